#include "pond/store/allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "pond/rng.h"
#include "pond/store/store_testing.h"

namespace pond::store {
namespace {

using testing::FormattedPool;
using testing::Worker;

struct Piece {
  MnId mn;
  uint64_t off;
  uint64_t len;
};

TEST(AllocatorTest, ThreadsNeverGetOverlappingSpace) {
  constexpr uint16_t kMns = 2;
  constexpr int kThreads = 4, kAllocs = 20000;
  auto pool = FormattedPool(kMns, 256 << 20, 64 << 10);
  std::vector<std::unique_ptr<Worker>> ws;
  for (int t = 0; t < kThreads; t++) {
    ws.push_back(std::make_unique<Worker>(*pool, WorkerAddr{static_cast<uint16_t>(t), 0}));
  }
  std::vector<std::vector<Piece>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      Allocator alloc(pool.layout);
      Rng rng(t + 1);
      ws[t]->Run([](Endpoint* ep, Allocator* a, Rng* rng, std::vector<Piece>* out) -> Task<int> {
        for (int i = 0; i < kAllocs; i++) {
          MnId mn = static_cast<MnId>(rng->Uniform(kMns));
          uint32_t len = static_cast<uint32_t>(1 + rng->Uniform(2048));
          Result<uint64_t> off = co_await a->Alloc(*ep, mn, len);
          EXPECT_TRUE(off.ok()) << off.status().ToString();
          if (!off.ok()) co_return 1;
          EXPECT_EQ(*off % 64, 0u);
          out->push_back(Piece{mn, *off, len});
          // Free and reuse some, as version recycling does.
          if (rng->Chance(0.1)) {
            Piece p = out->back();
            out->pop_back();
            a->Free(p.mn, p.off, static_cast<uint32_t>(p.len));
          }
        }
        co_return 0;
      }(ws[t]->ep.get(), &alloc, &rng, &got[t]));
      EXPECT_GT(alloc.stats().reused, 0u);
    });
  }
  for (auto& th : threads) th.join();
  std::vector<Piece> all;
  for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end(), [](const Piece& a, const Piece& b) {
    return a.mn != b.mn ? a.mn < b.mn : a.off < b.off;
  });
  for (size_t i = 0; i < all.size(); i++) {
    ASSERT_LE(all[i].off + all[i].len, pool.layout.lane_bytes) << "allocation past the lane";
    if (i > 0 && all[i].mn == all[i - 1].mn) {
      ASSERT_GE(all[i].off, all[i - 1].off + all[i - 1].len)
          << "overlap on MN " << all[i].mn << " at " << all[i].off;
    }
  }
}

TEST(AllocatorTest, ExhaustedHeapIsOutOfSpaceNotOverflow) {
  auto pool = FormattedPool(1, 4 << 20, 1 << 20);
  Worker w(*pool, {0, 0});
  Allocator alloc(pool.layout);
  Status last = w.Run([](Endpoint* ep, Allocator* a, uint64_t lane) -> Task<Status> {
    for (int i = 0; i < 1000; i++) {
      Result<uint64_t> off = co_await a->Alloc(*ep, 0, 64 << 10);
      if (!off.ok()) co_return off.status();
      if (*off + (64 << 10) > lane) co_return Internal("allocation past the lane end");
    }
    co_return Status::Ok();
  }(w.ep.get(), &alloc, pool.layout.lane_bytes));
  EXPECT_EQ(last.code(), Code::kOutOfSpace) << last.ToString();
  EXPECT_EQ(w.Run(alloc.Alloc(*w.ep, 0, (1 << 20) + 1)).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pond::store

namespace pond::store {
namespace {

TEST(AllocatorTest, ConcurrentCoroutinesShareOneCarve) {
  // Eight coroutines of one worker all find the cursor empty at once. Only one chunk FAA may be
  // in flight: the others wait for it and take their pieces from that chunk.
  auto pool = testing::FormattedPool(1, 64 << 20, 64 << 10);
  testing::Worker w(*pool, {0, 0});
  Allocator alloc(pool.layout);
  for (int c = 0; c < 8; c++) {
    w.sched.Spawn([](Endpoint* ep, Allocator* a) -> Task<void> {
      EXPECT_TRUE((co_await a->Alloc(*ep, 0, 64)).ok());
    }(w.ep.get(), &alloc));
  }
  w.sched.RunUntilIdle();
  EXPECT_EQ(alloc.stats().chunks, 1u);
  // A 64 KiB chunk holds 1024 pieces of 64 bytes; 8 are taken.
  for (int i = 0; i < 1024 - 8; i++) ASSERT_TRUE(w.Run(alloc.Alloc(*w.ep, 0, 64)).ok());
  EXPECT_EQ(alloc.stats().chunks, 1u);
  EXPECT_TRUE(w.Run(alloc.Alloc(*w.ep, 0, 64)).ok());
  EXPECT_EQ(alloc.stats().chunks, 2u);
  EXPECT_EQ(alloc.stats().wasted_bytes, 0u);
}

}  // namespace
}  // namespace pond::store
