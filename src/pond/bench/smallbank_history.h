// SmallBankHistory: how a SmallBank run becomes a history the isolation checker can judge.
//
// SmallBank overwrites balances, and the checker judges list-append histories, whose reads show
// every write before them in order. The bridge: while recording, each row carries beside its
// balance the tag of the transaction that last wrote it (tags are unique per row over the run; 0 is
// the loaded value), and every SmallBank write is a read-modify-write of a row the same transaction
// read. So each version (row, tag t) has one predecessor — the tag its writer read — and the
// version a read observes is the chain list(t) = list(prev(t)) + [t], list(0) = []. Written out
// that way, a write is an append of its tag and a read is a read of its chain: exactly a
// list-append history. A protocol that loses an update shows up as two writers with one predecessor
// (the checker's lost update, or incompatible orders); one that exposes an aborted write as a read
// of a failed transaction's tag (G1a); a read of a tag nobody wrote as a garbage read.
//
// Cost: a read's list is as long as its row's write chain, so the history grows with (writes
// per row)^2; it is meant for test-sized runs (SmallBankOptions::history_path).
#pragma once

#include <cstdint>
#include <vector>

#include "pond/check/recorder.h"
#include "pond/status.h"

namespace pond::bench {

struct SmallBankOp {
  uint64_t key;  // a row: table id << 48 | account
  uint64_t tag;  // read: the tag seen; write: the tag written
  bool write;
};

struct SmallBankRecordedTxn {
  int64_t process = 0;  // the client that issued it
  uint64_t invoke_ns = 0, complete_ns = 0;
  bool committed = false;
  std::vector<SmallBankOp> ops;  // in program order; a write follows a read of its row
  bool unknown = false;          // caught by a crash: recorded as info, committed or not
};

// The history key of a row.
inline uint64_t SmallBankHistoryKey(uint16_t table, uint64_t account) {
  return (uint64_t{table} << 48) | account;
}

// Records `txns` (any order) through `out` as a list-append history, as described above.
// InvalidArgument if a write has no read of its row before it in its transaction, or a tag is
// written twice (both are bugs of the recording, not of the protocol).
Status WriteSmallBankHistory(const std::vector<SmallBankRecordedTxn>& txns, check::Recorder& out);

}  // namespace pond::bench
