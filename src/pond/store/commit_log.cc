#include "pond/store/commit_log.h"

#include <cstring>

#include "pond/base/assert.h"
#include "pond/base/hash.h"

namespace pond::store {

namespace {

constexpr uint64_t kChecksumSeed = 0x504c4f4753554d31ULL;

uint32_t Checksum(std::span<const std::byte> record) {
  // The checksum field reads as zero: hash the header with it cleared, then the rest.
  LogRecordHeader h;
  std::memcpy(&h, record.data(), sizeof(h));
  h.checksum = 0;
  uint64_t a = HashBytes(&h, sizeof(h), kChecksumSeed);
  uint64_t b = HashBytes(record.data() + sizeof(h), record.size() - sizeof(h), a);
  return static_cast<uint32_t>(b ^ (b >> 32));
}

}  // namespace

void SealLogRecord(std::span<std::byte> record) {
  POND_CHECK(record.size() >= sizeof(LogRecordHeader));
  uint32_t sum = Checksum(record);
  std::memcpy(record.data() + offsetof(LogRecordHeader, checksum), &sum, sizeof(sum));
}

std::vector<ParsedLogRecord> ParseLogArea(std::span<const std::byte> area, uint16_t cn,
                                          uint16_t worker) {
  std::vector<ParsedLogRecord> out;
  uint64_t off = 0;
  // Records start at multiples of 8 (Reserve rounds up), so look at each such offset; a sealed
  // record is skipped whole, anything else one word at a time.
  while (off + sizeof(LogRecordHeader) <= area.size()) {
    LogRecordHeader h;
    std::memcpy(&h, area.data() + off, sizeof(h));
    if ((h.magic != kLogMagic && h.magic != kUndoLogMagic && h.magic != kMotorLogMagic) ||
        h.cn != cn || h.worker != worker || h.count == 0) {
      off += 8;
      continue;
    }
    const uint64_t items_end = sizeof(h) + uint64_t{h.count} * sizeof(LogItem);
    // An undo record's length depends on the tables' value sizes, so it says it.
    const uint64_t bytes = h.magic == kUndoLogMagic ? uint64_t{h.words} * 8 : items_end;
    if (bytes < items_end || off + bytes > area.size() ||
        Checksum(area.subspan(off, bytes)) != h.checksum) {
      off += 8;
      continue;
    }
    ParsedLogRecord r;
    r.offset = off;
    r.header = h;
    r.items.resize(h.count);
    std::memcpy(r.items.data(), area.data() + off + sizeof(h), h.count * sizeof(LogItem));
    r.tail.assign(area.begin() + static_cast<ptrdiff_t>(off + items_end),
                  area.begin() + static_cast<ptrdiff_t>(off + bytes));
    out.push_back(std::move(r));
    off += (bytes + 7) & ~uint64_t{7};
  }
  return out;
}

GAddr CommitLog::Reserve(MnId mn, uint64_t record_bytes) {
  POND_CHECK_MSG(record_bytes <= bytes_, "commit log record larger than the log area");
  POND_CHECK(mn < areas_.size());
  record_bytes = (record_bytes + 7) & ~uint64_t{7};
  uint64_t& cursor = cursors_[mn];
  if (cursor + record_bytes > bytes_) cursor = 0;
  GAddr at = areas_[mn] + cursor;
  cursor += record_bytes;
  return at;
}

}  // namespace pond::store
