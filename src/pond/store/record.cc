#include "pond/store/record.h"

#include <cstring>

#include "pond/base/assert.h"

namespace pond::store {

void EncodeRecord(std::span<const std::byte> value, uint8_t cv, std::span<std::byte> out) {
  POND_ASSERT(out.size() == RecordStride(static_cast<uint32_t>(value.size())));
  size_t copied = 0;
  for (size_t line = 0; line * kLineBytes < out.size(); line++) {
    std::byte* l = out.data() + line * kLineBytes;
    l[0] = static_cast<std::byte>(cv);
    size_t n = std::min<size_t>(kLinePayload, value.size() - copied);
    if (n > 0) std::memcpy(l + 1, value.data() + copied, n);
    if (n < kLinePayload) std::memset(l + 1 + n, 0, kLinePayload - n);
    copied += n;
  }
}

Status DecodeRecord(std::span<const std::byte> record, uint8_t cv, std::span<std::byte> value) {
  POND_ASSERT(record.size() == RecordStride(static_cast<uint32_t>(value.size())));
  size_t copied = 0;
  for (size_t line = 0; line * kLineBytes < record.size(); line++) {
    const std::byte* l = record.data() + line * kLineBytes;
    if (static_cast<uint8_t>(l[0]) != cv) {
      return TornRead("record line " + std::to_string(line) + " has cv " +
                      std::to_string(static_cast<unsigned>(l[0])) + ", cell says " +
                      std::to_string(cv));
    }
    size_t n = std::min<size_t>(kLinePayload, value.size() - copied);
    if (n > 0) std::memcpy(value.data() + copied, l + 1, n);
    copied += n;
  }
  return Status::Ok();
}

CvtCell EncodeCell(const Cell& c) {
  CvtCell raw{};
  raw.head_cv = c.cv;
  raw.tail_cv = c.cv;
  raw.valid = c.valid ? (c.tombstone ? kCellTombstone : kCellVersion) : kCellEmpty;
  raw.commit_ts = c.commit_ts;
  POND_ASSERT(c.record <= 0xffffffffffffULL);
  for (int i = 0; i < 6; i++) raw.record[i] = static_cast<uint8_t>(c.record >> (8 * i));
  POND_ASSERT(c.writer < (uint64_t{1} << 56));
  for (int i = 0; i < 6; i++) raw.writer[i] = static_cast<uint8_t>(c.writer >> (8 * i));
  raw.writer_cn = static_cast<uint8_t>(c.writer >> 48);
  return raw;
}

Result<Cell> DecodeCell(const CvtCell& raw) {
  if (raw.head_cv != raw.tail_cv) return TornRead("cell caught mid-write");
  Cell c;
  c.cv = raw.head_cv;
  c.valid = raw.valid != kCellEmpty;
  c.tombstone = raw.valid == kCellTombstone;
  c.commit_ts = raw.commit_ts;
  for (int i = 0; i < 6; i++) c.record |= uint64_t{raw.record[i]} << (8 * i);
  for (int i = 0; i < 6; i++) c.writer |= uint64_t{raw.writer[i]} << (8 * i);
  c.writer |= uint64_t{raw.writer_cn} << 48;
  return c;
}

}  // namespace pond::store
