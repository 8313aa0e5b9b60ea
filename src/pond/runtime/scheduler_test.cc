#include "pond/runtime/scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pond/runtime/clocks.h"

namespace pond {
namespace {

Task<int> AddOne(int x) { co_return x + 1; }

Task<int> Chain(int depth) {
  if (depth == 0) co_return 0;
  int below = co_await Chain(depth - 1);
  co_return below + 1;
}

TEST(TaskTest, AwaitReturnsValue) {
  ManualClock clock;
  Scheduler s(clock);
  int result = 0;
  s.Spawn([](int* out) -> Task<void> { *out = co_await AddOne(41); }(&result));
  s.RunUntilIdle();
  EXPECT_EQ(result, 42);
  EXPECT_EQ(s.live(), 0u);
}

TEST(TaskTest, DeepChainsDoNotGrowTheStack) {
  // Symmetric transfer: 100k nested awaits would overflow the stack if each resumed recursively.
  ManualClock clock;
  Scheduler s(clock);
  int result = -1;
  s.Spawn([](int* out) -> Task<void> { *out = co_await Chain(100000); }(&result));
  s.RunUntilIdle();
  EXPECT_EQ(result, 100000);
}

TEST(SchedulerTest, YieldInterleavesCoroutines) {
  ManualClock clock;
  Scheduler s(clock);
  std::string trace;
  auto worker = [](Scheduler* s, std::string* t, char c) -> Task<void> {
    for (int i = 0; i < 3; i++) {
      t->push_back(c);
      co_await s->Yield();
    }
  };
  s.Spawn(worker(&s, &trace, 'a'));
  s.Spawn(worker(&s, &trace, 'b'));
  s.RunUntilIdle();
  EXPECT_EQ(trace, "ababab");
}

// What coroutines leave for the end of their round runs once, after every coroutine of the
// round, in the order it was left; one left by such a call waits for the next round.
TEST(SchedulerTest, WhatARoundLeavesForItsEndRunsAfterAllItsCoroutines) {
  ManualClock clock;
  Scheduler s(clock);
  std::string trace;
  auto step = [](Scheduler* s, std::string* t, char c) -> Task<void> {
    t->push_back(c);
    s->AtRoundEnd([s, t, c] {
      t->push_back(static_cast<char>(c - 'a' + 'A'));
      if (c == 'a') s->AtRoundEnd([t] { t->push_back('!'); });
    });
    co_await s->Yield();
    t->push_back(c);
  };
  s.Spawn(step(&s, &trace, 'a'));
  s.Spawn(step(&s, &trace, 'b'));
  EXPECT_TRUE(s.RunOnce());
  EXPECT_EQ(trace, "abAB");
  EXPECT_TRUE(s.RunOnce());
  EXPECT_EQ(trace, "abABab!");
  EXPECT_FALSE(s.RunOnce());
  EXPECT_EQ(s.live(), 0u);
}

TEST(SchedulerTest, SleepWakesInDeadlineOrderAndNotBefore) {
  ManualClock clock;
  Scheduler s(clock);
  std::vector<int> woke;
  auto sleeper = [](Scheduler* s, std::vector<int>* w, int id, uint64_t ns) -> Task<void> {
    co_await s->SleepFor(ns);
    w->push_back(id);
  };
  s.Spawn(sleeper(&s, &woke, 1, 300));
  s.Spawn(sleeper(&s, &woke, 2, 100));
  s.Spawn(sleeper(&s, &woke, 3, 100));
  s.RunOnce();  // all three go to sleep
  s.RunOnce();
  EXPECT_TRUE(woke.empty()) << "no time has passed";
  clock.Advance(150);
  s.RunOnce();
  s.RunOnce();
  EXPECT_EQ(woke, (std::vector<int>{2, 3}));
  clock.Advance(150);
  s.RunUntilIdle();
  EXPECT_EQ(woke, (std::vector<int>{2, 3, 1}));
}

struct CountingAlarm : Alarm {
  std::vector<uint64_t> at;  // clock time of every call
  Clock* clock = nullptr;
  void OnAlarm() override { at.push_back(clock->NowNs()); }
};

// Alarms fire in deadline order, not before their time, once per SetAlarm; they keep no task
// alive, and a cancelled one never fires.
TEST(SchedulerTest, AlarmsFireAtTheirDeadlineAndCanBeCancelled) {
  ManualClock clock;
  Scheduler s(clock);
  CountingAlarm a, b;
  a.clock = b.clock = &clock;
  s.SetAlarm(200, &a);
  s.SetAlarm(100, &b);
  s.SetAlarm(300, &a);
  EXPECT_EQ(s.live(), 0u) << "an alarm is not a task";
  EXPECT_EQ(s.NextTimerNs(), 100u);
  s.RunOnce();
  EXPECT_TRUE(a.at.empty() && b.at.empty());
  clock.Advance(250);
  s.RunOnce();
  EXPECT_EQ(b.at, (std::vector<uint64_t>{250}));
  EXPECT_EQ(a.at, (std::vector<uint64_t>{250}));
  s.CancelAlarms(&a);
  EXPECT_EQ(s.NextTimerNs(), UINT64_MAX);
  clock.Advance(100);
  s.RunOnce();
  EXPECT_EQ(a.at.size(), 1u) << "cancelled";
}

TEST(SchedulerTest, WakeHookFiresWhenIdleSchedulerGetsWork) {
  // A driver of many schedulers on one thread learns of new work only through this hook: it must
  // fire on the idle -> busy transition, and not again while work is queued.
  ManualClock clock;
  Scheduler s(clock);
  int wakes = 0;
  s.SetWakeHook([&] { wakes++; });
  s.Spawn([]() -> Task<void> { co_return; }());
  s.Spawn([]() -> Task<void> { co_return; }());
  EXPECT_EQ(wakes, 1);
  EXPECT_TRUE(s.has_ready());
  s.RunUntilIdle();
  EXPECT_FALSE(s.has_ready());
  EXPECT_EQ(s.resumes(), 2u);
  s.Spawn([](Scheduler* s) -> Task<void> { co_await s->SleepFor(10); }(&s));
  EXPECT_EQ(wakes, 2);
  s.RunOnce();  // goes to sleep
  clock.Advance(10);
  s.RunOnce();  // the timer fires: the sleeper becomes ready, which is new work
  EXPECT_EQ(wakes, 3);
  s.RunUntilIdle();
}

TEST(SchedulerTest, DestroysUnfinishedTasks) {
  // A task parked forever (here: sleeping past the end of the test) is freed by ~Scheduler;
  // the sanitizer builds would report a leak otherwise.
  ManualClock clock;
  auto s = std::make_unique<Scheduler>(clock);
  s->Spawn([](Scheduler* s) -> Task<void> { co_await s->SleepFor(1'000'000); }(s.get()));
  s->RunOnce();
  EXPECT_EQ(s->live(), 1u);
  s.reset();
}

}  // namespace
}  // namespace pond
