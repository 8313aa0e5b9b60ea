#include "pond/cache/lru_cache.h"

#include <gtest/gtest.h>

#include <thread>

#include "pond/cache/vt_cache.h"

namespace pond::cache {
namespace {

struct IdHash {
  size_t operator()(uint64_t k) const { return k; }
};

TEST(LruCacheTest, EvictsLeastRecentlyUsed) {
  ShardedLruCache<uint64_t, int, IdHash> c(3, 1);
  c.Put(1, 10);
  c.Put(2, 20);
  c.Put(3, 30);
  EXPECT_EQ(c.Get(1), 10);  // 1 is now the most recent; 2 the least
  c.Put(4, 40);
  EXPECT_FALSE(c.Get(2).has_value());
  EXPECT_EQ(c.Get(1), 10);
  EXPECT_EQ(c.Get(3), 30);
  EXPECT_EQ(c.Get(4), 40);
  EXPECT_EQ(c.stats().evictions, 1u);
}

TEST(LruCacheTest, PutReplacesAndInvalidateRemoves) {
  ShardedLruCache<uint64_t, int, IdHash> c(8, 2);
  c.Put(5, 1);
  c.Put(5, 2);
  EXPECT_EQ(c.Get(5), 2);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_TRUE(c.Invalidate(5));
  EXPECT_FALSE(c.Invalidate(5));
  EXPECT_FALSE(c.Get(5).has_value());
}

TEST(LruCacheTest, CapacityIsSplitOverSubCaches) {
  ShardedLruCache<uint64_t, int, IdHash> c(8, 4);  // 2 entries per sub-cache
  for (uint64_t k = 0; k < 100; k++) c.Put(k, static_cast<int>(k));
  EXPECT_EQ(c.size(), 8u);
}

TEST(VtCacheTest, DropsAWholeShard) {
  VtCache vt(64, 4);
  CachedCvt v{};
  for (uint64_t k = 0; k < 20; k++) vt.Put(lock::LockKey::Record(1, k), v);
  // Keys 3 and 3 + 4096 would share shard 3; here only key 3 is in it.
  EXPECT_EQ(vt.InvalidateShard(3), 1u);
  EXPECT_FALSE(vt.Get(lock::LockKey::Record(1, 3)).has_value());
  EXPECT_TRUE(vt.Get(lock::LockKey::Record(1, 4)).has_value());
  EXPECT_FALSE(vt.Get(lock::LockKey::Record(2, 4)).has_value()) << "tables are separate";
}

TEST(LruCacheTest, ConcurrentUseKeepsTheBound) {
  ShardedLruCache<uint64_t, uint64_t, IdHash> c(256, 8);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&c, t] {
      for (uint64_t i = 0; i < 20000; i++) {
        uint64_t k = (i * 7 + static_cast<uint64_t>(t)) % 1000;
        if (auto v = c.Get(k)) {
          EXPECT_EQ(*v, k * 3);
        }
        c.Put(k, k * 3);
        if (i % 5 == 0) c.Invalidate(k);
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_LE(c.size(), 256u);
}

}  // namespace
}  // namespace pond::cache
