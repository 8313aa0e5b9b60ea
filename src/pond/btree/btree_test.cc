// The tree on the local transport, driven by one worker thread (many coroutines at most).
#include "pond/btree/btree.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "pond/btree/btree_testing.h"
#include "pond/btree/tree_check.h"
#include "pond/rng.h"

namespace pond::btree {
namespace {

using testing::LocalPool;
using testing::WholePoolSpace;
using testing::Worker;

constexpr uint64_t kRegion = 64 << 20;

// A tree on `mns` MNs, created through `w`.
TreeSpace MakeTree(Worker& w, uint16_t mns) {
  TreeSpace space = WholePoolSpace(mns, kRegion);
  Status s = w.Run(CreateTree(*w.ep, space));
  POND_CHECK(s.ok());
  return space;
}

// The tree holds exactly `want`, and its structure is sound.
void ExpectTreeHolds(Worker& w, const TreeSpace& space, const std::map<uint64_t, uint64_t>& want,
                     int levels_min = 1) {
  Result<TreeShape> shape = w.Run(CheckTree(*w.ep, space));
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_GE(shape->levels, levels_min);
  std::vector<KeyValue> expect(want.begin(), want.end());
  EXPECT_EQ(shape->entries, expect);
}

// `n` writes of random keys 1..range, the i-th writing value i; *want gets each key's last value.
std::vector<KeyValue> RandomKvs(Rng& rng, int n, uint64_t range,
                                std::map<uint64_t, uint64_t>* want) {
  std::vector<KeyValue> kvs;
  for (int i = 0; i < n; i++) {
    const uint64_t k = 1 + rng.Uniform(range);
    (*want)[k] = static_cast<uint64_t>(i);
    kvs.emplace_back(k, i);
  }
  return kvs;
}

Task<Status> InsertAll(BTree* t, std::vector<KeyValue> kvs) {
  for (auto [k, v] : kvs) POND_CO_RETURN_IF_ERROR(co_await t->Insert(k, v));
  co_return Status::Ok();
}

TEST(BTreeTest, InsertLookupUpdate) {
  auto pool = LocalPool(1, kRegion);
  Worker w(*pool, {0, 0});
  TreeSpace space = MakeTree(w, 1);
  BTree t(*w.ep, space);
  EXPECT_EQ(w.Run(t.Lookup(5)).status().code(), Code::kNotFound);
  ASSERT_TRUE(w.Run(t.Insert(5, 50)).ok());
  ASSERT_TRUE(w.Run(t.Insert(3, 30)).ok());
  EXPECT_EQ(w.Run(t.Lookup(5)).value(), 50u);
  EXPECT_EQ(w.Run(t.Lookup(3)).value(), 30u);
  EXPECT_EQ(w.Run(t.Lookup(4)).status().code(), Code::kNotFound);
  ASSERT_TRUE(w.Run(t.Insert(5, 51)).ok());
  EXPECT_EQ(w.Run(t.Lookup(5)).value(), 51u);
  EXPECT_EQ(t.stats().updates, 1u);
  // Without a split, every write went back as one entry, never as a node.
  EXPECT_EQ(t.stats().entry_writebacks, 3u);
  EXPECT_EQ(t.stats().node_writebacks, 0u);
  ExpectTreeHolds(w, space, {{3, 30}, {5, 51}});
}

TEST(BTreeTest, RejectsReservedKeys) {
  auto pool = LocalPool(1, kRegion);
  Worker w(*pool, {0, 0});
  TreeSpace space = MakeTree(w, 1);
  BTree t(*w.ep, space);
  EXPECT_EQ(w.Run(t.Insert(kKeyEmpty, 1)).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.Run(t.Insert(kKeyInfinity, 1)).code(), Code::kInvalidArgument);
  EXPECT_TRUE(w.Run(t.Insert(kKeyMax, 1)).ok());
  EXPECT_TRUE(w.Run(t.Insert(kKeyMin, 2)).ok());
  ExpectTreeHolds(w, space, {{kKeyMin, 2}, {kKeyMax, 1}});
}

// Tiny nodes make a deep tree from few keys: splits at every level and several root growths.
TEST(BTreeTest, SplitsAtEveryLevelWithTinyNodes) {
  auto pool = LocalPool(1, kRegion);
  Worker w(*pool, {0, 0});
  TreeSpace space = MakeTree(w, 1);
  BTree t(*w.ep, space, TreeOptions{.leaf_fill_max = 3, .internal_fill_max = 3});
  Rng rng(::testing::UnitTest::GetInstance()->random_seed());
  std::map<uint64_t, uint64_t> want;
  std::vector<KeyValue> kvs = RandomKvs(rng, 3000, 1'000'000, &want);
  ASSERT_TRUE(w.Run(InsertAll(&t, kvs)).ok());
  ExpectTreeHolds(w, space, want, 6);
  EXPECT_GT(t.stats().leaf_splits, 0u);
  EXPECT_GT(t.stats().internal_splits, 0u);
  EXPECT_GE(t.stats().root_growths, 5u);
  for (auto [k, v] : want) ASSERT_EQ(w.Run(t.Lookup(k)).value(), v) << k;
}

// Full-size nodes: enough keys for three levels.
TEST(BTreeTest, ThreeLevelsWithFullNodes) {
  auto pool = LocalPool(2, kRegion);
  Worker w(*pool, {0, 0});
  TreeSpace space = MakeTree(w, 2);
  BTree t(*w.ep, space);
  Rng rng(::testing::UnitTest::GetInstance()->random_seed());
  std::map<uint64_t, uint64_t> want;
  std::vector<KeyValue> kvs;
  for (int i = 0; i < 40000; i++) {
    uint64_t k = 1 + rng.Uniform(uint64_t{1} << 40);
    want[k] = rng.Next();
    kvs.emplace_back(k, want[k]);
  }
  ASSERT_TRUE(w.Run(InsertAll(&t, kvs)).ok());
  ExpectTreeHolds(w, space, want, 3);
  // Nodes were carved from chunks on both MNs, so splits crossed MNs too.
  EXPECT_GE(t.allocator().chunks_taken(), 2u);
  EXPECT_GT(t.index_cache().hits(), 0u);
}

// A tree of small nodes (many leaves and levels) holding 2,000 random keys below 10,001, and the
// same entries in an ordered map, for scans to be compared with.
class ScanTest : public ::testing::Test {
 protected:
  ScanTest()
      : pool_(LocalPool(1, kRegion)),
        w(*pool_, {0, 0}),
        space(MakeTree(w, 1)),
        t(*w.ep, space, TreeOptions{.leaf_fill_max = 8, .internal_fill_max = 6}),
        rng(::testing::UnitTest::GetInstance()->random_seed()) {
    POND_CHECK(w.Run(InsertAll(&t, RandomKvs(rng, 2000, 10'000, &want))).ok());
  }

  std::unique_ptr<LocalFabric> pool_;
  Worker w;
  TreeSpace space;
  BTree t;
  Rng rng;
  std::map<uint64_t, uint64_t> want;
};

TEST_F(ScanTest, ScansMatchAnOrderedMap) {
  for (int q = 0; q < 300; q++) {
    uint64_t low = rng.Uniform(11'000), high = low + rng.Uniform(3000);
    size_t limit = q % 3 == 0 ? 1 + rng.Uniform(50) : SIZE_MAX;
    std::vector<KeyValue> got;
    ASSERT_TRUE(w.Run(t.Scan(low, high, limit, &got)).ok());
    std::vector<KeyValue> expect;
    for (auto it = want.lower_bound(low); it != want.end() && it->first < high; ++it) {
      if (expect.size() == limit) break;
      expect.push_back(*it);
    }
    ASSERT_EQ(got, expect) << "[" << low << ", " << high << ") limit " << limit;
  }
  std::vector<KeyValue> all;
  ASSERT_TRUE(w.Run(t.Scan(0, kKeyInfinity, SIZE_MAX, &all)).ok());
  EXPECT_EQ(all.size(), want.size());
}

// Descending scans give the largest keys of their range first, as a reversed ordered map does —
// and a short one reads the leaves it returns from, not the whole range: from a warm index cache,
// at most one READ a leaf it visits (as an ascending scan of the same rows).
TEST_F(ScanTest, DescendingScansMatchAnOrderedMapAndReadOnlyTheLeavesTheyReturnFrom) {
  for (int q = 0; q < 300; q++) {
    uint64_t low = rng.Uniform(11'000), high = low + rng.Uniform(3000);
    size_t limit = q % 3 == 0 ? 1 + rng.Uniform(50) : SIZE_MAX;
    std::vector<KeyValue> got;
    ASSERT_TRUE(w.Run(t.ScanDescending(low, high, limit, &got)).ok());
    std::vector<KeyValue> expect;
    for (auto it = std::make_reverse_iterator(want.lower_bound(high));
         it != want.rend() && it->first >= low && expect.size() < limit; ++it) {
      expect.push_back(*it);
    }
    ASSERT_EQ(got, expect) << "[" << low << ", " << high << ") limit " << limit << " descending";
  }
  // The last 3 keys below 9,000 sit in one or two leaves of a range of ~1,500 keys (~200 leaves):
  // a scan down from 9,000 with limit 3 reads at most a leaf each plus the internal nodes the
  // cache misses, where a walk of the range would read about 200.
  std::vector<KeyValue> got;
  ASSERT_TRUE(w.Run(t.ScanDescending(1, 9000, 3, &got)).ok());  // warm the cache
  auto reads = [this] { return uint64_t{w.ep->stats().ops[static_cast<int>(Verb::kRead)]}; };
  const uint64_t reads_before = reads();
  got.clear();
  ASSERT_TRUE(w.Run(t.ScanDescending(1, 9000, 3, &got)).ok());
  EXPECT_EQ(got.size(), 3u);
  EXPECT_LE(reads() - reads_before, 3u);
}

// Many coroutines of one worker insert at once: their lock requests meet in the local lock
// table, which hands the global lock from one to the next.
TEST(BTreeTest, ManyCoroutinesOnOneWorker) {
  auto pool = LocalPool(1, kRegion);
  Worker w(*pool, {0, 0});
  TreeSpace space = MakeTree(w, 1);
  BTree t(*w.ep, space, TreeOptions{.leaf_fill_max = 6, .internal_fill_max = 5});
  constexpr int kCoroutines = 64, kPerCoroutine = 60;
  int failed = 0;
  for (int c = 0; c < kCoroutines; c++) {
    w.sched.Spawn([](BTree* t, int c, int* failed) -> Task<void> {
      for (int i = 0; i < kPerCoroutine; i++) {
        // Neighbouring keys from different coroutines: they share leaves and their locks.
        uint64_t k = 1 + static_cast<uint64_t>(i) * kCoroutines + c;
        if (!(co_await t->Insert(k, k * 3)).ok()) ++*failed;
      }
    }(&t, c, &failed));
  }
  w.sched.RunUntilIdle();
  EXPECT_EQ(failed, 0);
  std::map<uint64_t, uint64_t> want;
  for (uint64_t k = 1; k <= uint64_t{kCoroutines} * kPerCoroutine; k++) want[k] = k * 3;
  ExpectTreeHolds(w, space, want, 3);
  EXPECT_GT(t.local_locks().queued(), 0u) << "no coroutine ever waited locally";
  EXPECT_GT(t.local_locks().handovers(), 0u) << "the lock was never handed over";
}

// A second worker's splits leave the first worker's cached internal nodes stale; lookups
// through them still find every key (moving right), and drop the stale copies.
TEST(BTreeTest, StaleIndexCacheStillFindsEveryKey) {
  auto pool = LocalPool(1, kRegion);
  Worker a(*pool, {0, 0}), b(*pool, {1, 0});
  TreeSpace space = MakeTree(a, 1);
  TreeOptions small{.leaf_fill_max = 4, .internal_fill_max = 4};
  BTree ta(*a.ep, space, small), tb(*b.ep, space, small);
  std::map<uint64_t, uint64_t> want;
  std::vector<KeyValue> first, second;
  for (uint64_t k = 1; k <= 400; k++) {
    want[k * 10] = k;
    first.emplace_back(k * 10, k);
  }
  ASSERT_TRUE(a.Run(InsertAll(&ta, first)).ok());
  for (auto [k, v] : want) ASSERT_EQ(a.Run(ta.Lookup(k)).value(), v);  // warms a's cache
  for (uint64_t k = 1; k <= 4000; k++) {
    if (k % 10 == 0) continue;
    want[k] = k + 7;
    second.emplace_back(k, k + 7);
  }
  ASSERT_TRUE(b.Run(InsertAll(&tb, second)).ok());
  uint64_t moves_before = ta.stats().sibling_moves;
  for (auto [k, v] : want) ASSERT_EQ(a.Run(ta.Lookup(k)).value(), v) << k;
  EXPECT_GT(ta.stats().sibling_moves, moves_before) << "the cache was never stale";
  EXPECT_GT(ta.index_cache().drops(), 0u);
  ExpectTreeHolds(a, space, want, 4);
}

// Random inserts, updates and deletes against an ordered map, with tiny nodes: lookups, scans
// and the final tree agree with the map; deleted slots are reused; a delete of an absent key is
// NotFound; leaves emptied by deletes stay in the tree (merges are lazy) and the tree stays sound.
TEST(BTreeTest, DeletesAgreeWithAnOrderedMap) {
  auto pool = LocalPool(1, kRegion);
  Worker w(*pool, {0, 0});
  TreeSpace space = MakeTree(w, 1);
  BTree t(*w.ep, space, TreeOptions{.leaf_fill_max = 5, .internal_fill_max = 4});
  std::map<uint64_t, uint64_t> want;
  Rng rng(3);
  for (int i = 0; i < 6000; i++) {
    const uint64_t k = 1 + rng.Uniform(700);
    if (rng.Chance(0.4)) {
      Status s = w.Run(t.Delete(k));
      if (want.erase(k) == 1) {
        ASSERT_TRUE(s.ok()) << s.ToString();
      } else {
        ASSERT_EQ(s.code(), Code::kNotFound) << k;
      }
    } else {
      ASSERT_TRUE(w.Run(t.Insert(k, i)).ok());
      want[k] = static_cast<uint64_t>(i);
    }
    if (i % 500 == 0) {
      std::vector<KeyValue> got;
      ASSERT_TRUE(w.Run(t.Scan(1, kKeyInfinity, 1 << 20, &got)).ok());
      ASSERT_EQ(got, std::vector<KeyValue>(want.begin(), want.end())) << "after op " << i;
    }
  }
  for (uint64_t k = 1; k <= 700; k++) {
    Result<uint64_t> v = w.Run(t.Lookup(k));
    if (want.count(k) != 0) {
      ASSERT_TRUE(v.ok()) << k;
      EXPECT_EQ(*v, want[k]);
    } else {
      EXPECT_EQ(v.status().code(), Code::kNotFound) << k;
    }
  }
  EXPECT_GT(t.stats().deletes, 1000u);
  ExpectTreeHolds(w, space, want, 3);
}

// A worker that last saw the tree as one leaf, after another has grown it to thousands of
// leaves: its lookups and inserts at the far right must not walk the leaf level from the left
// (a READ a leaf, and past sibling_hops_max an error) but descend again, fresh.
TEST(BTreeTest, AStaleRootSendsADescentAgainNotAlongTheLeaves) {
  auto pool = LocalPool(1, kRegion);
  Worker a(*pool, {0, 0}), b(*pool, {1, 0});
  TreeSpace space = MakeTree(a, 1);
  TreeOptions small{.leaf_fill_max = 4, .internal_fill_max = 4, .sibling_hops_max = 64};
  BTree ta(*a.ep, space, small), tb(*b.ep, space, small);
  ASSERT_TRUE(a.Run(ta.Insert(1, 1)).ok());  // a's root is the first leaf
  std::vector<KeyValue> many;
  for (uint64_t k = 2; k <= 3000; k++) many.emplace_back(k, k);
  ASSERT_TRUE(b.Run(InsertAll(&tb, many)).ok());
  const uint64_t moves = ta.stats().sibling_moves;
  ASSERT_EQ(a.Run(ta.Lookup(3000)).value(), 3000u);
  ASSERT_TRUE(a.Run(ta.Insert(2999, 7)).ok());
  ASSERT_EQ(a.Run(ta.Lookup(2999)).value(), 7u);
  EXPECT_LE(ta.stats().sibling_moves - moves, 3 * kShortWalkHops);
  EXPECT_GE(ta.stats().restarts, 1u);
}

// A node's lock word left by a worker that died names its CN incarnation (store::LockOwnerWord):
// it is waited on while that incarnation may still be alive, and taken once it is gone.
TEST(BTreeTest, AWordHeldByADeadIncarnationIsTakenOnlyOnceItIsGone) {
  auto pool = LocalPool(1, kRegion);
  Worker w(*pool, {0, 0});
  TreeSpace space = MakeTree(w, 1);
  store::GoneHolders gone;
  TreeOptions o;
  o.gone = &gone;
  o.lock_retry_count_max = 64;
  BTree t(*w.ep, space, o);
  ASSERT_TRUE(w.Run(t.Insert(5, 50)).ok());
  // The tree is one leaf, the root CreateTree put first in the range.
  const GAddr word = SpaceLayout(space).LockFor(GAddr::Make(0, SpaceLayout(space).NodesBegin(0)));
  auto hold = [&](uint16_t cn, uint16_t incarnation) {
    return w.Run([](Endpoint* ep, GAddr word,
                    uint64_t v) -> Task<Status> {
      ep->Write(word, &v, 8);
      co_return co_await ep->Flush();
    }(w.ep.get(), word,
                                store::LockOwnerWord(
                                    cn, uint64_t{3} << 48 | uint64_t{incarnation}
                                                                << store::kSeqIncarnationShift)));
  };
  auto read_word = [&] {
    return w.Run([](Endpoint* ep, GAddr word) -> Task<uint64_t> {
      uint64_t v = 0;
      ep->Read(word, &v, 8);
      POND_CHECK((co_await ep->Flush()).ok());
      co_return v;
    }(w.ep.get(), word));
  };

  // CN 1's incarnation 0 holds it and has not been declared: the insert waits, then gives up.
  ASSERT_TRUE(hold(1, 0).ok());
  EXPECT_EQ(w.Run(t.Insert(6, 60)).code(), Code::kAborted);
  EXPECT_EQ(t.stats().gone_words_taken, 0u);
  // Incarnation 0 is recovered; a word of incarnation 1 (alive) is still waited on.
  gone.GoneBelow(1, 1);
  ASSERT_TRUE(hold(1, 1).ok());
  EXPECT_EQ(w.Run(t.Insert(6, 60)).code(), Code::kAborted);
  EXPECT_EQ(t.stats().gone_words_taken, 0u);
  // Incarnation 0's word is taken at once, and released as any other.
  ASSERT_TRUE(hold(1, 0).ok());
  ASSERT_TRUE(w.Run(t.Insert(6, 60)).ok());
  EXPECT_EQ(t.stats().gone_words_taken, 1u);
  EXPECT_EQ(read_word(), 0u);
  EXPECT_EQ(w.Run(t.Lookup(6)).value(), 60u);
  EXPECT_EQ(w.Run(t.Lookup(5)).value(), 50u);
  // Without the marks (a tree opened with none), no word is ever taken.
  BTree blind(*w.ep, space, TreeOptions{.lock_retry_count_max = 64});
  ASSERT_TRUE(hold(1, 0).ok());
  EXPECT_EQ(w.Run(blind.Insert(7, 70)).code(), Code::kAborted);
}

// A delete with a removal stamp raises the leaf's stamp, which every scan reading the leaf
// reports — and which both halves of a later split keep.
TEST(BTreeTest, RemovalStampsReachEveryScanOfTheLeafAndSurviveSplits) {
  auto pool = LocalPool(1, kRegion);
  Worker w(*pool, {0, 0});
  TreeSpace space = MakeTree(w, 1);
  BTree t(*w.ep, space, TreeOptions{.leaf_fill_max = 8, .internal_fill_max = 6});
  auto scan = [&](uint64_t low, uint64_t high, uint64_t* stamp) {
    std::vector<KeyValue> out;
    *stamp = 0;
    POND_CHECK(w.Run(t.Scan(low, high, 100, &out, stamp)).ok());
    return out.size();
  };
  for (uint64_t k = 1; k <= 6; k++) ASSERT_TRUE(w.Run(t.Insert(k * 10, k)).ok());
  uint64_t stamp = 0;
  EXPECT_EQ(scan(1, 1000, &stamp), 6u);
  EXPECT_EQ(stamp, 0u);
  ASSERT_TRUE(w.Run(t.Delete(20, 77)).ok());
  ASSERT_TRUE(w.Run(t.Delete(30)).ok());      // no stamp: the leaf keeps 77
  ASSERT_TRUE(w.Run(t.Delete(40, 50)).ok());  // older: the leaf keeps 77
  EXPECT_EQ(scan(1, 1000, &stamp), 3u);
  EXPECT_EQ(stamp, 77u);
  // Split the leaf: keys 100.. go right.
  for (uint64_t k = 10; k <= 20; k++) ASSERT_TRUE(w.Run(t.Insert(k * 10, k)).ok());
  EXPECT_GE(t.stats().leaf_splits, 1u);
  EXPECT_EQ(scan(150, 1000, &stamp), 6u);
  EXPECT_EQ(stamp, 77u) << "the right half lost the stamp";
  EXPECT_EQ(scan(1, 15, &stamp), 1u);
  EXPECT_EQ(stamp, 77u) << "the left half lost the stamp";
  std::vector<KeyValue> down;
  stamp = 0;
  ASSERT_TRUE(w.Run(t.ScanDescending(1, 1000, 3, &down, &stamp)).ok());
  EXPECT_EQ(stamp, 77u);
}

}  // namespace
}  // namespace pond::btree
