#include "pond/check/reference_executor.h"

#include <gtest/gtest.h>

#include <sstream>

#include "pond/check/checker.h"
#include "pond/check/history.h"

namespace pond::check {
namespace {

struct ExecRun {
  ExecutorStats stats;
  std::string text;
  History history;
};

ExecRun Execute(const ExecutorOptions& o) {
  ExecRun run;
  std::ostringstream out;
  Recorder rec(&out);
  Result<ExecutorStats> stats = RunReferenceExecutor(o, rec);
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_TRUE(rec.Close().ok());
  if (stats.ok()) run.stats = *stats;
  run.text = out.str();
  std::istringstream in(run.text);
  Result<History> h = ParseHistory(in, ExecutorFlawName(o.flaw));
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  if (h.ok()) run.history = std::move(h).value();
  return run;
}

CheckResult CheckAs(const ExecRun& run, Model m) {
  return Check(run.history, CheckerOptions{.model = m, .examples_per_anomaly_max = 1});
}

// Small key sets and many clients make conflicts frequent, so each flaw shows quickly.
ExecutorOptions Contended(ExecutorFlaw flaw, uint64_t seed) {
  ExecutorOptions o;
  o.seed = seed;
  o.txn_count = 2000;
  o.process_count = 10;
  o.active_key_count = 3;
  o.flaw = flaw;
  return o;
}

TEST(ReferenceExecutorTest, SameSeedSameHistory) {
  ExecutorOptions o = Contended(ExecutorFlaw::kNone, 7);
  EXPECT_EQ(Execute(o).text, Execute(o).text);
  ExecutorOptions other = o;
  other.seed = 8;
  EXPECT_NE(Execute(o).text, Execute(other).text);
}

TEST(ReferenceExecutorTest, ValidHistoriesPassEveryModel) {
  for (uint64_t seed = 1; seed <= 5; seed++) {
    ExecutorOptions o = Contended(ExecutorFlaw::kNone, seed);
    o.fail_fraction = 0.05;
    o.info_fraction = 0.05;
    ExecRun run = Execute(o);
    EXPECT_EQ(run.stats.ok + run.stats.fail + run.stats.info, o.txn_count);
    EXPECT_GT(run.stats.fail, 0u);
    EXPECT_GT(run.stats.info, 0u);
    for (Model m : {Model::kSerializable, Model::kSnapshotIsolation, Model::kStrictSerializable}) {
      CheckResult r = CheckAs(run, m);
      EXPECT_TRUE(r.valid) << "seed " << seed << "\n" << FormatText(run.history, r);
      EXPECT_GT(r.edge_count, o.txn_count / 2);  // the graph is not empty: it is acyclic
    }
  }
}

TEST(ReferenceExecutorTest, SnapshotIsolationPassesSiButNotSerializable) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    ExecRun run = Execute(Contended(ExecutorFlaw::kSnapshotIsolation, seed));
    CheckResult si = CheckAs(run, Model::kSnapshotIsolation);
    EXPECT_TRUE(si.valid) << "seed " << seed << "\n" << FormatText(run.history, si);
    CheckResult ser = CheckAs(run, Model::kSerializable);
    EXPECT_FALSE(ser.valid) << "seed " << seed;
    EXPECT_GT(ser[Anomaly::kG2Item].count, 0u);  // write skew
    EXPECT_EQ(ser[Anomaly::kGSingle].count, 0u);
    EXPECT_EQ(ser[Anomaly::kLostUpdate].count, 0u);
  }
}

TEST(ReferenceExecutorTest, StaleSnapshotIsCaught) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    ExecRun run = Execute(Contended(ExecutorFlaw::kStaleSnapshot, seed));
    CheckResult r = CheckAs(run, Model::kSnapshotIsolation);
    EXPECT_FALSE(r.valid) << "seed " << seed;
    EXPECT_GT(r[Anomaly::kGSingle].count, 0u) << FormatText(run.history, r);
  }
}

TEST(ReferenceExecutorTest, LostUpdateIsCaught) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    ExecRun run = Execute(Contended(ExecutorFlaw::kLostUpdate, seed));
    CheckResult r = CheckAs(run, Model::kSnapshotIsolation);
    EXPECT_FALSE(r.valid) << "seed " << seed;
    EXPECT_GT(r[Anomaly::kLostUpdate].count, 0u) << FormatText(run.history, r);
  }
}

TEST(ReferenceExecutorTest, AbortedReadIsCaught) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    ExecutorOptions o = Contended(ExecutorFlaw::kAbortedRead, seed);
    o.fail_fraction = 0.1;
    ExecRun run = Execute(o);
    CheckResult r = CheckAs(run, Model::kSerializable);
    EXPECT_FALSE(r.valid) << "seed " << seed;
    EXPECT_GT(r[Anomaly::kG1a].count, 0u) << FormatText(run.history, r);
  }
}

TEST(ReferenceExecutorTest, IntermediateReadIsCaught) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    ExecRun run = Execute(Contended(ExecutorFlaw::kIntermediateRead, seed));
    CheckResult r = CheckAs(run, Model::kSerializable);
    EXPECT_FALSE(r.valid) << "seed " << seed;
    EXPECT_GT(r[Anomaly::kG1b].count, 0u) << FormatText(run.history, r);
  }
}

TEST(ReferenceExecutorTest, RejectsBadOptions) {
  ExecutorOptions o;
  o.mops_per_txn_min = 5;
  o.mops_per_txn_max = 2;
  Recorder off;
  EXPECT_FALSE(RunReferenceExecutor(o, off).ok());
}

}  // namespace
}  // namespace pond::check
