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
#include "pond/store/tree_space_of.h"
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

using store::TreeSpaceOf;

// For the phantom test alone: while on, scans read no stripe rows — a deliberately broken scan,
// which the test's isolation check must catch.
void SetScansSkipStripesForTesting(bool on);

}  // namespace pond::txn
