// Allocator: two-stage allocation of MN memory without MN CPU (as Sherman's, with FAA in place of
// an RPC). Stage one takes a whole chunk from an MN's heap by FAA on its heap cursor; stage two
// hands out pieces of the current chunk locally, by bump pointer, with per-size free lists for
// reuse. No two allocators can hand out overlapping space: chunks are disjoint by FAA, and a
// chunk belongs to the one allocator that carved it.
//
// Thread rules: one Allocator per worker; not thread-safe. Offsets returned are 64-byte aligned.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "pond/runtime/task.h"
#include "pond/status.h"
#include "pond/store/catalog.h"
#include "pond/transport/endpoint.h"

namespace pond::store {

struct AllocatorStats {
  uint64_t chunks = 0;          // chunks carved (FAAs that succeeded)
  uint64_t allocations = 0;
  uint64_t reused = 0;          // allocations served from a free list
  uint64_t wasted_bytes = 0;    // tails of chunks abandoned when a piece did not fit
};

class Allocator {
 public:
  explicit Allocator(const RegionInfo& region) : region_(region), cursors_(region.num_mns) {}

  // `bytes` rounded up to 64; at most one chunk. OutOfSpace when the MN's heap is exhausted.
  Task<Result<uint64_t>> Alloc(Endpoint& ep, MnId mn, uint32_t bytes);
  // Returns a piece to this allocator's free list (it never goes back to the MN).
  void Free(MnId mn, uint64_t offset, uint32_t bytes);

  const AllocatorStats& stats() const { return stats_; }

 private:
  struct Cursor {
    uint64_t next = 0;
    uint64_t end = 0;
  };
  static uint64_t FreeKey(MnId mn, uint32_t bytes) { return (uint64_t{mn} << 32) | bytes; }

  RegionInfo region_;
  std::vector<Cursor> cursors_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> free_;
  AllocatorStats stats_;
};

}  // namespace pond::store
