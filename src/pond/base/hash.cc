#include "pond/base/hash.h"

#include <xxhash.h>

namespace pond {

uint64_t HashBytes(const void* data, size_t len, uint64_t seed) {
  return XXH3_64bits_withSeed(data, len, seed);
}

}  // namespace pond
