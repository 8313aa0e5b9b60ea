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

}  // namespace
}  // namespace pond::store
