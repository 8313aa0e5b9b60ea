#include "pond/check/dependency_graph.h"

#include <algorithm>

namespace pond::check {

DependencyGraph::DependencyGraph(uint32_t txn_count, uint32_t node_count,
                                 std::vector<RawEdge> edges)
    : txn_count_(txn_count), node_count_(node_count), offsets_(uint64_t{node_count} + 1, 0) {
  POND_CHECK(txn_count <= node_count && node_count <= kNodeCountMax);
  // Counting sort by source: two passes over the raw edges, no per-node allocation.
  for (const RawEdge& e : edges) offsets_[e.from + 1]++;
  for (uint32_t v = 0; v < node_count; v++) offsets_[v + 1] += offsets_[v];
  edges_.resize(edges.size());
  {
    std::vector<uint64_t> next(offsets_.begin(), offsets_.end() - 1);
    for (const RawEdge& e : edges) edges_[next[e.from]++] = e.packed;
  }
  edges = {};
  // The same pair is often linked twice (two keys, or a read and an append of one key);
  // duplicates only slow the searches down.
  uint64_t out = 0;
  for (uint32_t v = 0; v < node_count; v++) {
    uint64_t begin = offsets_[v], end = offsets_[v + 1];
    std::sort(edges_.begin() + begin, edges_.begin() + end);
    uint64_t start = out;
    offsets_[v] = start;
    for (uint64_t i = begin; i < end; i++) {
      if (out == start || edges_[out - 1] != edges_[i]) edges_[out++] = edges_[i];
    }
  }
  offsets_[node_count] = out;
  edges_.resize(out);
  edges_.shrink_to_fit();
}

}  // namespace pond::check
