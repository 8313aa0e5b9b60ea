// SmallBank under every protocol, on real threads and in the simulator, SR and SI (ford only
// SR: it refuses SI): transactions commit, and the money check holds — the balances after the
// run total the initial money plus every committed net deposit. With recording on, the run's
// history (smallbank_history.h) satisfies strict serializability under SR and snapshot
// isolation under SI.
#include "pond/bench/smallbank.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "pond/bench/report.h"
#include "pond/bench/test_run.h"

namespace pond::bench {
namespace {

struct SmallRun {
  RunOptions run;
  SmallBankParams p;
};

SmallRun Small(const std::string& protocol, Isolation iso, bool simulate) {
  SmallRun o{SmallTestRun(protocol, iso, simulate, simulate ? 0.0005 : 0.15), {}};
  // Few accounts and a small hot set, so that transactions collide and abort paths run too.
  o.p.accounts = 1000;
  o.p.hot_fraction = 0.01;
  return o;
}

Result<RunResult> RunSmall(const SmallRun& o) {
  SmallBankWorkload w(o.p);
  return ValidateAndRun(w, o.run);
}

uint64_t Committed(const RunResult& r, SmallBankTxn t) {
  return r.committed_by_txn.at(static_cast<size_t>(t)).second;
}

void RunAndCheckOptions(const SmallRun& o) {
  Result<RunResult> r = RunSmall(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->check.has_value());
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  const nlohmann::json& money = r->check->json;
  EXPECT_EQ(money["final_total"].get<int64_t>(),
            money["initial_total"].get<int64_t>() + money["net_deposits"].get<int64_t>());
  EXPECT_GT(r->committed, 0u);
  EXPECT_GT(r->committed_rw, 0u);
  // Money moved: some deposits or withdrawals committed.
  EXPECT_GT(
      Committed(*r, SmallBankTxn::kDepositChecking) + Committed(*r, SmallBankTxn::kWriteCheck), 0u);
}

void RunAndCheck(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  RunAndCheckOptions(Small(protocol, iso, simulate));
}

// A recorded run: its history is judged by the checker under the model the isolation promises.
void RunRecordedAndCheckHistory(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  SmallRun o = Small(protocol, iso, simulate);
  // Fewer accounts than the money test, so conflicting transactions meet; a hot set of 20, not
  // 2, since a read's list is its row's whole write chain and the history (and the checker's
  // time) grows with the square of a row's writes.
  o.p.accounts = 200;
  o.p.hot_fraction = 0.1;
  o.run.seconds = simulate ? 0.003 : 0.04;
  o.run.record = true;
  o.run.calls_max = kSmallBankHistoryTxnsMax;
  Result<RunResult> r = RunSmall(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  ASSERT_TRUE(r->history.has_value());
  // Every committed call and every scan batch is in the history.
  EXPECT_GE(r->history->txns, r->committed);
  EXPECT_EQ(r->history->model,
            iso == Isolation::kSnapshot ? "snapshot-isolation" : "strict-serializable");
  EXPECT_TRUE(r->history->ok) << r->history->detail;
}

class SmallBankTest : public testing::TestWithParam<std::string> {};
// SI runs: the protocols that have snapshots (ford is single-version and refuses SI).
class SmallBankTestSnapshot : public testing::TestWithParam<std::string> {};

// A moving hot set (--moving-hotspot-ms): every hot account is a real one, distinct, in as few
// consecutive shards as hold them, and the next place is elsewhere.
TEST(SmallBankHotSetTest, AMovingHotSetFillsFewShardsAndMovesOn) {
  constexpr uint64_t kAccounts = 100'000, kHot = 4000;  // 24 accounts a shard: 167 shards
  for (uint64_t place : {0, 1, 2}) {
    std::set<uint64_t> accounts, shards;
    for (uint64_t k = 0; k < kHot; k++) {
      const uint64_t a = SmallBankHotAccount(kAccounts, kHot, k, place);
      ASSERT_LT(a, kAccounts);
      accounts.insert(a);
      shards.insert(a % 4096);
    }
    EXPECT_EQ(accounts.size(), kHot) << "place " << place;
    EXPECT_EQ(shards.size(), 167u) << "place " << place;
    EXPECT_TRUE(shards.count((place * 1553) % 4096)) << "place " << place;
    EXPECT_FALSE(shards.count(((place + 1) * 1553) % 4096)) << "the next place overlaps";
  }
}

TEST_P(SmallBankTest, MoneyAddsUpOnThreadsSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, false);
}
TEST_P(SmallBankTestSnapshot, MoneyAddsUpOnThreadsSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, false);
}
TEST_P(SmallBankTest, MoneyAddsUpSimulatedSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, true);
}
TEST_P(SmallBankTestSnapshot, MoneyAddsUpSimulatedSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, true);
}

TEST_P(SmallBankTest, RecordedHistoryIsStrictlySerializableOnThreads) {
  RunRecordedAndCheckHistory(GetParam(), Isolation::kSerializable, false);
}
TEST_P(SmallBankTest, RecordedHistoryIsStrictlySerializableSimulated) {
  RunRecordedAndCheckHistory(GetParam(), Isolation::kSerializable, true);
}
TEST_P(SmallBankTestSnapshot, RecordedHistoryIsSnapshotIsolatedOnThreads) {
  RunRecordedAndCheckHistory(GetParam(), Isolation::kSnapshot, false);
}

INSTANTIATE_TEST_SUITE_P(Protocols, SmallBankTest, testing::ValuesIn(ProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Protocols, SmallBankTestSnapshot,
                         testing::ValuesIn(SnapshotProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// One seed, one simulated run: the same counts and totals twice.
TEST(SmallBankSimTest, SameSeedSameRun) {
  SmallRun o = Small("lotus", Isolation::kSerializable, true);
  Result<RunResult> a = RunSmall(o), b = RunSmall(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->committed, b->committed);
  EXPECT_EQ(a->aborted, b->aborted);
  EXPECT_EQ(a->check->json, b->check->json);
}

// Each simulated core's CPU is reported (the report's "CPU" line): the cores add up to the
// workers' total, and with tso-combine the oracle's CN (CN 0) spends less CPU per commit, since
// it hears from a few relays per CN, each carrying many requests.
TEST(SmallBankSimTest, CoresAreAccountedAndCombiningUnloadsTheOraclesCn) {
  double cn0_per_commit[2] = {0, 0};
  uint64_t committed[2] = {0, 0};
  const char* protocols[2] = {"pond-tso-combine", "pond"};
  for (int i = 0; i < 2; i++) {
    SCOPED_TRACE(protocols[i]);
    SmallRun o = Small(protocols[i], Isolation::kSerializable, true);
    // Enough CNs and load that CN 0's cores are busy: 27 CNs of 8 workers, 6 calls each.
    o.run.cluster.cns = 27;
    o.run.cluster.mns = 9;
    o.run.cluster.workers_per_cn = 8;
    o.run.coros = 6;
    o.run.seconds = 0.001;
    o.run.cluster.region_mib = 256;
    o.p.accounts = 27000;
    o.p.hot_fraction = 0.04;
    Result<RunResult> r = RunSmall(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->sim_cores.size(), 27u * 8u);
    uint64_t total = 0, cn0 = 0;
    for (const SimStats::Core& c : r->sim_cores) {
      total += c.busy_ns;
      if (c.cn == 0) cn0 += c.busy_ns;
    }
    EXPECT_EQ(total, r->sim_cpu_busy_ns);
    const CoreLoad l = CoreLoadOf(*r);
    EXPECT_GT(l.mean_share, 0);
    EXPECT_GE(l.busiest_share, l.mean_share);
    EXPECT_LE(l.busiest_share, 1.0);
    ASSERT_GT(r->committed, 0u);
    cn0_per_commit[i] = static_cast<double>(cn0) / static_cast<double>(r->committed);
    committed[i] = r->committed;
  }
  // CN 0 also runs its share of the transactions, which combining leaves as they are.
  EXPECT_LT(cn0_per_commit[1], 0.95 * cn0_per_commit[0]);
  EXPECT_GT(committed[1], committed[0]) << "CN 0's cores were the bottleneck";
}

// Scale-out (docs/simulator.md "Scale-out"): 256 CNs and 86 MNs, past the 64 that uint64_t masks
// of CNs and MNs and the owner word's 8-bit CN + 1 once allowed. One worker of two coroutines
// per CN keeps the test short; the accounts spread over every MN, transactions lock keys of
// CNs above 64 (lotus) and take MN lock words with the owner words of CNs up to 255 (motor), and
// each commit's log record goes to MNs above 64.
class SmallBankScaleTest : public testing::TestWithParam<std::string> {};

TEST_P(SmallBankScaleTest, MoneyAddsUpOn256Cns) {
  SmallRun o = Small(GetParam(), Isolation::kSerializable, true);
  o.run.cluster.cns = 256;
  o.run.cluster.mns = 86;
  o.run.cluster.replication = 3;
  o.run.cluster.workers_per_cn = 1;
  o.run.cluster.region_mib = 256;
  o.run.coros = 2;
  o.run.seconds = 0.0003;
  o.p.accounts = 20000;
  o.p.hot_fraction = 0.05;
  RunAndCheckOptions(o);
}

INSTANTIATE_TEST_SUITE_P(Protocols, SmallBankScaleTest, testing::Values("lotus", "motor"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// The limits of a cluster's size: one line naming the flag and the limit.
TEST(SmallBankScaleTest, RefusesClustersPastTheLimits) {
  ClusterConfig c;
  c.cns = kCnsMax + 1;
  EXPECT_EQ(ValidateConfig(c).message(), "ClusterConfig.cns (--cns) must be 1 to 256");
  c.cns = kCnsMax;
  c.mns = kMnsMax + 1;
  EXPECT_EQ(ValidateConfig(c).message(), "ClusterConfig.mns (--mns) must be 1 to 256");
  c.mns = 86;
  EXPECT_TRUE(ValidateConfig(c).ok());
  // The membership machine's lease page holds 64 CNs: node faults and resharding need no more.
  Status faults = ValidateNodeFaults(c, {NodeFault{}});
  EXPECT_EQ(faults.code(), Code::kInvalidArgument);
  EXPECT_NE(faults.message().find("at most 64 CNs and 64 MNs (--cns 256, --mns 86)"),
            std::string::npos)
      << faults.message();
  c.reshard.policy = ReshardConfig::Policy::kLoad;
  EXPECT_NE(ValidateConfig(c).message().find("resharding moves need the membership machine"),
            std::string::npos)
      << ValidateConfig(c).message();
}

// 504 workers in the default 1 GiB region once ran out of lane space mid-run (each carves a
// record chunk in every lane); now their chunks shrink to fit, and a region too small even for
// the smallest is refused before anything runs, naming --region-mib.
TEST(SmallBankScaleTest, RefusesARegionTooSmallForItsWorkersUpFront) {
  SmallRun o = Small("lotus", Isolation::kSerializable, true);
  o.run.cluster.cns = 256;
  o.run.cluster.mns = 4;
  o.run.cluster.workers_per_cn = 8;
  o.run.cluster.region_mib = 64;
  Result<RunResult> r = RunSmall(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--region-mib 64 is too small for 2048 workers"),
            std::string::npos)
      << r.status().message();
}

// The money check's allowance for calls heard of only as unknown: each was taken or not, and a
// WriteCheck taken may have paid the penalty unit on top of its amount.
TEST(SmallBankInDoubtTest, EachUnknownCallWasTakenOrNotWithAnyOfItsEffects) {
  EXPECT_TRUE(SmallBankInDoubtExplainsAny(0, {}));
  EXPECT_FALSE(SmallBankInDoubtExplainsAny(1, {}));
  const std::vector<std::vector<int64_t>> in_doubt = {{5}, {-41, -42}};
  for (int64_t diff : {0, 5, -41, -42, -36, -37}) {
    EXPECT_TRUE(SmallBankInDoubtExplainsAny(diff, in_doubt)) << diff;
  }
  for (int64_t diff : {1, -40, -43, 4, -83}) {
    EXPECT_FALSE(SmallBankInDoubtExplainsAny(diff, in_doubt)) << diff;
  }
}

// A recorded run caps its calls (the history is kept in memory); a run that records nothing
// needs no cap.
TEST(SmallBankOptionsTest, RejectsBadInput) {
  RunOptions run;
  SmallBankParams p;
  p.accounts = 1;
  EXPECT_FALSE(SmallBankWorkload(p).Validate(run).ok());
  p.accounts = 100;
  p.hot_fraction = 0;
  EXPECT_FALSE(SmallBankWorkload(p).Validate(run).ok());
  p.hot_fraction = 0.04;
  p.hot_access = 1.5;
  EXPECT_FALSE(SmallBankWorkload(p).Validate(run).ok());
  p.hot_access = 0.9;
  EXPECT_TRUE(SmallBankWorkload(p).Validate(run).ok());
  run.record = true;
  EXPECT_FALSE(SmallBankWorkload(p).Validate(run).ok());
  run.calls_max = 1000;
  EXPECT_TRUE(SmallBankWorkload(p).Validate(run).ok());
}

TEST(SmallBankKeyTest, ShardIsTheAccountsLowBits) {
  // Both tables use one key per account; its shard (bits 0..11) comes from the account.
  EXPECT_EQ(SmallBankKey(5) & 0xfff, 5u);
  EXPECT_EQ(SmallBankKey(4096 + 7) & 0xfff, 7u);
  EXPECT_NE(SmallBankKey(7), SmallBankKey(4096 + 7));
}

}  // namespace
}  // namespace pond::bench
