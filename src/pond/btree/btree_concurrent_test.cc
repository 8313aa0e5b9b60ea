// The tree under real threads on the local transport: several workers insert at once, and
// readers run lock-free beside writers. Runs under ThreadSanitizer too (make tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "pond/base/hash.h"
#include "pond/btree/btree.h"
#include "pond/btree/btree_testing.h"
#include "pond/btree/tree_check.h"
#include "pond/rng.h"

namespace pond::btree {
namespace {

using testing::LocalPool;
using testing::WholePoolSpace;
using testing::Worker;

constexpr uint64_t kRegion = 64 << 20;
// ThreadsInsertConcurrently
constexpr int kThreads = 4, kCoroutines = 8, kPerCoroutine = 400, kHotKeys = 4;

// Several threads, each a worker (two per CN) with several coroutines, insert disjoint keys
// that interleave in the key space (so they share leaves) and all update a few hot keys.
TEST(BTreeConcurrentTest, ThreadsInsertConcurrently) {
  auto pool = LocalPool(2, kRegion);
  std::vector<std::unique_ptr<Worker>> ws;
  for (int i = 0; i < kThreads; i++) {
    ws.push_back(std::make_unique<Worker>(
        *pool, WorkerAddr{static_cast<uint16_t>(i / 2), static_cast<uint16_t>(i % 2)}));
  }
  TreeSpace space = WholePoolSpace(2, kRegion, 512);
  ASSERT_TRUE(ws[0]->Run(CreateTree(*ws[0]->ep, space)).ok());
  TreeOptions opts{.leaf_fill_max = 10, .internal_fill_max = 8};
  std::vector<std::unique_ptr<BTree>> trees;
  for (auto& w : ws) trees.push_back(std::make_unique<BTree>(*w->ep, space, opts));

  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int c = 0; c < kCoroutines; c++) {
        ws[t]->sched.Spawn([](BTree* tree, int t, int c, std::atomic<int>* failed) -> Task<void> {
          for (int i = 0; i < kPerCoroutine; i++) {
            uint64_t k = kHotKeys + 1 +
                         (uint64_t{static_cast<uint64_t>(i)} * kThreads + t) * kCoroutines + c;
            if (!(co_await tree->Insert(k, Mix64(k))).ok()) failed->fetch_add(1);
            if (i % 10 == 0) {
              uint64_t hot = 1 + static_cast<uint64_t>(i / 10) % kHotKeys;
              if (!(co_await tree->Insert(hot, (uint64_t{static_cast<uint64_t>(t)} << 32) | i))
                       .ok()) {
                failed->fetch_add(1);
              }
            }
          }
        }(trees[t].get(), t, c, &failed));
      }
      ws[t]->sched.RunUntilIdle();
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);

  Result<TreeShape> shape = ws[0]->Run(CheckTree(*ws[0]->ep, space));
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_GE(shape->levels, 3);
  const uint64_t n = uint64_t{kThreads} * kCoroutines * kPerCoroutine;
  ASSERT_EQ(shape->entries.size(), n + kHotKeys);
  for (size_t i = 0; i < shape->entries.size(); i++) {
    auto [k, v] = shape->entries[i];
    ASSERT_EQ(k, i + 1);
    if (k > kHotKeys) {
      ASSERT_EQ(v, Mix64(k)) << k;
    } else {
      // Some writer's value: its thread id and an i that writes this hot key.
      ASSERT_LT(v >> 32, uint64_t{kThreads});
      ASSERT_EQ((v & 0xffffffff) / 10 % kHotKeys, k - 1) << v;
    }
  }
  uint64_t cas_failed = 0;
  for (auto& t : trees) cas_failed += t->stats().lock_cas_failed;
  std::printf("levels %d, leaves %lu, global lock CAS lost %lu\n", shape->levels,
              static_cast<unsigned long>(shape->nodes_by_level[0]),
              static_cast<unsigned long>(cas_failed));
}

// A value that says what it is: the writer's sequence number and a check word of (key, seq).
// A copy mixing two writes' bytes fails the check (with odds of 2^-32 to pass by chance).
// ReadersNeverSeeTornValues
constexpr int kWriters = 2, kReaders = 2;
constexpr uint64_t kKeys = 4000;

uint64_t Stamp(uint64_t key, uint64_t seq) { return (seq << 32) | (Mix64(key ^ seq) & 0xffffffff); }
bool Stamped(uint64_t key, uint64_t value) {
  return (value & 0xffffffff) == (Mix64(key ^ (value >> 32)) & 0xffffffff);
}

// Readers look up and scan while writers rewrite values in place (entry write-backs) and insert
// new keys (splits: whole-node write-backs). A reader must never return a value no writer wrote.
TEST(BTreeConcurrentTest, ReadersNeverSeeTornValues) {
  constexpr uint64_t kReadsMin = 200'000, kCaughtMin = 5;
  constexpr auto kTimeCap = std::chrono::seconds(60);
  auto pool = LocalPool(1, kRegion);
  std::vector<std::unique_ptr<Worker>> ws;
  for (int i = 0; i < kWriters + kReaders; i++) {
    ws.push_back(std::make_unique<Worker>(*pool, WorkerAddr{static_cast<uint16_t>(i), 0}));
  }
  TreeSpace space = WholePoolSpace(1, kRegion, 512);
  ASSERT_TRUE(ws[0]->Run(CreateTree(*ws[0]->ep, space)).ok());
  // Four threads share two cores here, so a writer may be descheduled in the middle of an
  // entry's 18 bytes for a whole time slice, and a reader sees that entry torn on every READ
  // meanwhile: let readers retry far longer than RDMA would ever need.
  TreeOptions opts{.leaf_fill_max = 16, .internal_fill_max = 8, .read_retry_count_max = 1u << 30};
  std::vector<std::unique_ptr<BTree>> trees;
  for (auto& w : ws) trees.push_back(std::make_unique<BTree>(*w->ep, space, opts));
  {
    Status s = ws[0]->Run([](BTree* t) -> Task<Status> {
      for (uint64_t k = 1; k <= kKeys; k++)
        POND_CO_RETURN_IF_ERROR(co_await t->Insert(2 * k, Stamp(2 * k, 0)));
      co_return Status::Ok();
    }(trees[0].get()));
    ASSERT_TRUE(s.ok());
  }

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, bad{0}, errors{0};
  std::atomic<uint64_t> caught[kReaders] = {};  // each reader's torn copies so far
  std::vector<std::thread> threads;
  for (int r = 0; r < kReaders; r++) {
    threads.emplace_back([&, r] {
      Worker& w = *ws[kWriters + r];
      w.sched.Spawn([](BTree* t, std::atomic<bool>* stop, std::atomic<uint64_t>* reads,
                       std::atomic<uint64_t>* bad, std::atomic<uint64_t>* errors,
                       std::atomic<uint64_t>* caught, uint64_t seed) -> Task<void> {
        Rng rng(seed);
        std::vector<KeyValue> got;
        while (!stop->load(std::memory_order_relaxed)) {
          uint64_t k = 1 + rng.Uniform(2 * kKeys);
          Result<uint64_t> v = co_await t->Lookup(k);
          if (v.ok()) {
            if (!Stamped(k, *v)) bad->fetch_add(1);
          } else if (v.status().code() != Code::kNotFound) {
            errors->fetch_add(1);
          }
          if (rng.Uniform(16) == 0) {
            got.clear();
            if (!(co_await t->Scan(k, k + 200, SIZE_MAX, &got)).ok()) errors->fetch_add(1);
            for (auto [gk, gv] : got) {
              if (!Stamped(gk, gv)) bad->fetch_add(1);
            }
          }
          reads->fetch_add(1, std::memory_order_relaxed);
          caught->store(t->stats().torn_node_reads + t->stats().torn_entry_reads,
                        std::memory_order_relaxed);
        }
      }(trees[kWriters + r].get(), &stop, &reads, &bad, &errors, &caught[r], 100 + r));
      w.sched.RunUntilIdle();
    });
  }
  for (int i = 0; i < kWriters; i++) {
    threads.emplace_back([&, i] {
      Worker& w = *ws[i];
      w.sched.Spawn([](BTree* t, int id, std::atomic<bool>* stop, std::atomic<uint64_t>* errors,
                       uint64_t seed) -> Task<void> {
        Rng rng(seed);
        uint64_t fresh = 0;
        for (uint64_t seq = 1; !stop->load(std::memory_order_relaxed); seq++) {
          // Mostly in-place updates of the even keys; now and then a new odd key, which splits.
          uint64_t k = rng.Uniform(8) == 0 && fresh < kKeys / 2 ? 2 * (fresh++ * kWriters + id) + 1
                                                                : 2 * (1 + rng.Uniform(kKeys));
          if (!(co_await t->Insert(k, Stamp(k, seq))).ok()) errors->fetch_add(1);
        }
      }(trees[i].get(), i, &stop, &errors, 1 + i));
      w.sched.RunUntilIdle();
    });
  }
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < kTimeCap &&
         (reads.load() < kReadsMin || caught[0].load() + caught[1].load() < kCaughtMin)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& t : threads) t.join();

  uint64_t torn_nodes = 0, torn_entries = 0;
  for (int r = 0; r < kReaders; r++) {
    torn_nodes += trees[kWriters + r]->stats().torn_node_reads;
    torn_entries += trees[kWriters + r]->stats().torn_entry_reads;
  }
  EXPECT_EQ(bad.load(), 0u) << "a reader returned a value no writer wrote";
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GT(reads.load(), 1000u);
  std::printf("reads %lu, torn node copies caught %lu, torn entries caught %lu\n",
              static_cast<unsigned long>(reads.load()), static_cast<unsigned long>(torn_nodes),
              static_cast<unsigned long>(torn_entries));
  // The versions must actually have been exercised, or the zero above proves little.
  EXPECT_GE(torn_nodes + torn_entries, kCaughtMin) << "no reader ever overlapped a writer";

  Result<TreeShape> shape = ws[0]->Run(CheckTree(*ws[0]->ep, space));
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  for (auto [k, v] : shape->entries) ASSERT_TRUE(Stamped(k, v)) << k;
}

}  // namespace
}  // namespace pond::btree
