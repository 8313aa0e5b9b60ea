// TATP under every protocol, on real threads and in the simulator, SR and SI (ford only SR):
// transactions commit, inserts and deletes of call forwardings run, and the referential check
// holds after the run.
#include "pond/bench/tatp.h"

#include <gtest/gtest.h>

#include <string>

#include "pond/bench/test_run.h"

namespace pond::bench {
namespace {

struct SmallRun {
  RunOptions run;
  TatpParams p;
};

SmallRun Small(const std::string& protocol, Isolation iso, bool simulate) {
  // Few subscribers, so that the 2% inserts and deletes hit the same rows and collide.
  return SmallRun{SmallTestRun(protocol, iso, simulate, simulate ? 0.001 : 0.15),
                  {.subscribers = 200}};
}

Result<RunResult> RunSmall(const SmallRun& o) {
  TatpWorkload w(o.p);
  return ValidateAndRun(w, o.run);
}

uint64_t Committed(const RunResult& r, TatpTxn t) {
  return r.committed_by_txn.at(static_cast<size_t>(t)).second;
}

uint64_t RowsAfter(const RunResult& r) { return r.check->json["rows_after"].get<uint64_t>(); }

void RunAndCheck(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  Result<RunResult> r = RunSmall(Small(protocol, iso, simulate));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->check.has_value());
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  EXPECT_GT(r->committed, 0u);
  EXPECT_GT(r->committed_rw, 0u);
  EXPECT_GT(RowsAfter(*r), 0u);
  EXPECT_GT(Committed(*r, TatpTxn::kUpdateLocation), 0u);
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
INSTANTIATE_TEST_SUITE_P(Protocols, TatpTestSnapshot, testing::ValuesIn(SnapshotProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// A longer simulated run on few subscribers: the inserts and deletes really change rows.
TEST(TatpSimTest, InsertsAndDeletesRun) {
  SmallRun o = Small("lotus", Isolation::kSerializable, true);
  o.run.seconds = 0.005;
  Result<RunResult> r = RunSmall(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  EXPECT_GT(Committed(*r, TatpTxn::kInsertCallForwarding), 0u);
  EXPECT_GT(Committed(*r, TatpTxn::kDeleteCallForwarding), 0u);
  EXPECT_NE(RowsAfter(*r), r->check->json["rows_loaded"].get<uint64_t>())
      << "inserts and deletes changed no row";
}

TEST(TatpKeyTest, ShardIsTheSubscribersLowBits) {
  EXPECT_EQ(TatpKey(5, 3) & 0xfff, 5u);
  EXPECT_EQ(TatpKey(4096 + 7, 0) & 0xfff, 7u);
  EXPECT_EQ(TatpKey(123, 9) >> 20, 123u);
  EXPECT_NE(TatpKey(7, 1), TatpKey(7, 2));
}

}  // namespace
}  // namespace pond::bench
