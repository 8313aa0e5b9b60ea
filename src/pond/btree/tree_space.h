// TreeSpace: where one B+Tree lives in the memory pool, and the fixed layout of that space
// (docs/formats.md "B+Tree nodes"). The tree is given one byte range on each of one or more MNs
// when it is created; every CN that opens the tree is given the same TreeSpace, from which it
// computes every address below without reading anything.
//
// Each range holds a 64-byte header (the chunk cursor, and in the first range the root word),
// then the global lock table of the nodes on that MN, then node chunks carved from the cursor.
//
// Replicated (replication R > 1, docs/btree.md "Replicated nodes"): the ranges are on MNs
// 0..n-1 in order, all of one span, and MN m's range is followed by R - 1 copy slots of that
// span: slot k holds copy k of MN (m - k)'s range, byte for byte at the same relative offsets —
// as record lanes mirror their groups. Copy 0 is the range itself. Every address in a node or
// word names copy 0; Copy() maps it to copy k.
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

inline constexpr int kTreeReplicationMax = 8;  // store::kReplicationMax

struct MnRange {
  MnId mn = 0;
  uint64_t begin = 0;  // offset in the MN's region; 64-aligned and not 0
  uint64_t end = 0;
};

struct TreeSpace {
  std::vector<MnRange> ranges;  // at most one per MN
  uint32_t lock_count = 4096;   // global lock words per range
  uint64_t chunk_bytes = 64 << 10;
  int replication = 1;  // copies of every range (R); each MN's space is R spans long
};

inline constexpr uint64_t kTreeMagic = 0x3145455254444e50;  // "PNDTREE1"

// Opens every range.
struct RangeHeader {
  uint64_t magic;         // kTreeMagic
  uint64_t chunk_cursor;  // next free chunk's offset; changed only by FAA
  uint64_t root;          // first range only: GAddr of the root; changed by CAS, or under `lock`
  uint64_t lock;          // the header's lock word: a replicated tree's cursor and root changes
  uint64_t reserved[4];
};
static_assert(sizeof(RangeHeader) == 64);
static_assert(offsetof(RangeHeader, chunk_cursor) == 8);
static_assert(offsetof(RangeHeader, root) == 16);
static_assert(offsetof(RangeHeader, lock) == 24);

inline uint64_t NodesBeginOf(const MnRange& r, uint32_t lock_count) {
  return (r.begin + sizeof(RangeHeader) + uint64_t{lock_count} * 8 + 1023) & ~uint64_t{1023};
}

// The line of a range that a lock word's holder names (docs/formats.md "Lock owner word": the
// low 32 bits are line:24 nonce:8, the line 0 for the range's header and i + 1 for its i-th node),
// so that whoever takes the word from a dead holder knows what it may have left written on some
// copies only. The nonce tells one acquisition from another of the same worker.
inline constexpr int kLineBits = 24;
inline constexpr uint64_t kRangeBytesMax = uint64_t{1} << (kLineBits + 10);  // 16 GiB of nodes
static_assert(kLineBits + 8 == 32, "line:24 nonce:8 fill an owner word's n (docs/formats.md)");

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
  if (s.replication < 1 || s.replication > static_cast<int>(s.ranges.size()) ||
      s.replication > kTreeReplicationMax) {
    return InvalidArgument("a tree's replication must be 1 to its number of ranges (at most 8)");
  }
  for (const MnRange& r : s.ranges) {
    if (r.end - r.begin > kRangeBytesMax) return InvalidArgument("a tree range is over 16 GiB");
  }
  if (s.replication > 1) {
    for (size_t i = 0; i < s.ranges.size(); i++) {
      if (s.ranges[i].mn != i ||
          s.ranges[i].end - s.ranges[i].begin != s.ranges[0].end - s.ranges[0].begin) {
        return InvalidArgument(
            "a replicated tree needs one range per MN, in MN order, of one span");
      }
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
  int replication() const { return space_.replication; }
  uint64_t span() const { return space_.ranges[0].end - space_.ranges[0].begin; }
  // Copy k of the byte at `a` (an address in copy 0, a range's own), on MN (a.mn + k) mod n.
  GAddr Copy(GAddr a, int k) const {
    if (k == 0) return a;
    const size_t n = space_.ranges.size();
    const size_t from = RangeOf(a.mn()), to = (from + static_cast<size_t>(k)) % n;
    const uint64_t rel = a.offset() - space_.ranges[from].begin;
    return At(to, space_.ranges[to].begin + static_cast<uint64_t>(k) * span() + rel);
  }
  // The line `a` (in copy 0) is: 0 for the header of its range, i + 1 for the range's i-th node.
  uint32_t LineOf(GAddr a) const {
    const size_t r = RangeOf(a.mn());
    if (a.offset() < NodesBegin(r)) return 0;
    return static_cast<uint32_t>((a.offset() - NodesBegin(r)) / 1024 + 1);
  }
  GAddr LineAt(MnId mn, uint32_t line) const {
    const size_t r = RangeOf(mn);
    return line == 0 ? Header(r) : At(r, NodesBegin(r) + uint64_t{line - 1} * 1024);
  }
  size_t Range(MnId mn) const { return RangeOf(mn); }
  GAddr Header(size_t r) const { return At(r, space_.ranges[r].begin); }
  GAddr Cursor(size_t r) const { return Header(r) + offsetof(RangeHeader, chunk_cursor); }
  GAddr RootWord() const { return Header(0) + offsetof(RangeHeader, root); }
  GAddr HeaderWord(size_t r) const { return Header(r) + offsetof(RangeHeader, lock); }
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
