// CallTable request by request: what a callee does with a new call, a copy of a running one, a
// copy of a finished one, and one below its caller's floor; and that floors bound its memory.
#include "pond/node/call_table.h"

#include <gtest/gtest.h>

namespace pond::node {
namespace {

const WorkerAddr kA{1, 0}, kB{2, 0};

TEST(CallTableTest, NewCallRunsOnce) {
  CallTable t;
  EXPECT_EQ(t.Request(kA, 1, 1).what, CallAdmission::kRun);
  // Expect: a copy while it runs is dropped: the answer will follow.
  EXPECT_EQ(t.Request(kA, 1, 1).what, CallAdmission::kRunning);
  t.Finish(kA, 1, {Code::kAborted});
  // Expect: a copy after it finished is answered again with the same outcome, not run.
  CallTable::Admit again = t.Request(kA, 1, 1);
  EXPECT_EQ(again.what, CallAdmission::kAnswered);
  ASSERT_NE(again.outcome, nullptr);
  EXPECT_EQ(again.outcome->code, Code::kAborted);
  EXPECT_EQ(t.stats().runs, 1u);
  EXPECT_EQ(t.stats().copies_running, 1u);
  EXPECT_EQ(t.stats().copies_answered, 1u);
}

TEST(CallTableTest, CallersAreApart) {
  CallTable t;
  EXPECT_EQ(t.Request(kA, 7, 7).what, CallAdmission::kRun);
  // Expect: the same id from another caller is another call.
  EXPECT_EQ(t.Request(kB, 7, 7).what, CallAdmission::kRun);
  EXPECT_EQ(t.entries(), 2u);
}

TEST(CallTableTest, FloorForgetsAnsweredCallsAndDropsStaleCopies) {
  CallTable t;
  for (uint64_t id = 1; id <= 3; id++) {
    ASSERT_EQ(t.Request(kA, id, 1).what, CallAdmission::kRun);
    t.Finish(kA, id, {Code::kOk});
  }
  EXPECT_EQ(t.entries(), 3u);
  // The caller has every answer below 4: its next request says so.
  EXPECT_EQ(t.Request(kA, 4, 4).what, CallAdmission::kRun);
  // Expect: calls 1..3 forgotten; a late copy of call 2 is stale and dropped, not run again.
  EXPECT_EQ(t.entries(), 1u);
  EXPECT_EQ(t.Request(kA, 2, 1).what, CallAdmission::kStale);
  EXPECT_EQ(t.stats().stale, 1u);
  EXPECT_EQ(t.stats().runs, 4u);
}

TEST(CallTableTest, ReorderedRequestsNeverLowerTheFloor) {
  CallTable t;
  EXPECT_EQ(t.Request(kA, 5, 5).what, CallAdmission::kRun);
  // A request sent earlier (floor 3) overtakes nothing it should not: call 3 is below the floor
  // the later request raised, so its caller already had its answer.
  EXPECT_EQ(t.Request(kA, 3, 3).what, CallAdmission::kStale);
  // Expect: call 5, still running, is still known.
  EXPECT_EQ(t.Request(kA, 5, 3).what, CallAdmission::kRunning);
}

TEST(CallTableTest, FinishOfAForgottenCallIsIgnored) {
  CallTable t;
  EXPECT_EQ(t.Request(kA, 1, 1).what, CallAdmission::kRun);
  EXPECT_EQ(t.Request(kA, 2, 2).what, CallAdmission::kRun);  // a confused caller's floor
  t.Finish(kA, 1, {Code::kOk});
  EXPECT_EQ(t.entries(), 1u);
}

TEST(CallTableTest, AFinishedCallKeepsItsMessageAndReply) {
  CallTable t;
  ASSERT_EQ(t.Request(kA, 1, 1).what, CallAdmission::kRun);
  t.Finish(kA, 1, {Code::kNotFound, "no such account", {std::byte{1}, std::byte{2}}});
  // Expect: a copy is answered from the stored outcome, whole.
  CallTable::Admit a = t.Request(kA, 1, 1);
  ASSERT_EQ(a.what, CallAdmission::kAnswered);
  EXPECT_EQ(a.outcome->code, Code::kNotFound);
  EXPECT_EQ(a.outcome->message, "no such account");
  EXPECT_EQ(a.outcome->reply, (std::vector<std::byte>{std::byte{1}, std::byte{2}}));
}

}  // namespace
}  // namespace pond::node
