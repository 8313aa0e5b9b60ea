#include "pond/store/placement.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace pond::store {
namespace {

TEST(PlacementTest, ReplicasAreDistinctAndStartAtPrimary) {
  Placement p(5, 3);
  for (uint64_t key = 0; key < 1000; key++) {
    std::set<MnId> mns;
    EXPECT_EQ(p.Replica(key, 0), p.Primary(key));
    for (int r = 0; r < 3; r++) mns.insert(p.Replica(key, r));
    EXPECT_EQ(mns.size(), 3u);
  }
}

TEST(PlacementTest, PrimariesSpreadOverMns) {
  Placement p(3, 1);
  std::vector<int> count(3);
  for (uint64_t key = 0; key < 30000; key++) count[p.Primary(key)]++;
  for (int c : count) EXPECT_NEAR(c, 10000, 500);
}

TEST(PlacementTest, SameKeySamePlaceOnEveryCn) {
  // Two independently built placements (two CNs) agree without communicating.
  Placement a(4, 2), b(4, 2);
  for (uint64_t key = 0; key < 100; key++) EXPECT_EQ(a.Replica(key, 1), b.Replica(key, 1));
}

// A rejoining MN is written, never read, and its cursors are left out of carves until it is up;
// frozen, carves of every group it belongs to are refused.
TEST(PlacementTest, ARejoiningMnIsWrittenButNotReadUntilUp) {
  Placement p(4, 3);
  uint64_t key = 0;
  while (p.Primary(key) != 1) key++;
  p.SetDown(1);
  EXPECT_FALSE(p.Readable(1));
  EXPECT_NE(p.ReadReplica(key), 0);
  p.SetJoining(1);
  EXPECT_FALSE(p.IsDown(1)) << "writes go to it";
  EXPECT_FALSE(p.Readable(1));
  EXPECT_NE(p.ReadReplica(key), 0) << "reads do not";
  EXPECT_EQ(p.carve_skip_mask(), uint64_t{1} << 1);
  EXPECT_FALSE(p.CarveFrozen(1));
  p.SetFrozen(1);
  EXPECT_TRUE(p.CarveFrozen(1));   // its own group
  EXPECT_TRUE(p.CarveFrozen(0));   // it is replica 1 of MN 0's group
  EXPECT_TRUE(p.CarveFrozen(3));   // and replica 2 of MN 3's
  EXPECT_FALSE(p.CarveFrozen(2));  // MN 2's group is 2, 3, 0
  p.SetUp(1);
  EXPECT_TRUE(p.Readable(1));
  EXPECT_EQ(p.ReadReplica(key), 0);
  EXPECT_EQ(p.carve_skip_mask(), 0u);
  EXPECT_FALSE(p.CarveFrozen(1));
}

// Lock words (motor, ford) live where readers read, and refuse everyone while they may change
// hands: from a replica's leaving until it is down, and from a restarted one's freeze until it
// is read.
TEST(PlacementTest, LockWordsChangeHandsOnlyThroughARefusal) {
  Placement p(4, 3);
  uint64_t key = 0;
  while (p.Primary(key) != 1) key++;
  EXPECT_EQ(p.LockReplica(key), 0);
  p.SetJoining(1);  // leaving
  EXPECT_EQ(p.LockReplica(key), -1);
  p.SetDown(1);
  const int moved = p.LockReplica(key);
  EXPECT_TRUE(moved == 1 || moved == 2) << moved;
  EXPECT_EQ(moved, p.ReadReplica(key)) << "the words are where the key is read";
  p.SetRejoining(1);  // copying: the backup keeps the words
  EXPECT_EQ(p.LockReplica(key), moved);
  p.SetFrozen(1);
  EXPECT_EQ(p.LockReplica(key), -1);
  p.SetUp(1);
  EXPECT_EQ(p.LockReplica(key), 0);
  // A backup leaving moves no key's words whose primary is up.
  p.SetJoining(2);
  EXPECT_EQ(p.LockReplica(key), 0);
  // The primary down and a backup leaving: refused until it is down too.
  p.SetDown(1);
  EXPECT_EQ(p.LockReplica(key), -1);
  p.SetDown(2);
  EXPECT_EQ(p.LockReplica(key), 2) << "MN 3, the one replica left";
  // A restarted MN that fails again before its freeze was never read: nothing moved.
  p.SetRejoining(2);
  EXPECT_EQ(p.LockReplica(key), 2);
  p.SetDown(2);
  EXPECT_EQ(p.LockReplica(key), 2);
  // A down primary's words spread over its backups, as its reads do.
  Placement q(4, 3);
  q.SetDown(1);
  int on[3] = {0, 0, 0};
  for (uint64_t k = 0; k < 4000; k++) {
    if (q.Primary(k) == 1) on[q.LockReplica(k)]++;
  }
  EXPECT_EQ(on[0], 0);
  EXPECT_GT(on[1], on[2] / 2);
  EXPECT_GT(on[2], on[1] / 2);
}

}  // namespace
}  // namespace pond::store
