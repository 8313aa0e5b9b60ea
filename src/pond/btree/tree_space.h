// TreeSpace: where one B+Tree lives in the memory pool, and the fixed layout of that space
// (docs/formats.md "B+Tree nodes"). The tree is given one byte range on each of one or more MNs
// when it is created; every CN that opens the tree is given the same TreeSpace, from which it
// computes every address below without reading anything.
//
// Each range holds a 64-byte header (the chunk cursor, and in the first range the root word),
// then the global lock table of the nodes on that MN, then node chunks carved by FAA on the
// cursor.
//
// Thread rules: a plain value; copy it freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pond/base/hash.h"
#include "pond/status.h"
#include "pond/transport/gaddr.h"

namespace pond::btree {

struct MnRange {
  MnId mn = 0;
  uint64_t begin = 0;  // offset in the MN's region; 64-aligned and not 0
  uint64_t end = 0;
};

struct TreeSpace {
  std::vector<MnRange> ranges;  // at most one per MN
  uint32_t lock_count = 4096;   // global lock words per range
  uint64_t chunk_bytes = 64 << 10;
};

inline constexpr uint64_t kTreeMagic = 0x3145455254444e50;  // "PNDTREE1"

// Opens every range.
struct RangeHeader {
  uint64_t magic;         // kTreeMagic
  uint64_t chunk_cursor;  // next free chunk's offset; changed only by FAA
  uint64_t root;          // first range only: GAddr of the root; changed only by CAS
  uint64_t reserved[5];
};
static_assert(sizeof(RangeHeader) == 64);
static_assert(offsetof(RangeHeader, chunk_cursor) == 8);
static_assert(offsetof(RangeHeader, root) == 16);

inline uint64_t NodesBeginOf(const MnRange& r, uint32_t lock_count) {
  return (r.begin + sizeof(RangeHeader) + uint64_t{lock_count} * 8 + 1023) & ~uint64_t{1023};
}

inline Status Validate(const TreeSpace& s) {
  if (s.ranges.empty() || s.ranges.size() > 64) {
    return InvalidArgument("a tree needs 1 to 64 MN ranges");
  }
  if (s.lock_count == 0) return InvalidArgument("a tree needs lock words");
  if (s.chunk_bytes < 1024 || s.chunk_bytes % 1024 != 0) {
    return InvalidArgument("chunk_bytes must be a positive multiple of the node size");
  }
  for (size_t i = 0; i < s.ranges.size(); i++) {
    const MnRange& r = s.ranges[i];
    if (r.begin == 0 || r.begin % 64 != 0) return InvalidArgument("range begin must be 64-aligned");
    if (r.end < NodesBeginOf(r, s.lock_count) + s.chunk_bytes)
      return InvalidArgument("range too small for one chunk");
    for (size_t j = 0; j < i; j++) {
      if (s.ranges[j].mn == r.mn) return InvalidArgument("two ranges on one MN");
    }
  }
  return Status::Ok();
}

// Addresses derived from a TreeSpace.
class SpaceLayout {
 public:
  explicit SpaceLayout(const TreeSpace& s) : space_(s) {}

  const TreeSpace& space() const { return space_; }
  size_t num_ranges() const { return space_.ranges.size(); }
  GAddr Header(size_t r) const { return At(r, space_.ranges[r].begin); }
  GAddr Cursor(size_t r) const { return Header(r) + offsetof(RangeHeader, chunk_cursor); }
  GAddr RootWord() const { return Header(0) + offsetof(RangeHeader, root); }
  GAddr LockBase(size_t r) const { return Header(r) + sizeof(RangeHeader); }
  // First byte of the node area (node-aligned), where the cursor starts.
  uint64_t NodesBegin(size_t r) const { return NodesBeginOf(space_.ranges[r], space_.lock_count); }
  uint64_t NodesEnd(size_t r) const { return space_.ranges[r].end; }

  // The global lock word of a node: on the node's own MN, so that a write-back and the release
  // travel in one doorbell batch. Nodes share words when they hash alike, which is harmless
  // because a writer holds one lock at a time.
  GAddr LockFor(GAddr node) const {
    size_t r = RangeOf(node.mn());
    uint64_t i = HashKey(node.raw, HashUse::kLockTable) % space_.lock_count;
    return LockBase(r) + i * 8;
  }

 private:
  size_t RangeOf(MnId mn) const {
    for (size_t r = 0; r < space_.ranges.size(); r++) {
      if (space_.ranges[r].mn == mn) return r;
    }
    return 0;  // a node outside the tree's MNs is a bug the caller asserts against
  }
  GAddr At(size_t r, uint64_t off) const { return GAddr::Make(space_.ranges[r].mn, off); }

  TreeSpace space_;
};

}  // namespace pond::btree
