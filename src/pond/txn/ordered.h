// Ordered tables (docs/protocol.md "Ordered tables and range scans"): how a table's keys map to
// its B+Tree's keys and to its stripe rows, and where its tree lives.
//
// A table with a critical field keeps the shard in bits 0..11 of a key, so keys of one shard are
// not consecutive integers. Its tree orders keys by shard first: a tree key is the key rotated
// right by the shard bits, which puts the range a scan of one shard names in one run of tree
// keys. The rotation is a bijection, and it maps only 0 and 2^64-1 outside the tree's key range,
// so an ordered table refuses those two keys alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pond/btree/tree_space.h"
#include "pond/lock/lock_key.h"
#include "pond/status.h"
#include "pond/store/catalog.h"
#include "pond/testbed.h"

namespace pond::txn {

inline bool OrderedKeyAllowed(uint64_t key) { return key != 0 && key != UINT64_MAX; }

inline uint64_t TreeKeyOf(const store::TableInfo& t, uint64_t key) {
  if (!t.critical_field) return key;
  return (key >> lock::kShardBits) | (key << (64 - lock::kShardBits));
}

inline uint64_t KeyOfTreeKey(const store::TableInfo& t, uint64_t tree_key) {
  if (!t.critical_field) return tree_key;
  return (tree_key << lock::kShardBits) | (tree_key >> (64 - lock::kShardBits));
}

// The stripe a key is in, counted over the bits above the shard.
inline uint64_t StripeOf(const store::TableInfo& t, uint64_t key) {
  return (t.critical_field ? key >> lock::kShardBits : key) >> t.stripe_bits;
}

// The key of a stripe's row in the companion table: in the stripe's shard, so that under lotus
// its lock lives with the locks of the keys it covers.
inline uint64_t StripeRowKey(const store::TableInfo& t, uint64_t shard_of, uint64_t stripe) {
  if (!t.critical_field) return stripe;
  return (stripe << lock::kShardBits) | (shard_of & (lock::kShards - 1));
}

// The tree's space: one range after the table's index area on every MN.
inline btree::TreeSpace TreeSpaceOf(const store::TableInfo& t) {
  btree::TreeSpace s;
  for (MnId mn = 0; mn < t.index_offset.size(); mn++) {
    const uint64_t begin = t.TreeOffset(mn);
    s.ranges.push_back({.mn = mn, .begin = begin, .end = begin + t.tree_bytes});
  }
  // Small chunks: every worker that inserts holds one partly used.
  s.chunk_bytes = 16 << 10;
  return s;
}

// MN crashes and ordered tables do not go together yet: the B+Tree is not replicated, so an MN
// that fails takes its part of every tree with it (docs/btree.md "Surviving node faults"). CN
// crashes, restarts and partitions are fine: a dead CN's tree lock words are freed once its
// failure is recovered (store::GoneHolders), and whatever it left half done is a valid tree.
inline Status OrderedTableAllows(const std::string& table, const std::vector<NodeFault>& faults) {
  for (const NodeFault& f : faults) {
    // A host cut loses its MN's place as a crash does.
    if (f.kind == NodeFaultKind::kCrashMn || f.kind == NodeFaultKind::kPartitionHost ||
        f.kind == NodeFaultKind::kCutHosts) {
      return InvalidArgument("ordered table \"" + table +
                             "\" cannot run with MN crashes or host cuts: its B+Tree is not "
                             "replicated yet "
                             "(CN crashes, restarts and partitions are allowed)");
    }
  }
  return Status::Ok();
}

// For the phantom test alone: while on, scans read no stripe rows — a deliberately broken scan,
// which the test's isolation check must catch.
void SetScansSkipStripesForTesting(bool on);

}  // namespace pond::txn
