// Merges of empty leaves (docs/btree.md "Merges"): what they save a scan, that scans running
// beside them never miss a key that stays, and that a merger dying at any step leaves a tree
// that others walk, write and finish merging.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <vector>

#include "pond/btree/btree.h"
#include "pond/btree/btree_testing.h"
#include "pond/btree/tree_check.h"
#include "pond/rng.h"
#include "pond/store/gone_holders.h"

namespace pond::btree {
namespace {

using testing::LocalPool;
using testing::SimCluster;
using testing::WholePoolSpace;
using testing::Worker;

TreeOptions SmallNodes(bool merge) {
  TreeOptions o{.leaf_fill_max = 8, .internal_fill_max = 6};
  o.merge_empty_leaves = merge;
  return o;
}

// As TPC-C's new_order: keys come in ascending, and the oldest is deleted after a scan from the
// bottom finds it. Returns the leaves the last 100 scans read, on average.
double OldestFirst(bool merge, std::map<uint64_t, uint64_t>* left, TreeStats* stats) {
  constexpr uint64_t kRegion = 16 << 20;
  auto pool = LocalPool(1, kRegion);
  Worker w(*pool, {0, 0});
  const TreeSpace space = WholePoolSpace(1, kRegion);
  POND_CHECK(w.Run(CreateTree(*w.ep, space)).ok());
  // Internal nodes as full as TPC-C's half-filled ones, relative to their leaves: merges stay
  // within a parent, so a parent's last leaf stays even when empty (docs/btree.md "Merges").
  TreeOptions o = SmallNodes(merge);
  o.internal_fill_max = 60;
  BTree t(*w.ep, space, o);
  for (uint64_t k = 1; k <= 3000; k++) POND_CHECK(w.Run(t.Insert(k, k)).ok());
  uint64_t leaves_before = 0;
  for (uint64_t k = 1; k <= 2000; k++) {
    if (k == 1901) leaves_before = t.stats().leaves_read;
    std::vector<KeyValue> oldest;
    POND_CHECK(w.Run(t.Scan(1, kKeyInfinity, 1, &oldest)).ok());
    EXPECT_EQ(oldest, std::vector<KeyValue>({{k, k}})) << "the oldest key after " << k - 1;
    POND_CHECK(w.Run(t.Delete(k)).ok());
  }
  const double per_scan = static_cast<double>(t.stats().leaves_read - leaves_before) / 100;
  for (uint64_t k = 2001; k <= 3000; k++) (*left)[k] = k;
  Result<TreeShape> shape = w.Run(CheckTree(*w.ep, space));
  EXPECT_TRUE(shape.ok()) << shape.status().ToString();
  if (shape.ok()) {
    EXPECT_EQ(shape->entries, std::vector<KeyValue>(left->begin(), left->end()));
  }
  std::vector<KeyValue> down;
  POND_CHECK(w.Run(t.ScanDescending(1, kKeyInfinity, 1 << 20, &down)).ok());
  EXPECT_EQ(down, std::vector<KeyValue>(left->rbegin(), left->rend()));
  *stats = t.stats();
  return per_scan;
}

TEST(BTreeMergeTest, LeavesEmptiedOldestFirstMergeAndTheScanFromTheBottomStaysShort) {
  std::map<uint64_t, uint64_t> left_on, left_off;
  TreeStats on, off;
  const double merged = OldestFirst(true, &left_on, &on);
  const double kept = OldestFirst(false, &left_off, &off);
  // Inserts in order leave leaves half full (4 keys of 8): 500 of them emptied by 2000 deletes,
  // and parents of about 30 leaves, whose last leaf does not merge.
  EXPECT_GT(on.leaf_merges, 450u);
  EXPECT_GT(on.merged_unlinked, 400u);
  EXPECT_EQ(off.leaf_merges, 0u);
  EXPECT_GT(kept, 400.0) << "without merges the scan should cross every emptied leaf";
  EXPECT_LT(merged, kept / 10) << "a scan for the oldest key still crosses emptied leaves";
  std::printf(
      "leaves a scan for the oldest key reads: %.1f merged, %.1f kept (%lu merges, %lu "
      "unlinked)\n",
      merged, kept, static_cast<unsigned long>(on.leaf_merges),
      static_cast<unsigned long>(on.merged_unlinked));
}

// Several CNs delete and insert keys of their own while others scan, ascending and descending:
// a scan never misses a key that was in the tree throughout, however the leaves around it
// merge. In the end the tree is exactly the keys left, and sound.
TEST(BTreeMergeTest, ScansBesideMergesNeverMissAKeyThatStays) {
  constexpr uint16_t kMns = 2;
  constexpr uint64_t kRegion = 32 << 20;
  constexpr int kCns = 4;
  SimCluster c(kCns, kMns, kRegion, 11);
  const TreeSpace space = WholePoolSpace(kMns, kRegion, 256, 16 << 10);
  c.workers[0].sched->Spawn([](Endpoint* ep, TreeSpace s) -> Task<void> {
    POND_CHECK((co_await CreateTree(*ep, s)).ok());
  }(c.workers[0].ep.get(), space));
  c.Run();
  std::vector<std::unique_ptr<BTree>> trees;
  for (int i = 0; i < kCns; i++) {
    trees.push_back(
        std::make_unique<BTree>(*c.workers[static_cast<size_t>(i)].ep, space, SmallNodes(true)));
  }
  // Every 10th key stays; the rest are CN (key % 3)'s to delete and insert again.
  std::map<uint64_t, uint64_t> want;
  c.workers[0].sched->Spawn([](BTree* t, std::map<uint64_t, uint64_t>* want) -> Task<void> {
    for (uint64_t k = 1; k <= 1200; k++) {
      POND_CHECK((co_await t->Insert(k, k)).ok());
      (*want)[k] = k;
    }
  }(trees[0].get(), &want));
  c.Run();
  int failed = 0;
  for (int cn = 0; cn < 3; cn++) {
    c.workers[static_cast<size_t>(cn)].sched->Spawn(
        [](BTree* t, int cn, std::map<uint64_t, uint64_t>* want, int* failed) -> Task<void> {
          Rng rng(static_cast<uint64_t>(cn) + 1);
          for (int round = 0; round < 3; round++) {
            for (uint64_t k = 1; k <= 1200; k++) {
              if (k % 10 == 0 || k % 3 != static_cast<uint64_t>(cn)) continue;
              const bool in = want->count(k) != 0;
              if (in && rng.Chance(0.9)) {
                if (!(co_await t->Delete(k)).ok()) ++*failed;
                want->erase(k);
              } else if (!in && rng.Chance(0.2)) {
                if (!(co_await t->Insert(k, k)).ok()) ++*failed;
                (*want)[k] = k;
              }
            }
          }
        }(trees[static_cast<size_t>(cn)].get(), cn, &want, &failed));
  }
  uint64_t scans = 0, missed = 0;
  c.workers[3].sched->Spawn(
      [](BTree* t, uint64_t* scans, uint64_t* missed, int* failed) -> Task<void> {
        for (int i = 0; i < 400; i++) {
          const uint64_t low = 1 + (static_cast<uint64_t>(i) * 97) % 1100;
          const uint64_t high = low + 100;
          std::vector<KeyValue> got;
          Status s;
          if (i % 2 == 0) {
            s = co_await t->Scan(low, high, 1 << 20, &got);
          } else {
            s = co_await t->ScanDescending(low, high, 1 << 20, &got);
          }
          if (!s.ok()) {
            ++*failed;
            continue;
          }
          ++*scans;
          for (uint64_t k = (low + 9) / 10 * 10; k < high; k += 10) {
            bool found = false;
            for (const KeyValue& kv : got) found = found || kv.first == k;
            if (!found) ++*missed;
          }
        }
      }(trees[3].get(), &scans, &missed, &failed));
  c.Run();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(scans, 400u);
  EXPECT_EQ(missed, 0u) << "a scan missed a key that was in the tree throughout";
  uint64_t merges = 0;
  for (const auto& t : trees) merges += t->stats().leaf_merges;
  EXPECT_GT(merges, 20u);
  Result<TreeShape> shape = Internal("not run");
  c.workers[0].sched->Spawn([](Endpoint* ep, TreeSpace s, Result<TreeShape>* out) -> Task<void> {
    *out = co_await CheckTree(*ep, s);
  }(c.workers[0].ep.get(), space, &shape));
  c.Run();
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->entries, std::vector<KeyValue>(want.begin(), want.end()));
}

// CN 1 deletes keys oldest first, merging the leaves it empties, and dies after `events` events.
// CN 0 then holds it gone, inserts keys into the ranges of the leaves it merged (finishing a
// merge the dead CN left), deletes the rest, and reads everything back.
struct MergeCrash {
  bool finished = false;
  uint64_t finished_merges = 0;  // merges of the dead CN that CN 0 finished
  uint64_t taken = 0;            // lock words CN 0 took from the dead CN
  uint64_t wrong = 0;
  Result<TreeShape> shape = Internal("not run");
  std::map<uint64_t, uint64_t> want;
};

MergeCrash RunCrashMidMerge(uint64_t events) {
  constexpr uint16_t kMns = 2;
  constexpr uint64_t kRegion = 32 << 20;
  SimCluster c(2, kMns, kRegion, 5);
  const TreeSpace space = WholePoolSpace(kMns, kRegion, 256, 16 << 10);
  store::GoneHolders gone;
  TreeOptions o = SmallNodes(true);
  o.gone = &gone;
  c.workers[0].sched->Spawn([](Endpoint* ep, TreeSpace s) -> Task<void> {
    POND_CHECK((co_await CreateTree(*ep, s)).ok());
  }(c.workers[0].ep.get(), space));
  c.Run();
  BTree dying(*c.workers[1].ep, space, o), survivor(*c.workers[0].ep, space, o);
  MergeCrash run;
  c.workers[0].sched->Spawn([](BTree* t) -> Task<void> {
    for (uint64_t k = 1; k <= 300; k++) POND_CHECK((co_await t->Insert(k * 4, k)).ok());
  }(&survivor));
  c.Run();

  c.workers[1].sched->Spawn([](BTree* t) -> Task<void> {
    for (uint64_t k = 1; k <= 200; k++) {
      if (!(co_await t->Delete(k * 4)).ok()) co_return;
    }
  }(&dying));
  run.finished = !c.RunFor(events);
  c.Crash(1);
  gone.GoneBelow(1, 1);
  c.Run();

  // Keys between the deleted ones land in the merged (or merging) leaves' ranges.
  for (uint64_t k = 1; k <= 200; k += 3) run.want[k * 4 + 1] = k;
  for (uint64_t k = 201; k <= 300; k++) run.want[k * 4] = k;
  c.workers[0].sched->Spawn(
      [](BTree* t, const std::map<uint64_t, uint64_t>* want, uint64_t* wrong) -> Task<void> {
        for (uint64_t k = 1; k <= 200; k++) {
          Status s = co_await t->Delete(k * 4);
          if (!s.ok() && s.code() != Code::kNotFound) ++*wrong;
        }
        for (auto [k, v] : *want) {
          if (k % 4 == 1 && !(co_await t->Insert(k, v)).ok()) ++*wrong;
        }
        for (auto [k, v] : *want) {
          Result<uint64_t> got = co_await t->Lookup(k);
          if (!got.ok() || *got != v) ++*wrong;
        }
        std::vector<KeyValue> up, down;
        if (!(co_await t->Scan(1, kKeyInfinity, 1 << 20, &up)).ok()) ++*wrong;
        if (!(co_await t->ScanDescending(1, kKeyInfinity, 1 << 20, &down)).ok()) ++*wrong;
        if (up != std::vector<KeyValue>(want->begin(), want->end())) ++*wrong;
        if (down != std::vector<KeyValue>(want->rbegin(), want->rend())) ++*wrong;
      }(&survivor, &run.want, &run.wrong));
  c.Run();
  run.finished_merges = survivor.stats().merges_finished;
  run.taken = survivor.stats().gone_words_taken;
  c.workers[0].sched->Spawn([](Endpoint* ep, TreeSpace s, Result<TreeShape>* out) -> Task<void> {
    *out = co_await CheckTree(*ep, s, /*splits_cut_short=*/true);
  }(c.workers[0].ep.get(), space, &run.shape));
  c.Run();
  return run;
}

TEST(BTreeMergeTest, AMergerThatDiesAtAnyStepLeavesATreeOthersWalkWriteAndFinish) {
  int runs = 0, finished = 0, taken = 0;
  for (uint64_t events = 30;; events += 23) {
    MergeCrash run = RunCrashMidMerge(events);
    if (run.finished) break;
    runs++;
    ASSERT_TRUE(run.shape.ok()) << "crash after " << events
                                << " events: " << run.shape.status().ToString();
    EXPECT_EQ(run.shape->entries, std::vector<KeyValue>(run.want.begin(), run.want.end()))
        << "crash after " << events << " events";
    EXPECT_EQ(run.wrong, 0u) << "crash after " << events << " events";
    finished += run.finished_merges > 0 ? 1 : 0;
    taken += run.taken > 0 ? 1 : 0;
  }
  EXPECT_GT(runs, 50);
  EXPECT_GT(finished, 0) << "no crash left a merging leaf for another CN to finish";
  EXPECT_GT(taken, 0) << "no crash fell while CN 1 held a node's lock word";
  std::printf("%d crashes: %d left a merge another CN finished, %d a lock word taken\n", runs,
              finished, taken);
}

}  // namespace
}  // namespace pond::btree
