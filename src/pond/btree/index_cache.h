// IndexCache: a worker's copies of internal tree nodes (level >= 1), by address, so that a
// descent costs one READ (of the leaf) once the upper levels are warm (Sherman's index cache,
// kept simpler: every internal node, first in first out).
//
// A copy may be stale: its node may have split since. That is never wrong in a B-link tree
// without merges — a stale copy's child still starts at or left of the key, and the reader
// moves right along siblings — only slower; so a reader that had to move right, or that found a
// node whose fences do not hold the key, drops the copy that sent it there (Drop), and the next
// descent reads that node afresh.
//
// Thread rules: one cache per worker, used only from that worker's coroutines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>

#include "pond/btree/node.h"

namespace pond::btree {

class IndexCache {
 public:
  explicit IndexCache(size_t nodes_max) : nodes_max_(nodes_max) {}

  const InternalNode* Find(GAddr a) {
    auto it = nodes_.find(a.raw);
    if (it == nodes_.end()) {
      misses_++;
      return nullptr;
    }
    hits_++;
    return &it->second;
  }
  void Put(GAddr a, const InternalNode& n) {
    if (nodes_max_ == 0) return;
    auto [it, fresh] = nodes_.insert_or_assign(a.raw, n);
    if (!fresh) return;
    order_.push_back(a.raw);
    // The FIFO may list addresses dropped since; skip those while evicting.
    while (nodes_.size() > nodes_max_) {
      nodes_.erase(order_.front());
      order_.pop_front();
    }
    // Drops leave addresses behind in the FIFO; keep it within a constant of the cache's size.
    if (order_.size() > 2 * nodes_max_ + 16) {
      std::deque<uint64_t> live;
      for (uint64_t raw : order_) {
        if (nodes_.contains(raw)) live.push_back(raw);
      }
      order_.swap(live);
    }
  }
  void Drop(GAddr a) {
    if (nodes_.erase(a.raw) != 0) drops_++;
  }

  size_t size() const { return nodes_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint64_t drops() const { return drops_; }

 private:
  size_t nodes_max_;
  std::unordered_map<uint64_t, InternalNode> nodes_;
  std::deque<uint64_t> order_;
  uint64_t hits_ = 0, misses_ = 0, drops_ = 0;
};

}  // namespace pond::btree
