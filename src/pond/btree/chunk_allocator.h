// ChunkAllocator: a CN worker's source of fresh tree nodes, in two stages (as Sherman's): a
// chunk of TreeSpace::chunk_bytes is taken from an MN range by moving that range's cursor word
// (`take`: one FAA, or a locked write on a replicated tree), then nodes are carved from it
// locally with no remote op at all. Chunks are taken from
// the ranges in turn, so the nodes of a tree spread over its MNs.
//
// Nodes are never given back: merges are lazy (docs/btree.md), so a node once linked stays.
//
// Thread rules: one allocator per worker, used from that worker's coroutines only.
#pragma once

#include <cstdint>
#include <functional>

#include "pond/btree/tree_space.h"
#include "pond/status.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::btree {

class ChunkAllocator {
 public:
  // `first_range` picks where this worker's first chunk comes from, so that workers do not all
  // start on the same MN.
  // `take(r)`: moves range r's cursor on by one chunk and answers where it was.
  using TakeChunk = std::function<Task<Result<uint64_t>>(size_t r)>;
  ChunkAllocator(const SpaceLayout& layout, size_t first_range, TakeChunk take)
      : layout_(layout), take_(std::move(take)), next_range_(first_range % layout.num_ranges()) {}

  // The address of a node's worth of memory no one else was given; OutOfSpace when every range
  // is used up.
  Task<Result<GAddr>> Allocate();

  uint64_t chunks_taken() const { return chunks_taken_; }

 private:
  const SpaceLayout& layout_;
  TakeChunk take_;
  size_t next_range_;
  GAddr next_ = GAddr::Null();  // next free node in the current chunk
  uint64_t left_bytes_ = 0;     // in the current chunk
  uint64_t exhausted_ = 0;      // bit r: range r has no whole chunk left
  uint64_t chunks_taken_ = 0;
};

}  // namespace pond::btree
