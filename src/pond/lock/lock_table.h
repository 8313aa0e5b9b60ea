// LockTable: the locks of the shards one CN manages (Lotus §4.1, Algorithm 1).
//
// A fixed-size hash table of 8-byte slots, 8 slots to a bucket. A slot is a 56-bit fingerprint of
// the LockKey and an 8-bit counter: 1 = write-locked, an even non-zero value = that many/2 read
// locks, 0 = free. Every change of a slot is one CAS, so the CN's workers share the table without
// a lock on the fast path. Beside it, the lock state records each held lock's holders (owner and
// mode): it makes a repeated request by the same owner a no-op (requests may be retried), and
// lets recovery find and release every lock of a failed CN.
//
// Two keys whose fingerprints collide in one bucket share a slot and so conflict falsely (never
// the reverse); with 56-bit fingerprints this is negligible and only costs an abort.
//
// Refusals are values: Conflict when the slot is held in a conflicting mode, when the bucket has
// no free slot, or when a read lock would overflow the counter; WrongShard when the key's shard is
// not managed here.
//
// Thread rules: all methods are safe to call from any of the CN's worker threads.
#pragma once

#include <atomic>
#include <bitset>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "pond/lock/lock_key.h"
#include "pond/status.h"

namespace pond::lock {

inline constexpr int kSlotsPerBucket = 8;
inline constexpr uint8_t kWriteLocked = 1;
inline constexpr uint8_t kReadCounterMax = 254;  // 127 readers

// Slot word: fingerprint in bits 63..8, counter in bits 7..0.
constexpr uint64_t PackSlot(uint64_t fingerprint, uint8_t counter) {
  return (fingerprint << 8) | counter;
}
constexpr uint64_t SlotFingerprint(uint64_t slot) { return slot >> 8; }
constexpr uint8_t SlotCounter(uint64_t slot) { return static_cast<uint8_t>(slot); }

struct LockTableStats {
  std::atomic<uint64_t> acquired{0};
  std::atomic<uint64_t> repeated{0};        // idempotent repeats answered from the lock state
  std::atomic<uint64_t> conflicts{0};
  std::atomic<uint64_t> bucket_full{0};
  std::atomic<uint64_t> counter_full{0};
  std::atomic<uint64_t> released{0};
};

class LockTable {
 public:
  // `buckets` lock buckets (each 8 slots); `cn` is this CN's id, used for shard checks.
  LockTable(uint32_t buckets, uint16_t cn);

  // Which shards this CN manages; requests for others get WrongShard.
  void SetManaged(uint32_t shard, bool managed);
  bool Manages(uint32_t shard) const;

  // Algorithm 1. Ok if the lock is now held by `owner` (including when it already was).
  // A read -> write upgrade succeeds only if `owner` is the sole reader.
  Status Acquire(const LockKey& key, LockMode mode, const LockOwner& owner);
  // Drops `owner`'s hold. NotFound if `owner` holds no lock on `key` in `mode` (a duplicate or
  // stray unlock, which must change nothing).
  Status Release(const LockKey& key, LockMode mode, const LockOwner& owner);

  // Recovery: releases every lock held by transactions of CN `cn`; returns how many.
  size_t ReleaseAllOf(uint16_t cn);

  struct Held {
    LockKey key;
    LockMode mode;
    LockOwner owner;
  };
  // Every lock currently held (for recovery and tests).
  std::vector<Held> HeldLocks() const;

  const LockTableStats& stats() const { return stats_; }

 private:
  // Implementation-defined; see lock_table.cc.
  struct Impl;
  std::unique_ptr<Impl> impl_;
  LockTableStats stats_;
};

}  // namespace pond::lock
