// CommitLog: a worker's log area in the memory pool (Lotus §5.1 "Write Data & Log", §6), and the
// record format that recovery of a failed CN parses (cluster/log_recovery.h).
//
// Before a transaction's commit timestamp is fetched, its coordinator writes one log record
// naming every CVT cell it wrote (as INVISIBLE, stamped with the transaction's writer tag). MVCC
// keeps the old versions, so the record needs no before-images: recovery reads the record, looks
// at the cells it names, and finishes or rolls back the transaction. The area is a ring: a
// record that does not fit in the space left starts again at the beginning, so old records and
// pieces of records lie around it; a record is recognised by its magic, its writer and a
// checksum over all its bytes. Format: docs/formats.md "Commit log".
//
// Thread rules: one CommitLog per worker; the parsing functions are pure.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "pond/transport/gaddr.h"

namespace pond::store {

inline constexpr uint32_t kLogMagic = 0x474f4c50;       // "PLOG": lotus, +log-visible
inline constexpr uint32_t kUndoLogMagic = 0x444e5550;   // "PUND": ford's undo record
inline constexpr uint32_t kMotorLogMagic = 0x544f4d50;  // "PMOT": motor's (cells written committed)
inline constexpr uint8_t kLogItemInsert = 1;
inline constexpr uint8_t kLogItemDelete = 2;
inline constexpr uint8_t kLogItemWasAbsent = 4;  // undo: the key was absent before (ford)

struct LogRecordHeader {
  uint32_t magic;  // kLogMagic, kMotorLogMagic or kUndoLogMagic
  uint16_t count;  // LogItems that follow
  uint16_t cn;
  uint64_t txn_id;
  uint16_t worker;
  uint16_t words;     // undo records: the whole record's length in 8-byte words; else 0
  uint32_t checksum;  // SealLogRecord: over the whole record with this field zero
};
static_assert(sizeof(LogRecordHeader) == 24);
static_assert(offsetof(LogRecordHeader, checksum) == 20);

// A ford undo record is the same header (magic kUndoLogMagic, `words` set) and its LogItems
// (cell = 0), then for each item in turn its slot's version before the transaction (8 bytes) and
// its value then (the table's value bytes, padded to 8; zeros if kLogItemWasAbsent).
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

// Fills in the checksum of an encoded record (header first, then what follows it).
void SealLogRecord(std::span<std::byte> record);

// One sealed record found in a log area.
struct ParsedLogRecord {
  uint64_t offset = 0;  // in the area
  LogRecordHeader header{};
  std::vector<LogItem> items;
  std::vector<std::byte> tail;  // what follows the items (an undo record's old versions)
};

// Every sealed record of worker (cn, worker) in a copy of its log area, of every kind, in offset
// order.
std::vector<ParsedLogRecord> ParseLogArea(std::span<const std::byte> area, uint16_t cn,
                                          uint16_t worker);

// A worker's log: one ring per MN. A commit record is written to every MN the transaction
// writes a cell on, ahead of its cells in that MN's batch: an MN applies a batch in order (as an
// RC queue pair does), so wherever a cell of the transaction has landed, a copy of its record
// has landed before it, whatever the crash cut short. Recovery reads every ring.
class CommitLog {
 public:
  // areas[mn]: the ring on MN mn, `bytes` long.
  CommitLog(std::vector<GAddr> areas, uint64_t bytes)
      : areas_(std::move(areas)), bytes_(bytes), cursors_(areas_.size(), 0) {}

  // Where the next record of `record_bytes` goes on MN `mn`.
  GAddr Reserve(MnId mn, uint64_t record_bytes);
  const std::vector<GAddr>& areas() const { return areas_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<GAddr> areas_;
  uint64_t bytes_;
  std::vector<uint64_t> cursors_;
};

}  // namespace pond::store
