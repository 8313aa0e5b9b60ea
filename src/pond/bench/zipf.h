// Zipf: draws ranks 0..n-1 with P(rank k) proportional to 1 / (k+1)^theta, as YCSB does (Gray et
// al., "Quickly generating billion-record synthetic databases"). Rank 0 is the hottest. theta = 0
// is uniform; the papers' skewed runs use 0.99. Setup is O(n) (the zeta sum); each draw is O(1).
#pragma once

#include <cmath>
#include <cstdint>

#include "pond/base/assert.h"
#include "pond/rng.h"

namespace pond::bench {

class Zipf {
 public:
  Zipf(uint64_t n, double theta) : n_(n), theta_(theta) {
    POND_CHECK(n >= 1 && theta >= 0 && theta < 1);
    if (theta_ == 0) return;
    zeta_n_ = Zeta(n, theta);
    double zeta2 = Zeta(2, theta);
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta2 / zeta_n_);
    half_pow_ = 1.0 + std::pow(0.5, theta);
  }

  uint64_t Next(Rng& rng) const {
    if (theta_ == 0) return rng.Uniform(n_);
    double u = rng.UniformDouble();
    double uz = u * zeta_n_;
    if (uz < 1.0) return 0;
    if (uz < half_pow_) return n_ > 1 ? 1 : 0;
    auto k =
        static_cast<uint64_t>(static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
    return k < n_ ? k : n_ - 1;
  }

  uint64_t n() const { return n_; }
  double theta() const { return theta_; }

 private:
  static double Zeta(uint64_t n, double theta) {
    double sum = 0;
    for (uint64_t i = 1; i <= n; i++) sum += 1.0 / std::pow(static_cast<double>(i), theta);
    return sum;
  }

  uint64_t n_;
  double theta_;
  double zeta_n_ = 0, alpha_ = 0, eta_ = 0, half_pow_ = 0;
};

}  // namespace pond::bench
