// FlatMap: an open-addressing hash map for the checker's big indices (key interning, element to
// appender), where std::unordered_map's node per entry would cost several times the history.
//
// Linear probing over a power-of-two table kept at most half full; entries are never erased
// (the checker only ever adds). Not thread-safe: one map belongs to one checker run.
// Invariant: capacity is a power of two and size_ <= capacity / 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pond::check {

// Key must be equality-comparable and Hash must map it to a well-mixed uint64 (the low bits
// pick the slot).
template <typename Key, typename Value, typename Hash>
class FlatMap {
 public:
  FlatMap() { Rehash(16); }

  size_t size() const { return size_; }

  // The value stored under key, or nullptr.
  const Value* Find(const Key& key) const {
    size_t mask = slots_.size() - 1;
    for (size_t i = Hash{}(key)&mask;; i = (i + 1) & mask) {
      if (!used_[i]) return nullptr;
      if (slots_[i].first == key) return &slots_[i].second;
    }
  }
  Value* Find(const Key& key) {
    return const_cast<Value*>(static_cast<const FlatMap*>(this)->Find(key));
  }

  // Inserts (key, value) unless key is present. Returns the stored value and whether it was
  // inserted. The pointer stays valid until the next insertion.
  std::pair<Value*, bool> Insert(const Key& key, const Value& value) {
    if ((size_ + 1) * 2 > slots_.size()) Rehash(slots_.size() * 2);
    size_t mask = slots_.size() - 1;
    size_t i = Hash{}(key)&mask;
    for (; used_[i]; i = (i + 1) & mask) {
      if (slots_[i].first == key) return {&slots_[i].second, false};
    }
    used_[i] = 1;
    slots_[i] = {key, value};
    size_++;
    return {&slots_[i].second, true};
  }

  void Reserve(size_t n) {
    size_t cap = slots_.size();
    while (n * 2 > cap) cap *= 2;
    if (cap != slots_.size()) Rehash(cap);
  }

  // Calls f(key, value) for every entry, in no particular order.
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t i = 0; i < slots_.size(); i++) {
      if (used_[i]) f(slots_[i].first, slots_[i].second);
    }
  }

 private:
  void Rehash(size_t capacity) {
    std::vector<std::pair<Key, Value>> old_slots(capacity);
    std::vector<uint8_t> old_used(capacity, 0);
    old_slots.swap(slots_);
    old_used.swap(used_);
    size_ = 0;
    size_t mask = capacity - 1;
    for (size_t j = 0; j < old_slots.size(); j++) {
      if (!old_used[j]) continue;
      size_t i = Hash{}(old_slots[j].first) & mask;
      while (used_[i]) i = (i + 1) & mask;
      used_[i] = 1;
      slots_[i] = std::move(old_slots[j]);
      size_++;
    }
  }

  std::vector<std::pair<Key, Value>> slots_;
  std::vector<uint8_t> used_;
  size_t size_ = 0;
};

}  // namespace pond::check
