#include "pond/btree/tree_check.h"

#include <algorithm>
#include <string>

#include "pond/btree/node.h"

namespace pond::btree {

namespace {

std::string At(GAddr a) {
  return "node " + std::to_string(a.mn()) + ":" + std::to_string(a.offset());
}

// What a parent says of one of its children.
struct Expect {
  GAddr addr;
  uint64_t lower;
  uint64_t upper;
};

}  // namespace

Task<Result<TreeShape>> CheckTree(Endpoint& ep, const TreeSpace& space, bool splits_cut_short) {
  POND_CO_RETURN_IF_ERROR(Validate(space));
  SpaceLayout layout(space);
  uint64_t root_raw = 0;
  ep.Read(layout.RootWord(), &root_raw, 8);
  POND_CO_RETURN_IF_ERROR(co_await ep.Flush());
  if (root_raw == 0) co_return Corruption("no root");

  TreeShape shape;
  NodeBuffer n;
  // The level being walked, as its parent level listed it (the root level: just the root).
  std::vector<Expect> expected{{GAddr{root_raw}, 0, kKeyInfinity}};
  int level = -1;
  while (!expected.empty()) {
    std::vector<Expect> children;
    GAddr a = expected.front().addr;
    uint64_t prev_upper = 0, prev_lower = 0;
    bool prev_merging = false;  // the node before is a merging or merged leaf
    size_t i = 0;               // expected nodes met so far
    while (!a.null()) {
      ep.Read(a, &n, kNodeBytes);
      POND_CO_RETURN_IF_ERROR(co_await ep.Flush());
      if (!n.valid() || !n.whole()) co_return Corruption(At(a) + " is not a whole valid node");
      if (level < 0) {
        level = n.h.level;
        shape.levels = level + 1;
        shape.nodes_by_level.assign(static_cast<size_t>(shape.levels), 0);
      }
      if (n.h.level != level) co_return Corruption(At(a) + " is on the wrong level");
      // Merges (docs/btree.md "Merges"): a merged leaf covers nothing and may be in no parent; the
      // leaf after a merging or merged one may already begin where that one begins.
      const bool merged = n.h.state == kNodeMerged;
      // A merged leaf its parent still names may be off the chain already (a scan linked past
      // it): the next node took its range over, from that leaf's lower fence.
      bool skipped = false;
      uint64_t skipped_lower = 0;
      while (level == 0 && i < expected.size() && expected[i].addr != a) {
        NodeBuffer m;
        ep.Read(expected[i].addr, &m, kNodeBytes);
        POND_CO_RETURN_IF_ERROR(co_await ep.Flush());
        if (!m.valid() || !m.whole() || m.h.state != kNodeMerged) break;
        if (!skipped) skipped_lower = expected[i].lower;
        skipped = true;
        i++;
      }
      const bool takes_over =
          (prev_merging && n.h.lower == prev_lower) || (skipped && n.h.lower == skipped_lower);
      if (n.h.state > kNodeMerged || (n.h.state != kNodeLive && level != 0)) {
        co_return Corruption(At(a) + " has an unknown state");
      }
      if (i < expected.size() && expected[i].addr == a) {
        // Its parent's fences; with splits cut short, only the lower one: it may have split.
        if ((n.h.lower != expected[i].lower && !takes_over) ||
            (!merged &&
             (splits_cut_short ? n.h.upper > expected[i].upper : n.h.upper != expected[i].upper))) {
          co_return Corruption(At(a) + " has fences other than its parent gives it");
        }
        i++;
      } else if (!merged && (!splits_cut_short || i == 0 || n.h.upper > expected[i - 1].upper)) {
        co_return Corruption(At(a) + " is on its level's sibling chain but not in its parent");
      }
      if ((n.h.lower != prev_upper && !(prev_merging && n.h.lower == prev_lower)) ||
          (merged ? n.h.lower != n.h.upper : n.h.lower >= n.h.upper)) {
        co_return Corruption(At(a) + " does not continue its left sibling's range");
      }
      prev_upper = n.h.upper;
      prev_lower = n.h.lower;
      prev_merging = n.h.state != kNodeLive;
      if ((n.h.sibling == 0) != (n.h.upper == kKeyInfinity)) {
        co_return Corruption(At(a) + ": only the last node of a level may have no sibling");
      }
      shape.nodes_by_level[static_cast<size_t>(level)]++;
      if (level == 0) {
        std::vector<KeyValue> here;
        for (const LeafEntry& e : n.leaf.entries) {
          if (!e.whole()) co_return Corruption(At(a) + " has a torn entry");
          if (e.empty()) continue;
          if (n.h.state != kNodeLive) co_return Corruption(At(a) + " merges and holds a key");
          if (e.key() < n.h.lower || e.key() >= n.h.upper) {
            co_return Corruption(At(a) + " holds a key outside its fences");
          }
          here.emplace_back(e.key(), e.value());
        }
        std::sort(here.begin(), here.end());
        shape.entries.insert(shape.entries.end(), here.begin(), here.end());
      } else {
        const InternalNode& in = n.internal;
        uint64_t lo = n.h.lower;
        GAddr c{in.h.leftmost};
        for (int k = 0; k < in.h.count; k++) {
          if (in.entries[k].key <= lo || in.entries[k].key >= n.h.upper) {
            co_return Corruption(At(a) + " has keys unsorted or outside its fences");
          }
          children.push_back({c, lo, in.entries[k].key});
          lo = in.entries[k].key;
          c = GAddr{in.entries[k].child};
        }
        children.push_back({c, lo, n.h.upper});
      }
      a = GAddr{n.h.sibling};
    }
    if (i != expected.size()) co_return Corruption("a level has fewer nodes than its parents name");
    expected = std::move(children);
    level--;
  }
  for (size_t k = 1; k < shape.entries.size(); k++) {
    if (shape.entries[k - 1].first >= shape.entries[k].first) {
      co_return Corruption("keys repeat or go down across leaves");
    }
  }
  co_return shape;
}

}  // namespace pond::btree
