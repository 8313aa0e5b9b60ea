// NodeSet: a set of node ids (CNs or MNs) below kNodeSetBits, as four 64-bit words. It replaces
// the single `uint64_t` masks that capped a cluster at 64 nodes: the MNs a Flush found
// unreachable, the MNs a placement holds down, the CNs a transaction asked for locks.
//
// It is a value (32 bytes, trivially copyable) with the operations those masks were used for —
// test, set, union, intersection, difference, emptiness, and a walk over its members in
// increasing order — each a few word operations with no branch per bit, so a hot path that used
// a mask pays about four times a mask's word operations, and nothing that allocates.
// `~` complements all kNodeSetBits bits; callers that need "the others" intersect with a set of
// the nodes that exist, or use `Without`.
//
// AtomicNodeSet is the same set for one writer thread and reader threads (a CN process's
// membership thread changes which MNs are down while its workers read): each word is a relaxed
// atomic, so a read is never torn within a word, and a snapshot of the four is not one instant —
// which is what the masks gave too (a change needs no order with anything else; see
// store::Placement).
//
// Thread rules: NodeSet as any value; AtomicNodeSet: one writer at a time, any readers.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "pond/base/assert.h"

namespace pond {

inline constexpr size_t kNodeSetBits = 256;

// Whether 64-bit mask `mask` (of the membership machine, which knows at most 64 nodes: a Flush's
// unreachable MNs, the placement's down MNs) has node `id`; ids from 64 up never are in one.
constexpr bool MaskHas(uint64_t mask, size_t id) { return id < 64 && ((mask >> id) & 1) != 0; }

class NodeSet {
 public:
  static constexpr size_t kWords = kNodeSetBits / 64;

  constexpr NodeSet() = default;
  // The set of one node.
  static constexpr NodeSet Of(size_t id) {
    NodeSet s;
    s.Add(id);
    return s;
  }
  // The nodes 0 .. n-1.
  static constexpr NodeSet FirstN(size_t n) {
    POND_ASSERT(n <= kNodeSetBits);
    NodeSet s;
    for (size_t k = 0; k < kWords; k++) {
      const size_t lo = k * 64;
      if (n >= lo + 64) {
        s.w_[k] = ~uint64_t{0};
      } else if (n > lo) {
        s.w_[k] = (uint64_t{1} << (n - lo)) - 1;
      }
    }
    return s;
  }
  // A set of the nodes below 64 from a 64-bit mask (bit i: node i), for formats that hold 64.
  static constexpr NodeSet FromWord(uint64_t mask) {
    NodeSet s;
    s.w_[0] = mask;
    return s;
  }
  static constexpr NodeSet FromWords(const std::array<uint64_t, kWords>& words) {
    NodeSet s;
    s.w_ = words;
    return s;
  }

  constexpr bool Has(size_t id) const {
    POND_ASSERT(id < kNodeSetBits);
    return (w_[id / 64] >> (id % 64)) & 1;
  }
  constexpr void Add(size_t id) {
    POND_ASSERT(id < kNodeSetBits);
    w_[id / 64] |= uint64_t{1} << (id % 64);
  }
  constexpr void Remove(size_t id) {
    POND_ASSERT(id < kNodeSetBits);
    w_[id / 64] &= ~(uint64_t{1} << (id % 64));
  }
  constexpr bool Empty() const { return (w_[0] | w_[1] | w_[2] | w_[3]) == 0; }
  constexpr bool Any() const { return !Empty(); }
  constexpr size_t Count() const {
    size_t n = 0;
    for (uint64_t w : w_) n += static_cast<size_t>(std::popcount(w));
    return n;
  }
  // The smallest member, or kNodeSetBits if empty.
  constexpr size_t First() const { return NextFrom(0); }
  // The smallest member >= id, or kNodeSetBits if none.
  constexpr size_t NextFrom(size_t id) const {
    for (size_t k = id / 64; k < kWords; k++) {
      uint64_t w = w_[k];
      if (k == id / 64) w &= ~uint64_t{0} << (id % 64);
      if (w != 0) return k * 64 + static_cast<size_t>(std::countr_zero(w));
    }
    return kNodeSetBits;
  }
  // Bits 0..63 (nodes 0..63), for formats that hold 64 nodes; the caller checks the rest is
  // empty where it must be (FitsWord).
  constexpr uint64_t Word(size_t k = 0) const { return w_[k]; }
  constexpr bool FitsWord() const { return (w_[1] | w_[2] | w_[3]) == 0; }

  constexpr NodeSet& operator|=(const NodeSet& o) {
    for (size_t k = 0; k < kWords; k++) w_[k] |= o.w_[k];
    return *this;
  }
  constexpr NodeSet& operator&=(const NodeSet& o) {
    for (size_t k = 0; k < kWords; k++) w_[k] &= o.w_[k];
    return *this;
  }
  // This set without the members of `o` (a & ~b).
  constexpr NodeSet Without(const NodeSet& o) const {
    NodeSet s;
    for (size_t k = 0; k < kWords; k++) s.w_[k] = w_[k] & ~o.w_[k];
    return s;
  }
  friend constexpr NodeSet operator|(NodeSet a, const NodeSet& b) { return a |= b; }
  friend constexpr NodeSet operator&(NodeSet a, const NodeSet& b) { return a &= b; }
  friend constexpr NodeSet operator~(NodeSet a) {
    for (uint64_t& w : a.w_) w = ~w;
    return a;
  }
  friend constexpr bool operator==(const NodeSet&, const NodeSet&) = default;

  // Members in increasing order: `for (size_t mn : set) ...`.
  class Iterator {
   public:
    constexpr Iterator(const NodeSet* s, size_t at) : s_(s), at_(at) {}
    constexpr size_t operator*() const { return at_; }
    constexpr Iterator& operator++() {
      at_ = at_ + 1 >= kNodeSetBits ? kNodeSetBits : s_->NextFrom(at_ + 1);
      return *this;
    }
    constexpr bool operator==(const Iterator& o) const { return at_ == o.at_; }

   private:
    const NodeSet* s_;
    size_t at_;
  };
  constexpr Iterator begin() const { return Iterator(this, First()); }
  constexpr Iterator end() const { return Iterator(this, kNodeSetBits); }

 private:
  std::array<uint64_t, kWords> w_{};
};
static_assert(sizeof(NodeSet) == 32);

class AtomicNodeSet {
 public:
  AtomicNodeSet() = default;
  AtomicNodeSet(const AtomicNodeSet& o) { Store(o.Load()); }
  AtomicNodeSet& operator=(const AtomicNodeSet& o) {
    Store(o.Load());
    return *this;
  }

  NodeSet Load() const {
    std::array<uint64_t, NodeSet::kWords> words;
    for (size_t k = 0; k < NodeSet::kWords; k++) words[k] = w_[k].load(std::memory_order_relaxed);
    return NodeSet::FromWords(words);
  }
  // One member, reading one word.
  bool Has(size_t id) const {
    POND_ASSERT(id < kNodeSetBits);
    return (w_[id / 64].load(std::memory_order_relaxed) >> (id % 64)) & 1;
  }
  bool Empty() const {
    uint64_t any = 0;
    for (const auto& w : w_) any |= w.load(std::memory_order_relaxed);
    return any == 0;
  }
  void Add(size_t id) {
    POND_ASSERT(id < kNodeSetBits);
    w_[id / 64].fetch_or(uint64_t{1} << (id % 64), std::memory_order_relaxed);
  }
  void Remove(size_t id) {
    POND_ASSERT(id < kNodeSetBits);
    w_[id / 64].fetch_and(~(uint64_t{1} << (id % 64)), std::memory_order_relaxed);
  }

 private:
  void Store(const NodeSet& s) {
    for (size_t k = 0; k < NodeSet::kWords; k++) {
      w_[k].store(s.Word(k), std::memory_order_relaxed);
    }
  }
  std::array<std::atomic<uint64_t>, NodeSet::kWords> w_{};
};

}  // namespace pond
