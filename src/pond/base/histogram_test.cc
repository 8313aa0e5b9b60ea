#include "pond/base/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <random>

namespace pond {
namespace {

TEST(HistogramTest, SmallValuesAreExact) {
  Histogram h;
  for (uint64_t v = 0; v < 32; v++) h.Record(v);
  EXPECT_EQ(h.count(), 32u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 31u);
  EXPECT_EQ(h.Percentile(0.5), 15u);  // the 16th of 32 values
}

TEST(HistogramTest, BucketsCoverEveryValueInOrder) {
  // Every value lands in a bucket whose upper bound is >= the value, and buckets never shrink.
  uint64_t prev_bucket = 0;
  for (uint64_t v : std::initializer_list<uint64_t>{0, 1, 31, 32, 33, 63, 64, 1000, 123456789,
                                                    (uint64_t{1} << 40) + 5, UINT64_MAX}) {
    int b = Histogram::BucketOf(v);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, Histogram::kBuckets);
    EXPECT_GE(Histogram::BucketUpperBound(b), v);
    EXPECT_GE(static_cast<uint64_t>(b), prev_bucket);
    prev_bucket = static_cast<uint64_t>(b);
  }
}

TEST(HistogramTest, PercentilesWithinRelativeError) {
  Histogram h;
  std::vector<uint64_t> values;
  std::mt19937_64 gen(1);
  for (int i = 0; i < 100000; i++) {
    uint64_t v = 100 + gen() % 1000000;
    values.push_back(v);
    h.Record(v);
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    double exact = static_cast<double>(values[static_cast<size_t>(q * values.size()) - 1]);
    double got = static_cast<double>(h.Percentile(q));
    EXPECT_NEAR(got, exact, exact * 0.035) << "q=" << q;
  }
}

TEST(HistogramTest, MergeAddsCounts) {
  Histogram a, b;
  a.Record(10);
  b.Record(1000);
  b.Record(2000);
  a.Merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.max(), 2000u);
  EXPECT_EQ(a.min(), 10u);
}

}  // namespace
}  // namespace pond
