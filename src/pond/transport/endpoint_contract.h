// The Endpoint contract (endpoint.h) as checks every transport's test runs against fabrics of
// its own kind: read-back, posting order within a batch, CAS and FAA results, a bad op failing
// its batch from that op on, messages packed per destination and round, and atomics that lose no
// update across threads. Protocols rely on each of these, whatever carries them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pond/transport/fabric.h"
#include "pond/transport/test_worker.h"

namespace pond::contract {

// A fabric of `mns` MNs with regions of `bytes`, whose region() is readable by the test.
using MakeFabric = std::function<std::unique_ptr<Fabric>(uint16_t mns, uint64_t bytes)>;

using Worker = testing_transport::Worker;

inline void ReadsBackWhatItWrote(const MakeFabric& make) {
  auto f = make(2, 1 << 20);
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    char out[13] = "hello, pond!";
    char in[13] = {};
    ep->Write(GAddr::Make(1, 4099), out, sizeof(out));  // unaligned on purpose
    EXPECT_TRUE((co_await ep->Flush()).ok());
    ep->Read(GAddr::Make(1, 4099), in, sizeof(in));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_STREQ(in, "hello, pond!");
    // 64 KiB (past a network transport's eager sizes) come back whole.
    std::vector<uint8_t> big(64 << 10), back(64 << 10);
    for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<uint8_t>(i * 7);
    ep->Write(GAddr::Make(0, 8192), big.data(), static_cast<uint32_t>(big.size()));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    ep->Read(GAddr::Make(0, 8192), back.data(), static_cast<uint32_t>(back.size()));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(big, back);
  }(w.ep.get()));
  EXPECT_EQ(std::memcmp(f->region(1) + 4099, "hello, pond!", 13), 0) << "it is in MN 1's region";
}

// RC queue-pair order: a READ posted after a WRITE to the same address in one batch sees it, a
// CAS compares against the written value, and an FAA after the CAS sees the CAS's result.
inline void BatchAppliesInPostingOrder(const MakeFabric& make) {
  auto f = make(2, 1 << 20);
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    for (uint64_t round = 1; round <= 50; round++) {
      uint64_t v = round * 10, got = 0, old = 0, after = 0;
      GAddr a = GAddr::Make(0, 4096);
      ep->Write(a, &v, 8);
      ep->Read(a, &got, 8);
      ep->Cas(a, v, v + 1, &old);
      ep->Faa(a, 2, &after);
      EXPECT_EQ(ep->pending(), 4u);
      EXPECT_TRUE((co_await ep->Flush()).ok());
      EXPECT_EQ(got, v);
      EXPECT_EQ(old, v);
      EXPECT_EQ(after, v + 1);
    }
    uint64_t now = 0;
    ep->Read(GAddr::Make(0, 4096), &now, 8);
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(now, 503u);
  }(w.ep.get()));
}

inline void FailedCasReturnsCurrentValue(const MakeFabric& make) {
  auto f = make(2, 1 << 20);
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

inline void OutOfRegionAccessFailsTheBatch(const MakeFabric& make) {
  auto f = make(1, 1 << 20);
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t x = 0, y = 0;
    ep->Read(GAddr::Make(0, (1 << 20) - 4), &x, 8);
    Status s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    ep->Read(GAddr::Make(5, 0), &x, 8);  // no MN 5
    s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    ep->Cas(GAddr::Make(0, 4097), 0, 1, &x);
    s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "atomics need 8-byte alignment";
    // The ops before the bad one are done, those after it are not.
    uint64_t one = 1;
    ep->Write(GAddr::Make(0, 4096), &one, 8);
    ep->Read(GAddr::Make(0, 1 << 20), &x, 8);
    ep->Write(GAddr::Make(0, 4104), &one, 8);
    s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    ep->Read(GAddr::Make(0, 4096), &x, 8);
    ep->Read(GAddr::Make(0, 4104), &y, 8);
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(x, 1u);
    EXPECT_EQ(y, 0u);
  }(w.ep.get()));
}

inline void MessagesToOneWorkerInOneRoundShareAPacket(const MakeFabric& make) {
  auto f = make(1, 1 << 20);
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
  EXPECT_EQ(f->packets_in_flight(), 1u);
  ASSERT_TRUE(b.RunUntil([&] {
    a.sched.RunOnce();  // over a network the sender's worker must progress too
    return got.size() == 2;
  }));
  EXPECT_EQ(got, (std::vector<std::string>{"lock k1", "lock k2 and k3"}));
  EXPECT_EQ(kinds, (std::vector<uint16_t>{1, 2}));
  EXPECT_EQ(b.ep->stats().packets_received, 1u);
  EXPECT_EQ(f->packets_in_flight(), 0u);
}

// `threads` threads each add 1 to one word `iters` times by FAA and `iters` times by a CAS loop
// to another; no update may be lost.
inline void ConcurrentFaaAndCasAreAtomic(const MakeFabric& make, int threads, int iters) {
  auto f = make(1, 1 << 20);
  std::vector<std::unique_ptr<Worker>> ws;
  for (int t = 0; t < threads; t++) {
    ws.push_back(std::make_unique<Worker>(*f, WorkerAddr{static_cast<uint16_t>(t), 0}));
  }
  std::vector<std::thread> running;
  for (int t = 0; t < threads; t++) {
    running.emplace_back([&, t] {
      ws[t]->Run([](Endpoint* ep, int iters) -> Task<void> {
        GAddr faa = GAddr::Make(0, 4096), cas = GAddr::Make(0, 4104);
        for (int i = 0; i < iters; i++) {
          uint64_t old;
          ep->Faa(faa, 1, &old);
          EXPECT_TRUE((co_await ep->Flush()).ok());
          uint64_t seen = 0;
          ep->Read(cas, &seen, 8);
          EXPECT_TRUE((co_await ep->Flush()).ok());
          for (;;) {
            ep->Cas(cas, seen, seen + 1, &old);
            EXPECT_TRUE((co_await ep->Flush()).ok());
            if (old == seen) break;
            seen = old;
          }
        }
      }(ws[t]->ep.get(), iters));
    });
  }
  for (auto& th : running) th.join();
  uint64_t faa, cas;
  std::memcpy(&faa, f->region(0) + 4096, 8);
  std::memcpy(&cas, f->region(0) + 4104, 8);
  EXPECT_EQ(faa, uint64_t(threads) * iters);
  EXPECT_EQ(cas, uint64_t(threads) * iters);
}

// A READ concurrent with WRITEs of one range: every copy that has any part of a newer WRITE also
// has that WRITE's head (docs/formats.md "Cacheline versions": a version at the head of a range
// detects a concurrent writer only so). The writer fills the range with its generation in every
// 8-byte word, whole numbers so that a reader the writer laps cannot mistake an older word for a
// newer one; a copy with a word newer than its head is a torn copy no version check could catch.
// Returns the copies that mixed generations at all, to show the two met.
inline uint64_t AReadThatSawPartOfAWriteSeesItsHead(const MakeFabric& make, int writes) {
  constexpr size_t kWords = 64;
  const GAddr range = GAddr::Make(0, 8192);
  auto f = make(1, 1 << 20);
  Worker writer(*f, {0, 0}), reader(*f, {1, 0});
  std::atomic<bool> done{false};
  uint64_t mixed = 0, hidden = 0;
  std::thread reading([&] {
    reader.Run([](Endpoint* ep, GAddr range, std::atomic<bool>* done, uint64_t* mixed,
                  uint64_t* hidden) -> Task<void> {
      std::vector<uint64_t> copy(kWords);
      while (!done->load(std::memory_order_acquire)) {
        ep->Read(range, copy.data(), kWords * 8);
        EXPECT_TRUE((co_await ep->Flush()).ok());
        bool any_newer = false, any_other = false;
        for (uint64_t g : copy) {
          any_newer |= g > copy[0];
          any_other |= g != copy[0];
        }
        *mixed += any_other ? 1 : 0;
        *hidden += any_newer ? 1 : 0;
      }
    }(reader.ep.get(), range, &done, &mixed, &hidden));
  });
  writer.Run([](Endpoint* ep, GAddr range, int writes) -> Task<void> {
    std::vector<uint64_t> fill(kWords);
    for (int i = 1; i <= writes; i++) {
      std::fill(fill.begin(), fill.end(), static_cast<uint64_t>(i));
      ep->Write(range, fill.data(), kWords * 8);
      EXPECT_TRUE((co_await ep->Flush()).ok());
    }
  }(writer.ep.get(), range, writes));
  done.store(true, std::memory_order_release);
  reading.join();
  EXPECT_EQ(hidden, 0u) << "copies with words of a WRITE whose head they lack, of " << mixed
                        << " torn copies";
  return mixed;
}

}  // namespace pond::contract
