// LockTable: the locks of the shards one CN manages (Lotus §4.1, Algorithm 1).
//
// A fixed-size hash table of 8-byte slots, 8 slots to a bucket (one cache line). A slot is a
// 56-bit fingerprint of the LockKey and an 8-bit counter: 1 = write-locked, an even non-zero value
// = that many/2 read locks, 0 = free (a free slot is the all-zero word; fingerprint 0 is never
// used). Every change of a slot is one CAS, and the lock decision (conflict, counter overflow, sole
// reader for an upgrade) is taken from the slot word alone. Beside it, the lock state records each
// held lock's holders (owner and mode): it makes a repeated request by the same owner a no-op
// (requests may be retried), lets Release drop only what an owner holds, and lets recovery find
// and release every lock of a failed CN.
//
// A hold is one (owner, key) pair with one mode. A write hold covers reads: a read request by the
// writer is a repeat. A write request by a reader is an upgrade, granted only if that owner is the
// sole reader (the slot counter is exactly 2); afterwards the hold is a write hold, and Release
// must name kWrite.
//
// Two keys whose fingerprints collide in one bucket share a slot and so conflict falsely (never
// the reverse); with 56-bit fingerprints this is negligible and only costs an abort.
//
// Refusals are values: Conflict when the slot is held in a conflicting mode, when the bucket has
// no free slot, or when a read lock would overflow the counter; WrongShard when the key's shard is
// not managed here (Acquire only: Release and ReleaseAllOf work on any shard, so a shard that is
// being handed to another CN can still drain, Lotus §4.3).
//
// Concurrency (docs/locks.md "Races"): buckets are grouped into stripes, each with one mutex that
// also guards the lock state of every key hashing to its buckets. An operation holds its bucket's
// stripe mutex across "read state, read slot, CAS slot, update state", so slot and state change
// together: whenever no operation is inside a stripe, every slot counter equals the sum of its
// holders' contributions (write 1, read 2) and no key is held by a writer and anyone else. The
// CAS therefore never loses (asserted); the mutex is what makes claiming a free slot and
// releasing one from another thread unable to put one fingerprint in two slots of a bucket.
//
// Thread rules: all methods are safe to call from any of the CN's worker threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "pond/lock/lock_key.h"
#include "pond/status.h"

namespace pond::lock {

inline constexpr int kSlotsPerBucket = 8;
inline constexpr uint8_t kWriteLocked = 1;
inline constexpr uint8_t kReadCounterMax = 254;        // 127 readers
inline constexpr uint32_t kLockBucketsMax = 1u << 24;  // 1 GiB of slots
inline constexpr uint64_t kFingerprintMask = (uint64_t{1} << 56) - 1;

// Slot word: fingerprint in bits 63..8, counter in bits 7..0.
constexpr uint64_t PackSlot(uint64_t fingerprint, uint8_t counter) {
  return (fingerprint << 8) | counter;
}
constexpr uint64_t SlotFingerprint(uint64_t slot) { return slot >> 8; }
constexpr uint8_t SlotCounter(uint64_t slot) { return static_cast<uint8_t>(slot); }

// Counted with relaxed atomics; every refusal counts in exactly one of conflicts, bucket_full,
// counter_full (and wrong_shard).
struct LockTableStats {
  std::atomic<uint64_t> acquired{0};      // new holds granted
  std::atomic<uint64_t> upgraded{0};      // read holds turned into write holds
  std::atomic<uint64_t> repeated{0};      // idempotent repeats answered from the lock state
  std::atomic<uint64_t> conflicts{0};     // refused: conflicting mode, or upgrade not sole reader
  std::atomic<uint64_t> bucket_full{0};   // refused: no slot free in the key's bucket
  std::atomic<uint64_t> counter_full{0};  // refused: read counter at kReadCounterMax
  std::atomic<uint64_t> wrong_shard{0};
  std::atomic<uint64_t> released{0};        // holds dropped by Release and ReleaseAllOf
  std::atomic<uint64_t> stray_releases{0};  // Release of a hold that does not exist
};

class LockTable {
 public:
  // `buckets` lock buckets (each 8 slots, 1 <= buckets <= kLockBucketsMax), all allocated here;
  // `cn` is this CN's id. No shard is managed until SetManaged.
  LockTable(uint32_t buckets, uint16_t cn);
  ~LockTable();
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  // Which shards this CN manages; requests for others get WrongShard.
  void SetManaged(uint32_t shard, bool managed);
  bool Manages(uint32_t shard) const;
  // Whether Acquire counts the requests for each shard it manages (off at first: a counter that
  // every worker of a CN bumps on a hot shard costs), and the counts so far, by shard.
  void CountShards(bool on);
  std::vector<uint64_t> ShardRequests() const;
  // While counted, also a majority vote per shard over the CNs of the owners that requested its
  // locks (Boyer–Moore, one CAS a request; the locality policy's): by shard, the CN named and
  // its count, since the last call. Each call starts every vote anew. A count of 0 names none.
  struct Majority {
    uint16_t cn = 0;
    uint64_t count = 0;
  };
  std::vector<Majority> TakeShardMajorities();

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
  // How many locks are held in any of `shards` (sorted): a shard closed to move is drained once
  // none is.
  size_t HeldIn(const std::vector<uint32_t>& shards) const;

  // Checks the invariants above on a quiescent or live table (each stripe is checked under its
  // mutex): counters equal the holders' contributions, no fingerprint in two slots of a bucket,
  // free slots all-zero, no key held by a writer and anyone else, no owner twice on a key.
  // Internal with a description of the first violation. For tests and recovery checks; O(table).
  Status VerifyInvariants() const;

  // Where a key lives, and the raw slot words: for tests and diagnostics.
  uint32_t BucketOf(const LockKey& key) const;
  static uint64_t FingerprintOf(const LockKey& key);
  uint64_t SlotWord(uint32_t bucket, int slot) const;
  uint32_t buckets() const;
  uint16_t cn() const;

  const LockTableStats& stats() const { return stats_; }

 private:
  // Implementation-defined; see lock_table.cc.
  struct Impl;
  std::unique_ptr<Impl> impl_;
  LockTableStats stats_;
};

}  // namespace pond::lock
