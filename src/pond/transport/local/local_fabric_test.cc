#include "pond/transport/local/local_fabric.h"

#include <gtest/gtest.h>

#include <iostream>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "pond/runtime/clocks.h"
#include "pond/transport/endpoint_contract.h"

namespace pond {
namespace {

using contract::Worker;

std::unique_ptr<LocalFabric> MakeFabric(uint16_t mns = 2, uint64_t bytes = 1 << 20) {
  auto f = LocalFabric::Create(mns, bytes);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(f).value();
}

std::unique_ptr<Fabric> MakeAny(uint16_t mns, uint64_t bytes) { return MakeFabric(mns, bytes); }

TEST(LocalFabricTest, AReadThatSawPartOfAWriteSeesItsHead) {
  std::cout << contract::AReadThatSawPartOfAWriteSeesItsHead(MakeAny, 200000) << " torn copies\n";
}
TEST(LocalFabricTest, ReadsBackWhatItWrote) { contract::ReadsBackWhatItWrote(MakeAny); }

TEST(LocalFabricTest, BatchAppliesInPostingOrder) { contract::BatchAppliesInPostingOrder(MakeAny); }

TEST(LocalFabricTest, FailedCasReturnsCurrentValue) {
  contract::FailedCasReturnsCurrentValue(MakeAny);
}

TEST(LocalFabricTest, OutOfRegionAccessFailsTheBatch) {
  contract::OutOfRegionAccessFailsTheBatch(MakeAny);
}

TEST(LocalFabricTest, MessagesToOneWorkerInOneRoundShareAPacket) {
  contract::MessagesToOneWorkerInOneRoundShareAPacket(MakeAny);
}

// Four threads, 20k updates each way: on the local transport every op is the posting thread's
// own load, store or atomic, so this is where races would show (and ThreadSanitizer runs it).
TEST(LocalFabricTest, ConcurrentFaaAndCasAreAtomic) {
  contract::ConcurrentFaaAndCasAreAtomic(MakeAny, 4, 20000);
}

TEST(LocalFabricTest, OneBatchPerMnPerFlush) {
  auto f = MakeFabric(3);
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t buf[6] = {};
    for (int i = 0; i < 6; i++) ep->Read(GAddr::Make(i % 3, 4096), &buf[i], 8);
    EXPECT_TRUE((co_await ep->Flush()).ok());
  }(w.ep.get()));
  EXPECT_EQ(w.ep->stats().flushes, 1u);
  EXPECT_EQ(w.ep->stats().batches, 3u);
  EXPECT_EQ(w.ep->stats().ops[static_cast<int>(Verb::kRead)], 6u);
}

// A packet counts as in flight until the round that took it has sent the answers its handlers
// buffered: between the poll and the round's end nothing may look idle (Cluster::Run's workers
// leave when nothing is in flight, and an answer sent to a worker that left would never arrive).
TEST(LocalFabricTest, APacketIsInFlightUntilItsAnswerHasLeft) {
  auto f = MakeFabric(1);
  Worker a(*f, {0, 0});
  Worker b(*f, {1, 0});
  int answers = 0;
  b.ep->OnMessage(1, [&](const Message& m) { b.ep->Send(m.from, 2, m.payload); });
  a.ep->OnMessage(2, [&](const Message&) { answers++; });
  std::byte x{7};
  a.ep->Send({1, 0}, 1, std::span(&x, 1));
  a.ep->EndRound();
  EXPECT_EQ(f->packets_in_flight(), 1u);
  EXPECT_TRUE(b.ep->Poll());  // the handler buffers its answer
  EXPECT_EQ(f->packets_in_flight(), 1u) << "the request counts until its answer has left";
  b.ep->EndRound();
  EXPECT_EQ(f->packets_in_flight(), 1u) << "now the answer is the one in flight";
  EXPECT_TRUE(a.ep->Poll());
  a.ep->EndRound();
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(f->packets_in_flight(), 0u);
}

// Membership's fence on the wire: a packet carries its sender CN's incarnation, and a receiver's
// filter drops a dead incarnation's packets whole, before any handler sees them.
TEST(LocalFabricTest, APacketFilterDropsADeadIncarnationsPackets) {
  auto f = MakeFabric(1);
  Worker a(*f, {0, 0});
  Worker b(*f, {1, 0});
  int delivered = 0;
  b.ep->OnMessage(1, [&](const Message&) { delivered++; });
  uint16_t live_incarnation = 1;
  b.ep->SetPacketFilter([&](WorkerAddr from, uint16_t incarnation) {
    return from.cn != 0 || incarnation == live_incarnation;
  });
  std::byte x{7};
  a.ep->Send({1, 0}, 1, std::span(&x, 1));
  a.ep->Send({1, 0}, 1, std::span(&x, 1));
  a.ep->EndRound();  // incarnation 0: the dead one
  EXPECT_TRUE(b.ep->Poll());
  b.ep->EndRound();
  EXPECT_EQ(delivered, 0);
  EXPECT_EQ(b.ep->stats().packets_refused, 1u);
  EXPECT_EQ(b.ep->stats().messages_received, 0u);
  a.ep->set_incarnation(1);
  a.ep->Send({1, 0}, 1, std::span(&x, 1));
  a.ep->EndRound();
  EXPECT_TRUE(b.ep->Poll());
  b.ep->EndRound();
  EXPECT_EQ(delivered, 1);
  EXPECT_EQ(f->packets_in_flight(), 0u) << "a refused packet is not left in flight";
}

// A serving worker sleeps on a doorbell while idle: a packet for it rings the bell, so the
// sleeper is woken at once, not at the end of its bound.
TEST(LocalFabricTest, APacketRingsItsReceiversDoorbell) {
  auto f = MakeFabric(1);
  Worker a(*f, {0, 0});
  Worker b(*f, {1, 0});
  b.ep->OnMessage(1, [](const Message&) {});
  Doorbell bell;
  EXPECT_TRUE(b.ep->SetDoorbell(&bell)) << "the local transport rings what arrives";
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    bell.Wait(std::chrono::seconds(60));
    woke = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(woke.load()) << "woken with nothing sent";
  std::byte x{7};
  a.ep->Send({1, 0}, 1, std::span(&x, 1));
  a.ep->EndRound();
  const auto sent = std::chrono::steady_clock::now();
  sleeper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(10));
  EXPECT_TRUE(b.ep->Poll());
  b.ep->EndRound();
  b.ep->SetDoorbell(nullptr);
}

}  // namespace
}  // namespace pond
