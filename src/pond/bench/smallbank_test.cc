// SmallBank under every protocol, on real threads and in the simulator, SR and SI (ford only
// SR: it refuses SI): transactions commit, and the money check holds — the balances after the
// run total the initial money plus every committed net deposit. With recording on, the run's
// history (smallbank_history.h) satisfies strict serializability under SR and snapshot
// isolation under SI.
#include "pond/bench/smallbank.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

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

void RunAndCheck(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  Result<RunResult> r = RunSmall(Small(protocol, iso, simulate));
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
INSTANTIATE_TEST_SUITE_P(Protocols, SmallBankTestSnapshot, testing::Values("lotus", "motor"),
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
