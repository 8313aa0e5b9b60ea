// ShardedLruCache: a bounded key-value cache split into independent LRU sub-caches by key hash,
// each under its own mutex, so the workers of one CN rarely contend (Lotus §4.4, Fig. 9).
//
// Values are copied in and out: a caller never holds a reference into the cache, so an entry can
// be evicted or replaced at any time without dangling pointers. Capacity is split evenly over the
// sub-caches; each evicts its least recently used entry when full.
//
// Thread rules: every method is safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "pond/base/assert.h"

namespace pond::cache {

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t evictions = 0;
  uint64_t invalidations = 0;
  void Merge(const CacheStats& o) {
    hits += o.hits;
    misses += o.misses;
    inserts += o.inserts;
    evictions += o.evictions;
    invalidations += o.invalidations;
  }
};

template <typename K, typename V, typename Hash>
class ShardedLruCache {
 public:
  ShardedLruCache(size_t capacity, int sub_caches) : subs_(static_cast<size_t>(sub_caches)) {
    POND_CHECK(sub_caches > 0 && capacity >= static_cast<size_t>(sub_caches));
    for (auto& s : subs_) s.capacity = capacity / subs_.size();
  }

  std::optional<V> Get(const K& k) {
    Sub& s = SubOf(k);
    std::lock_guard lock(s.mu);
    auto it = s.index.find(k);
    if (it == s.index.end()) {
      s.stats.misses++;
      return std::nullopt;
    }
    s.order.splice(s.order.begin(), s.order, it->second);
    s.stats.hits++;
    return it->second->second;
  }

  void Put(const K& k, const V& v) {
    Sub& s = SubOf(k);
    std::lock_guard lock(s.mu);
    s.stats.inserts++;
    auto it = s.index.find(k);
    if (it != s.index.end()) {
      it->second->second = v;
      s.order.splice(s.order.begin(), s.order, it->second);
      return;
    }
    if (s.index.size() >= s.capacity) {
      s.index.erase(s.order.back().first);
      s.order.pop_back();
      s.stats.evictions++;
    }
    s.order.emplace_front(k, v);
    s.index.emplace(k, s.order.begin());
  }

  // Removes `k` if present; returns whether it was.
  bool Invalidate(const K& k) {
    Sub& s = SubOf(k);
    std::lock_guard lock(s.mu);
    auto it = s.index.find(k);
    if (it == s.index.end()) return false;
    s.order.erase(it->second);
    s.index.erase(it);
    s.stats.invalidations++;
    return true;
  }

  // Applies `fn(key, value&)` to each entry whose key satisfies `pred`, under the sub-cache lock;
  // used to drop whole shards when their lock management moves.
  template <typename Pred>
  size_t InvalidateIf(Pred pred) {
    size_t n = 0;
    for (auto& s : subs_) {
      std::lock_guard lock(s.mu);
      for (auto it = s.order.begin(); it != s.order.end();) {
        if (pred(it->first)) {
          s.index.erase(it->first);
          it = s.order.erase(it);
          s.stats.invalidations++;
          n++;
        } else {
          ++it;
        }
      }
    }
    return n;
  }

  size_t size() const {
    size_t n = 0;
    for (auto& s : subs_) {
      std::lock_guard lock(s.mu);
      n += s.index.size();
    }
    return n;
  }

  CacheStats stats() const {
    CacheStats total;
    for (auto& s : subs_) {
      std::lock_guard lock(s.mu);
      total.Merge(s.stats);
    }
    return total;
  }

 private:
  struct Sub {
    mutable std::mutex mu;
    size_t capacity = 0;
    std::list<std::pair<K, V>> order;  // most recent first
    std::unordered_map<K, typename std::list<std::pair<K, V>>::iterator, Hash> index;
    CacheStats stats;
  };
  Sub& SubOf(const K& k) { return subs_[Hash()(k) % subs_.size()]; }

  std::vector<Sub> subs_;
};

}  // namespace pond::cache
