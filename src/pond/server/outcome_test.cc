// How a transaction's Status becomes a client's Answer (outcome.h): never a wrong answer, and
// UNKNOWN only when the server cannot know — a routed call whose CN died running it, or a
// surprise it cannot prove wrote nothing.
#include "pond/server/outcome.h"

#include <gtest/gtest.h>

namespace pond::server {
namespace {

v1::Answer AnswerOf(const Status& s, Phase phase) {
  v1::Answer a;
  SetAnswer(s, phase, &a);
  return a;
}

TEST(OutcomeTest, AFullTableIsAnAbortFromEveryPhase) {
  for (Phase phase : {Phase::kBeforeCommit, Phase::kCommit, Phase::kProcedure}) {
    const v1::Answer a = AnswerOf(OutOfSpace("no free slot for key 7 within 64 buckets"), phase);
    EXPECT_EQ(a.outcome(), v1::ABORTED) << static_cast<int>(phase);
    EXPECT_EQ(a.reason(), v1::TABLE_FULL);
    EXPECT_EQ(a.message(), "no free slot for key 7 within 64 buckets");
  }
}

TEST(OutcomeTest, ACallNeverSentIsAnAbortToRetry) {
  for (Phase phase : {Phase::kCommit, Phase::kProcedure}) {
    const v1::Answer a = AnswerOf(Aborted("not sent: CN 2 has failed"), phase);
    EXPECT_EQ(a.outcome(), v1::ABORTED);
    EXPECT_EQ(a.reason(), v1::NOT_SENT);
  }
}

TEST(OutcomeTest, UnknownOnlyWhereTheServerCannotKnow) {
  // A routed call whose CN failed mid-call: it may have committed.
  EXPECT_EQ(AnswerOf(Unknown("CN 1 failed"), Phase::kProcedure).outcome(), v1::UNKNOWN);
  EXPECT_EQ(AnswerOf(Unknown("CN 1 failed"), Phase::kCommit).outcome(), v1::UNKNOWN);
  // A surprise from commit or a procedure cannot be proved harmless; before commit it can.
  EXPECT_EQ(AnswerOf(Internal("?"), Phase::kCommit).outcome(), v1::UNKNOWN);
  EXPECT_EQ(AnswerOf(Internal("?"), Phase::kProcedure).outcome(), v1::UNKNOWN);
  EXPECT_EQ(AnswerOf(Internal("?"), Phase::kBeforeCommit).outcome(), v1::ABORTED);
  // Aborts and misuse from anywhere.
  EXPECT_EQ(AnswerOf(Aborted("lock conflict"), Phase::kCommit).reason(), v1::LOCK_CONFLICT);
  EXPECT_EQ(AnswerOf(AlreadyExists("key 3"), Phase::kProcedure).reason(), v1::DUPLICATE_KEY);
  EXPECT_EQ(AnswerOf(InvalidArgument("bad"), Phase::kCommit).outcome(), v1::REJECTED);
  EXPECT_EQ(AnswerOf(NotFound("no account 42"), Phase::kProcedure).reason(), v1::USER);
  EXPECT_EQ(AnswerOf(Status::Ok(), Phase::kCommit).outcome(), v1::COMMITTED);
}

}  // namespace
}  // namespace pond::server
