#include "pond/base/histogram.h"

#include <bit>

namespace pond {

int Histogram::BucketOf(uint64_t value) {
  if (value < kSubBuckets) return static_cast<int>(value);
  int msb = 63 - std::countl_zero(value);  // >= kSubBits
  int shift = msb - kSubBits;
  int sub = static_cast<int>((value >> shift) & (kSubBuckets - 1));
  return (shift + 1) * kSubBuckets + sub;
}

uint64_t Histogram::BucketUpperBound(int bucket) {
  if (bucket < kSubBuckets) return static_cast<uint64_t>(bucket);
  int shift = bucket / kSubBuckets - 1;
  uint64_t sub = static_cast<uint64_t>(bucket % kSubBuckets);
  uint64_t lower = ((uint64_t{kSubBuckets} + sub) << shift);
  return lower + ((uint64_t{1} << shift) - 1);
}

void Histogram::Merge(const Histogram& other) {
  for (int i = 0; i < kBuckets; i++) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  if (other.count_ && other.max_ > max_) max_ = other.max_;
  if (other.count_ && other.min_ < min_) min_ = other.min_;
}

uint64_t Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  if (q <= 0) return min();
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_) + 0.5);
  if (rank < 1) rank = 1;
  if (rank > count_) rank = count_;
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; i++) {
    seen += counts_[i];
    if (seen >= rank) {
      uint64_t ub = BucketUpperBound(i);
      return ub < max_ ? ub : max_;
    }
  }
  return max_;
}

}  // namespace pond
