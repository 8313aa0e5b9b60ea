#include "pond/sim/faults.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace pond::sim {
namespace {

uint64_t TestSeed() {
  int s = ::testing::UnitTest::GetInstance()->random_seed();
  uint64_t seed = s == 0 ? 20240601 : static_cast<uint64_t>(s);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

constexpr int kDraws = 200'000;

// Tolerance for a count of Bernoulli(p) successes in n draws: 6 standard deviations, so a
// correct model fails about once in 10^9 runs.
double Tolerance(double p, int n) { return 6 * std::sqrt(n * p * (1 - p)) + 1; }

FaultModel Make(const FaultConfig& c) {
  Result<FaultModel> m = FaultModel::Create(c);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

TEST(FaultModelTest, OffMeansExactlyNoFaultsAndNoDraws) {
  Rng r(TestSeed());
  Rng untouched = r;
  FaultModel off;  // default config: every knob off
  for (int i = 0; i < kDraws; i++) {
    FaultDecision d = off.Decide(r);
    ASSERT_FALSE(d.drop);
    ASSERT_FALSE(d.duplicate);
    ASSERT_EQ(d.delay_ns, 0u);
    ASSERT_EQ(d.duplicate_delay_ns, 0u);
  }
  // The caller's stream is exactly where it would be without the model.
  EXPECT_EQ(r.Next(), untouched.Next());
  EXPECT_EQ(off.stats().decided_count, 0u);
  EXPECT_FALSE(FaultConfig{}.enabled());
  EXPECT_TRUE(FaultConfig{}.Validate().ok());
}

TEST(FaultModelTest, DropRateWithinTolerance) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng r(seed);
  FaultConfig c;
  c.drop_probability = 0.1;
  FaultModel m = Make(c);
  int drops = 0;
  for (int i = 0; i < kDraws; i++) {
    FaultDecision d = m.Decide(r);
    if (d.drop) {
      drops++;
      EXPECT_FALSE(d.duplicate);  // a lost message is not also duplicated or delayed
      EXPECT_EQ(d.delay_ns, 0u);
    }
  }
  EXPECT_NEAR(drops, 0.1 * kDraws, Tolerance(0.1, kDraws));
  EXPECT_EQ(m.stats().drop_count, static_cast<uint64_t>(drops));
  EXPECT_EQ(m.stats().decided_count, static_cast<uint64_t>(kDraws));
}

TEST(FaultModelTest, DuplicateRateWithinTolerance) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng r(seed);
  FaultConfig c;
  c.duplicate_probability = 0.05;
  FaultModel m = Make(c);
  int dups = 0;
  for (int i = 0; i < kDraws; i++) dups += m.Decide(r).duplicate;
  EXPECT_NEAR(dups, 0.05 * kDraws, Tolerance(0.05, kDraws));
  EXPECT_EQ(m.stats().drop_count, 0u);
  EXPECT_EQ(m.stats().delay_count, 0u);
}

TEST(FaultModelTest, UniformDelayStaysInBoundsWithTheRightRateAndMean) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng r(seed);
  FaultConfig c;
  c.delay_probability = 0.3;
  c.delay_ns_min = 1'000;
  c.delay_ns_max = 9'000;
  FaultModel m = Make(c);
  int delayed = 0;
  double sum = 0;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < kDraws; i++) {
    uint64_t d = m.Decide(r).delay_ns;
    if (d == 0) continue;
    delayed++;
    sum += static_cast<double>(d);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_NEAR(delayed, 0.3 * kDraws, Tolerance(0.3, kDraws));
  EXPECT_GE(lo, 1'000u);
  EXPECT_LE(hi, 9'000u);
  EXPECT_LT(lo, 1'100u);  // both ends are reached
  EXPECT_GT(hi, 8'900u);
  // Mean 5000, sd of the mean 8000/sqrt(12 n) ~ 8 ns.
  EXPECT_NEAR(sum / delayed, 5'000, 60);
}

TEST(FaultModelTest, ExponentialDelayHasItsMeanAndRespectsTheCap) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng r(seed);
  FaultConfig c;
  c.delay_probability = 1;
  c.delay_distribution = DelayDistribution::kExponential;
  c.delay_ns_min = 500;
  c.delay_ns_mean = 2'000;
  c.delay_ns_max = 500 + 2'000 * 3;  // cap at 3 means above the minimum
  FaultModel m = Make(c);
  int capped = 0;
  double sum = 0;
  for (int i = 0; i < kDraws; i++) {
    uint64_t d = m.Decide(r).delay_ns;
    ASSERT_GE(d, 500u);
    ASSERT_LE(d, c.delay_ns_max);
    capped += d == c.delay_ns_max;
    sum += static_cast<double>(d - 500);
  }
  // P(Exp >= 3 means) = e^-3; the capped mean is 2000 (1 - e^-3) ~ 1900.4.
  const double p_cap = std::exp(-3.0);
  EXPECT_NEAR(capped, p_cap * kDraws, Tolerance(p_cap, kDraws));
  EXPECT_NEAR(sum / kDraws, 2'000 * (1 - p_cap), 30);
}

TEST(FaultModelTest, DelaysReorderMessagesOnALink) {
  Rng r(TestSeed());
  FaultConfig c;
  c.delay_probability = 0.5;
  c.delay_ns_max = 10'000;
  FaultModel m = Make(c);
  // Messages sent 100 ns apart over a 1 us link: any delay over 100 ns lets the next overtake.
  int overtaken = 0;
  uint64_t prev_arrival = 0;
  for (uint64_t i = 0; i < 10'000; i++) {
    uint64_t arrival = i * 100 + 1'000 + m.Decide(r).delay_ns;
    overtaken += i > 0 && arrival < prev_arrival;
    prev_arrival = arrival;
  }
  EXPECT_GT(overtaken, 1'000);
}

TEST(FaultModelTest, DuplicatesDrawTheirOwnDelay) {
  Rng r(TestSeed());
  FaultConfig c;
  c.duplicate_probability = 1;
  c.delay_probability = 1;
  c.delay_ns_min = 1;
  c.delay_ns_max = 1'000'000;
  FaultModel m = Make(c);
  int differ = 0;
  for (int i = 0; i < 1'000; i++) {
    FaultDecision d = m.Decide(r);
    ASSERT_TRUE(d.duplicate);
    ASSERT_GT(d.duplicate_delay_ns, 0u);
    differ += d.delay_ns != d.duplicate_delay_ns;
  }
  EXPECT_GT(differ, 990);
}

TEST(FaultModelTest, SameStreamGivesTheSameDecisions) {
  FaultConfig c;
  c.drop_probability = 0.2;
  c.duplicate_probability = 0.2;
  c.delay_probability = 0.5;
  c.delay_ns_max = 5'000;
  FaultModel a = Make(c), b = Make(c);
  Rng ra(99), rb(99);
  for (int i = 0; i < 10'000; i++) {
    FaultDecision x = a.Decide(ra), y = b.Decide(rb);
    ASSERT_EQ(x.drop, y.drop);
    ASSERT_EQ(x.duplicate, y.duplicate);
    ASSERT_EQ(x.delay_ns, y.delay_ns);
    ASSERT_EQ(x.duplicate_delay_ns, y.duplicate_delay_ns);
  }
}

TEST(FaultModelTest, ValidationRejectsBadConfigs) {
  auto rejects = [](FaultConfig c, const std::string& field) {
    Status st = c.Validate();
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
    EXPECT_FALSE(FaultModel::Create(c).ok());
  };
  FaultConfig c;
  c.drop_probability = -0.1;
  rejects(c, "drop_probability");
  c = {};
  c.drop_probability = std::numeric_limits<double>::quiet_NaN();
  rejects(c, "drop_probability");
  c = {};
  c.duplicate_probability = 1.5;
  rejects(c, "duplicate_probability");
  c = {};
  c.delay_probability = 2;
  rejects(c, "delay_probability");
  c = {};
  c.delay_ns_min = 10;
  c.delay_ns_max = 5;
  rejects(c, "delay_ns_min");
  c = {};
  c.delay_ns_max = kFaultDelayNsLimit + 1;
  rejects(c, "delay_ns_max");
  c = {};
  c.delay_probability = 0.5;  // a delay knob with no room to delay
  rejects(c, "delay_ns_max");
  c = {};
  c.delay_probability = 0.5;
  c.delay_ns_max = 100;
  c.delay_distribution = DelayDistribution::kExponential;  // without a mean
  rejects(c, "delay_ns_mean");
  c.delay_ns_mean = kFaultDelayNsLimit + 1;
  rejects(c, "delay_ns_mean");
  c = {};
  c.delay_distribution = static_cast<DelayDistribution>(7);
  rejects(c, "delay_distribution");

  // The extremes are allowed: certain loss (a cut link) and the largest delay.
  c = {};
  c.drop_probability = 1;
  c.delay_probability = 1;
  c.delay_ns_min = kFaultDelayNsLimit;
  c.delay_ns_max = kFaultDelayNsLimit;
  EXPECT_TRUE(c.Validate().ok());
}

}  // namespace
}  // namespace pond::sim
