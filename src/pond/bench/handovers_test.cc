// Handovers under every protocol, on real threads and in the simulator, SR and SI (ford only SR):
// service requests, releases and handovers commit, and after the run every phone is on one cell
// whose counts agree with its phones; under random fault schedules too.
#include "pond/bench/handovers.h"

#include <gtest/gtest.h>

#include <string>

#include "pond/bench/run_faults.h"
#include "pond/bench/seed_runs.h"
#include "pond/bench/test_run.h"

namespace pond::bench {
namespace {

uint64_t Committed(const RunResult& r, HandoversTxn t) {
  return r.committed_by_txn.at(static_cast<size_t>(t)).second;
}

// Few phones and cells and many handovers, so that cells are shared and phones move. A release
// is a phone's second request: with 64 phones a run of a few hundred calls has many, where one
// of 400 phones under AddressSanitizer's slowness could commit no release in 0.15 s on threads.
HandoversParams Small() {
  return {.phones = 64, .cells = 8, .mobile_share = 0.5, .handover_pct = 20, .context_bytes = 64};
}

void RunAndCheck(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  HandoversWorkload w(Small());
  Result<RunResult> r =
      ValidateAndRun(w, SmallTestRun(protocol, iso, simulate, simulate ? 0.002 : 0.15));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->check.has_value());
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  EXPECT_GT(Committed(*r, HandoversTxn::kServiceRequest), 0u);
  EXPECT_GT(Committed(*r, HandoversTxn::kRelease), 0u);
  EXPECT_GT(Committed(*r, HandoversTxn::kHandover), 0u);
}

class HandoversTest : public testing::TestWithParam<std::string> {};
class HandoversTestSnapshot : public testing::TestWithParam<std::string> {};

TEST_P(HandoversTest, EveryPhoneStaysOnOneCellOnThreadsSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, false);
}
TEST_P(HandoversTestSnapshot, EveryPhoneStaysOnOneCellOnThreadsSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, false);
}
TEST_P(HandoversTest, EveryPhoneStaysOnOneCellSimulatedSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, true);
}
TEST_P(HandoversTestSnapshot, EveryPhoneStaysOnOneCellSimulatedSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, true);
}

INSTANTIATE_TEST_SUITE_P(Protocols, HandoversTest, testing::ValuesIn(ProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Protocols, HandoversTestSnapshot,
                         testing::ValuesIn(SnapshotProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// CN and MN crashes, restarts and partitions drawn from each seed: every phone stays on one
// cell, the cells' counts agree, and the replicas agree.
TEST(HandoversFaultTest, EveryPhoneStaysOnOneCellSimulatedUnderRandomFaults) {
  const SeedRange seeds = SeedsFromEnv("POND_FAULT_SEED", "POND_FAULT_SEEDS", 20);
  uint64_t handovers = 0;
  for (uint64_t seed = seeds.first; seed < seeds.first + seeds.count; seed++) {
    TraceSeed(seed);
    for (const char* protocol : {"lotus", "motor", "ford"}) {
      SCOPED_TRACE(std::string(protocol) + " seed " + std::to_string(seed));
      HandoversWorkload w(Small());
      RunOptions o = FaultyRun(protocol, Isolation::kSerializable, seed);
      ASSERT_TRUE(ResolveFaultsFor(w, &o, "random").ok());
      Result<RunResult> r = ValidateAndRun(w, o);
      ASSERT_TRUE(r.ok()) << o.faults << ": " << r.status().ToString();
      EXPECT_TRUE(r->check->ok) << o.faults << ": " << r->check->detail;
      handovers += Committed(*r, HandoversTxn::kHandover);
    }
  }
  EXPECT_GT(handovers, 0u);
}

TEST(HandoversKeyTest, APhoneStartsOnItsHomeCellsShard) {
  for (uint64_t x : {0, 1, 77, 4096 + 3}) {
    EXPECT_EQ(PhoneKey(x, 50) & 0xfff, CellKey(HomeCell(x, 50)) & 0xfff);
    EXPECT_EQ(PhoneKey(x, 50) >> 12, x);
    EXPECT_LT(HomeCell(x, 50), 50u);
  }
}

TEST(HandoversValidateTest, BadSettingsNameTheirFlag) {
  RunOptions o = SmallTestRun("lotus", Isolation::kSerializable, true, 0.001);
  auto message = [&](HandoversParams p) { return HandoversWorkload(p).Validate(o).message(); };
  EXPECT_NE(message({.phones = 0}).find("--phones"), std::string::npos);
  EXPECT_NE(message({.cells = 1}).find("--cells"), std::string::npos);
  EXPECT_NE(message({.mobile_share = 0}).find("--mobile-share"), std::string::npos);
  EXPECT_NE(message({.handover_pct = 101}).find("--handover-pct"), std::string::npos);
  EXPECT_NE(message({.context_bytes = 8}).find("--context-bytes"), std::string::npos);
}

}  // namespace
}  // namespace pond::bench
