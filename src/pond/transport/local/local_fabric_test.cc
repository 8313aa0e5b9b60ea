#include "pond/transport/local/local_fabric.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "pond/runtime/clocks.h"

namespace pond {
namespace {

struct Worker {
  ManualClock clock;
  Scheduler sched{clock};
  std::unique_ptr<Endpoint> ep;
  Worker(LocalFabric& f, WorkerAddr a) { ep = f.CreateEndpoint(a, sched); }
  void Run(Task<void> t) {
    sched.Spawn(std::move(t));
    sched.RunUntilIdle();
  }
};

std::unique_ptr<LocalFabric> MakeFabric(uint16_t mns = 2, uint64_t bytes = 1 << 20) {
  auto f = LocalFabric::Create(mns, bytes);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(f).value();
}

TEST(LocalFabricTest, ReadsBackWhatItWrote) {
  auto f = MakeFabric();
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    char out[13] = "hello, pond!";
    char in[13] = {};
    ep->Write(GAddr::Make(1, 4099), out, sizeof(out));  // unaligned on purpose
    EXPECT_TRUE((co_await ep->Flush()).ok());
    ep->Read(GAddr::Make(1, 4099), in, sizeof(in));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_STREQ(in, "hello, pond!");
  }(w.ep.get()));
}

TEST(LocalFabricTest, BatchAppliesInPostingOrder) {
  // RC queue-pair order: a READ posted after a WRITE to the same address in one batch sees it,
  // and a CAS posted after a WRITE compares against the written value.
  auto f = MakeFabric();
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t seven = 7, got = 0, old = 0;
    GAddr a = GAddr::Make(0, 4096);
    ep->Write(a, &seven, 8);
    ep->Read(a, &got, 8);
    ep->Cas(a, 7, 9, &old);
    EXPECT_EQ(ep->pending(), 3u);
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(got, 7u);
    EXPECT_EQ(old, 7u);
    uint64_t now = 0;
    ep->Read(a, &now, 8);
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(now, 9u);
  }(w.ep.get()));
  EXPECT_EQ(w.ep->stats().batches, 2u);
}

TEST(LocalFabricTest, FailedCasReturnsCurrentValue) {
  auto f = MakeFabric();
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t old = 123;
    GAddr a = GAddr::Make(0, 8192);
    ep->Cas(a, 5, 6, &old);  // memory holds 0, not 5
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(old, 0u);
    uint64_t prev = 0;
    ep->Faa(a, 10, &prev);
    ep->Faa(a, 10, &prev);
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(prev, 10u);
  }(w.ep.get()));
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

TEST(LocalFabricTest, OutOfRegionAccessFailsTheBatch) {
  auto f = MakeFabric(1, 1 << 20);
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t x = 0;
    ep->Read(GAddr::Make(0, (1 << 20) - 4), &x, 8);
    Status s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    ep->Read(GAddr::Make(5, 0), &x, 8);  // no MN 5
    s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    ep->Cas(GAddr::Make(0, 4097), 0, 1, &x);
    s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "atomics need 8-byte alignment";
  }(w.ep.get()));
}

TEST(LocalFabricTest, MessagesToOneWorkerInOneRoundShareAPacket) {
  auto f = MakeFabric(1);
  Worker a(*f, {0, 0});
  Worker b(*f, {1, 0});
  std::vector<std::string> got;
  std::vector<uint16_t> kinds;
  auto handler = [&](const Message& m) {
    EXPECT_EQ(m.from, (WorkerAddr{0, 0}));
    kinds.push_back(m.kind);
    got.emplace_back(reinterpret_cast<const char*>(m.payload.data()), m.payload.size());
  };
  b.ep->OnMessage(1, handler);
  b.ep->OnMessage(2, handler);
  // Two coroutines on worker a each send in the same round.
  auto sender = [](Endpoint* ep, std::string text, uint16_t kind) -> Task<void> {
    ep->Send({1, 0}, kind, std::as_bytes(std::span(text.data(), text.size())));
    co_return;
  };
  a.sched.Spawn(sender(a.ep.get(), "lock k1", 1));
  a.sched.Spawn(sender(a.ep.get(), "lock k2 and k3", 2));
  a.sched.RunOnce();
  EXPECT_EQ(a.ep->stats().packets_sent, 1u);
  EXPECT_EQ(a.ep->stats().messages_sent, 2u);
  EXPECT_TRUE(b.sched.RunOnce());
  EXPECT_EQ(got, (std::vector<std::string>{"lock k1", "lock k2 and k3"}));
  EXPECT_EQ(kinds, (std::vector<uint16_t>{1, 2}));
  EXPECT_EQ(b.ep->stats().packets_received, 1u);
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

TEST(LocalFabricTest, ConcurrentFaaAndCasAreAtomic) {
  // Four threads each add 1 to one counter 20k times by FAA, and 20k times by a CAS loop, to two
  // words; no update may be lost.
  auto f = MakeFabric(1);
  constexpr int kThreads = 4, kIters = 20000;
  std::vector<std::unique_ptr<Worker>> ws;
  for (int t = 0; t < kThreads; t++) {
    ws.push_back(std::make_unique<Worker>(*f, WorkerAddr{static_cast<uint16_t>(t), 0}));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      ws[t]->Run([](Endpoint* ep) -> Task<void> {
        GAddr faa = GAddr::Make(0, 4096), cas = GAddr::Make(0, 4104);
        for (int i = 0; i < kIters; i++) {
          uint64_t old;
          ep->Faa(faa, 1, &old);
          (void)co_await ep->Flush();
          uint64_t seen = 0;
          ep->Read(cas, &seen, 8);
          (void)co_await ep->Flush();
          for (;;) {
            ep->Cas(cas, seen, seen + 1, &old);
            (void)co_await ep->Flush();
            if (old == seen) break;
            seen = old;
          }
        }
      }(ws[t]->ep.get()));
    });
  }
  for (auto& th : threads) th.join();
  uint64_t faa, cas;
  std::memcpy(&faa, f->region(0) + 4096, 8);
  std::memcpy(&cas, f->region(0) + 4104, 8);
  EXPECT_EQ(faa, uint64_t{kThreads} * kIters);
  EXPECT_EQ(cas, uint64_t{kThreads} * kIters);
}

}  // namespace
}  // namespace pond
