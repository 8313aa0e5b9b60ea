#include "pond/btree/local_lock_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pond/runtime/clocks.h"

namespace pond::btree {
namespace {

struct Log {
  std::vector<std::string> events;
};

// Takes `word`, records whether it came handed over, yields a round while holding it (so the
// others queue), then lets go the way a BTree holder does.
Task<void> Holder(LocalLockTable* t, Scheduler* s, uint64_t word, int id, Log* log) {
  bool handed = co_await t->Acquire(word);
  log->events.push_back(std::to_string(id) + (handed ? " handed" : " global"));
  co_await s->Yield();
  bool hand = t->WillHandOver(word);
  if (!hand) log->events.push_back(std::to_string(id) + " releases");
  co_await s->Yield();  // the release's flush would be here
  t->Release(word);
}

TEST(LocalLockTableTest, HandsOverInArrivalOrderUpToTheLimitThenReleases) {
  ManualClock clock;
  Scheduler sched(clock);
  LocalLockTable t(sched, 2);
  Log log;
  for (int i = 0; i < 6; i++) sched.Spawn(Holder(&t, &sched, 0x1000, i, &log));
  sched.RunUntilIdle();
  // 0 takes the global word; 1 and 2 get it handed over; the limit (2) makes 2 release it to
  // the MN, so 3 must take it again; 4 and 5 are handed it; 5, with no one left, releases.
  std::vector<std::string> want = {"0 global", "1 handed", "2 handed", "2 releases",
                                   "3 global", "4 handed", "5 handed", "5 releases"};
  EXPECT_EQ(log.events, want);
  EXPECT_EQ(t.handovers(), 4u);
  EXPECT_EQ(t.queued(), 5u);
  EXPECT_EQ(t.entries(), 0u) << "an idle word keeps no entry";
}

TEST(LocalLockTableTest, DifferentWordsDoNotWaitForEachOther) {
  ManualClock clock;
  Scheduler sched(clock);
  LocalLockTable t(sched, 4);
  Log log;
  sched.Spawn(Holder(&t, &sched, 0x1000, 0, &log));
  sched.Spawn(Holder(&t, &sched, 0x2000, 1, &log));
  sched.RunUntilIdle();
  std::vector<std::string> want = {"0 global", "1 global", "0 releases", "1 releases"};
  EXPECT_EQ(log.events, want);
  EXPECT_EQ(t.queued(), 0u);
}

TEST(LocalLockTableTest, AbandonMakesTheNextWaiterTakeTheGlobalWord) {
  ManualClock clock;
  Scheduler sched(clock);
  LocalLockTable t(sched, 4);
  Log log;
  sched.Spawn([](LocalLockTable* t, Scheduler* s, Log* log) -> Task<void> {
    bool handed = co_await t->Acquire(0x1000);
    EXPECT_FALSE(handed);
    co_await s->Yield();
    log->events.push_back("0 gives up");
    t->Abandon(0x1000);
  }(&t, &sched, &log));
  sched.Spawn(Holder(&t, &sched, 0x1000, 1, &log));
  sched.RunUntilIdle();
  std::vector<std::string> want = {"0 gives up", "1 global", "1 releases"};
  EXPECT_EQ(log.events, want);
}

}  // namespace
}  // namespace pond::btree
