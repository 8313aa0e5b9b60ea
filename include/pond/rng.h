// Rng: a seeded pseudo-random generator (xoshiro256**), the only source of randomness in Pond,
// and what Session::rng() hands a client.
//
// Every random choice (keys, backoff, routing, fault schedules) draws from an Rng built from an
// explicit seed, so a run is replayed by its seed: a client that draws from its session's Rng
// (not from std::random_device or the time) keeps a simulated run replayable.
//
// Thread rules: not thread-safe. One Rng belongs to one worker; derive independent streams with
// Fork() rather than sharing one across threads.
#pragma once

#include <cstdint>

namespace pond {

class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t Next() {
    uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n); n > 0. Lemire's multiply-shift, with the tiny bias left in (n << 2^64).
  uint64_t Uniform(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  // Uniform in [0, 1).
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return UniformDouble() < p; }

  // An independent stream, e.g. one per worker, derived deterministically from this one.
  Rng Fork() { return Rng(Next()); }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace pond
