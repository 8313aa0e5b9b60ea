#include "pond/store/record.h"

#include <gtest/gtest.h>

#include <vector>

namespace pond::store {
namespace {

std::vector<std::byte> Bytes(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return v;
}

TEST(RecordTest, StrideIsWholeLinesOf63PayloadBytes) {
  EXPECT_EQ(RecordStride(1), 64u);
  EXPECT_EQ(RecordStride(40), 64u);
  EXPECT_EQ(RecordStride(63), 64u);
  EXPECT_EQ(RecordStride(64), 128u);
  EXPECT_EQ(RecordStride(1000), 16u * 64);
}

TEST(RecordTest, RoundTripsEverySize) {
  for (size_t n : {1, 8, 40, 63, 64, 100, 126, 127, 1000}) {
    auto value = Bytes(n, 7);
    std::vector<std::byte> rec(RecordStride(static_cast<uint32_t>(n)));
    EncodeRecord(value, 42, rec);
    for (size_t line = 0; line < rec.size() / 64; line++) {
      EXPECT_EQ(static_cast<uint8_t>(rec[line * 64]), 42) << "every line starts with its cv";
    }
    std::vector<std::byte> out(n);
    ASSERT_TRUE(DecodeRecord(rec, 42, out).ok());
    EXPECT_EQ(out, value) << n;
  }
}

TEST(RecordTest, MixedLinesAreTorn) {
  // First line from version 5, second from version 6: the reader must refuse it.
  std::vector<std::byte> a(128), b(128), out(100);
  EncodeRecord(Bytes(100, 1), 5, a);
  EncodeRecord(Bytes(100, 2), 6, b);
  std::copy(b.begin() + 64, b.end(), a.begin() + 64);
  Status s = DecodeRecord(a, 5, out);
  EXPECT_EQ(s.code(), Code::kTornRead);
  EXPECT_EQ(DecodeRecord(b, 5, out).code(), Code::kTornRead) << "whole newer version, wrong cv";
}

TEST(CellTest, RoundTripsAndDetectsTornCell) {
  Cell c{.cv = 9, .valid = true, .commit_ts = 123456789, .record = 0xabcdef012345ULL};
  CvtCell raw = EncodeCell(c);
  Result<Cell> back = DecodeCell(raw);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->cv, 9);
  EXPECT_TRUE(back->valid);
  EXPECT_EQ(back->commit_ts, 123456789u);
  EXPECT_EQ(back->record, 0xabcdef012345ULL);
  raw.tail_cv = 8;  // the writer stored the head of a newer cell, not yet its tail
  EXPECT_EQ(DecodeCell(raw).status().code(), Code::kTornRead);
}

TEST(CellTest, TombstoneRoundTrips) {
  CvtCell raw = EncodeCell(Cell{.cv = 3, .valid = true, .tombstone = true, .commit_ts = 7});
  EXPECT_EQ(raw.valid, kCellTombstone);
  Result<Cell> back = DecodeCell(raw);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->valid);
  EXPECT_TRUE(back->tombstone);
  EXPECT_TRUE(back->visible());
  EXPECT_FALSE(
      DecodeCell(EncodeCell(Cell{.cv = 3, .valid = true, .commit_ts = kInvisible}))->visible());
}

TEST(CellTest, InvisibleIsAllOnes) {
  CvtCell raw = EncodeCell(Cell{.cv = 1, .valid = true, .commit_ts = kInvisible, .record = 64});
  EXPECT_EQ(raw.commit_ts, ~uint64_t{0});
}

}  // namespace
}  // namespace pond::store
