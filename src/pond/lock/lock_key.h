// LockKey: what a lock protects, and which shard (so which CN) manages it.
//
// A record lock names (table, key). An index-bucket lock, taken by inserts so that two inserts
// into one bucket exclude each other (Lotus §4.1), names (table | kBucketLockFlag, bucket
// number). The shard is the low 12 bits of `key` (Lotus §4.2): for records that is the critical
// field's shard number; for bucket locks it spreads buckets over CNs.
#pragma once

#include <cstdint>

#include "pond/base/hash.h"

namespace pond::lock {

inline constexpr int kShardBits = 12;
inline constexpr uint32_t kShards = 1u << kShardBits;
inline constexpr uint16_t kBucketLockFlag = 0x8000;

struct LockKey {
  uint16_t table = 0;
  uint64_t key = 0;

  static LockKey Record(uint16_t table, uint64_t key) { return {table, key}; }
  static LockKey IndexBucket(uint16_t table, uint64_t bucket) {
    return {static_cast<uint16_t>(table | kBucketLockFlag), bucket};
  }
  uint32_t shard() const { return static_cast<uint32_t>(key & (kShards - 1)); }
  // One 64-bit hash of both fields, for the lock table's bucket and fingerprint.
  uint64_t Hash() const { return HashKey(key ^ (uint64_t{table} << 48), HashUse::kLockTable); }
  friend bool operator==(const LockKey& a, const LockKey& b) {
    return a.table == b.table && a.key == b.key;
  }
};

enum class LockMode : uint8_t { kRead = 0, kWrite = 1 };

// Who holds a lock: the CN a transaction runs on and its id there (unique per CN).
struct LockOwner {
  uint16_t cn = 0;
  uint64_t txn_id = 0;
  friend bool operator==(const LockOwner& a, const LockOwner& b) {
    return a.cn == b.cn && a.txn_id == b.txn_id;
  }
};

}  // namespace pond::lock
