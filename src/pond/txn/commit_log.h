// CommitLog: a worker's log area in the memory pool (Lotus §5.1 "Write Data & Log", §6).
//
// Before a transaction's commit timestamp is fetched, its coordinator writes one log record
// naming every CVT cell it wrote (as INVISIBLE). MVCC keeps the old versions, so the record needs
// no before-images: recovery (of a failed CN) reads the record, finds which cells already carry a
// commit timestamp, and finishes or rolls back the transaction. The area is a ring: a record that
// does not fit in the space left starts again at the beginning. Format: docs/formats.md
// "Commit log".
//
// Thread rules: one CommitLog per worker.
#pragma once

#include <cstdint>
#include <vector>

#include "pond/transport/gaddr.h"

namespace pond::txn {

inline constexpr uint32_t kLogMagic = 0x474f4c50;      // "PLOG"
inline constexpr uint32_t kUndoLogMagic = 0x444e5550;  // "PUND": ford's undo record
inline constexpr uint8_t kLogItemInsert = 1;
inline constexpr uint8_t kLogItemDelete = 2;

struct LogRecordHeader {
  uint32_t magic;  // kLogMagic
  uint16_t count;  // LogItems that follow
  uint16_t cn;
  uint64_t txn_id;
  uint16_t worker;
  uint16_t reserved[3];
};
static_assert(sizeof(LogRecordHeader) == 24);

// A ford undo record is the same header (magic kUndoLogMagic) and LogItems (cell = 0), each
// LogItem followed by the slot's old value (the table's value bytes, padded to 8).
struct LogItem {
  uint64_t key;
  uint64_t bucket;  // where the CVT is: bucket and slot (same on every replica)
  uint16_t table;
  uint16_t slot;
  uint8_t cell;   // the version cell written
  uint8_t flags;  // kLogItemInsert, kLogItemDelete
  uint16_t reserved;
};
static_assert(sizeof(LogItem) == 24);

class CommitLog {
 public:
  CommitLog(GAddr area, uint64_t bytes) : area_(area), bytes_(bytes) {}

  // Where the next record of `record_bytes` goes.
  GAddr Reserve(uint64_t record_bytes);
  uint64_t bytes() const { return bytes_; }

 private:
  GAddr area_;
  uint64_t bytes_;
  uint64_t cursor_ = 0;
};

}  // namespace pond::txn
