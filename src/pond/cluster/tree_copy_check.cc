// The B+Tree half of the replica check (replica_check.h): every copy of a replicated tree's
// ranges agrees on every node a reader can reach, and no tree lock word is left held.
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "pond/btree/node.h"
#include "pond/btree/tree_space.h"
#include "pond/cluster/replica_check.h"
#include "pond/store/tree_space_of.h"

namespace pond::cluster {

namespace {

// One tree's copies, read from the MNs' memory.
class TreeCopies {
 public:
  TreeCopies(const store::TableInfo& t, const store::Placement& placement,
             const std::function<const std::byte*(MnId)>& region)
      : t_(t), layout_(store::TreeSpaceOf(t)), placement_(placement), region_(region) {}

  // The copies of MN `mn`'s range that a reader may use (readable MNs), the first one first.
  std::vector<int> ReadableCopies(MnId mn) const {
    std::vector<int> ks;
    for (int k = 0; k < layout_.replication(); k++) {
      if (placement_.Readable(MnOf(mn, k))) ks.push_back(k);
    }
    return ks;
  }
  const std::byte* At(GAddr a, int k) const {
    const GAddr c = layout_.Copy(a, k);
    return region_(c.mn()) + c.offset();
  }
  uint64_t Word(GAddr a, int k) const {
    uint64_t w;
    std::memcpy(&w, At(a, k), 8);
    return w;
  }
  const btree::SpaceLayout& layout() const { return layout_; }
  const store::TableInfo& table() const { return t_; }

 private:
  MnId MnOf(MnId mn, int k) const {
    return static_cast<MnId>((mn + static_cast<size_t>(k)) % layout_.num_ranges());
  }
  const store::TableInfo& t_;
  btree::SpaceLayout layout_;
  const store::Placement& placement_;
  const std::function<const std::byte*(MnId)>& region_;
};

// Where copies k0 and k of node `a` first differ, and its lock word on every copy: what one
// needs to tell a half write from a lost one.
std::string Difference(const TreeCopies& tc, GAddr a, int k0, int k) {
  const std::byte* x = tc.At(a, k0);
  const std::byte* y = tc.At(a, k);
  uint32_t at = 0;
  while (at < btree::kNodeBytes && x[at] == y[at]) at++;
  std::string s = "copy " + std::to_string(k) + " against copy " + std::to_string(k0) +
                  ", from byte " + std::to_string(at) + " of line " +
                  std::to_string(tc.layout().LineOf(a)) + "; its lock word on each copy:";
  char hex[24];
  for (int c = 0; c < tc.layout().replication(); c++) {
    std::snprintf(hex, sizeof hex, " %llx",
                  static_cast<unsigned long long>(tc.Word(tc.layout().LockFor(a), c)));
    s += hex;
  }
  return s;
}

void CheckOneTree(const TreeCopies& tc, const std::function<bool(uint64_t)>& holder_gone,
                  ReplicaReport& r) {
  const btree::SpaceLayout& layout = tc.layout();
  const std::string name = "table " + tc.table().name + "'s B+Tree";
  // Lines a dead holder's word names (range, line): it may have written them to some copies
  // only, and whoever takes the word next makes them one again (docs/btree.md).
  std::set<std::pair<size_t, uint32_t>> excused;
  for (size_t rg = 0; rg < layout.num_ranges(); rg++) {
    const MnId mn = layout.space().ranges[rg].mn;
    const std::vector<int> ks = tc.ReadableCopies(mn);
    if (ks.empty()) {
      AddProblem(r, &r.lost_groups,
                 name + ": every copy of MN " + std::to_string(mn) + "'s range is down");
      continue;
    }
    auto look = [&](GAddr word) {
      for (int k : ks) {
        const uint64_t w = tc.Word(word, k);
        if (w == 0) continue;
        if (holder_gone != nullptr && holder_gone(w)) {
          excused.insert({rg, static_cast<uint32_t>(w >> 8) & ((1u << btree::kLineBits) - 1)});
        } else {
          AddProblem(r, &r.locked,
                     name + ": a lock word of MN " + std::to_string(mn) +
                         "'s range is held (copy " + std::to_string(k) + ")");
        }
      }
    };
    look(layout.HeaderWord(rg));
    for (uint32_t i = 0; i < layout.space().lock_count; i++) look(layout.LockBase(rg) + i * 8);
    if (excused.count({rg, 0}) != 0) continue;
    for (int k : ks) {
      if (std::memcmp(tc.At(layout.Cursor(rg), ks[0]), tc.At(layout.Cursor(rg), k), 16) != 0) {
        AddProblem(r, &r.disagreements,
                   name + ": the copies of MN " + std::to_string(mn) + "'s range header disagree");
      }
    }
  }
  // Every node a reader can reach: each level from its leftmost node along the sibling chain.
  const std::vector<int> root_ks = tc.ReadableCopies(layout.space().ranges[0].mn);
  if (root_ks.empty()) return;
  GAddr leftmost{tc.Word(layout.RootWord(), root_ks[0])};
  size_t visited = 0;
  const size_t visited_max = layout.num_ranges() * (layout.span() / btree::kNodeBytes + 1);
  while (!leftmost.null()) {
    GAddr next_level = GAddr::Null();
    for (GAddr a = leftmost; !a.null();) {
      if (++visited > visited_max) {
        AddProblem(r, &r.disagreements, name + ": a sibling chain loops");
        return;
      }
      const size_t rg = layout.Range(a.mn());
      const std::vector<int> ks = tc.ReadableCopies(a.mn());
      if (ks.empty()) break;
      btree::NodeBuffer n;
      std::memcpy(&n, tc.At(a, ks[0]), btree::kNodeBytes);
      r.tree_nodes++;
      if (excused.count({rg, layout.LineOf(a)}) == 0) {
        for (int k : ks) {
          if (std::memcmp(tc.At(a, ks[0]), tc.At(a, k), btree::kNodeBytes) != 0) {
            AddProblem(r, &r.disagreements,
                       name + ": the copies of node " + std::to_string(a.raw) + " disagree (" +
                           Difference(tc, a, ks[0], k) + ")");
          }
        }
      }
      if (!n.valid()) {
        AddProblem(r, &r.disagreements, name + ": a reachable node is not valid");
        return;
      }
      if (a == leftmost && n.h.level > 0) next_level = GAddr{n.h.leftmost};
      a = GAddr{n.h.sibling};
    }
    leftmost = next_level;
  }
}

}  // namespace

void CheckTreeCopies(const store::Catalog& catalog, const store::Placement& placement,
                     const std::function<const std::byte*(MnId)>& region,
                     const std::function<bool(uint64_t)>& holder_gone, ReplicaReport& r) {
  for (const store::TableInfo& t : catalog.tables()) {
    if (!t.ordered) continue;
    CheckOneTree(TreeCopies(t, placement, region), holder_gone, r);
  }
}

}  // namespace pond::cluster
