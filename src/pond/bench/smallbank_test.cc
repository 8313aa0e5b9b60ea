// SmallBank under every protocol, on real threads and in the simulator, SR and SI (ford only
// SR: it refuses SI): transactions commit, and the money check holds — the balances after the
// run total the initial money plus every committed net deposit. With recording on, the run's
// history (smallbank_history.h) satisfies strict serializability under SR and snapshot
// isolation under SI.
#include "pond/bench/smallbank.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "pond/check/checker.h"
#include "pond/check/history.h"

namespace pond::bench {
namespace {

SmallBankOptions Small(const std::string& protocol, Isolation iso, bool simulate) {
  SmallBankOptions o;
  o.cluster.protocol = ProtocolByName(protocol).value();
  o.cluster.mns = 3;
  o.cluster.cns = 2;
  o.cluster.workers_per_cn = simulate ? 2 : 1;
  o.cluster.replication = 2;
  o.cluster.isolation = iso;
  o.cluster.region_mib = 64;
  o.cluster.lock_buckets = 1 << 12;
  o.cluster.vt_cache_entries = 1 << 12;
  o.cluster.addr_cache_entries = 1 << 14;
  o.cluster.seed = 5;
  o.coros = 3;
  // Few accounts and a small hot set, so that transactions collide and abort paths run too.
  o.accounts = 1000;
  o.hot_fraction = 0.01;
  o.seconds = simulate ? 0.0005 : 0.15;
  if (simulate) o.sim = Testbed{};
  return o;
}

void RunAndCheck(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  Result<SmallBankResult> r = RunSmallBank(Small(protocol, iso, simulate), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check_ok) << r->check_detail;
  EXPECT_EQ(r->final_total, r->initial_total + r->net_deposits);
  EXPECT_GT(r->committed, 0u);
  EXPECT_GT(r->committed_rw, 0u);
  // Money moved: some deposits or withdrawals committed.
  EXPECT_GT(r->committed_by_txn[static_cast<size_t>(SmallBankTxn::kDepositChecking)] +
                r->committed_by_txn[static_cast<size_t>(SmallBankTxn::kWriteCheck)],
            0u);
}

// A recorded run: its history is judged by the checker under the model the isolation promises.
void RunRecordedAndCheckHistory(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  SmallBankOptions o = Small(protocol, iso, simulate);
  // Fewer accounts than the money test, so conflicting transactions meet; a hot set of 20, not
  // 2, since a read's list is its row's whole write chain and the history (and the checker's
  // time) grows with the square of a row's writes.
  o.accounts = 200;
  o.hot_fraction = 0.1;
  o.seconds = simulate ? 0.003 : 0.04;
  std::string name = testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  o.history_path =
      (std::filesystem::temp_directory_path() / ("pond-smallbank-" + name + ".jsonl")).string();
  Result<SmallBankResult> r = RunSmallBank(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check_ok) << r->check_detail;
  std::ifstream in(o.history_path);
  Result<check::History> h = check::ParseHistory(in, o.history_path);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  // Every committed call and every scan batch is in the history.
  EXPECT_EQ(r->history_txns, h->txns().size());
  EXPECT_GE(r->history_txns, r->committed);
  check::CheckerOptions co;
  co.model = iso == Isolation::kSnapshot ? check::Model::kSnapshotIsolation
                                         : check::Model::kStrictSerializable;
  check::CheckResult c = check::Check(*h, co);
  EXPECT_TRUE(c.valid) << "history kept at " << o.history_path;
  if (c.valid) std::filesystem::remove(o.history_path);
}

class SmallBankTest : public testing::TestWithParam<std::string> {};
// SI runs: the protocols that have snapshots (ford is single-version and refuses SI).
class SmallBankTestSnapshot : public testing::TestWithParam<std::string> {};

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
  SmallBankOptions o = Small("lotus", Isolation::kSerializable, true);
  Result<SmallBankResult> a = RunSmallBank(o, nullptr), b = RunSmallBank(o, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->committed, b->committed);
  EXPECT_EQ(a->aborted, b->aborted);
  EXPECT_EQ(a->net_deposits, b->net_deposits);
  EXPECT_EQ(a->final_total, b->final_total);
}

TEST(SmallBankOptionsTest, RejectsBadInput) {
  SmallBankOptions o;
  o.accounts = 1;
  EXPECT_FALSE(ValidateSmallBankOptions(o).ok());
  o.accounts = 100;
  o.hot_fraction = 0;
  EXPECT_FALSE(ValidateSmallBankOptions(o).ok());
  o.hot_fraction = 0.04;
  o.hot_access = 1.5;
  EXPECT_FALSE(ValidateSmallBankOptions(o).ok());
  o.hot_access = 0.9;
  EXPECT_TRUE(ValidateSmallBankOptions(o).ok());
}

TEST(SmallBankKeyTest, ShardIsTheAccountsLowBits) {
  // Both tables use one key per account; its shard (bits 0..11) comes from the account.
  EXPECT_EQ(SmallBankKey(5) & 0xfff, 5u);
  EXPECT_EQ(SmallBankKey(4096 + 7) & 0xfff, 7u);
  EXPECT_NE(SmallBankKey(7), SmallBankKey(4096 + 7));
}

}  // namespace
}  // namespace pond::bench
