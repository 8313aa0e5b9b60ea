#include "pond/store/allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "pond/rng.h"
#include "pond/runtime/scheduler.h"
#include "pond/sim/engine.h"
#include "pond/store/store_testing.h"
#include "pond/transport/sim/sim_fabric.h"

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

// While a group's primary MN is down, chunks come from its backups' cursor mirrors, and never
// overlap what the primary handed out before; the mirrors keep up with the primary meanwhile.
TEST(AllocatorTest, WithThePrimaryDownChunksComeFromAMirrorPastEverythingCarved) {
  constexpr uint64_t kChunk = 64 << 10;
  auto pool = testing::FormattedPool(3, 64 << 20, kChunk, 3);
  testing::Worker w(*pool, {0, 0});
  Allocator before(pool.layout), after(pool.layout), later(pool.layout);
  uint64_t highest_end = 0;
  for (int i = 0; i < 5; i++) {  // five chunks of group 1 carved with every MN up
    Result<uint64_t> off = w.Run(before.Alloc(*w.ep, 1, static_cast<uint32_t>(kChunk)));
    ASSERT_TRUE(off.ok()) << off.status().ToString();
    highest_end = std::max(highest_end, *off + kChunk);
  }
  Superblock sb[3];
  for (MnId mn = 0; mn < 3; mn++) std::memcpy(&sb[mn], pool->region(mn), sizeof(Superblock));
  EXPECT_EQ(sb[1].lane_cursor, 5 * kChunk);
  EXPECT_EQ(sb[2].lane_mirror[0], 5 * kChunk) << "MN 2 is replica 1 of group 1";
  EXPECT_EQ(sb[0].lane_mirror[1], 5 * kChunk) << "MN 0 is replica 2 of group 1";
  // MN 1 (group 1's primary) is down: the mirror on MN 2 carves.
  Result<uint64_t> off = w.Run(after.Alloc(*w.ep, 1, 64, uint64_t{1} << 1));
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_GE(*off, highest_end);
  // MNs 1 and 2 down: the mirror on MN 0, past both.
  Result<uint64_t> off2 = w.Run(later.Alloc(*w.ep, 1, 64, (uint64_t{1} << 1) | (uint64_t{1} << 2)));
  ASSERT_TRUE(off2.ok()) << off2.status().ToString();
  EXPECT_GE(*off2, *off + kChunk);
  // Every cursor of the group down: no space, said so.
  Allocator none(pool.layout);
  EXPECT_EQ(w.Run(none.Alloc(*w.ep, 1, 64, 7)).status().code(), Code::kUnavailable);
}

// A carve that an MN of the group does not answer has already taken a chunk on each replica that
// did (the higher replicas are carved first), and that chunk is lost. Until the MNs known down
// change, or kCarveRetryNs passes, the group's next carves fail at once and take nothing: a
// transaction retrying through the lease it takes to declare the MN does not use up the lanes.
TEST(AllocatorTest, AGroupAnMnDidNotAnswerIsNotCarvedAgainUntilItIsKnownDown) {
  constexpr uint64_t kChunk = 64 << 10;
  sim::Engine engine(1);
  auto fabric = SimFabric::Create(engine, Testbed{}, 3, 64 << 20).value();
  const PoolLayout layout = MakeLayout(3, 3, 64 << 20, kChunk).value();
  for (MnId mn = 0; mn < 3; mn++) FormatRegion(fabric->region(mn), layout, mn);
  Scheduler sched(engine.clock());
  std::unique_ptr<Endpoint> ep = fabric->CreateEndpoint({0, 0}, sched);
  // Runs `t` to its end in virtual time: each round's posts leave at once.
  auto run = [&](Task<Result<uint64_t>> t) {
    std::optional<Result<uint64_t>> out;
    sched.Spawn([](Task<Result<uint64_t>> t, std::optional<Result<uint64_t>>* o) -> Task<void> {
      o->emplace(co_await std::move(t));
    }(std::move(t), &out));
    while (!out.has_value()) {
      sched.RunOnce();
      fabric->Launch({0, 0}, engine.now());
      if (!out.has_value() && !engine.Step()) break;
    }
    return *out;
  };
  auto mirror = [&](MnId mn, int i) {
    Superblock sb;
    std::memcpy(&sb, fabric->region(mn), sizeof(sb));
    return i == 0 ? sb.lane_cursor : sb.lane_mirror[i - 1];
  };
  Allocator a(layout);
  fabric->CrashMn(1);  // group 1's primary; nobody knows yet
  EXPECT_EQ(run(a.Alloc(*ep, 1, 64)).status().code(), Code::kUnavailable);
  EXPECT_EQ(mirror(2, 1), kChunk) << "MN 2's mirror of group 1 moved before the primary failed";
  EXPECT_EQ(mirror(0, 2), kChunk);
  for (int i = 0; i < 50; i++) {
    EXPECT_EQ(run(a.Alloc(*ep, 1, 64)).status().code(), Code::kUnavailable);
  }
  EXPECT_EQ(mirror(2, 1), kChunk) << "retries within the pause carved nothing more";
  // The epoch says MN 1 is down: the carve goes on from the mirrors at once.
  Result<uint64_t> off = run(a.Alloc(*ep, 1, 64, uint64_t{1} << 1));
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(*off, kChunk);
  // Another group unknown down: one failed carve, then a pause; after kCarveRetryNs one more.
  Allocator b(layout);
  EXPECT_EQ(run(b.Alloc(*ep, 1, 64)).status().code(), Code::kUnavailable);
  const uint64_t after_first = mirror(2, 1);
  EXPECT_EQ(run(b.Alloc(*ep, 1, 64)).status().code(), Code::kUnavailable);
  EXPECT_EQ(mirror(2, 1), after_first);
  engine.RunUntil(engine.now() + Allocator::kCarveRetryNs);
  EXPECT_EQ(run(b.Alloc(*ep, 1, 64)).status().code(), Code::kUnavailable);
  EXPECT_EQ(mirror(2, 1), after_first + kChunk) << "tried again once the pause was over";
}

}  // namespace
}  // namespace pond::store
