#include "pond/btree/node.h"

#include <gtest/gtest.h>

#include <cstring>

namespace pond::btree {
namespace {

TEST(NodeTest, ChildForPicksTheRangeHoldingTheKey) {
  NodeBuffer n;
  InitNode(n, 1, 10, 100);
  n.h.leftmost = 1;
  n.h.count = 2;
  n.internal.entries[0] = {20, 2};
  n.internal.entries[1] = {50, 3};
  EXPECT_EQ(n.internal.ChildFor(10).raw, 1u);
  EXPECT_EQ(n.internal.ChildFor(19).raw, 1u);
  EXPECT_EQ(n.internal.ChildFor(20).raw, 2u);  // a separator belongs to the right child
  EXPECT_EQ(n.internal.ChildFor(49).raw, 2u);
  EXPECT_EQ(n.internal.ChildFor(50).raw, 3u);
  EXPECT_EQ(n.internal.ChildFor(99).raw, 3u);
}

// A READ that overlaps one WRITE of the same bytes ends up with the write's new bytes below
// some point and the old bytes above it (stores go up, loads come down). Every such mix must
// fail the version check, at every point.
TEST(NodeTest, EveryTornNodeCopyFailsTheNodeVersions) {
  NodeBuffer before, after;
  InitNode(before, 0, 1, 1000);
  before.leaf.entries[3].set_key(7);
  after = before;
  after.leaf.entries[3].set_value(99);
  after.h.upper = 500;
  after.BumpVersion();
  ASSERT_TRUE(before.whole());
  ASSERT_TRUE(after.whole());
  for (uint32_t p = 1; p < kNodeBytes; p++) {
    NodeBuffer copy;
    std::memcpy(copy.bytes, after.bytes, p);
    std::memcpy(copy.bytes + p, before.bytes + p, kNodeBytes - p);
    EXPECT_FALSE(copy.whole()) << "torn at byte " << p;
  }
}

TEST(NodeTest, EveryTornEntryCopyFailsTheEntryVersions) {
  LeafEntry before{};
  before.set_key(42);
  before.set_value(1);
  LeafEntry after = before;
  after.set_value(0x0102030405060708);
  after.BumpVersion();
  ASSERT_TRUE(before.whole() && after.whole());
  for (size_t p = 1; p < sizeof(LeafEntry); p++) {
    LeafEntry copy;
    std::memcpy(&copy, &after, p);
    std::memcpy(reinterpret_cast<uint8_t*>(&copy) + p, reinterpret_cast<uint8_t*>(&before) + p,
                sizeof(LeafEntry) - p);
    EXPECT_FALSE(copy.whole()) << "torn at byte " << p;
  }
}

TEST(NodeTest, EntryOffsetsMatchTheLayout) {
  LeafNode leaf{};
  EXPECT_EQ(reinterpret_cast<std::byte*>(&leaf.entries[5]) - reinterpret_cast<std::byte*>(&leaf),
            static_cast<ptrdiff_t>(LeafEntryOffset(5)));
  EXPECT_LE(LeafEntryOffset(kLeafEntries), offsetof(LeafNode, rear_version));
}

}  // namespace
}  // namespace pond::btree
