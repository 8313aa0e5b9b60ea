// SvTxn: the ford protocol on single-version slots (store/layout.h "Single-version slots").
//
// Execute: read-write items are locked by CAS on the slot's lock word and read in the same
// doorbell batch (after one bucket READ to find the slot when its address is not cached);
// read-only items are READ; a locked slot aborts the reader (FORD cannot read data being
// written). Commit: re-read the headers of read-only items and WRITE the undo log (old values)
// in one round trip — any change aborts; then WRITE the new slots to every replica, the
// primary's lock word released after them in the same batch. Read-only transactions validate
// too. No timestamps: versions are per-slot counters.
#pragma once

#include "pond/txn/txn_state.h"

namespace pond::txn {

class SvTxn final : public TxnState {
 public:
  SvTxn(TxnContext& w, TxnKind kind) : TxnState(w, kind) {}
  ~SvTxn() override;

  Task<Status> Execute() override;
  Task<Status> Commit() override;
  void Abort() override;

 private:
  // Posts the new slot of every item in `items` (its tombstone instead, if `tombstones`) to
  // `which` replicas; the primary's lock word stays taken in the image if this transaction holds
  // it (it goes free by its own WRITE after) and is not written at all if not. `images` keeps the
  // bytes until the flush.
  void PostSlotImages(const std::vector<size_t>& items, bool tombstones, Replicas which,
                      std::vector<std::vector<std::byte>>* images);
  // Before an abort after the claims: leaves each slot this transaction claimed as a tombstone,
  // and voids the undo record if one went out, both before any lock word goes free — recovery
  // that cannot read a word must be able to take every record it finds for a commit's
  // (docs/recovery.md "Lock words on MNs", item 4).
  Task<void> BeforeAbort(const std::vector<size_t>& writes);

  std::vector<std::byte> log_buf_;
  std::vector<GAddr> undo_at_;  // the undo record's copies, once posted
};

}  // namespace pond::txn
