#include "pond/store/bulk_load.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "pond/store/hash_index.h"
#include "pond/store/store_testing.h"
#include "pond/store/sv_slot.h"

namespace pond::store {
namespace {

using testing::FormattedPool;
using testing::Worker;

constexpr uint64_t kRegion = 64 << 20;

struct Fixture {
  testing::Pool pool;
  Catalog catalog;
  const TableInfo* table = nullptr;
  Placement placement;
  std::unique_ptr<Worker> w;
  Allocator alloc;

  Fixture(uint16_t mns, int replication, TableSpec spec)
      : pool(FormattedPool(mns, kRegion, 1 << 20, replication)),
        placement(mns, replication),
        w(std::make_unique<Worker>(*pool, WorkerAddr{0, 0})),
        alloc(pool.layout) {
    Status s = w->Run(CreateTable(*w->ep, pool.layout, spec));
    POND_CHECK_MSG(s.ok(), s.ToString().c_str());
    Result<Catalog> c = w->Run(LoadCatalog(*w->ep));
    POND_CHECK(c.ok());
    catalog = std::move(c).value();
    table = catalog.Find(spec.id);
  }

  Status Load(const std::vector<uint64_t>& keys, uint64_t ts = 3, BulkLoadOptions o = {}) {
    std::vector<std::byte> values;
    for (uint64_t k : keys) {
      std::vector<std::byte> v = ValueOf(k);
      values.insert(values.end(), v.begin(), v.end());
    }
    return w->Run(BulkLoad(*w->ep, *table, pool.layout, placement, alloc, keys, values, ts, o));
  }
  Status InsertOne(uint64_t key, uint64_t ts = 3) {
    std::vector<std::byte> v = ValueOf(key);
    if (table->single_version) return w->Run(SvInsert(*w->ep, *table, placement, key, v)).status();
    return w->Run(Insert(*w->ep, *table, pool.layout, placement, alloc, key, v, ts)).status();
  }
  std::vector<std::byte> ValueOf(uint64_t key) const {
    std::vector<std::byte> v(table->value_bytes);
    for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<std::byte>((key * 13 + i) & 0xff);
    return v;
  }
  // Every replica finds `key` at its primary's slot, committed at `ts`, with its value.
  void ExpectLoaded(uint64_t key, uint64_t ts = 3) {
    Result<Found> prim = w->Run(Lookup(*w->ep, *table, placement.Primary(key), 0, key));
    ASSERT_TRUE(prim.ok()) << "key " << key << ": " << prim.status().ToString();
    const uint64_t lane = prim->cvt.cells[0].record - pool.layout.RecordOffset(0, 0);
    std::vector<std::byte> out(table->value_bytes);
    for (int r = 0; r < placement.replication(); r++) {
      const MnId mn = placement.Replica(key, r);
      Result<Found> f = w->Run(Lookup(*w->ep, *table, mn, r, key));
      ASSERT_TRUE(f.ok()) << "replica " << r << " of key " << key;
      EXPECT_EQ(f->ref.bucket, prim->ref.bucket);
      EXPECT_EQ(f->ref.slot, prim->ref.slot);
      EXPECT_EQ(f->cvt.cells[0].commit_ts, ts);
      EXPECT_FALSE(f->cvt.cells[1].valid);
      EXPECT_EQ(f->cvt.cells[0].record, pool.layout.RecordOffset(r, lane));
      ASSERT_TRUE(w->Run(ReadRecord(*w->ep, *table, mn, f->cvt.cells[0], out)).ok());
      EXPECT_EQ(out, ValueOf(key)) << "replica " << r << " of key " << key;
    }
  }
};

Task<Status> ReadBytes(Endpoint& ep, GAddr from, std::span<std::byte> to) {
  ep.Read(from, to.data(), static_cast<uint32_t>(to.size()));
  co_return co_await ep.Flush();
}

std::vector<uint64_t> Keys(uint64_t from, uint64_t n) {
  std::vector<uint64_t> k;
  for (uint64_t i = 0; i < n; i++) k.push_back((from + i) * 0x9e3779b97f4a7c15ULL + 1);
  return k;
}

TableSpec Spec(uint64_t capacity, int slots = 4) {
  return {.id = 1,
          .name = "t",
          .value_bytes = 100,
          .versions = 3,
          .capacity = capacity,
          .slots_per_bucket = slots};
}

// The strongest check there is: the memory a bulk load leaves on every MN is byte for byte what
// the same keys inserted one by one, in the same order, leave — index, records, cursors.
TEST(BulkLoadTest, LeavesEveryMnAsInsertingOneByOneDoes) {
  const std::vector<uint64_t> keys = Keys(0, 3000);
  Fixture bulk(3, 2, Spec(4000));
  Fixture one(3, 2, Spec(4000));
  Status loaded = bulk.Load(keys);
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  for (uint64_t k : keys) ASSERT_TRUE(one.InsertOne(k).ok()) << k;
  for (MnId mn = 0; mn < 3; mn++) {
    EXPECT_EQ(std::memcmp(bulk.pool->region(mn), one.pool->region(mn), kRegion), 0) << "MN " << mn;
  }
  for (uint64_t k : Keys(0, 200)) bulk.ExpectLoaded(k);
}

// The same for FORD's single-version slots, which hold their values themselves.
TEST(BulkLoadTest, LeavesEveryMnAsSvInsertingOneByOneDoes) {
  const std::vector<uint64_t> keys = Keys(0, 3000);
  TableSpec spec = Spec(4000, 22);
  spec.versions = 1;
  spec.single_version = true;
  Fixture bulk(3, 3, spec);
  Fixture one(3, 3, spec);
  Status loaded = bulk.Load(keys);
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  for (uint64_t k : keys) ASSERT_TRUE(one.InsertOne(k).ok()) << k;
  for (MnId mn = 0; mn < 3; mn++) {
    EXPECT_EQ(std::memcmp(bulk.pool->region(mn), one.pool->region(mn), kRegion), 0) << "MN " << mn;
  }
  std::vector<std::byte> slot(bulk.table->cvt_bytes);
  std::vector<std::byte> value(bulk.table->value_bytes);
  for (uint64_t k : Keys(0, 200)) {
    for (int r = 0; r < 3; r++) {
      const MnId mn = bulk.placement.Replica(k, r);
      Result<SlotRef> at = bulk.w->Run(SvLocate(*bulk.w->ep, *bulk.table, mn, r, k));
      ASSERT_TRUE(at.ok()) << "replica " << r << " of key " << k;
      ASSERT_TRUE(bulk.w->Run(ReadBytes(*bulk.w->ep, at->Addr(*bulk.table, mn, r), slot)).ok());
      SvHeader h{};
      ASSERT_TRUE(DecodeSvSlot(*bulk.table, slot, &h, value).ok());
      EXPECT_EQ(h.version, 1u);
      EXPECT_EQ(value, bulk.ValueOf(k));
    }
  }
}

// A load that goes window by window — eight buckets each here, so that rows probe past their
// window, and the last window's probe paths run on into the first buckets — leaves what inserting
// one by one in its order leaves: by window of the home bucket, each window's in the order given.
void ExpectWindowsLeaveWhatOneByOneLeaves(TableSpec spec, int replication, uint64_t count) {
  const std::vector<uint64_t> keys = Keys(0, count);
  Fixture bulk(3, replication, spec);
  Fixture one(3, replication, spec);
  const TableInfo& t = *bulk.table;
  const uint64_t window = 8;
  ASSERT_GT(t.bucket_count, 4 * window) << "too few windows to test";
  Status loaded = bulk.Load(keys, 3, BulkLoadOptions{.window_bytes = window * t.bucket_bytes()});
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  std::vector<uint64_t> order = keys;
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
    return HomeBucket(t, a) / window < HomeBucket(t, b) / window;
  });
  ASSERT_NE(order, keys) << "the windows should reorder the keys";
  for (uint64_t k : order) ASSERT_TRUE(one.InsertOne(k).ok()) << k;
  for (MnId mn = 0; mn < 3; mn++) {
    EXPECT_EQ(std::memcmp(bulk.pool->region(mn), one.pool->region(mn), kRegion), 0) << "MN " << mn;
  }
  if (!t.single_version) {
    for (uint64_t k : Keys(0, 200)) bulk.ExpectLoaded(k);
  }
}

TEST(BulkLoadTest, WindowByWindowLeavesEveryMnAsInsertingInItsOrderDoes) {
  // One slot a bucket, 80% full: long probe paths, many of them past their window.
  ExpectWindowsLeaveWhatOneByOneLeaves(Spec(1000, 1), 2, 1300);
}

TEST(BulkLoadTest, WindowByWindowLeavesEveryMnAsSvInsertingInItsOrderDoes) {
  TableSpec spec = Spec(4000, 22);
  spec.versions = 1;
  spec.single_version = true;
  ExpectWindowsLeaveWhatOneByOneLeaves(spec, 3, 3000);
}

TEST(BulkLoadTest, KeysInsertedBeforeStayAndInsertsAfterItWork) {
  Fixture fx(3, 3, Spec(5000));
  for (uint64_t k : Keys(0, 300)) ASSERT_TRUE(fx.InsertOne(k, 2).ok());
  ASSERT_TRUE(fx.Load(Keys(300, 2000)).ok());
  for (uint64_t k : Keys(2300, 100)) ASSERT_TRUE(fx.InsertOne(k, 4).ok());
  for (uint64_t k : Keys(0, 300)) fx.ExpectLoaded(k, 2);
  for (uint64_t k : Keys(300, 2000)) fx.ExpectLoaded(k, 3);
  for (uint64_t k : Keys(2300, 100)) fx.ExpectLoaded(k, 4);
  EXPECT_EQ(fx.InsertOne(Keys(1000, 1)[0]).code(), Code::kAlreadyExists) << "loaded";
}

TEST(BulkLoadTest, RefusesAKeyLiveAlreadyOrGivenTwiceAndWritesNothingOfItsGroup) {
  Fixture fx(1, 1, Spec(1000));
  ASSERT_TRUE(fx.InsertOne(7).ok());
  EXPECT_EQ(fx.Load({5, 6, 7}).code(), Code::kAlreadyExists);
  EXPECT_EQ(fx.Load({5, 6, 5}).code(), Code::kAlreadyExists);
  for (uint64_t k : {5, 6}) {
    EXPECT_EQ(fx.w->Run(Lookup(*fx.w->ep, *fx.table, 0, 0, k)).status().code(), Code::kNotFound);
  }
  ASSERT_TRUE(fx.Load({5, 6}).ok());
  fx.ExpectLoaded(5);
  fx.ExpectLoaded(6);
}

TEST(BulkLoadTest, AFullTableIsOutOfSpaceAndKeepsWhatItHeld) {
  // One slot per bucket: a load of more keys than buckets cannot place them all.
  Fixture fx(1, 1, Spec(1, 1));
  const uint64_t buckets = fx.table->bucket_count;
  ASSERT_TRUE(fx.Load(Keys(0, buckets / 2)).ok());
  EXPECT_EQ(fx.Load(Keys(buckets, buckets + 1)).code(), Code::kOutOfSpace);
  for (uint64_t k : Keys(0, buckets / 2)) fx.ExpectLoaded(k);
}

TEST(BulkLoadTest, RefusesValuesOfTheWrongSizeAndTablesItCannotLoad) {
  Fixture fx(1, 1, Spec(100));
  std::vector<uint64_t> keys = {1, 2};
  std::vector<std::byte> short_values(2 * 100 - 1);
  EXPECT_EQ(fx.w->Run(BulkLoad(*fx.w->ep, *fx.table, fx.pool.layout, fx.placement, fx.alloc, keys,
                               short_values, 1))
                .code(),
            Code::kInvalidArgument);
  TableInfo ordered = *fx.table;  // (a real ordered table also has a B+Tree)
  ordered.ordered = true;
  std::vector<std::byte> values(2 * 100);
  EXPECT_EQ(fx.w->Run(BulkLoad(*fx.w->ep, ordered, fx.pool.layout, fx.placement, fx.alloc, keys,
                               values, 1))
                .code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace pond::store
