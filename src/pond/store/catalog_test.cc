#include "pond/store/catalog.h"

#include <gtest/gtest.h>

#include <cstring>

#include "pond/store/store_testing.h"

namespace pond::store {
namespace {

using testing::FormattedPool;
using testing::Worker;

TEST(CatalogTest, FormatWritesSuperblock) {
  auto pool = FormattedPool(2, 64 << 20);
  Superblock sb;
  std::memcpy(&sb, pool->region(1), sizeof(sb));
  EXPECT_EQ(sb.magic, kSuperblockMagic);
  EXPECT_EQ(sb.mn_id, 1);
  EXPECT_EQ(sb.num_mns, 2);
  EXPECT_EQ(sb.heap_cursor, sb.heap_begin);
  EXPECT_EQ(sb.lane_cursor, 0u);
  EXPECT_EQ(sb.replication, 1);
  EXPECT_EQ(sb.heap_end, pool.layout.heap_end);
  EXPECT_GE(sb.heap_begin, kCatalogOffset + kTablesMax * sizeof(TableDesc));
}

TEST(CatalogTest, LayoutRejectsBadNumbers) {
  EXPECT_EQ(MakeLayout(1, 1, 8192, 1 << 20).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(MakeLayout(2, 3, 64 << 20, 1 << 20).status().code(), Code::kInvalidArgument)
      << "more replicas than MNs";
  EXPECT_EQ(MakeLayout(1, 1, 64 << 20, 100).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(MakeLayout(0, 1, 64 << 20, 1 << 20).status().code(), Code::kInvalidArgument);
}

TEST(CatalogTest, LanesTileTheRegionAfterTheHeap) {
  auto l = MakeLayout(4, 3, 64 << 20, 1 << 20);
  ASSERT_TRUE(l.ok());
  EXPECT_GE(l->heap_end, l->heap_begin + (16 << 20) - 4096) << "a quarter for the heap";
  EXPECT_EQ(l->RecordOffset(0, 0), l->heap_end);
  EXPECT_EQ(l->RecordOffset(1, 0), l->heap_end + l->lane_bytes);
  EXPECT_LE(l->RecordOffset(2, l->lane_bytes), uint64_t{64} << 20) << "last lane fits";
  EXPECT_EQ(l->lane_bytes % 64, 0u);
}

TEST(CatalogTest, CreatedTablesAreLoadedOnAnotherCn) {
  auto pool = FormattedPool(3, 64 << 20);
  Worker creator(*pool, {0, 0});
  TableSpec spec{.id = 7,
                 .name = "accounts",
                 .value_bytes = 40,
                 .versions = 4,
                 .critical_field = true,
                 .capacity = 1000};
  ASSERT_TRUE(creator.Run(CreateTable(*creator.ep, pool.layout, spec)).ok());

  Worker other(*pool, {1, 0});
  Result<Catalog> cat = other.Run(LoadCatalog(*other.ep));
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  EXPECT_EQ(cat->layout().num_mns, 3);
  EXPECT_EQ(cat->layout().lane_bytes, pool.layout.lane_bytes);
  const TableInfo* t = cat->FindByName("accounts");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->id, 7);
  EXPECT_EQ(t->versions, 4);
  EXPECT_TRUE(t->critical_field);
  EXPECT_EQ(t->value_bytes, 40u);
  EXPECT_EQ(t->record_stride, 64u);
  EXPECT_EQ(t->cvt_bytes, CvtBytes(4));
  // Each MN's index has one sub-index per replica group; one group holds the keys of one
  // primary, about a third of the capacity here, with room to spare.
  EXPECT_EQ(t->replication, pool.layout.replication);
  EXPECT_GE(t->bucket_count * t->slots_per_bucket, 1000u / 3) << "room for the capacity asked";
  ASSERT_EQ(t->index_offset.size(), 3u);
  for (uint64_t off : t->index_offset) EXPECT_EQ(off % kHeapAlign, 0u);
  EXPECT_EQ(cat->Find(8), nullptr);
}

TEST(CatalogTest, DuplicateIdAndBadSpecsAreRefused) {
  auto pool = FormattedPool(1, 64 << 20);
  Worker w(*pool, {0, 0});
  TableSpec spec{.id = 1, .name = "t"};
  ASSERT_TRUE(w.Run(CreateTable(*w.ep, pool.layout, spec)).ok());
  EXPECT_EQ(w.Run(CreateTable(*w.ep, pool.layout, spec)).code(), Code::kAlreadyExists);
  EXPECT_EQ(w.Run(CreateTable(*w.ep, pool.layout, TableSpec{.id = 2, .name = ""})).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(w.Run(CreateTable(*w.ep, pool.layout, TableSpec{.id = 2, .name = "v", .versions = 17}))
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(w.Run(CreateTable(*w.ep, pool.layout, TableSpec{.id = 300, .name = "x"})).code(),
            Code::kInvalidArgument);
}

TEST(CatalogTest, TableLargerThanTheRegionIsOutOfSpace) {
  auto pool = FormattedPool(1, 8 << 20);
  Worker w(*pool, {0, 0});
  TableSpec spec{.id = 1, .name = "huge", .capacity = 10'000'000};
  EXPECT_EQ(w.Run(CreateTable(*w.ep, pool.layout, spec)).code(), Code::kOutOfSpace);
}

TEST(CatalogTest, UnformattedPoolIsCorrupt) {
  auto f = LocalFabric::Create(1, 1 << 20);
  ASSERT_TRUE(f.ok());
  Worker w(**f, {0, 0});  // never formatted
  EXPECT_EQ(w.Run(LoadCatalog(*w.ep)).status().code(), Code::kCorruption);
}

}  // namespace
}  // namespace pond::store
