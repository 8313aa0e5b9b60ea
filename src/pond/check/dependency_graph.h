// DependencyGraph: Adya's direct serialization graph over the transactions of one history, in
// compressed sparse rows (CSR), plus the filtered "views" the cycle search walks.
//
// Nodes [0, txn_count) are transactions (History::txns() positions); nodes above are real-time
// barriers, which stand for "every transaction completed before this point" so that the
// real-time order costs O(n) edges instead of O(n^2) (see docs/checker.md). An edge is 4 bytes:
// target << 2 | kind. Built once by the checker, then read-only; not thread-safe to build.
// Invariants: no self edges; targets < node_count; at most kNodeCountMax nodes.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "pond/base/assert.h"

namespace pond::check {

enum class EdgeKind : uint8_t {
  kWw = 0,        // write-write: the source's append directly precedes the target's
  kWr = 1,        // write-read: the target read a state the source's append produced
  kRw = 2,        // read-write (anti-dependency): the target overwrote the state the source read
  kRealtime = 3,  // the source completed before the target was invoked (strict models only)
};

inline constexpr uint32_t kNodeCountMax = 1u << 30;
inline constexpr uint32_t kNoNode = ~0u;

class DependencyGraph {
 public:
  // Builds the CSR from (source, target, kind) triples; consumes them.
  struct RawEdge {
    uint32_t from;
    uint32_t packed;  // target << 2 | kind
  };
  DependencyGraph(uint32_t txn_count, uint32_t node_count, std::vector<RawEdge> edges);
  DependencyGraph() = default;

  static RawEdge Edge(uint32_t from, uint32_t to, EdgeKind kind) {
    POND_ASSERT(from != to && to < kNodeCountMax);
    return {from, to << 2 | static_cast<uint32_t>(kind)};
  }
  static uint32_t Target(uint32_t packed) { return packed >> 2; }
  static EdgeKind Kind(uint32_t packed) { return static_cast<EdgeKind>(packed & 3); }

  uint32_t txn_count() const { return txn_count_; }
  uint32_t node_count() const { return node_count_; }
  uint64_t edge_count() const { return edges_.size(); }
  bool IsTxn(uint32_t node) const { return node < txn_count_; }
  uint64_t Begin(uint32_t node) const { return offsets_[node]; }
  uint64_t End(uint32_t node) const { return offsets_[node + 1]; }
  uint32_t EdgeAt(uint64_t i) const { return edges_[i]; }

 private:
  uint32_t txn_count_ = 0;
  uint32_t node_count_ = 0;
  std::vector<uint64_t> offsets_;  // node_count + 1
  std::vector<uint32_t> edges_;    // sorted and de-duplicated per node
};

// A view of the graph for the search algorithms: which edge kinds count, which nodes are in
// play, and whether each node is split in two layers (see LayeredView).
//
// The search algorithms (graph_search.h) take any type with this interface:
//   uint32_t NodeCount() const; bool Active(uint32_t x) const;
//   uint64_t Begin(uint32_t x) const; uint64_t End(uint32_t x) const;
//   uint32_t Target(uint32_t x, uint64_t i) const;  // kNoNode: edge not in the view
//   EdgeKind Kind(uint64_t i) const; uint32_t Weight(uint32_t target) const;  // 0 or 1

// The graph restricted to the edge kinds in kind_mask (bit 1 << kind) and to nodes with
// active[x] != 0 (all nodes if active is null).
class KindView {
 public:
  KindView(const DependencyGraph& g, uint32_t kind_mask, const std::vector<uint8_t>* active)
      : g_(g), mask_(kind_mask), active_(active) {}
  uint32_t NodeCount() const { return g_.node_count(); }
  bool Active(uint32_t x) const { return active_ == nullptr || (*active_)[x]; }
  uint64_t Begin(uint32_t x) const { return g_.Begin(x); }
  uint64_t End(uint32_t x) const { return g_.End(x); }
  uint32_t Target(uint32_t, uint64_t i) const {
    uint32_t e = g_.EdgeAt(i);
    if (!(mask_ >> static_cast<uint32_t>(DependencyGraph::Kind(e)) & 1)) return kNoNode;
    uint32_t t = DependencyGraph::Target(e);
    return Active(t) ? t : kNoNode;
  }
  EdgeKind Kind(uint64_t i) const { return DependencyGraph::Kind(g_.EdgeAt(i)); }
  // Walking into a barrier is free, so a path's length counts transactions only.
  uint32_t Weight(uint32_t target) const { return g_.IsTxn(target) ? 1 : 0; }
  uint32_t Txn(uint32_t x) const { return x; }

 private:
  const DependencyGraph& g_;
  uint32_t mask_;
  const std::vector<uint8_t>* active_;
};

// The snapshot-isolation view: node 2v is "v reached by a ww/wr edge (or a start)", node 2v+1
// is "v reached by an rw edge". ww/wr edges lead to layer 0; an rw edge leads from layer 0 to
// layer 1 only. A cycle here is exactly a cycle of the graph in which no two rw edges are
// adjacent (wrapping around), which is what snapshot isolation forbids (G-single,
// G-nonadjacent, and the rw-free G0/G1c). Real-time edges are not in this view.
class LayeredView {
 public:
  // Only transactions with active[v] != 0 are in play; kind_mask as in KindView (rw and/or
  // ww/wr; real-time is ignored).
  LayeredView(const DependencyGraph& g, uint32_t kind_mask, const std::vector<uint8_t>* active)
      : g_(g), mask_(kind_mask), active_(active) {}
  uint32_t NodeCount() const { return 2 * g_.txn_count(); }
  bool Active(uint32_t x) const { return (*active_)[x >> 1]; }
  uint64_t Begin(uint32_t x) const { return g_.Begin(x >> 1); }
  uint64_t End(uint32_t x) const { return g_.End(x >> 1); }
  uint32_t Target(uint32_t x, uint64_t i) const {
    uint32_t e = g_.EdgeAt(i);
    EdgeKind k = DependencyGraph::Kind(e);
    if (!(mask_ >> static_cast<uint32_t>(k) & 1) || k == EdgeKind::kRealtime) return kNoNode;
    uint32_t t = DependencyGraph::Target(e);
    if (!(*active_)[t]) return kNoNode;
    if (k != EdgeKind::kRw) return 2 * t;
    return (x & 1) ? kNoNode : 2 * t + 1;
  }
  EdgeKind Kind(uint64_t i) const { return DependencyGraph::Kind(g_.EdgeAt(i)); }
  uint32_t Weight(uint32_t) const { return 1; }
  uint32_t Txn(uint32_t x) const { return x >> 1; }

 private:
  const DependencyGraph& g_;
  uint32_t mask_;
  const std::vector<uint8_t>* active_;
};

inline constexpr uint32_t KindBit(EdgeKind k) { return 1u << static_cast<uint32_t>(k); }
inline constexpr uint32_t kWwMask = KindBit(EdgeKind::kWw);
inline constexpr uint32_t kWwWrMask = kWwMask | KindBit(EdgeKind::kWr);
inline constexpr uint32_t kDataMask = kWwWrMask | KindBit(EdgeKind::kRw);
inline constexpr uint32_t kAllMask = kDataMask | KindBit(EdgeKind::kRealtime);

}  // namespace pond::check
