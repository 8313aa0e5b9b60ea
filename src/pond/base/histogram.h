// Histogram: a fixed-size log-linear histogram of non-negative integers (latencies in ns).
//
// Values are bucketed by their leading bit and the next kSubBits bits, so every bucket's width
// is at most 1/2^kSubBits of its lower bound: a percentile is reported within 3.2% of the true
// value. Recording is two shifts and an increment, with no allocation; one histogram belongs to
// one thread, and per-thread histograms are merged at the end of a run.
#pragma once

#include <array>
#include <cstdint>

namespace pond {

class Histogram {
 public:
  static constexpr int kSubBits = 5;
  static constexpr int kSubBuckets = 1 << kSubBits;
  static constexpr int kBuckets = (64 - kSubBits + 1) * kSubBuckets;

  void Record(uint64_t value) {
    counts_[BucketOf(value)]++;
    count_++;
    sum_ += value;
    if (value > max_) max_ = value;
    if (value < min_) min_ = value;
  }
  void Merge(const Histogram& other);

  uint64_t count() const { return count_; }
  uint64_t max() const { return count_ ? max_ : 0; }
  uint64_t min() const { return count_ ? min_ : 0; }
  double Mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }
  // The value at quantile q in [0, 1]: the upper bound of the bucket holding it, capped at max.
  uint64_t Percentile(double q) const;

  static int BucketOf(uint64_t value);
  static uint64_t BucketUpperBound(int bucket);

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

}  // namespace pond
