#include "pond/status.h"

#include <gtest/gtest.h>

namespace pond {
namespace {

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = Conflict("key 7 write-locked");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kConflict);
  EXPECT_EQ(s.ToString(), "Conflict: key 7 write-locked");
}

Status FailsAtSecond(int* reached) {
  POND_RETURN_IF_ERROR(Status::Ok());
  (*reached)++;
  POND_RETURN_IF_ERROR(NotFound("x"));
  (*reached)++;
  return Status::Ok();
}

TEST(StatusTest, ReturnIfErrorStopsAtFirstFailure) {
  int reached = 0;
  EXPECT_EQ(FailsAtSecond(&reached).code(), Code::kNotFound);
  EXPECT_EQ(reached, 1);
}

TEST(ResultTest, HoldsValueOrStatus) {
  Result<int> good = 42;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  Result<int> bad = OutOfSpace("full");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kOutOfSpace);
  EXPECT_EQ(bad.value_or(7), 7);
  EXPECT_EQ(good.value_or(7), 42);
}

// value() of an error is a bug in every build, Release included: it stops the process and says
// which error, instead of reading a value that is not there.
TEST(ResultDeathTest, ValueOfAnErrorAbortsWithTheError) {
  Result<int> bad = OutOfSpace("full");
  EXPECT_DEATH({ (void)bad.value(); }, "Result::value\\(\\) of an error: OutOfSpace: full");
  EXPECT_DEATH({ (void)*bad; }, "of an error");
}

}  // namespace
}  // namespace pond
