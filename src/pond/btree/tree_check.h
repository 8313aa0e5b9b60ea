// CheckTree: walks a whole B+Tree and checks its structure — for tests and for tools that want
// to know a tree is sound after a run. Call it when no one writes the tree (it reads each node
// once and takes no locks).
//
// Checked: every node is valid and whole; each level, walked along sibling pointers from its
// leftmost node, has fences that tile [0, infinity) in order; an internal node's keys are
// sorted, inside its fences, and its children are exactly the next level's nodes in order, each
// with the fences its parent gives it; leaves hold keys inside their fences, none twice.
//
// A split whose CN died before its separator reached the parent leaves a node on the sibling
// chain that no parent names (docs/btree.md "Lock words that name their holder"): a valid
// B-link tree, which `splits_cut_short` accepts — each run of chain nodes then covers exactly
// the range the parent gives its first node. Without it, every split must have finished.
//
// Thread rules: one coroutine on the worker that owns `ep`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pond/btree/btree.h"
#include "pond/btree/tree_space.h"
#include "pond/status.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::btree {

struct TreeShape {
  int levels = 0;                        // leaves are level 0, so the root is at levels - 1
  std::vector<uint64_t> nodes_by_level;  // [0] = leaves
  std::vector<KeyValue> entries;         // every leaf entry, ascending by key
};

// The tree's shape, or Corruption naming the first broken rule.
Task<Result<TreeShape>> CheckTree(Endpoint& ep, const TreeSpace& space,
                                  bool splits_cut_short = false);

}  // namespace pond::btree
