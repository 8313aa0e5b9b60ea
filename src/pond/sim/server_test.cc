#include "pond/sim/server.h"

#include <gtest/gtest.h>

namespace pond::sim {
namespace {

constexpr int kRead = 0;
constexpr int kCas = 1;

TEST(ServerTest, IdleServerCompletesAfterTheServiceTime) {
  Server s;
  EXPECT_EQ(s.Serve(100, 30, kRead), 130u);
  EXPECT_EQ(s.busy_until_ns(), 130u);
  EXPECT_EQ(s.WaitNs(kRead), 0u);
}

TEST(ServerTest, RequestsQueueInArrivalOrder) {
  Server s;
  // Three at once: each waits for the ones before it.
  EXPECT_EQ(s.Serve(0, 10, kRead), 10u);
  EXPECT_EQ(s.Serve(0, 10, kRead), 20u);
  EXPECT_EQ(s.Serve(5, 10, kCas), 30u);
  EXPECT_EQ(s.WaitNs(kRead), 10u);  // 0 + 10
  EXPECT_EQ(s.WaitNs(kCas), 15u);   // arrived at 5, started at 20
  EXPECT_EQ(s.wait_ns_max(), 15u);
  // Arriving after the queue drained: no wait, the idle gap is not busy time.
  EXPECT_EQ(s.Serve(100, 10, kRead), 110u);
  EXPECT_EQ(s.BusyNs(), 40u);
}

TEST(ServerTest, BacklogIsUnfinishedWork) {
  Server s;
  s.Serve(0, 100, kRead);
  s.Serve(0, 100, kRead);
  EXPECT_EQ(s.BacklogNs(50), 150u);
  EXPECT_EQ(s.BacklogNs(200), 0u);
  EXPECT_EQ(s.BacklogNs(500), 0u);
}

TEST(ServerTest, UtilisationIsSplitByKind) {
  Server s;
  // 1000 ns window: 300 ns of READ and 500 ns of CAS, with gaps.
  uint64_t t = 0;
  for (int i = 0; i < 3; i++, t += 100) s.Serve(t, 100, kRead);
  for (int i = 0; i < 5; i++, t += 100) s.Serve(t + 100, 100, kCas);
  EXPECT_EQ(s.BusyNs(kRead), 300u);
  EXPECT_EQ(s.BusyNs(kCas), 500u);
  EXPECT_EQ(s.ServedCount(kRead), 3u);
  EXPECT_EQ(s.ServedCount(kCas), 5u);
  EXPECT_DOUBLE_EQ(s.Utilisation(kRead, 0, 1000), 0.3);
  EXPECT_DOUBLE_EQ(s.Utilisation(kCas, 0, 1000), 0.5);
  EXPECT_DOUBLE_EQ(s.Utilisation(0, 1000), 0.8);
  EXPECT_EQ(s.BusyNs(2), 0u);
}

TEST(ServerTest, SaturatedServerIsFullyBusyAndItsQueueGrows) {
  Server s;
  // Offered load twice the capacity: one 10 ns request every 5 ns for 10 us.
  uint64_t done = 0;
  for (uint64_t t = 0; t < 10'000; t += 5) done = s.Serve(t, 10, kCas);
  EXPECT_EQ(done, 20'000u);  // 2000 requests x 10 ns, back to back from 0
  EXPECT_EQ(s.BacklogNs(10'000), 10'000u);
  // Busy time counted at acceptance: over [0, 10 us) the counted share is 2, the true one 1;
  // the difference is exactly the backlog at the window's end.
  EXPECT_DOUBLE_EQ(s.Utilisation(0, 10'000), 2.0);
  EXPECT_EQ(s.BusyNs() - s.BacklogNs(10'000), 10'000u);
}

TEST(ServerTest, ResetStatsStartsANewWindowButKeepsTheQueue) {
  Server s;
  s.Serve(0, 100, kRead);
  s.ResetStats();
  EXPECT_EQ(s.BusyNs(), 0u);
  EXPECT_EQ(s.ServedCount(kRead), 0u);
  EXPECT_EQ(s.wait_ns_max(), 0u);
  EXPECT_EQ(s.busy_until_ns(), 100u);
  EXPECT_EQ(s.Serve(50, 10, kCas), 110u);  // still queued behind the earlier request
  EXPECT_EQ(s.WaitNs(kCas), 50u);
}

#ifndef NDEBUG
TEST(ServerDeathTest, OutOfOrderArrivalAborts) {
  Server s;
  s.Serve(100, 10, kRead);
  EXPECT_DEATH(s.Serve(50, 10, kRead), "arrival order");
}

TEST(ServerDeathTest, KindOutOfRangeAborts) {
  Server s;
  EXPECT_DEATH(s.Serve(0, 10, Server::kKindCountMax), "kind");
}
#endif

}  // namespace
}  // namespace pond::sim
