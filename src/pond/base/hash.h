// Hashing. Every placement decision in Pond (primary MN of a key, index bucket, lock-table
// bucket and fingerprint) comes from these functions so that all CNs agree without talking.
// Seeds separate the uses: the bucket of a key must not correlate with its primary MN.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pond {

// 64-bit xxh3 of a byte string.
uint64_t HashBytes(const void* data, size_t len, uint64_t seed = 0);

// A bijective 64-bit mixer (the splitmix64 finaliser), for hashing integer keys cheaply.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Seeds for the independent uses of a key hash.
enum class HashUse : uint64_t {
  kPlacement = 0x9e3779b97f4a7c15ULL,  // which MN is a key's primary
  kIndexBucket = 0xc2b2ae3d27d4eb4fULL,
  kLockTable = 0x165667b19e3779f9ULL,
};

constexpr uint64_t HashKey(uint64_t key, HashUse use) {
  return Mix64(key ^ static_cast<uint64_t>(use));
}

}  // namespace pond
