#include "pond/transport/sim/sim_fabric.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "pond/runtime/scheduler.h"
#include "pond/sim/alloc_cache.h"

namespace pond {
namespace {

// A minimal driver: every worker that gets work (a ready coroutine, an arrived packet, a due
// timer) runs one round at the current virtual time, with no CPU cost, and what it posted leaves
// at once.
struct Cluster {
  sim::Engine engine;
  std::unique_ptr<SimFabric> fabric;
  struct Worker {
    std::unique_ptr<Scheduler> sched;
    std::unique_ptr<Endpoint> ep;
    bool queued = false;
  };
  std::vector<Worker> workers;

  Cluster(int n, Testbed model = {}, uint64_t seed = 1) : engine(seed) {
    auto f = SimFabric::Create(engine, model, 2, 1 << 20);
    POND_CHECK(f.ok());
    fabric = std::move(f).value();
    workers.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
      Worker& w = workers[static_cast<size_t>(i)];
      w.sched = std::make_unique<Scheduler>(engine.clock());
      w.ep = fabric->CreateEndpoint(WorkerAddr{static_cast<uint16_t>(i), 0}, *w.sched);
      w.sched->SetWakeHook([this, i] { Wake(i); });
    }
    fabric->SetPacketHook([this](WorkerAddr a) { Wake(a.cn); });
  }
  void Wake(int i) {
    Worker& w = workers[static_cast<size_t>(i)];
    if (w.queued) return;
    w.queued = true;
    engine.At(engine.now(), [this, i] {
      Worker& w = workers[static_cast<size_t>(i)];
      w.queued = false;
      w.sched->RunOnce();
      fabric->Launch(WorkerAddr{static_cast<uint16_t>(i), 0}, engine.now());
      if (w.sched->has_ready()) Wake(i);
      uint64_t t = w.sched->NextTimerNs();
      if (t != UINT64_MAX) engine.At(std::max(t, engine.now()), [this, i] { Wake(i); });
    });
  }
  void Run() {
    while (engine.Step()) {
    }
  }
};

TEST(SimFabricTest, ReadTakesTwoOneWaysPlusNicService) {
  Cluster c(1);
  uint64_t done_at = 0;
  c.workers[0].sched->Spawn([](Cluster* c, uint64_t* done_at) -> Task<void> {
    std::vector<std::byte> buf(64);
    c->workers[0].ep->Read(GAddr::Make(1, 4096), buf.data(), 64);
    EXPECT_TRUE((co_await c->workers[0].ep->Flush()).ok());
    *done_at = c->engine.now();
  }(&c, &done_at));
  c.Run();
  const Testbed& m = c.fabric->testbed();
  EXPECT_EQ(done_at, 2 * m.one_way_ns + NicServiceNs(m, 0, 64));
  EXPECT_EQ(c.fabric->nic(1).ServedCount(0), 1u);
  EXPECT_EQ(c.fabric->nic(0).ServedCount(0), 0u);
}

TEST(SimFabricTest, AtomicsQueueAtTheNicAndReadsElsewhereDoNot) {
  // Ten workers post ten CAS each to MN 0 at time 0; at 2.5 M atomics/s the NIC needs 40 µs for
  // them. A READ to MN 1 at the same moment is served at once.
  Cluster c(11);
  std::vector<uint64_t> done(11, 0);
  for (int i = 0; i < 10; i++) {
    c.workers[static_cast<size_t>(i)].sched->Spawn(
        [](Cluster* c, int i, uint64_t* done) -> Task<void> {
          uint64_t old[10];
          for (int k = 0; k < 10; k++) {
            c->workers[static_cast<size_t>(i)].ep->Cas(GAddr::Make(0, 4096 + 8 * k), 0, 1, &old[k]);
          }
          EXPECT_TRUE((co_await c->workers[static_cast<size_t>(i)].ep->Flush()).ok());
          *done = c->engine.now();
        }(&c, i, &done[static_cast<size_t>(i)]));
  }
  c.workers[10].sched->Spawn([](Cluster* c, uint64_t* done) -> Task<void> {
    uint64_t x;
    c->workers[10].ep->Read(GAddr::Make(1, 4096), &x, 8);
    EXPECT_TRUE((co_await c->workers[10].ep->Flush()).ok());
    *done = c->engine.now();
  }(&c, &done[10]));
  c.Run();
  const Testbed& m = c.fabric->testbed();
  uint64_t cas_ns = NicServiceNs(m, 2, 8);
  uint64_t last = *std::max_element(done.begin(), done.begin() + 10);
  EXPECT_EQ(last, 2 * m.one_way_ns + 100 * cas_ns);
  EXPECT_EQ(done[10], 2 * m.one_way_ns + NicServiceNs(m, 0, 8));
  EXPECT_EQ(c.fabric->nic(0).ServedCount(2), 100u);
  // Only the first CAS on each word won.
  uint64_t words[10];
  std::memcpy(words, c.fabric->region(0) + 4096, sizeof(words));
  for (uint64_t w : words) EXPECT_EQ(w, 1u);
}

// A CN crash (fault schedules' crash-cn): packets to it and from it are lost from then on, even
// those already on the wire; each batch it had launched reaches its MN or not, with no completion.
TEST(SimFabricTest, ACrashedCnSendsAndReceivesNothingMoreAndItsBatchesDoNotComplete) {
  Cluster c(3);
  int at1 = 0, at2 = 0;
  c.workers[1].ep->OnMessage(1, [&](const Message&) { at1++; });
  c.workers[2].ep->OnMessage(1, [&](const Message&) { at2++; });
  bool completed = false;
  std::byte x{1};
  uint64_t words[4] = {1, 2, 3, 4};
  // Worker 1 sends a packet to 2 and posts writes to both MNs, then its CN dies while they are
  // on their way (one way takes 1 us).
  c.workers[1].sched->Spawn(
      [](Cluster* c, std::byte* x, uint64_t* words, bool* done) -> Task<void> {
        Endpoint& ep = *c->workers[1].ep;
        ep.Send({2, 0}, 1, std::span(x, 1));
        ep.Write(GAddr::Make(0, 4096), &words[0], 16);
        ep.Write(GAddr::Make(1, 4096), &words[2], 16);
        (void)co_await ep.Flush();
        *done = true;
      }(&c, &x, words, &completed));
  c.engine.At(500, [&c] { c.fabric->CrashCn(1); });
  // Worker 0 sends to the dead CN afterwards.
  c.engine.At(600, [&c, &x] {
    c.workers[0].ep->Send({1, 0}, 1, std::span(&x, 1));
    c.workers[0].ep->EndRound();
    c.fabric->Launch({0, 0}, c.engine.now());
  });
  c.Run();
  EXPECT_FALSE(completed) << "nobody is left to resume";
  EXPECT_EQ(at1, 0);
  EXPECT_EQ(at2, 0) << "a packet from a crashed CN arriving after the crash is lost";
  EXPECT_EQ(c.fabric->packets_in_flight(), 0u);
  SimFabric::CrashStats s = c.fabric->crash_stats();
  EXPECT_EQ(s.dropped_packets, 2u);
  EXPECT_EQ(s.landed_batches + s.lost_batches, 2u);
  EXPECT_TRUE(c.fabric->IsCnDown(1));
  EXPECT_FALSE(c.fabric->IsCnDown(0));
}

// What a crashed CN had on its way lands whole, not at all, or cut short: a prefix of its ops in
// posting order, the last one a prefix of its 8-byte words — never a later op without an earlier
// one, never a word in part. Over seeds each of the three shows up.
TEST(SimFabricTest, ACrashedCnsBatchLandsWholeNotAtAllOrAPrefixOfItsWords) {
  constexpr int kOps = 3;
  constexpr int kWords = 4;
  int whole = 0, none = 0, cut = 0;
  for (uint64_t seed = 1; seed <= 64; seed++) {
    Cluster c(2, {}, seed);
    std::array<uint64_t, kOps * kWords> ones;
    ones.fill(~uint64_t{0});
    c.workers[1].sched->Spawn([](Cluster* c, uint64_t* ones) -> Task<void> {
      Endpoint& ep = *c->workers[1].ep;
      for (int i = 0; i < kOps; i++) {
        ep.Write(GAddr::Make(0, 4096 + 64 * i), ones + kWords * i, 8 * kWords);
      }
      (void)co_await ep.Flush();
    }(&c, ones.data()));
    c.engine.At(500, [&c] { c.fabric->CrashCn(1); });
    c.Run();
    int landed = 0;  // words landed, counted in posting order
    bool gap = false;
    for (int i = 0; i < kOps; i++) {
      for (int w = 0; w < kWords; w++) {
        uint64_t word;
        std::memcpy(&word, c.fabric->region(0) + 4096 + 64 * i + 8 * w, 8);
        ASSERT_TRUE(word == 0 || word == ~uint64_t{0}) << "seed " << seed << ": a word in part";
        if (word == 0) {
          gap = true;
        } else {
          ASSERT_FALSE(gap) << "seed " << seed << ": a later word landed without an earlier one";
          landed++;
        }
      }
    }
    SimFabric::CrashStats s = c.fabric->crash_stats();
    EXPECT_EQ(s.landed_batches + s.lost_batches, 1u);
    EXPECT_EQ(s.cut_batches, landed > 0 && landed < kOps * kWords ? 1u : 0u) << "seed " << seed;
    (landed == 0 ? none : landed == kOps * kWords ? whole : cut)++;
  }
  EXPECT_GT(whole, 0);
  EXPECT_GT(none, 0);
  EXPECT_GT(cut, 0);
}

// A restarted CN gets new endpoints at the same addresses. What was on the wire to or from it
// when it crashed or restarted is lost — a late packet must not reach the new incarnation — and
// what is sent once it is back arrives.
TEST(SimFabricTest, ARestartedCnGetsOnlyPacketsSentAfterItCameBack) {
  Cluster c(2);
  std::byte x{1};
  auto send = [&c, &x] {
    c.workers[0].ep->Send({1, 0}, 1, std::span(&x, 1));
    c.workers[0].ep->EndRound();
    c.fabric->Launch({0, 0}, c.engine.now());
  };
  int at_old = 0, at_new = 0;
  c.workers[1].ep->OnMessage(1, [&at_old](const Message&) { at_old++; });
  const uint16_t gen0 = c.fabric->Generation(1);
  c.engine.At(100, [&] { send(); });  // on the wire at the crash (one way is 1 us): lost
  c.engine.At(500, [&c] { c.fabric->CrashCn(1); });
  c.engine.At(600, [&] { send(); });  // to a dead CN: lost
  // The dead incarnation's scheduler and endpoint outlive the restart, as a crashed CN's
  // workers do in a cluster.
  std::unique_ptr<Scheduler> old_sched;
  std::unique_ptr<Endpoint> old_ep;
  c.engine.At(1'200, [&] {
    c.fabric->RestartCn(1);
    old_sched = std::move(c.workers[1].sched);
    old_ep = std::move(c.workers[1].ep);
    c.workers[1].sched = std::make_unique<Scheduler>(c.engine.clock());
    c.workers[1].ep = c.fabric->CreateEndpoint({1, 0}, *c.workers[1].sched);
    c.workers[1].ep->OnMessage(1, [&at_new](const Message&) { at_new++; });
  });
  c.engine.At(1'300, [&] { send(); });  // after the restart: arrives
  c.Run();
  EXPECT_EQ(at_old, 0);
  EXPECT_EQ(at_new, 1) << "only the packet sent after the restart reaches the new incarnation";
  EXPECT_FALSE(c.fabric->IsCnDown(1));
  EXPECT_EQ(c.fabric->Generation(1), gen0 + 2) << "one crash, one restart";
  EXPECT_EQ(c.fabric->crash_stats().dropped_packets, 2u);
  // The dead endpoint goes while its successor lives: the address stays the successor's.
  old_ep.reset();
  send();
  c.Run();
  EXPECT_EQ(at_new, 2);
  EXPECT_EQ(c.fabric->packets_in_flight(), 0u);
}

// A partitioned CN neither sends nor receives packets — one on the wire when the cut comes is
// lost too — but its one-sided ops still reach the memory pool (the cut fencing is for). Healed,
// it talks again.
TEST(SimFabricTest, APartitionedCnLosesItsPacketsButStillReachesTheMemoryPool) {
  Cluster c(2);
  std::byte x{1};
  auto send = [&c, &x](int from) {
    const uint16_t to = from == 0 ? 1 : 0;
    c.workers[static_cast<size_t>(from)].ep->Send({to, 0}, 1, std::span(&x, 1));
    c.workers[static_cast<size_t>(from)].ep->EndRound();
    c.fabric->Launch({static_cast<uint16_t>(from), 0}, c.engine.now());
  };
  int at0 = 0, at1 = 0;
  c.workers[0].ep->OnMessage(1, [&at0](const Message&) { at0++; });
  c.workers[1].ep->OnMessage(1, [&at1](const Message&) { at1++; });
  c.engine.At(100, [&] { send(0); });  // on the wire at the cut (one way is 1 us): lost
  c.engine.At(500, [&c] { c.fabric->PartitionCn(1); });
  c.engine.At(600, [&] { send(0); });  // to the cut CN: lost
  c.engine.At(700, [&] { send(1); });  // from it: lost
  uint64_t word = 7, back = 0;
  bool wrote = false;
  c.engine.At(800, [&] {
    c.workers[1].sched->Spawn(
        [](Cluster* c, uint64_t* word, uint64_t* back, bool* ok) -> Task<void> {
          Endpoint& ep = *c->workers[1].ep;
          ep.Write(GAddr::Make(0, 4096), word, 8);
          *ok = (co_await ep.Flush()).ok();
          ep.Read(GAddr::Make(0, 4096), back, 8);
          *ok = *ok && (co_await ep.Flush()).ok();
        }(&c, &word, &back, &wrote));
  });
  c.engine.At(20'000, [&c] { c.fabric->HealCn(1); });
  c.engine.At(20'100, [&] { send(0); });
  c.engine.At(20'200, [&] { send(1); });
  c.Run();
  EXPECT_TRUE(wrote) << "its writes and reads reach the MN";
  EXPECT_EQ(back, 7u);
  EXPECT_EQ(at1, 1) << "only the packet sent after the heal reaches it";
  EXPECT_EQ(at0, 1);
  EXPECT_EQ(c.fabric->crash_stats().cut_packets, 3u);
  EXPECT_FALSE(c.fabric->IsCnPartitioned(1));
  EXPECT_EQ(c.fabric->packets_in_flight(), 0u);
}

// A crashed MN answers nothing: a Flush with a batch to it fails Unavailable after the queue
// pair's timeout and names it, while the batch to the MN that is up is applied; a batch that
// reached the MN before its crash but had not completed is unreachable too.
TEST(SimFabricTest, ACrashedMnFailsItsBatchesAfterTheTimeoutAndSaysWhich) {
  Cluster c(1);
  struct Seen {
    Endpoint::FlushResult before, after;
    uint64_t after_at = 0, posted_at = 0;
    uint64_t got0 = 0;
  } seen;
  c.workers[0].sched->Spawn([](Cluster* c, Seen* seen) -> Task<void> {
    Endpoint& ep = *c->workers[0].ep;
    uint64_t one = 1, two = 2, x = 0;
    // In flight when MN 1 crashes: it has reached the NIC and is being served.
    ep.Write(GAddr::Make(1, 4096), &one, 8);
    seen->before = co_await ep.FlushReporting();
    seen->posted_at = c->engine.now();
    ep.Write(GAddr::Make(0, 4096), &two, 8);
    ep.Read(GAddr::Make(1, 4096), &x, 8);
    ep.Read(GAddr::Make(0, 4096), &seen->got0, 8);
    seen->after = co_await ep.FlushReporting();
    seen->after_at = c->engine.now();
  }(&c, &seen));
  const Testbed& m = c.fabric->testbed();
  c.engine.At(m.one_way_ns + 1, [&c] { c.fabric->CrashMn(1); });
  c.Run();
  EXPECT_TRUE(c.fabric->IsMnDown(1));
  EXPECT_FALSE(c.fabric->IsMnDown(0));
  EXPECT_EQ(seen.before.status.code(), Code::kUnavailable);
  EXPECT_EQ(seen.before.unreachable, 2u) << "reached MN 1, never acknowledged";
  EXPECT_EQ(seen.after.status.code(), Code::kUnavailable);
  EXPECT_EQ(seen.after.unreachable, 2u) << "MN 1 only";
  EXPECT_EQ(seen.got0, 2u) << "the batch to MN 0 is applied";
  EXPECT_EQ(seen.after_at - seen.posted_at,
            m.one_way_ns + SimFabric::kMnUnreachableNs + m.one_way_ns);
  uint64_t word = 1;
  std::memcpy(&word, c.fabric->region(1) + 4096, 8);
  EXPECT_EQ(word, 0u) << "a crashed MN's memory is gone";
  EXPECT_EQ(c.workers[0].sched->live(), 0u);
}

// A restarted MN is blank and serves batches posted after its restart; a batch posted before
// its crash and arriving after its restart still fails, as its queue pair died with the old MN.
TEST(SimFabricTest, ARestartedMnIsBlankAndServesOnlyBatchesPostedAfterIt) {
  Cluster c(1);
  struct Seen {
    Endpoint::FlushResult stale, fresh;
    uint64_t got = 7;
  } seen;
  const Testbed& m = c.fabric->testbed();
  c.workers[0].sched->Spawn([](Cluster* c, Seen* seen, uint64_t one_way) -> Task<void> {
    Endpoint& ep = *c->workers[0].ep;
    uint64_t one = 1, two = 2;
    ep.Write(GAddr::Make(1, 4096), &one, 8);
    seen->stale = co_await ep.FlushReporting();  // on the wire across the crash and restart
    co_await c->workers[0].sched->SleepFor(one_way);
    ep.Write(GAddr::Make(1, 8192), &two, 8);
    ep.Read(GAddr::Make(1, 4096), &seen->got, 8);
    seen->fresh = co_await ep.FlushReporting();
  }(&c, &seen, m.one_way_ns));
  c.engine.At(1, [&c] { c.fabric->CrashMn(1); });
  c.engine.At(2, [&c] { c.fabric->RestartMn(1); });
  c.Run();
  EXPECT_FALSE(c.fabric->IsMnDown(1));
  EXPECT_EQ(c.fabric->MnGeneration(1), 1);
  EXPECT_EQ(seen.stale.unreachable, 2u) << "posted before the restart";
  EXPECT_TRUE(seen.fresh.status.ok()) << seen.fresh.status.ToString();
  EXPECT_EQ(seen.got, 0u) << "nothing of the old MN is there";
  uint64_t word = 0;
  std::memcpy(&word, c.fabric->region(1) + 8192, 8);
  EXPECT_EQ(word, 2u);
}

TEST(SimFabricTest, BatchAppliesInPostingOrder) {
  Cluster c(1);
  c.workers[0].sched->Spawn([](Cluster* c) -> Task<void> {
    Endpoint& ep = *c->workers[0].ep;
    uint64_t seven = 7, got = 0, old = 0;
    ep.Write(GAddr::Make(0, 8192), &seven, 8);
    ep.Read(GAddr::Make(0, 8192), &got, 8);
    ep.Faa(GAddr::Make(0, 8192), 3, &old);
    EXPECT_TRUE((co_await ep.Flush()).ok());
    EXPECT_EQ(got, 7u);
    EXPECT_EQ(old, 7u);
    ep.Read(GAddr::Make(0, 1 << 20), &got, 8);  // past the region
    EXPECT_EQ((co_await ep.Flush()).code(), Code::kInvalidArgument);
  }(&c));
  c.Run();
  EXPECT_EQ(c.workers[0].sched->live(), 0u);
}

// Ops posted to two MNs interleaved leave as one batch per MN, each in posting order; the
// round's batches reach the MNs in one event, and the Flush completes in one event when both
// are done.
TEST(SimFabricTest, InterleavedPostsToTwoMnsFormTwoOrderedBatchesArrivingInOneEvent) {
  Cluster c(1);
  c.workers[0].sched->Spawn([](Cluster* c) -> Task<void> {
    Endpoint& ep = *c->workers[0].ep;
    uint64_t a = 1, b = 2, got0 = 0, got1 = 0;
    ep.Write(GAddr::Make(1, 4096), &a, 8);
    ep.Write(GAddr::Make(0, 4096), &b, 8);
    ep.Read(GAddr::Make(1, 4096), &got1, 8);
    ep.Read(GAddr::Make(0, 4096), &got0, 8);
    EXPECT_EQ(ep.pending(), 4u);
    EXPECT_TRUE((co_await ep.Flush()).ok());
    EXPECT_EQ(ep.pending(), 0u);
    EXPECT_EQ(got0, 2u);
    EXPECT_EQ(got1, 1u);
  }(&c));
  c.Run();
  EXPECT_EQ(c.workers[0].sched->live(), 0u);
  EXPECT_EQ(c.workers[0].ep->stats().batches, 2u);
  EXPECT_EQ(c.fabric->nic(0).ServedCount(0), 1u);
  EXPECT_EQ(c.fabric->nic(1).ServedCount(1), 1u);
  // Two rounds (post; resume), one arrival event for both batches, one completion.
  EXPECT_EQ(c.engine.stats().events_run, 2u + 1u + 1u);
}

// A Flush over two MNs completes when the slower batch is done, and reports the error of a
// failing batch even when the other one succeeds.
TEST(SimFabricTest, FlushOverTwoMnsWaitsForTheSlowerAndReportsTheError) {
  Cluster c(1);
  uint64_t done_at = 0;
  c.workers[0].sched->Spawn([](Cluster* c, uint64_t* done_at) -> Task<void> {
    Endpoint& ep = *c->workers[0].ep;
    uint64_t old[4], x = 0;
    for (int k = 0; k < 4; k++) ep.Cas(GAddr::Make(0, 4096 + 8 * k), 0, 1, &old[k]);
    ep.Read(GAddr::Make(1, 4096), &x, 8);
    EXPECT_TRUE((co_await ep.Flush()).ok());
    *done_at = c->engine.now();
    ep.Read(GAddr::Make(0, 4096), &x, 8);
    ep.Read(GAddr::Make(1, 1 << 20), &x, 8);  // past the region
    EXPECT_EQ((co_await ep.Flush()).code(), Code::kInvalidArgument);
  }(&c, &done_at));
  c.Run();
  EXPECT_EQ(c.workers[0].sched->live(), 0u);
  const Testbed& m = c.fabric->testbed();
  EXPECT_EQ(done_at, 2 * m.one_way_ns + 4 * NicServiceNs(m, 2, 8));
}

// Atomics on memory marked as the NIC's own are served at the device rate; elsewhere, and for
// reads there, at the usual rates.
TEST(SimFabricTest, AtomicsOnDeviceMemoryAreServedAtTheDeviceRate) {
  Cluster c(1, Testbed::Preset("cx5").value());
  c.fabric->MarkDeviceMemory(0, 8192, 8192 + 4096);
  uint64_t host_done = 0, device_done = 0, read_done = 0;
  c.workers[0].sched->Spawn(
      [](Cluster* c, uint64_t* host, uint64_t* device, uint64_t* read) -> Task<void> {
        Endpoint& ep = *c->workers[0].ep;
        uint64_t old[8], x;
        uint64_t t0 = c->engine.now();
        for (int k = 0; k < 8; k++) ep.Cas(GAddr::Make(0, 4096 + 8 * k), 0, 1, &old[k]);
        EXPECT_TRUE((co_await ep.Flush()).ok());
        *host = c->engine.now() - t0;
        t0 = c->engine.now();
        for (int k = 0; k < 8; k++) ep.Cas(GAddr::Make(0, 8192 + 8 * k), 0, 1, &old[k]);
        EXPECT_TRUE((co_await ep.Flush()).ok());
        *device = c->engine.now() - t0;
        t0 = c->engine.now();
        ep.Read(GAddr::Make(0, 8192), &x, 8);
        EXPECT_TRUE((co_await ep.Flush()).ok());
        *read = c->engine.now() - t0;
      }(&c, &host_done, &device_done, &read_done));
  c.Run();
  const Testbed& m = c.fabric->testbed();
  EXPECT_EQ(host_done, 2 * m.one_way_ns + 8 * NicServiceNs(m, 2, 8));
  EXPECT_EQ(device_done, 2 * m.one_way_ns + 8 * NicServiceNs(m, 2, 8, /*device=*/true));
  EXPECT_EQ(read_done, 2 * m.one_way_ns + NicServiceNs(m, 0, 8));
  EXPECT_LT(device_done, host_done);
  EXPECT_EQ(c.fabric->device_atomics(), 8u);
  EXPECT_TRUE(c.fabric->IsDeviceMemory(0, 8192 + 4095));
  EXPECT_FALSE(c.fabric->IsDeviceMemory(0, 8192 + 4096));
}

// Atomics whose addresses share their 12 low bits take turns in the NIC's lock bucket: eight
// CASes to one word complete one serial time apart however fast the NIC is otherwise; eight to
// eight buckets, and a word 4096 bytes on (the same bucket), show which is which. READs and
// WRITEs to the word never wait for the bucket.
TEST(SimFabricTest, AtomicsToOneLockBucketTakeTurns) {
  Testbed m = Testbed::Preset("cx5").value();
  m.mn_atomic_serial_ns = 1000;  // well above cx5's 125 ns per atomic
  Cluster c(1, m);
  uint64_t spread = 0, one_word = 0, aliased = 0, write_after = 0;
  c.workers[0].sched->Spawn([](Cluster* c, uint64_t* spread, uint64_t* one_word, uint64_t* aliased,
                               uint64_t* write_after) -> Task<void> {
    Endpoint& ep = *c->workers[0].ep;
    uint64_t old[8], x = 7;
    uint64_t t0 = c->engine.now();
    for (int k = 0; k < 8; k++) ep.Cas(GAddr::Make(0, 4096 + 8 * k), 0, 1, &old[k]);
    EXPECT_TRUE((co_await ep.Flush()).ok());
    *spread = c->engine.now() - t0;
    t0 = c->engine.now();
    for (int k = 0; k < 8; k++) ep.Faa(GAddr::Make(0, 8192), 1, &old[k]);
    EXPECT_TRUE((co_await ep.Flush()).ok());
    *one_word = c->engine.now() - t0;
    for (int k = 0; k < 8; k++) EXPECT_EQ(old[k], uint64_t(k));  // applied in posting order
    t0 = c->engine.now();
    ep.Cas(GAddr::Make(0, 16384), 0, 1, &old[0]);
    ep.Cas(GAddr::Make(0, 16384 + 4096), 0, 1, &old[1]);  // same 12 low bits: same bucket
    EXPECT_TRUE((co_await ep.Flush()).ok());
    *aliased = c->engine.now() - t0;
    t0 = c->engine.now();
    ep.Cas(GAddr::Make(0, 24576), 0, 1, &old[0]);
    ep.Cas(GAddr::Make(1, 24576), 0, 1, &old[1]);  // another MN's NIC: its own buckets
    ep.Write(GAddr::Make(0, 24576 + 8), &x, 8);
    EXPECT_TRUE((co_await ep.Flush()).ok());
    *write_after = c->engine.now() - t0;
  }(&c, &spread, &one_word, &aliased, &write_after));
  c.Run();
  uint64_t cas_ns = NicServiceNs(m, 2, 8);
  EXPECT_EQ(spread, 2 * m.one_way_ns + 8 * cas_ns);  // eight buckets: the NIC's rate alone
  // The first FAA completes as served; each later one a serial time after the one before.
  EXPECT_EQ(one_word, 2 * m.one_way_ns + cas_ns + 7 * m.mn_atomic_serial_ns);
  EXPECT_EQ(aliased, 2 * m.one_way_ns + cas_ns + m.mn_atomic_serial_ns);
  EXPECT_EQ(write_after, 2 * m.one_way_ns + cas_ns + NicServiceNs(m, 1, 8));
  EXPECT_EQ(c.fabric->serialized_atomics(), 8u);  // 7 FAAs and the aliased CAS
  // Off (0), one word's atomics come at the NIC's rate again.
  m.mn_atomic_serial_ns = 0;
  Cluster d(1, m);
  uint64_t off = 0;
  d.workers[0].sched->Spawn([](Cluster* d, uint64_t* off) -> Task<void> {
    Endpoint& ep = *d->workers[0].ep;
    uint64_t old[8];
    uint64_t t0 = d->engine.now();
    for (int k = 0; k < 8; k++) ep.Faa(GAddr::Make(0, 8192), 1, &old[k]);
    EXPECT_TRUE((co_await ep.Flush()).ok());
    *off = d->engine.now() - t0;
  }(&d, &off));
  d.Run();
  EXPECT_EQ(off, 2 * m.one_way_ns + 8 * cas_ns);
  EXPECT_EQ(d.fabric->serialized_atomics(), 0u);
}

TEST(SimFabricTest, MessagesOfOneRoundTravelAsOnePacket) {
  Cluster c(2);
  uint64_t arrived_at = 0;
  int count = 0;
  c.workers[1].ep->OnMessage(9, [&](const Message& m) {
    EXPECT_EQ(m.from, (WorkerAddr{0, 0}));
    count++;
    arrived_at = c.engine.now();
  });
  c.workers[0].sched->Spawn([](Cluster* c) -> Task<void> {
    std::byte b[100] = {};
    c->workers[0].ep->Send({1, 0}, 9, b);
    c->workers[0].ep->Send({1, 0}, 9, b);
    co_return;
  }(&c));
  c.Run();
  EXPECT_EQ(count, 2);
  EXPECT_EQ(c.workers[0].ep->stats().packets_sent, 1u);
  EXPECT_GE(arrived_at, c.fabric->testbed().one_way_ns);
  EXPECT_EQ(c.fabric->packets_in_flight(), 0u);
}

TEST(SimFabricTest, DroppedPacketsNeverArrive) {
  Testbed m;
  m.faults.drop_probability = 1.0;
  Cluster c(2, m);
  int count = 0;
  c.workers[1].ep->OnMessage(9, [&](const Message&) { count++; });
  c.workers[0].sched->Spawn([](Cluster* c) -> Task<void> {
    std::byte b[8] = {};
    c->workers[0].ep->Send({1, 0}, 9, b);
    co_return;
  }(&c));
  c.Run();
  EXPECT_EQ(count, 0);
  EXPECT_EQ(c.fabric->fault_stats().drop_count, 1u);
  EXPECT_EQ(c.fabric->packets_in_flight(), 0u);
}

TEST(SimFabricTest, DelaysReplayFromTheSeed) {
  Testbed m;
  m.faults.delay_probability = 0.5;
  m.faults.delay_ns_max = 50'000;
  auto arrivals = [&](uint64_t seed) {
    Cluster c(2, m, seed);
    std::vector<uint64_t> at;
    c.workers[1].ep->OnMessage(9, [&](const Message&) { at.push_back(c.engine.now()); });
    c.workers[0].sched->Spawn([](Cluster* c) -> Task<void> {
      for (int i = 0; i < 50; i++) {
        std::byte b[8] = {};
        c->workers[0].ep->Send({1, 0}, 9, b);
        co_await c->workers[0].sched->SleepFor(100);
      }
    }(&c));
    c.Run();
    return at;
  };
  std::vector<uint64_t> a = arrivals(5), b = arrivals(5), d = arrivals(6);
  EXPECT_EQ(a.size(), 50u);
  EXPECT_EQ(a, b) << "one seed, one schedule";
  EXPECT_NE(a, d);
}

TEST(TestbedTest, PresetsValidateAndBadValuesAreRefused) {
  EXPECT_TRUE(Testbed::Preset("cx3").ok());
  EXPECT_TRUE(Testbed::Preset("cx5").ok());
  EXPECT_EQ(Testbed::Preset("cx9").status().code(), Code::kInvalidArgument);
  Testbed m;
  m.mn_atomic_mops = 0;
  EXPECT_EQ(m.Validate().code(), Code::kInvalidArgument);
  EXPECT_EQ(Testbed::Load("/no/such/model.json").status().code(), Code::kInvalidArgument);
}

// sim::AllocCache lives in engine.cc; it is tested here because this binary links the global
// operator new of alloc_cache_new.cc (pond_alloc_cache; sim_test replaces it to count allocations).
// The tests call operator new/delete directly: new-expressions may be elided by the compiler.
TEST(AllocCacheTest, ReusesFreedBlocksWhileOnAndGivesThemBackWhenOff) {
  const void* token = sim::AllocCache::Enable();
  if (token == nullptr) GTEST_SKIP() << "no cache under sanitizers";
  void* a = ::operator new(1000);
  const auto a_address = reinterpret_cast<uintptr_t>(a);
  const size_t before = sim::AllocCache::CachedBlocks();
  ::operator delete(a, 1000);
  EXPECT_EQ(sim::AllocCache::CachedBlocks(), before + 1);
  // LIFO: the next request of the same class (993..1008 bytes) gets the block just freed.
  void* b = ::operator new(993);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b), a_address);
  EXPECT_EQ(sim::AllocCache::CachedBlocks(), before);
  // An unsized delete finds the class from the block itself.
  ::operator delete(b);
  void* c = ::operator new(1008);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c), a_address);
  ::operator delete(c, 1008);
  // Nested Enable/Disable: only the last Disable gives the blocks back.
  const void* inner = sim::AllocCache::Enable();
  sim::AllocCache::Disable(inner);
  EXPECT_EQ(sim::AllocCache::CachedBlocks(), before + 1);
  sim::AllocCache::Disable(token);
  EXPECT_EQ(sim::AllocCache::CachedBlocks(), 0u);
}

// Blocks cross threads freely: one allocated under the cache may be freed on a thread without
// it, and a thread's cached blocks go back to malloc when it exits.
TEST(AllocCacheTest, BlocksMayBeFreedOnAnyThread) {
  const void* token = sim::AllocCache::Enable();
  if (token == nullptr) GTEST_SKIP() << "no cache under sanitizers";
  std::vector<void*> made;
  for (int i = 0; i < 1000; i++) made.push_back(::operator new(100));
  std::thread other([&] {
    for (void* p : made) ::operator delete(p, 100);  // no cache here: straight to free()
    EXPECT_EQ(sim::AllocCache::CachedBlocks(), 0u);
    const void* t = sim::AllocCache::Enable();
    for (int i = 0; i < 100; i++) ::operator delete(::operator new(64), 64);
    EXPECT_EQ(sim::AllocCache::CachedBlocks(), 1u);
    (void)t;  // left on: the thread's exit gives the block back
  });
  other.join();
  for (void*& p : made) p = ::operator new(100);
  for (void* p : made) ::operator delete(p, 100);
  EXPECT_GE(sim::AllocCache::CachedBlocks(), 1000u);
  sim::AllocCache::Disable(token);
  EXPECT_EQ(sim::AllocCache::CachedBlocks(), 0u);
}

}  // namespace
}  // namespace pond
