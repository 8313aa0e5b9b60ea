// Deterministic simulation testing: many short simulated runs of the list-append workload in its
// user mode (list_append_plan.h), each one seed, under high contention, with CN-to-CN messages
// duplicated and delayed and one-sided batches jittered (so they land in any order across MNs),
// over every protocol and ablation step, SR and SI; the isolation checker
// judges every history. Then the same for recorded SmallBank runs
// (smallbank_history.h), whose multi-key transactions with read-only items the list-append
// workload does not have. A failure names the seed and the command that replays
// exactly that run. POND_SIM_SEED=N runs seed N only; POND_SIM_SEEDS=K runs K seeds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "pond/bench/list_append.h"
#include "pond/bench/seed_runs.h"
#include "pond/bench/smallbank.h"
#include "pond/check/checker.h"

namespace pond::bench {
namespace {

SeedRange Seeds(uint64_t default_count) {
  return SeedsFromEnv("POND_SIM_SEED", "POND_SIM_SEEDS", default_count);
}

// A small simulated cluster for one seed: few versions, so recycling and "snapshot too old"
// happen.
ClusterConfig SeedCluster(const std::string& protocol, Isolation iso, uint64_t seed) {
  ClusterConfig c;
  c.protocol = ProtocolByName(protocol).value();
  c.mns = 3;
  c.cns = 3;
  c.workers_per_cn = 2;
  c.replication = 2;
  c.versions = 2;
  c.isolation = iso;
  c.region_mib = 64;
  c.lock_buckets = 1 << 12;
  c.vt_cache_entries = 1 << 12;
  c.addr_cache_entries = 1 << 14;
  c.seed = seed;
  return c;
}

// The command that replays `seed` of the running test.
std::string ReplayLine(uint64_t seed) {
  const testing::TestInfo* t = testing::UnitTest::GetInstance()->current_test_info();
  return "replay: POND_SIM_SEED=" + std::to_string(seed) + " " + testing::internal::GetArgvs()[0] +
         " --gtest_filter=" + t->test_suite_name() + "." + t->name();
}

// The user-mode list-append workload (list_append_plan.h) on one seed: inserts and deletes that
// race, absent keys, promotions, repeated Executes, own reads, RunTxn retries and routed calls.
ListAppendOptions UserWorkload(uint64_t seed) {
  ListAppendOptions o;
  o.user = true;
  o.keys = 4000;
  o.window = 16;
  o.theta = 0.99;
  o.max_appends = 24;
  o.txns_per_client = 60;
  o.read_only_fraction = 0.3;
  o.seed = seed;
  return o;
}

// CN-to-CN messages duplicated and delayed (so reordered): the faults every seed runs with.
MessageFaults SeedMessageFaults() {
  MessageFaults f;
  f.duplicate_probability = 0.02;
  f.delay_probability = 0.1;
  f.delay_ns_min = 1000;
  f.delay_ns_max = 30000;
  return f;
}

// One-sided batches and completions jittered by up to this much (Testbed::jitter_ns), so that
// batches to different MNs land in every order. It is far above a round trip: a late WRITE to a
// backup must be able to land after the next writer has locked, read and written the key —
// what an RC queue pair per MN allows on real hardware, and what a commit must not depend on.
constexpr uint64_t kSeedJitterNs = 2'000;

// What every seed asserts of its replicas (Cluster::CheckReplicas after the run).
void ExpectReplicasAgree(const RunResult& r, const std::string& protocol, uint64_t seed) {
  ASSERT_TRUE(r.replicas.has_value());
  EXPECT_TRUE(r.replicas->ok()) << protocol << " seed " << seed << ": replicas disagree: "
                                << (r.replicas->problems.empty() ? "" : r.replicas->problems[0])
                                << "\n"
                                << ReplayLine(seed);
}

// Writes a history that failed its check to a temp file, for `pond check` and replay.
std::string KeepHistory(const std::string& text, const std::string& name) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("pond-sim-" + name + "-" + std::to_string(::getpid()) + ".jsonl"))
                         .string();
  std::ofstream(path) << text;
  return path;
}

// Runs one seed recorded and judged (the driver judges under the model `iso` promises); returns
// whether the history satisfied it, and the run's measures in *out.
bool RunSeed(const std::string& protocol, uint64_t seed, Isolation iso, double drop,
             RunResult* out) {
  RunOptions ro;
  ro.cluster = SeedCluster(protocol, iso, seed);
  ro.cluster.cns = 4;
  ro.coros = 3;
  ro.seconds = 86400;  // the transaction count ends the run
  ro.record = true;
  ro.sim = Testbed{};
  ro.sim->faults = SeedMessageFaults();
  ro.sim->faults.drop_probability = drop;
  ro.sim->jitter_ns = kSeedJitterNs;
  ListAppendWorkload w(UserWorkload(seed));
  EXPECT_TRUE(ValidateRun(w, ro).ok());
  Result<RunResult> run = RunWorkload(w, ro, nullptr);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  if (!run.ok()) return false;
  *out = *std::move(run);
  ExpectReplicasAgree(*out, protocol, seed);
  if (!out->replicas || !out->replicas->ok()) return false;
  const HistoryVerdict& v = *out->history;
  if (v.ok) return true;
  std::string name =
      protocol + "-" + std::to_string(seed) + (iso == Isolation::kSnapshot ? "-si" : "-sr");
  ADD_FAILURE() << protocol << " seed " << seed << " broke " << v.model << "; history kept at "
                << KeepHistory(v.text, name) << "\n"
                << ReplayLine(seed) << "\n"
                << v.report.substr(0, 3000);
  return false;
}

void RunSeeds(const std::string& protocol, Isolation iso, uint64_t default_seeds, double drop = 0) {
  SeedRange r = Seeds(default_seeds);
  uint64_t committed = 0, failed = 0;
  for (uint64_t seed = r.first; seed < r.first + r.count; seed++) {
    TraceSeed(seed);
    RunResult out;
    if (!RunSeed(protocol, seed, iso, drop, &out)) return;
    committed += out.committed;
    failed += out.aborted;
  }
  std::printf("%s %s, %.0f%% of messages lost: %lu seeds: %lu committed, %lu aborted\n",
              protocol.c_str(), IsolationName(iso), drop * 100, static_cast<unsigned long>(r.count),
              static_cast<unsigned long>(committed), static_cast<unsigned long>(failed));
  EXPECT_GT(failed, 0u) << "the runs were meant to be contended";
  // (ford aborts most attempts of this workload: every read-only item is validated.)
  EXPECT_GT(committed * 10, failed) << "the runs were meant to commit a good share";
}

// Every protocol and every step of the ablation, under SR and (all but ford) SI.
TEST(SimSeedTest, LotusSerializable) { RunSeeds("lotus", Isolation::kSerializable, 100); }
TEST(SimSeedTest, LotusSnapshot) { RunSeeds("lotus", Isolation::kSnapshot, 100); }
TEST(SimSeedTest, MotorSerializable) { RunSeeds("motor", Isolation::kSerializable, 100); }
TEST(SimSeedTest, MotorSnapshot) { RunSeeds("motor", Isolation::kSnapshot, 100); }
TEST(SimSeedTest, FordSerializable) { RunSeeds("ford", Isolation::kSerializable, 100); }
TEST(SimSeedTest, PondSerializable) { RunSeeds("pond", Isolation::kSerializable, 100); }
TEST(SimSeedTest, PondSnapshot) { RunSeeds("pond", Isolation::kSnapshot, 100); }
// Each of pond's steps alone on lotus, as the ablation steps.
TEST(SimSeedTest, PondStepsSerializable) {
  for (const std::string& step : PondSteps()) {
    RunSeeds("lotus+" + step, Isolation::kSerializable, 40);
  }
}
TEST(SimSeedTest, PondStepsSnapshot) {
  for (const std::string& step : PondSteps()) RunSeeds("lotus+" + step, Isolation::kSnapshot, 40);
}

// Messages lost besides: every request (lock, end, timestamp, routed call) is sent again until
// answered, and late copies take nothing.
TEST(SimSeedTest, LostMessagesSerializable) {
  for (const std::string& p : ProtocolNames()) RunSeeds(p, Isolation::kSerializable, 30, 0.01);
}
TEST(SimSeedTest, LostMessagesSnapshot) {
  for (const std::string& p : SnapshotProtocolNames()) RunSeeds(p, Isolation::kSnapshot, 30, 0.01);
}
TEST(SimSeedTest, TenPercentOfMessagesLost) {
  for (const std::string& p : ProtocolNames()) RunSeeds(p, Isolation::kSerializable, 5, 0.10);
}

TEST(SimSeedTest, AblationStepsSerializable) {
  for (const std::string& step : AblationSteps()) {
    if (step == "motor" || step == "+vt-cache") continue;  // = motor, lotus: run above
    RunSeeds(step, Isolation::kSerializable, 40);
  }
}

TEST(SimSeedTest, AblationStepsSnapshot) {
  for (const std::string& step : AblationSteps()) {
    if (step == "motor" || step == "+vt-cache") continue;
    RunSeeds(step, Isolation::kSnapshot, 40);
  }
}

// One recorded SmallBank run in the simulator, small and hot, judged under `model`.
void RunSmallBankSeeds(const std::string& protocol, Isolation iso, check::Model model,
                       uint64_t default_seeds) {
  SeedRange r = Seeds(default_seeds);
  uint64_t committed = 0, aborted = 0;
  for (uint64_t seed = r.first; seed < r.first + r.count; seed++) {
    TraceSeed(seed);
    RunOptions ro;
    ro.cluster = SeedCluster(protocol, iso, seed);
    ro.coros = 3;
    ro.seconds = 0.002;
    ro.sim = Testbed{};
    ro.sim->jitter_ns = kSeedJitterNs;
    ro.record = true;
    ro.calls_max = kSmallBankHistoryTxnsMax;
    SmallBankWorkload w({.accounts = 300, .hot_fraction = 0.05});
    ASSERT_TRUE(ValidateRun(w, ro).ok());
    Result<RunResult> run = RunWorkload(w, ro, nullptr);
    ASSERT_TRUE(run.ok()) << protocol << " seed " << seed << ": " << run.status().ToString();
    ASSERT_TRUE(run->check->ok) << protocol << " seed " << seed << ": " << run->check->detail;
    ExpectReplicasAgree(*run, protocol, seed);
    committed += run->committed;
    aborted += run->aborted;
    const HistoryVerdict& v = *run->history;
    EXPECT_EQ(v.model, check::ModelName(model));
    if (v.ok) continue;
    std::string name = "smallbank-" + protocol + "-" + std::to_string(seed) +
                       (iso == Isolation::kSnapshot ? "-si" : "-sr");
    ADD_FAILURE() << "smallbank " << protocol << " seed " << seed << " broke " << v.model
                  << "; history kept at " << KeepHistory(v.text, name) << "\n"
                  << ReplayLine(seed) << "\n"
                  << v.report.substr(0, 3000);
    return;
  }
  std::printf("smallbank %s: %lu seeds: %lu committed, %lu aborted\n", protocol.c_str(),
              static_cast<unsigned long>(r.count), static_cast<unsigned long>(committed),
              static_cast<unsigned long>(aborted));
  EXPECT_GT(aborted, 0u) << "the runs were meant to be contended";
}

TEST(SimSeedTest, SmallBankSerializableIsStrictlySerializable) {
  for (const std::string& p : ProtocolNames()) {
    RunSmallBankSeeds(p, Isolation::kSerializable, check::Model::kStrictSerializable, 20);
  }
}

TEST(SimSeedTest, SmallBankSnapshotIsSnapshotIsolated) {
  for (const std::string& p : SnapshotProtocolNames()) {
    RunSmallBankSeeds(p, Isolation::kSnapshot, check::Model::kSnapshotIsolation, 20);
  }
}

}  // namespace
}  // namespace pond::bench
