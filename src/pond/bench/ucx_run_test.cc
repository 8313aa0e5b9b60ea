// The embedded cluster on the `ucx` transport, over shared memory and over TCP on loopback: the
// same SmallBank runs the local transport's tests make, with the money check and the recorded
// history judged by the isolation checker. Protocol code does not know its transport, so what
// these runs test is the transport's keeping of the Endpoint contract under real transactions.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "pond/bench/smallbank.h"
#include "pond/bench/smallbank_history.h"
#include "pond/bench/test_run.h"

namespace pond::bench {
namespace {

using Param = std::tuple<std::string, Isolation, std::string>;  // protocol, isolation, tls

RunOptions UcxRun(const Param& p, double seconds) {
  const auto& [protocol, iso, tls] = p;
  RunOptions o = SmallTestRun(protocol, iso, /*simulate=*/false, seconds);
  o.cluster.transport.kind = "ucx";
  o.cluster.transport.ucx_tls = tls;
  o.cluster.transport.ucx_net_devices = "lo";
  return o;
}

class UcxRunTest : public testing::TestWithParam<Param> {};

TEST_P(UcxRunTest, SmallBankMoneyAddsUp) {
  SmallBankParams p;
  p.accounts = 1000;
  p.hot_fraction = 0.01;
  SmallBankWorkload w(p);
  Result<RunResult> r = ValidateAndRun(w, UcxRun(GetParam(), 0.15));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->check.has_value());
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  EXPECT_GT(r->committed_rw, 0u);
}

TEST_P(UcxRunTest, RecordedSmallBankHistoryHoldsItsModel) {
  SmallBankParams p;
  p.accounts = 200;
  p.hot_fraction = 0.1;
  SmallBankWorkload w(p);
  RunOptions o = UcxRun(GetParam(), 0.05);
  o.record = true;
  o.calls_max = kSmallBankHistoryTxnsMax;
  Result<RunResult> r = ValidateAndRun(w, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  ASSERT_TRUE(r->history.has_value());
  EXPECT_GE(r->history->txns, r->committed);
  EXPECT_GT(r->committed_rw, 0u);
  EXPECT_EQ(r->history->model, std::get<1>(GetParam()) == Isolation::kSnapshot
                                   ? "snapshot-isolation"
                                   : "strict-serializable");
  EXPECT_TRUE(r->history->ok) << r->history->detail;
}

// pond's tso-combine on worker threads: 3 CNs of 2 workers form groups of 2, so one worker of
// each CN relays the other's timestamp requests, a message between two threads of one process,
// over UCX and over the local fabric. The recorded history is strictly serializable.
TEST(UcxRunTest, PondRelaysTimestampRequestsBetweenWorkerThreads) {
  for (const char* kind : {"ucx", "local"}) {
    SCOPED_TRACE(kind);
    SmallBankParams p;
    p.accounts = 200;
    p.hot_fraction = 0.1;
    SmallBankWorkload w(p);
    RunOptions o = UcxRun(Param{"pond", Isolation::kSerializable, "shm"}, 0.05);
    o.cluster.transport.kind = kind;
    o.cluster.cns = 3;
    o.cluster.workers_per_cn = 2;
    o.record = true;
    o.calls_max = kSmallBankHistoryTxnsMax;
    Result<RunResult> r = ValidateAndRun(w, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->check->ok) << r->check->detail;
    ASSERT_TRUE(r->history.has_value());
    EXPECT_GT(r->committed_rw, 0u);
    EXPECT_GT(r->stats.tso_relayed, 0u) << "no relay answered a request";
    EXPECT_EQ(r->history->model, "strict-serializable");
    EXPECT_TRUE(r->history->ok) << r->history->detail;
  }
}

std::string Name(const testing::TestParamInfo<Param>& i) {
  const auto& [protocol, iso, tls] = i.param;
  return protocol + (iso == Isolation::kSnapshot ? "_si_" : "_sr_") + tls;
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxRunTest,
                         testing::Values(Param{"lotus", Isolation::kSerializable, "shm"},
                                         Param{"lotus", Isolation::kSnapshot, "shm"},
                                         Param{"motor", Isolation::kSerializable, "shm"},
                                         Param{"ford", Isolation::kSerializable, "shm"},
                                         Param{"lotus", Isolation::kSerializable, "tcp"},
                                         Param{"motor", Isolation::kSnapshot, "tcp"},
                                         Param{"ford", Isolation::kSerializable, "tcp"}),
                         Name);

}  // namespace
}  // namespace pond::bench
