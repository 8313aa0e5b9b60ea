// GoneHolders: which CN incarnations' MN lock words are free to take.
//
// A lock word on an MN — a record's (protocols with locks on MNs: motor, ford, the first
// ablation steps) or a B+Tree node's — holds its holder's owner word (LockOwnerWord, layout.h),
// which names a CN incarnation. A CN that fails leaves the words it held; once its failure is
// recovered (its log recovery finished or undid every transaction that wrote), a word that names
// the dead incarnation guards nothing: whoever meets it reads past it, and whoever it refuses
// frees it (CAS word -> 0) and tries again (docs/recovery.md "Lock words on MNs").
//
// A word READ before its holder's recovery finished came beside memory as the holder left it:
// a version not yet rolled forward, a value not yet rolled back. So a reader judges a word by the
// marks as they stood when it posted the READ: it takes generation() before, and counts a holder
// gone only if the generation is unchanged when it looks (TxnState::HeldByOther).
//
// Thread rules: the membership machine raises the marks, any worker reads them; thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pond/store/layout.h"

namespace pond::store {

class GoneHolders {
 public:
  static constexpr size_t kMaxCns = 256;
  bool Gone(uint64_t word) const {
    const uint16_t cn = LockOwnerCn(word);
    return cn < kMaxCns && LockOwnerIncarnation(word) < below_[cn].load(std::memory_order_seq_cst);
  }
  // Every incarnation of `cn` below `incarnation` is gone (recovered, or older than one the
  // configuration let back in).
  void GoneBelow(uint16_t cn, uint16_t incarnation) {
    if (cn >= kMaxCns) return;
    uint16_t cur = below_[cn].load(std::memory_order_relaxed);
    if (cur >= incarnation) return;
    // The generation moves first: whoever sees the new mark (acquire) then sees it moved too.
    generation_.fetch_add(1, std::memory_order_seq_cst);
    while (cur < incarnation &&
           !below_[cn].compare_exchange_weak(cur, incarnation, std::memory_order_seq_cst)) {
    }
  }
  // Moves whenever a mark is raised (see the top of this file).
  uint64_t generation() const { return generation_.load(std::memory_order_seq_cst); }
  uint16_t below(uint16_t cn) const { return below_[cn].load(std::memory_order_acquire); }

 private:
  std::array<std::atomic<uint16_t>, kMaxCns> below_{};
  std::atomic<uint64_t> generation_{0};
};

}  // namespace pond::store
