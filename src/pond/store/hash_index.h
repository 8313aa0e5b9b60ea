// HashIndex: finds and inserts keys in a table's MN-resident hash index, by one-sided ops only.
//
// A bucket holds slots_per_bucket CVTs, so one READ of a key's home bucket returns the key's whole
// version table. A full bucket overflows into the next (linear probing over buckets, at most
// kProbeBucketsMax). Slots go empty -> claimed -> live and never back, so a lookup may stop at the
// first bucket that still has an empty slot. Every replica MN of a key holds its CVT at the same
// bucket and slot: the primary's CAS decides the slot, backups mirror it.
//
// Insert claims a slot by CAS on its meta word; concurrent inserts of *different* keys are safe.
// Inserts of the *same* key must be serialised by the caller (the transaction layer locks the
// index bucket, Lotus §4.1); otherwise both may succeed in different slots.
#pragma once

#include <cstdint>
#include <span>

#include "pond/status.h"
#include "pond/store/allocator.h"
#include "pond/store/catalog.h"
#include "pond/store/placement.h"
#include "pond/store/record.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::store {

inline constexpr int kProbeBucketsMax = 64;
inline constexpr int kInsertAttemptsMax = 64;

// A decoded CVT.
struct Cvt {
  uint64_t key = 0;
  uint8_t state = kSlotEmpty;
  uint64_t lock = 0;
  int versions = 0;
  Cell cells[kVersionsMax];
};

// Decodes one CVT copied from a bucket; TornRead if any cell was caught mid-write.
Result<Cvt> DecodeCvt(std::span<const std::byte> bytes, int versions);

// Where a key's CVT lives: the same bucket and slot in the sub-index of every replica.
struct SlotRef {
  uint64_t bucket = 0;
  int slot = 0;
  // On replica `replica` of the key, which is MN `mn`.
  GAddr Addr(const TableInfo& t, MnId mn, int replica) const {
    return t.SlotAddr(mn, replica, bucket, slot);
  }
};

struct Found {
  SlotRef ref;
  Cvt cvt;
};

uint64_t HomeBucket(const TableInfo& t, uint64_t key);

// Scans a copied bucket: the slot holding `key` live (or -1), and whether any slot is empty (if
// so, the key cannot be in a later bucket of its probe path).
struct BucketScan {
  int match = -1;
  int first_empty = -1;
};
BucketScan ScanBucket(const TableInfo& t, std::span<const std::byte> bucket, uint64_t key);

// Claims a slot for a new key on the primary MN by CAS (step 1 of Insert), marks it claimed on
// every other replica up, and returns it; the caller then writes cells, key and meta=live on
// every replica (see Insert). AlreadyExists if the key is live on its probe path; OutOfSpace if
// no slot is free within kProbeBucketsMax buckets.
//
// Why every replica: a claim stays a claim, also when its insert never ends (its CN died, its
// transaction aborted). A key inserted later past that bucket, which looked full, must be found
// on every replica — a backup is read once the primary is down — so the bucket must look full
// there too: a lookup stops at the first bucket with an empty slot.
Task<Result<SlotRef>> ClaimSlot(Endpoint& ep, const TableInfo& t, const Placement& placement,
                                uint64_t key);

// Looks the key up on its replica `replica` (0: the primary), which is MN `mn`. NotFound if
// absent.
Task<Result<Found>> Lookup(Endpoint& ep, const TableInfo& t, MnId mn, int replica, uint64_t key);

// Inserts a new key with `value` as its first version, committed at `commit_ts`, on all
// replicas. AlreadyExists if the key is live on the primary; OutOfSpace if every probed bucket
// is full or memory ran out.
Task<Result<SlotRef>> Insert(Endpoint& ep, const TableInfo& t, const PoolLayout& layout,
                             const Placement& placement, Allocator& alloc, uint64_t key,
                             std::span<const std::byte> value, uint64_t commit_ts);

// Reads the version a cell points to on MN `mn` and checks its cacheline versions.
Task<Status> ReadRecord(Endpoint& ep, const TableInfo& t, MnId mn, const Cell& cell,
                        std::span<std::byte> value);

}  // namespace pond::store
