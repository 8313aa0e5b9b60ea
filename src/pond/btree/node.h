// B+Tree node formats (docs/formats.md "B+Tree nodes"): the bytes of one 1 KiB tree node in MN
// memory, as every CN reads and writes them with one-sided ops.
//
// The tree is a B-link tree: every node carries its key range as fence keys [lower, upper) and a
// pointer to its right sibling, so a reader that reaches a node after it split follows the
// sibling instead of failing. Leaves hold unsorted 18-byte entries, each wrapped in its own pair
// of versions, so an insert or update rewrites only its entry; a split rewrites whole nodes and
// bumps the node's pair of versions, at the first and the last byte of the node. Internal nodes
// are sorted and always written whole.
//
// Why the version pairs catch torn copies: a WRITE stores in increasing address order and a READ
// loads in decreasing order (transport/remote_copy.h). The front version is stored first and
// loaded last, the rear version stored last and loaded first; so a copy that saw any byte of a
// newer write also saw its front version, and unless the write had already finished when the
// rear version was loaded (then every byte loaded after it is new), front and rear differ.
//
// Thread rules: these are plain values; a CN copies a node into one of them with a READ.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pond/transport/gaddr.h"

namespace pond::btree {

inline constexpr uint32_t kNodeBytes = 1024;
// Key 0 marks an empty leaf entry, and the upper fence kKeyInfinity means "no upper bound", so
// user keys are 1 .. 2^64 - 2.
inline constexpr uint64_t kKeyEmpty = 0;
inline constexpr uint64_t kKeyInfinity = UINT64_MAX;
inline constexpr uint64_t kKeyMin = 1;
inline constexpr uint64_t kKeyMax = UINT64_MAX - 1;
// A node that was ever written has valid == kNodeValid; zeroed chunk memory has 0.
inline constexpr uint8_t kNodeValid = 0xb7;

// A leaf's state (docs/btree.md "Merges"): live; merging — empty and being merged into its right
// sibling, so that no insert may go into it; merged — an empty range [lower, lower) whose keys
// its sibling holds, written no more.
inline constexpr uint8_t kNodeLive = 0;
inline constexpr uint8_t kNodeMerging = 1;
inline constexpr uint8_t kNodeMerged = 2;

// The 40 bytes that open every node.
struct NodeHeader {
  uint8_t front_version;  // FNV: equals the node's last byte in a whole copy
  uint8_t level;          // 0 = leaf
  uint8_t valid;          // kNodeValid
  uint8_t count;          // internal nodes: number of keys; leaves: 0 (they are scanned whole)
  uint8_t state;          // leaves: kNodeLive, kNodeMerging or kNodeMerged
  uint8_t reserved[3];
  uint64_t lower;    // smallest key the node may hold
  uint64_t upper;    // keys are < upper; kKeyInfinity for the rightmost node of a level
  uint64_t sibling;  // GAddr of the right sibling; 0 for the rightmost node of a level
  // Internal nodes: child for keys in [lower, key[0]). Leaves: the removal stamp, the newest
  // commit timestamp of a deleted key whose entry was removed from the leaf (0: none), which a
  // snapshot scan older than it may not trust (docs/btree.md "The tree cleans itself").
  uint64_t leftmost;
};
static_assert(sizeof(NodeHeader) == 40);
static_assert(offsetof(NodeHeader, level) == 1);
static_assert(offsetof(NodeHeader, valid) == 2);
static_assert(offsetof(NodeHeader, count) == 3);
static_assert(offsetof(NodeHeader, state) == 4);
static_assert(offsetof(NodeHeader, lower) == 8);
static_assert(offsetof(NodeHeader, upper) == 16);
static_assert(offsetof(NodeHeader, sibling) == 24);
static_assert(offsetof(NodeHeader, leftmost) == 32);

// One leaf entry. Bytes only (no alignment), so 54 of them fit a leaf; key and value are read
// through the accessors.
struct LeafEntry {
  uint8_t front_version;  // FEV
  uint8_t key_bytes[8];
  uint8_t value_bytes[8];
  uint8_t rear_version;  // REV

  uint64_t key() const { return Load(key_bytes); }
  uint64_t value() const { return Load(value_bytes); }
  void set_key(uint64_t k) { std::memcpy(key_bytes, &k, 8); }
  void set_value(uint64_t v) { std::memcpy(value_bytes, &v, 8); }
  bool empty() const { return key() == kKeyEmpty; }
  bool whole() const { return front_version == rear_version; }
  // Before an entry is written back alone: both versions move on together.
  void BumpVersion() {
    front_version++;
    rear_version = front_version;
  }

 private:
  static uint64_t Load(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
};
static_assert(sizeof(LeafEntry) == 18);
static_assert(offsetof(LeafEntry, key_bytes) == 1);
static_assert(offsetof(LeafEntry, value_bytes) == 9);
static_assert(offsetof(LeafEntry, rear_version) == 17);

inline constexpr int kLeafEntries = 54;

struct LeafNode {
  NodeHeader h;
  LeafEntry entries[kLeafEntries];
  uint8_t pad[11];
  uint8_t rear_version;  // RNV

  bool whole() const { return h.front_version == rear_version; }
  // No entry in use: a leaf a merge may take away (docs/btree.md "Merges").
  bool empty() const {
    for (const LeafEntry& e : entries) {
      if (!e.empty()) return false;
    }
    return true;
  }
};
static_assert(sizeof(LeafNode) == kNodeBytes);
static_assert(offsetof(LeafNode, entries) == 40);
static_assert(offsetof(LeafNode, rear_version) == kNodeBytes - 1);

struct InternalEntry {
  uint64_t key;    // smallest key of the child's range
  uint64_t child;  // GAddr of the child, one level down
};
static_assert(sizeof(InternalEntry) == 16);

inline constexpr int kInternalEntries = 61;

struct InternalNode {
  NodeHeader h;
  InternalEntry entries[kInternalEntries];  // sorted by key; the first h.count are in use
  uint8_t pad[7];
  uint8_t rear_version;  // RNV

  bool whole() const { return h.front_version == rear_version; }
  // The child whose range holds `key` (lower <= key < upper assumed).
  GAddr ChildFor(uint64_t key) const {
    // upper_bound: the first entry with entry.key > key; the child before it.
    const InternalEntry* end = entries + h.count;
    const InternalEntry* it = std::upper_bound(
        entries, end, key, [](uint64_t k, const InternalEntry& e) { return k < e.key; });
    return GAddr{it == entries ? h.leftmost : (it - 1)->child};
  }
};
static_assert(sizeof(InternalNode) == kNodeBytes);
static_assert(offsetof(InternalNode, entries) == 40);
static_assert(offsetof(InternalNode, rear_version) == kNodeBytes - 1);

// Either kind of node, as one buffer a READ fills before the level is known.
union NodeBuffer {
  NodeHeader h;
  LeafNode leaf;
  InternalNode internal;
  std::byte bytes[kNodeBytes];

  bool valid() const { return h.valid == kNodeValid; }
  // The node-level versions agree (same byte offsets in both kinds).
  bool whole() const { return h.front_version == leaf.rear_version; }
  bool Covers(uint64_t key) const { return h.lower <= key && key < h.upper; }
  // A whole-node write: both node versions move on together.
  void BumpVersion() {
    h.front_version++;
    leaf.rear_version = h.front_version;
  }
};
static_assert(sizeof(NodeBuffer) == kNodeBytes);
static_assert(offsetof(LeafNode, rear_version) == offsetof(InternalNode, rear_version));

// An empty node of `level` covering [lower, upper), ready to be filled and written whole.
inline void InitNode(NodeBuffer& n, uint8_t level, uint64_t lower, uint64_t upper) {
  std::memset(n.bytes, 0, kNodeBytes);
  n.h.level = level;
  n.h.valid = kNodeValid;
  n.h.lower = lower;
  n.h.upper = upper;
}

// Byte offset of leaf entry `i` in its node, for an entry's own write-back.
constexpr uint32_t LeafEntryOffset(int i) {
  return static_cast<uint32_t>(offsetof(LeafNode, entries) + sizeof(LeafEntry) * i);
}

}  // namespace pond::btree
