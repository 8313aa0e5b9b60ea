// TATP under every protocol, on real threads and in the simulator, SR and SI (ford only SR):
// transactions commit, inserts and deletes of call forwardings run, and the referential check
// holds after the run.
#include "pond/bench/tatp.h"

#include <gtest/gtest.h>

#include <string>

namespace pond::bench {
namespace {

TatpOptions Small(const std::string& protocol, Isolation iso, bool simulate) {
  TatpOptions o;
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
  // Few subscribers, so that the 2% inserts and deletes hit the same rows and collide.
  o.subscribers = 200;
  o.seconds = simulate ? 0.001 : 0.15;
  if (simulate) o.sim = Testbed{};
  return o;
}

void RunAndCheck(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  Result<TatpResult> r = RunTatp(Small(protocol, iso, simulate), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check_ok) << r->check_detail;
  EXPECT_GT(r->committed, 0u);
  EXPECT_GT(r->committed_rw, 0u);
  EXPECT_GT(r->rows_after, 0u);
  EXPECT_GT(r->committed_by_txn[static_cast<size_t>(TatpTxn::kUpdateLocation)], 0u);
}

class TatpTest : public testing::TestWithParam<std::string> {};
// SI runs: the protocols that have snapshots (ford is single-version and refuses SI).
class TatpTestSnapshot : public testing::TestWithParam<std::string> {};

TEST_P(TatpTest, RowsStayConsistentOnThreadsSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, false);
}
TEST_P(TatpTestSnapshot, RowsStayConsistentOnThreadsSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, false);
}
TEST_P(TatpTest, RowsStayConsistentSimulatedSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, true);
}
TEST_P(TatpTestSnapshot, RowsStayConsistentSimulatedSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, true);
}

INSTANTIATE_TEST_SUITE_P(Protocols, TatpTest, testing::ValuesIn(ProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Protocols, TatpTestSnapshot, testing::Values("lotus", "motor"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// A longer simulated run on few subscribers: the inserts and deletes really change rows.
TEST(TatpSimTest, InsertsAndDeletesRun) {
  TatpOptions o = Small("lotus", Isolation::kSerializable, true);
  o.seconds = 0.005;
  Result<TatpResult> r = RunTatp(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check_ok) << r->check_detail;
  EXPECT_GT(r->committed_by_txn[static_cast<size_t>(TatpTxn::kInsertCallForwarding)], 0u);
  EXPECT_GT(r->committed_by_txn[static_cast<size_t>(TatpTxn::kDeleteCallForwarding)], 0u);
  EXPECT_NE(r->rows_after, r->rows_loaded) << "inserts and deletes changed no row";
}

TEST(TatpKeyTest, ShardIsTheSubscribersLowBits) {
  EXPECT_EQ(TatpKey(5, 3) & 0xfff, 5u);
  EXPECT_EQ(TatpKey(4096 + 7, 0) & 0xfff, 7u);
  EXPECT_EQ(TatpKey(123, 9) >> 20, 123u);
  EXPECT_NE(TatpKey(7, 1), TatpKey(7, 2));
}

}  // namespace
}  // namespace pond::bench
