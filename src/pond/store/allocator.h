// Allocator: two-stage allocation of record space without MN CPU (as Sherman's, with FAA in place
// of an RPC). Stage one takes a whole chunk of a replica group's record lanes by FAA on the
// primary MN's lane cursor — one FAA reserves the same lane-relative range on all R replicas
// (layout.h). Stage two hands out pieces of the current chunk locally, by bump pointer, with
// per-size free lists for reuse. No two allocators can hand out overlapping space: chunks are
// disjoint by FAA, and a chunk belongs to the one allocator that carved it.
//
// Offsets are lane-relative; PoolLayout::RecordOffset turns one into each replica's address.
// Thread rules: one Allocator per worker; not thread-safe. Offsets are 64-byte aligned.
#pragma once

#include <coroutine>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "pond/status.h"
#include "pond/store/catalog.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::store {

struct AllocatorStats {
  uint64_t chunks = 0;  // chunks carved (FAAs that succeeded)
  uint64_t allocations = 0;
  uint64_t reused = 0;        // allocations served from a free list
  uint64_t wasted_bytes = 0;  // tails of chunks abandoned when a piece did not fit
};

class Allocator {
 public:
  explicit Allocator(const PoolLayout& layout)
      : layout_(layout),
        cursors_(layout.num_mns),
        carving_(layout.num_mns, 0),
        carve_waiters_(layout.num_mns),
        unanswered_(layout.num_mns) {}

  // After a carve that an MN of the group did not answer, the group's carves fail Unavailable at
  // once — no FAA — for this long, unless the MNs known down change meanwhile: a carve FAAs the
  // higher replicas' cursors before the primary's, so each one that then finds the primary down
  // loses a chunk on every replica that answered, and transactions retrying through the lease it
  // takes to declare the MN would use up the group's lanes (the simulator's fault seeds did).
  static constexpr uint64_t kCarveRetryNs = 1'000'000;

  // Record space for a key whose primary is `primary`: `bytes` rounded up to 64, at most one
  // chunk. Returns a lane-relative offset. OutOfSpace when the group's lanes are exhausted.
  // Chunks are carved from the group's cursors on MNs not in `down_mns` (CarveLane). With
  // `carve_frozen`, an allocation that needs a new chunk fails Unavailable instead (a rejoining
  // MN's cursors are being brought into step, docs/recovery.md "MN restart").
  Task<Result<uint64_t>> Alloc(Endpoint& ep, MnId primary, uint32_t bytes, uint64_t down_mns = 0,
                               bool carve_frozen = false);
  // The same, from space already in hand only — a free piece of that size or room in the group's
  // current chunk — or nullopt, with no I/O. For callers that take many pieces in a loop: at -O1,
  // as the sanitizer trees compile, each awaited Task that completes at once is a nested call, not
  // a jump, and BulkLoad awaiting Alloc once per row overflowed the stack under ASan.
  std::optional<uint64_t> TakeInHand(MnId primary, uint32_t bytes);
  // Returns a piece to this allocator's free list (it never goes back to the MN).
  void Free(MnId primary, uint64_t lane_offset, uint32_t bytes);
  // A restarted worker goes on in the chunks its dead incarnation carved: their unused ends and
  // free pieces are nobody else's, and a piece the dead one handed out for a transaction that
  // recovery rolled back lies below the cursor, lost but harmless. A carve the dead one had in
  // flight is not taken over (its chunk, if the FAA landed, is lost).
  void TakeOver(const Allocator& dead) {
    cursors_ = dead.cursors_;
    free_ = dead.free_;
  }

  const AllocatorStats& stats() const { return stats_; }

 private:
  struct Cursor {
    uint64_t next = 0;
    uint64_t end = 0;
  };
  static uint64_t FreeKey(MnId mn, uint32_t bytes) { return (uint64_t{mn} << 32) | bytes; }
  static uint32_t Rounded(uint32_t bytes) {
    return (bytes + static_cast<uint32_t>(kHeapAlign) - 1) & ~static_cast<uint32_t>(kHeapAlign - 1);
  }

  PoolLayout layout_;
  std::vector<Cursor> cursors_;  // per primary MN (replica group)
  std::vector<char> carving_;    // per group: a chunk FAA is in flight
  std::vector<std::vector<std::coroutine_handle<>>> carve_waiters_;
  // Per group: the last carve an MN did not answer — when, and the MNs known down then.
  struct Unanswered {
    bool set = false;
    uint64_t at_ns = 0;
    uint64_t down_mns = 0;
  };
  std::vector<Unanswered> unanswered_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> free_;
  AllocatorStats stats_;
};

}  // namespace pond::store
