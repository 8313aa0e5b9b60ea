// Graph searches for the checker: strongly connected components (Tarjan) and shortest paths
// inside one component (0-1 breadth-first search), over any view of dependency_graph.h.
//
// Both are iterative: a history of a million transactions makes recursion depth a million.
// Both run in time linear in the nodes and edges they touch. Single-threaded; a SearchScratch
// belongs to one caller and is reused so that many small searches do not each pay O(nodes).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "pond/check/dependency_graph.h"

namespace pond::check {

struct Components {
  std::vector<uint32_t> comp;  // per node: component id, kNoNode if the node is not active
  std::vector<uint32_t> size;  // per component: node count
  bool Nontrivial(uint32_t x) const { return comp[x] != kNoNode && size[comp[x]] > 1; }
  bool AnyNontrivial() const {
    for (uint32_t s : size) {
      if (s > 1) return true;
    }
    return false;
  }
};

// Tarjan's algorithm. Self edges never occur (DependencyGraph's invariant), so a component of
// one node is acyclic.
template <typename View>
Components StronglyConnected(const View& v) {
  const uint32_t n = v.NodeCount();
  Components out;
  out.comp.assign(n, kNoNode);
  std::vector<uint32_t> index(n, kNoNode), low(n, 0);
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<uint32_t> stack;
  struct Frame {
    uint32_t node;
    uint64_t next;
  };
  std::vector<Frame> frames;
  uint32_t counter = 0;
  auto visit = [&](uint32_t x) {
    index[x] = low[x] = counter++;
    stack.push_back(x);
    on_stack[x] = 1;
    frames.push_back({x, v.Begin(x)});
  };
  for (uint32_t root = 0; root < n; root++) {
    if (index[root] != kNoNode || !v.Active(root)) continue;
    visit(root);
    while (!frames.empty()) {
      Frame& f = frames.back();
      uint32_t x = f.node;
      if (f.next < v.End(x)) {
        uint32_t t = v.Target(x, f.next++);
        if (t == kNoNode) continue;
        if (index[t] == kNoNode) {
          visit(t);  // invalidates f
        } else if (on_stack[t] && index[t] < low[x]) {
          low[x] = index[t];
        }
        continue;
      }
      frames.pop_back();
      if (low[x] == index[x]) {
        uint32_t id = static_cast<uint32_t>(out.size.size());
        uint32_t count = 0;
        uint32_t y;
        do {
          y = stack.back();
          stack.pop_back();
          on_stack[y] = 0;
          out.comp[y] = id;
          count++;
        } while (y != x);
        out.size.push_back(count);
      }
      if (!frames.empty()) {
        uint32_t parent = frames.back().node;
        if (low[x] < low[parent]) low[parent] = low[x];
      }
    }
  }
  return out;
}

struct PathStep {
  uint32_t node;  // the node this step enters
  uint64_t edge;  // the edge index (View::Begin/End space) taken to enter it
};

// Reusable per-node state for ShortestPath; sized on first use.
class SearchScratch {
 public:
  void Reset(uint32_t n) {
    if (stamp_.size() != n) {
      stamp_.assign(n, 0);
      dist_.assign(n, 0);
      parent_.assign(n, 0);
      parent_edge_.assign(n, 0);
      epoch_ = 0;
    }
    epoch_++;
  }
  bool Seen(uint32_t x) const { return stamp_[x] == epoch_; }

 private:
  template <typename View>
  friend std::vector<PathStep> ShortestPath(const View&, const Components&, uint32_t, uint32_t,
                                            uint32_t, SearchScratch&);
  std::vector<uint64_t> stamp_;
  std::vector<uint32_t> dist_;
  std::vector<uint32_t> parent_;
  std::vector<uint64_t> parent_edge_;
  uint64_t epoch_ = 0;
};

// The path of least View::Weight from `from` to `to` (from == to asks for a cycle) through
// nodes of component c only. Returns the steps after `from`, ending with `to`; empty if there
// is none. Both ends must be in c.
template <typename View>
std::vector<PathStep> ShortestPath(const View& v, const Components& comps, uint32_t c,
                                   uint32_t from, uint32_t to, SearchScratch& s) {
  s.Reset(v.NodeCount());
  constexpr uint32_t kInf = ~0u;
  std::deque<uint32_t> queue;
  s.stamp_[from] = s.epoch_;
  s.dist_[from] = 0;
  queue.push_back(from);
  uint32_t best = kInf, best_parent = kNoNode;
  uint64_t best_edge = 0;
  while (!queue.empty()) {
    uint32_t x = queue.front();
    queue.pop_front();
    uint32_t dx = s.dist_[x];
    if (dx >= best) break;  // weights are 0 or 1, so nothing later can beat best
    for (uint64_t i = v.Begin(x); i < v.End(x); i++) {
      uint32_t t = v.Target(x, i);
      if (t == kNoNode || comps.comp[t] != c) continue;
      uint32_t w = v.Weight(t);
      uint32_t d = dx + w;
      // The goal is never expanded: reaching it closes the path (or the cycle).
      if (t == to) {
        if (d < best) best = d, best_parent = x, best_edge = i;
        continue;
      }
      if (s.stamp_[t] == s.epoch_ && s.dist_[t] <= d) continue;
      s.stamp_[t] = s.epoch_;
      s.dist_[t] = d;
      s.parent_[t] = x;
      s.parent_edge_[t] = i;
      if (w == 0) {
        queue.push_front(t);
      } else {
        queue.push_back(t);
      }
    }
  }
  std::vector<PathStep> path;
  if (best == kInf) return path;
  path.push_back({to, best_edge});
  for (uint32_t x = best_parent; x != from; x = s.parent_[x]) {
    path.push_back({x, s.parent_edge_[x]});
  }
  return {path.rbegin(), path.rend()};
}

}  // namespace pond::check
