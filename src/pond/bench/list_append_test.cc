// The history checker judges the real system: real threads, 4 CNs, high contention, read-write
// and read-only transactions, SR and SI; and a write-skew workload shows the checker is not
// vacuous — SI lets write skew through (a G2-item cycle), SR never does.
#include "pond/bench/list_append.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "pond/check/checker.h"
#include "pond/check/history.h"

namespace pond::bench {
namespace {

ClusterConfig StressConfig(Isolation iso, const std::string& protocol = "lotus") {
  ClusterConfig c;
  c.protocol = ProtocolByName(protocol).value();
  c.mns = 3;
  c.cns = 4;
  c.workers_per_cn = 1;
  c.replication = 2;
  c.versions = 4;
  c.isolation = iso;
  c.region_mib = 256;
  c.lock_buckets = 1 << 14;
  c.vt_cache_entries = 1 << 14;
  c.addr_cache_entries = 1 << 16;
  c.seed = 7;
  return c;
}

struct Checked {
  bool valid = false;
  nlohmann::json report;
  RunResult run;
};

// Runs the workload recorded, then checks the history against `model` (which need not be the
// one the isolation level promises: write skew is checked against serializability under SI).
Checked RunAndCheck(Isolation iso, const ListAppendOptions& o, int clients, check::Model model,
                    const std::string& protocol = "lotus") {
  RunOptions ro;
  ro.cluster = StressConfig(iso, protocol);
  ro.coros = clients;
  ro.seconds = 86400;  // the transaction count ends the run
  ro.record = true;
  ListAppendWorkload w(o);
  EXPECT_TRUE(ValidateRun(w, ro).ok());
  Result<RunResult> run = RunWorkload(w, ro, nullptr);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  Checked c;
  if (!run.ok()) return c;
  c.run = *std::move(run);
  EXPECT_TRUE(c.run.replicas && c.run.replicas->ok())
      << "replicas disagree after the run: "
      << (c.run.replicas && !c.run.replicas->problems.empty() ? c.run.replicas->problems[0] : "");
  std::istringstream in(c.run.history->text);
  Result<check::History> h = check::ParseHistory(in, "the recorded history");
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  if (!h.ok()) return c;
  check::CheckerOptions co;
  co.model = model;
  check::CheckResult result = check::Check(*h, co);
  c.valid = result.valid;
  c.report = check::ToJson(*h, result);
  if (!c.valid) std::printf("%s\n", check::FormatText(*h, result).substr(0, 4000).c_str());
  return c;
}

ListAppendOptions Contended() {
  ListAppendOptions o;
  o.keys = 40000;
  o.window = 100;  // zipf 0.99 over 100 active keys
  o.theta = 0.99;
  o.max_appends = 32;
  o.txns_per_client = 6250;  // 4 CNs x 4 clients x 6250 = 100k transactions
  o.read_only_fraction = 0.25;
  o.mops_max = 4;
  return o;
}

TEST(ListAppendTest, SerializableRunIsStrictlySerializable) {
  Checked c =
      RunAndCheck(Isolation::kSerializable, Contended(), 4, check::Model::kStrictSerializable);
  EXPECT_TRUE(c.valid);
  EXPECT_GE(c.run.committed + c.run.aborted, 100000u);
  EXPECT_GT(c.run.aborted, 0u) << "the run was meant to be contended";
  std::printf("committed %lu, aborted %lu\n", static_cast<unsigned long>(c.run.committed),
              static_cast<unsigned long>(c.run.aborted));
}

TEST(ListAppendTest, SnapshotIsolationRunIsSnapshotIsolated) {
  Checked c = RunAndCheck(Isolation::kSnapshot, Contended(), 4, check::Model::kSnapshotIsolation);
  EXPECT_TRUE(c.valid);
  EXPECT_GE(c.run.committed + c.run.aborted, 100000u);
}

// The baselines on real threads: motor under SR and SI, ford under SR.
TEST(ListAppendTest, MotorSerializableRunIsStrictlySerializable) {
  Checked c = RunAndCheck(Isolation::kSerializable, Contended(), 4,
                          check::Model::kStrictSerializable, "motor");
  EXPECT_TRUE(c.valid);
  EXPECT_GT(c.run.aborted, 0u) << "the run was meant to be contended";
}

TEST(ListAppendTest, MotorSnapshotRunIsSnapshotIsolated) {
  Checked c =
      RunAndCheck(Isolation::kSnapshot, Contended(), 4, check::Model::kSnapshotIsolation, "motor");
  EXPECT_TRUE(c.valid);
}

TEST(ListAppendTest, FordRunIsStrictlySerializable) {
  Checked c = RunAndCheck(Isolation::kSerializable, Contended(), 4,
                          check::Model::kStrictSerializable, "ford");
  EXPECT_TRUE(c.valid);
  EXPECT_GT(c.run.aborted, 0u) << "the run was meant to be contended";
}

TEST(ListAppendTest, MnLockAblationStepsAreStrictlySerializable) {
  for (const char* step : {"+full-record", "+log-visible"}) {
    Checked c = RunAndCheck(Isolation::kSerializable, Contended(), 4,
                            check::Model::kStrictSerializable, step);
    EXPECT_TRUE(c.valid) << step;
  }
}

// What users' transactions do (list_append_plan.h: racing inserts and deletes, absent keys,
// promotions, an Execute per step, own reads, RunTxn retries, routed calls) on real threads, under
// every protocol and ablation step, SR and (all but ford) SI.
TEST(ListAppendTest, UserTransactionsUnderEveryProtocolAndIsolation) {
  std::vector<std::string> configs = ProtocolNames();
  for (const std::string& step : AblationSteps()) {
    if (step != "motor" && step != "+vt-cache") configs.push_back(step);
  }
  ListAppendOptions o = Contended();
  o.user = true;
  o.keys = 8000;  // appends fill about 24000 x 4 / 32 keys
  o.window = 40;
  o.txns_per_client = 1500;  // 4 CNs x 4 clients x 1500 = 24000 transactions a run
  for (const std::string& protocol : configs) {
    for (Isolation iso : {Isolation::kSerializable, Isolation::kSnapshot}) {
      if (protocol == "ford" && iso == Isolation::kSnapshot) continue;
      const check::Model model = iso == Isolation::kSerializable ? check::Model::kStrictSerializable
                                                                 : check::Model::kSnapshotIsolation;
      Checked c = RunAndCheck(iso, o, 4, model, protocol);
      EXPECT_TRUE(c.valid) << protocol << " " << IsolationName(iso);
      EXPECT_GT(c.run.committed, 0u) << protocol << " " << IsolationName(iso);
      EXPECT_GT(c.run.aborted, 0u) << protocol << ": the run was meant to be contended";
    }
  }
}

ListAppendOptions WriteSkew() {
  ListAppendOptions o;
  o.keys = 20000;
  o.window = 4;  // four hot pairs
  o.theta = 0.5;
  o.max_appends = 32;
  o.txns_per_client = 1500;
  o.write_skew = true;
  return o;
}

uint64_t AnomalyCount(const nlohmann::json& report, const std::string& name) {
  if (!report.is_object() || !report.contains("anomalies")) return 0;
  const auto& a = report["anomalies"];
  if (!a.contains(name)) return 0;
  return a[name].value("count", uint64_t{0});
}

TEST(ListAppendTest, WriteSkewUnderSiIsCaughtAsG2Item) {
  Checked c = RunAndCheck(Isolation::kSnapshot, WriteSkew(), 4, check::Model::kSerializable);
  EXPECT_FALSE(c.valid) << "SI must let some write skew through";
  EXPECT_GT(AnomalyCount(c.report, "G2-item"), 0u) << c.report.dump().substr(0, 2000);
}

TEST(ListAppendTest, WriteSkewUnderSrNeverHappens) {
  for (const char* protocol : {"lotus", "motor", "ford"}) {
    Checked c = RunAndCheck(Isolation::kSerializable, WriteSkew(), 4, check::Model::kSerializable,
                            protocol);
    EXPECT_TRUE(c.valid) << protocol;
  }
}

}  // namespace
}  // namespace pond::bench
