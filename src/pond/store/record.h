// Encoding of one stored version (a record) with its cacheline versions, and of CVT cells.
//
// A reader that copies a record while a writer rewrites it may get a mix of old and new lines;
// the 1-byte version at the head of every 64-byte line exposes that: all lines must carry the cv
// the reader expects (the one in the cell it followed). The scheme assumes a reader is never 256
// rewrites of one record behind, which holds because a record is rewritten only when its cell is
// recycled, i.e. once every N versions of that key (docs/formats.md "Cacheline versions").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "pond/status.h"
#include "pond/store/layout.h"

namespace pond::store {

// Writes `value` into `out` (RecordStride(value.size()) bytes) with every line stamped `cv`.
void EncodeRecord(std::span<const std::byte> value, uint8_t cv, std::span<std::byte> out);

// Extracts the value from a copied record; TornRead unless every line carries `cv`.
Status DecodeRecord(std::span<const std::byte> record, uint8_t cv, std::span<std::byte> value);

// A decoded cell.
struct Cell {
  uint8_t cv = 0;
  bool valid = false;      // holds a version (a value, or a deletion if tombstone)
  bool tombstone = false;  // the version is "key deleted"
  uint64_t commit_ts = 0;
  uint64_t record = 0;  // offset on the CVT's MN; 0 = no record buffer yet
  uint64_t writer = 0;  // WriterTag of the transaction that wrote it (0 if unknown)

  bool visible() const { return valid && commit_ts != kInvisible; }
};

CvtCell EncodeCell(const Cell& c);
// TornRead if head_cv != tail_cv.
Result<Cell> DecodeCell(const CvtCell& raw);

}  // namespace pond::store
