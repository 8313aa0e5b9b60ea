#include "pond/rng.h"

#include "pond/base/hash.h"

namespace pond {

Rng::Rng(uint64_t seed) {
  // splitmix64 expands the seed so that nearby seeds give unrelated streams.
  uint64_t x = seed;
  for (auto& w : s_) {
    x += 0x9e3779b97f4a7c15ULL;
    w = Mix64(x);
  }
}

}  // namespace pond
