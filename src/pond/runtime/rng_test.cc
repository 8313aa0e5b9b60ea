#include "pond/rng.h"

#include <gtest/gtest.h>

namespace pond {
namespace {

TEST(RngTest, SameSeedSameStream) {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; i++) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(RngTest, UniformStaysInRangeAndCoversIt) {
  Rng r(1);
  std::vector<int> hits(10);
  for (int i = 0; i < 100000; i++) {
    uint64_t v = r.Uniform(10);
    ASSERT_LT(v, 10u);
    hits[v]++;
  }
  for (int h : hits) EXPECT_NEAR(h, 10000, 600);
}

TEST(RngTest, UniformDoubleInUnitInterval) {
  Rng r(3);
  for (int i = 0; i < 10000; i++) {
    double d = r.UniformDouble();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
  }
}

}  // namespace
}  // namespace pond
