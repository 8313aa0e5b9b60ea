// VtCache: a CN's cache of the version tables (CVTs) of keys in shards it manages (Lotus §4.4).
//
// It saves the READ of a CVT before reading a record. It is exact without any consistency
// traffic because of three rules, which its callers (the transaction layer) follow:
//  1. Only a transaction that holds a lock on the key fills an entry (no writer can be active).
//  2. A local transaction that writes the key updates the entry *before* the MN sees the change
//     become visible (at write-invisible, and again with the commit timestamp before the
//     write-visible step is posted), so the cache is never older than MN memory.
//  3. The lock server drops the entry when it grants a write lock to a transaction of another CN,
//     which will change the CVT in memory directly.
//
// Thread rules: safe from any of the CN's worker threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "pond/cache/lru_cache.h"
#include "pond/lock/lock_key.h"
#include "pond/store/hash_index.h"

namespace pond::cache {

// A value this small rides in its CVT's entry (ProtocolConfig::value_cache).
inline constexpr uint32_t kCachedValueBytesMax = 128;

struct CachedCvt {
  store::SlotRef ref;
  store::Cvt cvt;
  // With the value cache: the value of cell `value_cell` (-1: none) as of that cell's `value_cv`,
  // which is the newest committed version. The same three rules keep it exact: its filler holds
  // the key's lock, a local writer replaces it when it makes its version visible, and the entry
  // goes whole when another CN's writer is granted the key.
  int value_cell = -1;
  uint8_t value_cv = 0;
  uint32_t value_bytes = 0;
  std::array<std::byte, kCachedValueBytesMax> value;
};

struct LockKeyHash {
  size_t operator()(const lock::LockKey& k) const { return static_cast<size_t>(k.Hash()); }
};

class VtCache {
 public:
  VtCache(size_t capacity, int sub_caches) : lru_(capacity, sub_caches) {}

  std::optional<CachedCvt> Get(const lock::LockKey& k) { return lru_.Get(k); }
  void Put(const lock::LockKey& k, const CachedCvt& v) { lru_.Put(k, v); }
  bool Invalidate(const lock::LockKey& k) { return lru_.Invalidate(k); }
  size_t InvalidateShard(uint32_t shard) {
    return lru_.InvalidateIf([shard](const lock::LockKey& k) { return k.shard() == shard; });
  }
  size_t size() const { return lru_.size(); }
  CacheStats stats() const { return lru_.stats(); }

 private:
  ShardedLruCache<lock::LockKey, CachedCvt, LockKeyHash> lru_;
};

// AddrCache: where a key's CVT is (bucket and slot), for any key this CN has seen. It needs no
// consistency maintenance: a CVT never moves while its key exists, and a user of a cached address
// checks that the slot it reads holds the key (Lotus §5), dropping the entry if not.
class AddrCache {
 public:
  AddrCache(size_t capacity, int sub_caches) : lru_(capacity, sub_caches) {}

  std::optional<store::SlotRef> Get(const lock::LockKey& k) { return lru_.Get(k); }
  void Put(const lock::LockKey& k, const store::SlotRef& r) { lru_.Put(k, r); }
  bool Invalidate(const lock::LockKey& k) { return lru_.Invalidate(k); }
  size_t size() const { return lru_.size(); }
  CacheStats stats() const { return lru_.stats(); }

 private:
  ShardedLruCache<lock::LockKey, store::SlotRef, LockKeyHash> lru_;
};

}  // namespace pond::cache
