#include "pond/base/node_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
#include <random>
#include <vector>

namespace pond {
namespace {

std::vector<size_t> Members(const NodeSet& s) {
  std::vector<size_t> out;
  for (size_t id : s) out.push_back(id);
  return out;
}

TEST(NodeSetTest, StartsEmpty) {
  NodeSet s;
  EXPECT_TRUE(s.Empty());
  EXPECT_FALSE(s.Any());
  EXPECT_EQ(s.Count(), 0u);
  EXPECT_EQ(s.First(), kNodeSetBits);
  EXPECT_TRUE(Members(s).empty());
}

// Ids on both sides of every word boundary, where a shift by id % 64 in the wrong word would go.
TEST(NodeSetTest, HoldsIdsAcrossWordBoundaries) {
  const std::vector<size_t> ids = {0, 1, 63, 64, 65, 127, 128, 191, 192, 254, 255};
  NodeSet s;
  for (size_t id : ids) s.Add(id);
  EXPECT_EQ(Members(s), ids);
  EXPECT_EQ(s.Count(), ids.size());
  for (size_t id = 0; id < kNodeSetBits; id++) {
    EXPECT_EQ(s.Has(id), std::find(ids.begin(), ids.end(), id) != ids.end()) << id;
  }
  s.Remove(64);
  s.Remove(255);
  EXPECT_FALSE(s.Has(64));
  EXPECT_FALSE(s.Has(255));
  EXPECT_TRUE(s.Has(63));
  EXPECT_TRUE(s.Has(65));
  EXPECT_EQ(s.Count(), ids.size() - 2);
  EXPECT_FALSE(s.FitsWord());
  EXPECT_TRUE(NodeSet::FromWord(0x8000000000000001).FitsWord());
}

TEST(NodeSetTest, FirstNAndOf) {
  for (size_t n : {0u, 1u, 63u, 64u, 65u, 86u, 128u, 255u, 256u}) {
    const NodeSet s = NodeSet::FirstN(n);
    EXPECT_EQ(s.Count(), n) << n;
    for (size_t id = 0; id < kNodeSetBits; id++) EXPECT_EQ(s.Has(id), id < n) << n << " " << id;
  }
  EXPECT_EQ(Members(NodeSet::Of(200)), std::vector<size_t>{200});
  EXPECT_EQ(NodeSet::FromWord(0b101).Word(), 0b101u);
}

// Every operation against std::bitset<256> on random sets, dense and sparse.
TEST(NodeSetTest, MatchesBitset) {
  std::mt19937_64 rng(::testing::UnitTest::GetInstance()->random_seed());
  using Ref = std::bitset<kNodeSetBits>;
  auto random_set = [&](double density, NodeSet* s, Ref* r) {
    std::bernoulli_distribution in(density);
    for (size_t id = 0; id < kNodeSetBits; id++) {
      if (in(rng)) {
        s->Add(id);
        r->set(id);
      }
    }
  };
  auto same = [](const NodeSet& s, const Ref& r) {
    if (s.Count() != r.count() || s.Empty() != r.none()) return false;
    for (size_t id = 0; id < kNodeSetBits; id++) {
      if (s.Has(id) != r.test(id)) return false;
    }
    std::vector<size_t> want;
    for (size_t id = 0; id < kNodeSetBits; id++) {
      if (r.test(id)) want.push_back(id);
    }
    return Members(s) == want;
  };
  for (int round = 0; round < 2000; round++) {
    const double d1 = round % 3 == 0 ? 0.01 : 0.5, d2 = round % 5 == 0 ? 0.02 : 0.3;
    NodeSet a, b;
    Ref ra, rb;
    random_set(d1, &a, &ra);
    random_set(d2, &b, &rb);
    ASSERT_TRUE(same(a, ra));
    ASSERT_TRUE(same(a | b, ra | rb));
    ASSERT_TRUE(same(a & b, ra & rb));
    ASSERT_TRUE(same(a.Without(b), ra & ~rb));
    ASSERT_TRUE(same(~a, ~ra));
    ASSERT_EQ(a == b, ra == rb);
    ASSERT_TRUE(a == a);
    const size_t from = static_cast<size_t>(rng() % kNodeSetBits);
    size_t want = kNodeSetBits;
    for (size_t id = from; id < kNodeSetBits; id++) {
      if (ra.test(id)) {
        want = id;
        break;
      }
    }
    ASSERT_EQ(a.NextFrom(from), want);
  }
}

TEST(AtomicNodeSetTest, AddRemoveLoadCopy) {
  AtomicNodeSet s;
  EXPECT_TRUE(s.Empty());
  s.Add(3);
  s.Add(70);
  s.Add(255);
  EXPECT_TRUE(s.Has(70));
  EXPECT_FALSE(s.Has(71));
  EXPECT_FALSE(s.Empty());
  NodeSet want;
  want.Add(3);
  want.Add(70);
  want.Add(255);
  EXPECT_EQ(s.Load(), want);
  AtomicNodeSet copy = s;
  s.Remove(70);
  EXPECT_FALSE(s.Has(70));
  EXPECT_TRUE(copy.Has(70));
  copy = s;
  EXPECT_EQ(copy.Load(), s.Load());
}

}  // namespace
}  // namespace pond
