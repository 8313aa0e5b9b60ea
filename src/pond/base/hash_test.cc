#include "pond/base/hash.h"

#include <gtest/gtest.h>

#include <set>

namespace pond {
namespace {

TEST(HashTest, UsesAreIndependent) {
  // The same key must hash differently per use, or a key's bucket would predict its MN.
  EXPECT_NE(HashKey(12345, HashUse::kPlacement), HashKey(12345, HashUse::kIndexBucket));
  EXPECT_NE(HashKey(12345, HashUse::kIndexBucket), HashKey(12345, HashUse::kLockTable));
}

TEST(HashTest, Mix64IsInjectiveOnASample) {
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 100000; i++) seen.insert(Mix64(i));
  EXPECT_EQ(seen.size(), 100000u);
}

TEST(HashTest, HashBytesDependsOnSeedAndContent) {
  const char a[] = "pond";
  const char b[] = "pone";
  EXPECT_EQ(HashBytes(a, 4), HashBytes(a, 4));
  EXPECT_NE(HashBytes(a, 4), HashBytes(b, 4));
  EXPECT_NE(HashBytes(a, 4, 1), HashBytes(a, 4, 2));
}

}  // namespace
}  // namespace pond
