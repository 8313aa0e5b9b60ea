// Where an ordered table's B+Tree lives: its TreeSpace, from the table's catalog entry — one
// range after the table's index area on every MN, with as many copies as its records have.
#pragma once

#include "pond/btree/tree_space.h"
#include "pond/store/catalog.h"

namespace pond::store {

inline btree::TreeSpace TreeSpaceOf(const TableInfo& t) {
  btree::TreeSpace s;
  for (MnId mn = 0; mn < t.index_offset.size(); mn++) {
    const uint64_t begin = t.TreeOffset(mn);
    s.ranges.push_back({.mn = mn, .begin = begin, .end = begin + t.tree_bytes});
  }
  // Small chunks: every worker that inserts holds one partly used.
  s.chunk_bytes = 16 << 10;
  // As many copies as the table's records have (docs/btree.md "Replicated nodes").
  s.replication = t.replication;
  return s;
}

}  // namespace pond::store
