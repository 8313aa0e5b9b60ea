#include "pond/sim/engine.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pond/base/hash.h"

// Counts heap allocations so that a test can show the engine's hot path makes none. Replacing
// the global operator new is legal once per program; sim_test has only this one. GCC sees
// new and delete inlined into each other and cannot tell that this pair matches, hence the
// pragma.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
uint64_t g_allocation_count = 0;
}  // namespace

void* operator new(std::size_t n) {
  g_allocation_count++;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  g_allocation_count++;
  size_t align = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace pond::sim {
namespace {

// Random tests draw from the framework's seed (printed on failure), so `--gtest_random_seed=N`
// replays a failing run.
uint64_t TestSeed() {
  int s = ::testing::UnitTest::GetInstance()->random_seed();
  uint64_t seed = s == 0 ? 20240601 : static_cast<uint64_t>(s);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

TEST(EngineTest, StartsAtTimeZeroWithNothingPending) {
  Engine e(1);
  EXPECT_EQ(e.now(), 0u);
  EXPECT_EQ(e.clock().NowNs(), 0u);
  EXPECT_EQ(e.pending(), 0u);
  EXPECT_FALSE(e.Step());
  EXPECT_EQ(e.NextEventNs(), UINT64_MAX);
}

TEST(EngineTest, RunsEventsInTimeOrder) {
  Engine e(1);
  std::vector<uint64_t> seen;
  for (uint64_t t : {50, 10, 40, 20, 30}) e.At(t, [&e, &seen] { seen.push_back(e.now()); });
  while (e.Step()) {
  }
  EXPECT_EQ(seen, (std::vector<uint64_t>{10, 20, 30, 40, 50}));
  EXPECT_EQ(e.now(), 50u);
  EXPECT_EQ(e.stats().events_run, 5u);
}

TEST(EngineTest, EqualTimesRunInSchedulingOrder) {
  Engine e(1);
  std::vector<int> seen;
  // Interleave two times so that heap order alone would not give FIFO by accident.
  for (int i = 0; i < 100; i++) {
    e.At(i % 2 == 0 ? 7 : 3, [&seen, i] { seen.push_back(i); });
  }
  while (e.Step()) {
  }
  std::vector<int> want;
  for (int i = 1; i < 100; i += 2) want.push_back(i);  // time 3, in scheduling order
  for (int i = 0; i < 100; i += 2) want.push_back(i);  // then time 7
  EXPECT_EQ(seen, want);
}

TEST(EngineTest, EventScheduledForNowRunsAfterThoseAlreadyDue) {
  Engine e(1);
  std::vector<std::string> seen;
  e.At(5, [&] {
    seen.push_back("a");
    // Due now, but b and c were scheduled first: FIFO puts this one after them.
    e.After(0, [&] { seen.push_back("a-child"); });
  });
  e.At(5, [&] { seen.push_back("b"); });
  e.At(5, [&] { seen.push_back("c"); });
  while (e.Step()) {
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c", "a-child"}));
}

TEST(EngineTest, EventsCanScheduleEvents) {
  Engine e(1);
  int count = 0;
  struct Ticker {
    Engine* e;
    int* count;
    void operator()() const {
      if (++*count < 10) e->After(100, *this);
    }
  };
  e.At(0, Ticker{&e, &count});
  while (e.Step()) {
  }
  EXPECT_EQ(count, 10);
  EXPECT_EQ(e.now(), 900u);
}

TEST(EngineTest, CancelledEventNeverRuns) {
  Engine e(1);
  int runs = 0;
  EventId a = e.At(10, [&] { runs += 1; });
  EventId b = e.At(20, [&] { runs += 10; });
  EXPECT_TRUE(e.IsPending(a));
  EXPECT_TRUE(e.Cancel(a));
  EXPECT_FALSE(e.IsPending(a));
  EXPECT_EQ(e.pending(), 1u);
  // The stale entry at 10 is skipped: the next event is at 20.
  EXPECT_EQ(e.NextEventNs(), 20u);
  EXPECT_TRUE(e.Step());
  EXPECT_EQ(runs, 10);
  EXPECT_EQ(e.now(), 20u);
  EXPECT_FALSE(e.Step());
  EXPECT_FALSE(e.IsPending(b));
  EXPECT_EQ(e.stats().events_cancelled, 1u);
}

TEST(EngineTest, CancelIsANoOpForRunCancelledOrNoEvent) {
  Engine e(1);
  EventId ran = e.At(1, [] {});
  ASSERT_TRUE(e.Step());
  EXPECT_FALSE(e.Cancel(ran));
  EventId twice = e.At(2, [] {});
  EXPECT_TRUE(e.Cancel(twice));
  EXPECT_FALSE(e.Cancel(twice));
  EXPECT_FALSE(e.Cancel(EventId()));
  EXPECT_EQ(e.stats().events_cancelled, 1u);
}

TEST(EngineTest, StaleIdDoesNotCancelTheEventThatReusedItsSlot) {
  Engine e(1);
  EventId old_id = e.At(1, [] {});
  ASSERT_TRUE(e.Step());  // frees the slot
  int runs = 0;
  EventId new_id = e.At(2, [&] { runs++; });  // takes the same slot (LIFO free list)
  EXPECT_NE(old_id, new_id);
  // The id carries the sequence number, so the old one no longer names anything.
  EXPECT_FALSE(e.Cancel(old_id));
  EXPECT_TRUE(e.IsPending(new_id));
  ASSERT_TRUE(e.Step());
  EXPECT_EQ(runs, 1);
}

TEST(EngineTest, RunningEventCannotCancelItself) {
  Engine e(1);
  EventId self;
  bool cancelled = true;
  self = e.At(1, [&] { cancelled = e.Cancel(self); });
  ASSERT_TRUE(e.Step());
  EXPECT_FALSE(cancelled);
}

TEST(EngineTest, EventCanCancelAnotherDueAtTheSameTime) {
  Engine e(1);
  bool second_ran = false;
  EventId second;
  e.At(5, [&] { EXPECT_TRUE(e.Cancel(second)); });
  second = e.At(5, [&] { second_ran = true; });
  while (e.Step()) {
  }
  EXPECT_FALSE(second_ran);
}

TEST(EngineTest, RunUntilRunsEverythingDueAndSetsTheClock) {
  Engine e(1);
  std::vector<uint64_t> seen;
  auto note = [&] { seen.push_back(e.now()); };
  e.At(10, note);
  e.At(20, [&] {
    note();
    e.After(0, note);  // due at 20 too: runs within RunUntil(20)
    e.After(5, note);  // due at 25: does not
  });
  e.At(30, note);
  e.RunUntil(20);
  EXPECT_EQ(seen, (std::vector<uint64_t>{10, 20, 20}));
  EXPECT_EQ(e.now(), 20u);
  e.RunUntil(27);
  EXPECT_EQ(seen, (std::vector<uint64_t>{10, 20, 20, 25}));
  EXPECT_EQ(e.now(), 27u);  // no event at 27, the clock still moves there
  e.RunUntil(27);           // a no-op
  EXPECT_EQ(e.now(), 27u);
  e.RunUntil(1000);
  EXPECT_EQ(seen.back(), 30u);
  EXPECT_EQ(e.now(), 1000u);
}

TEST(EngineTest, RunWhileChecksThePredicateBeforeEachEvent) {
  Engine e(1);
  int runs = 0;
  for (int i = 0; i < 10; i++) e.At(i, [&] { runs++; });
  EXPECT_TRUE(e.RunWhile([&] { return runs < 4; }));
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(e.now(), 3u);
  // The queue runs dry with the predicate still true.
  EXPECT_FALSE(e.RunWhile([] { return true; }));
  EXPECT_EQ(runs, 10);
}

TEST(EngineTest, AfterIsRelativeToNow) {
  Engine e(1);
  uint64_t ran_at = 0;
  e.RunUntil(1000);
  e.After(250, [&] { ran_at = e.now(); });
  while (e.Step()) {
  }
  EXPECT_EQ(ran_at, 1250u);
}

TEST(EngineTest, ClockIsAPondClockReadingVirtualTime) {
  Engine e(1);
  Clock& clock = e.clock();
  uint64_t seen = 0;
  e.At(12345, [&] { seen = clock.NowNs(); });
  ASSERT_TRUE(e.Step());
  EXPECT_EQ(seen, 12345u);
}

TEST(EngineTest, VirtualClockNeverGoesBackwards) {
  Engine e(TestSeed());
  Rng r = e.Fork();
  uint64_t last = 0;
  bool backwards = false;
  struct Hop {
    Engine* e;
    Rng* r;
    uint64_t* last;
    bool* backwards;
    void operator()() const {
      if (e->now() < *last) *backwards = true;
      *last = e->now();
      // Delays of 0 and repeated times included on purpose.
      if (e->stats().events_run < 50000) e->After(r->Uniform(20), *this);
    }
  };
  for (int i = 0; i < 50; i++) e.At(r.Uniform(100), Hop{&e, &r, &last, &backwards});
  while (e.Step()) {
  }
  EXPECT_FALSE(backwards);
  EXPECT_GE(e.stats().events_run, 50000u);
}

TEST(EngineDeathTest, SchedulingInThePastAborts) {
  Engine e(1);
  e.RunUntil(100);
  EXPECT_DEATH(e.At(99, [] {}), "event scheduled in the past");
  EXPECT_DEATH(e.RunUntil(50), "RunUntil into the past");
}

TEST(EngineDeathTest, PendingLimitAborts) {
  EngineOptions options;
  options.pending_event_count_max = 4;
  Engine e(1, options);
  for (int i = 0; i < 4; i++) e.At(1, [] {});
  EXPECT_DEATH(e.At(1, [] {}), "too many pending events");
}

TEST(EngineTest, DestructorDestroysPendingCallablesWithoutRunningThem) {
  auto token = std::make_shared<int>(0);
  {
    Engine e(1);
    e.At(5, [token] { ++*token; });
    e.At(6, [token] { ++*token; });
    EventId c = e.At(7, [token] { ++*token; });
    EXPECT_EQ(token.use_count(), 4);
    EXPECT_TRUE(e.Cancel(c));
    EXPECT_EQ(token.use_count(), 3);  // cancel destroys the capture at once
  }
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(*token, 0);
}

TEST(EngineTest, CallableOfTheMaximumSizeFits) {
  Engine e(1);
  // Big is one pointer over the limit (At would refuse it at compile time); Exact is at it.
  struct Big {
    uint64_t words[Engine::kCaptureBytesMax / 8];
    uint64_t* out;
  };
  struct Exact {
    uint64_t words[Engine::kCaptureBytesMax / 8 - 1];
    uint64_t* out;
    void operator()() const {
      uint64_t s = 0;
      for (uint64_t w : words) s += w;
      *out = s;
    }
  };
  static_assert(sizeof(Exact) == Engine::kCaptureBytesMax);
  static_assert(sizeof(Big) > Engine::kCaptureBytesMax);
  uint64_t sum = 0;
  Exact x{{1, 2, 3, 4, 5}, &sum};
  e.At(1, x);
  ASSERT_TRUE(e.Step());
  EXPECT_EQ(sum, 15u);
}

// After warm-up (slots and heap grown to the working set), scheduling, running and cancelling
// events allocate nothing.
TEST(EngineTest, SteadyStateMakesNoHeapAllocations) {
  const uint64_t at_start = g_allocation_count;
  Engine e(7);
  struct Actor {
    Engine* e;
    Rng rng{0};
    EventId timeout;
    uint64_t fired = 0;
  };
  std::vector<Actor> actors(300);
  struct Act {
    Actor* a;
    void operator()() const {
      Engine& e = *a->e;
      // Timeouts that are usually cancelled before they fire, as an RPC layer would set them:
      // short ones (on the timing wheel) and long ones (beyond its span, in the heap).
      e.Cancel(a->timeout);
      Actor* self = a;
      uint64_t timeout_ns = a->rng.Chance(0.5) ? 5000 : 3 * Engine::kWheelSpanNs;
      a->timeout = e.After(timeout_ns, [self] { self->fired++; });
      e.After(1 + a->rng.Uniform(1000), *this);
    }
  };
  for (size_t i = 0; i < actors.size(); i++) {
    actors[i].e = &e;
    actors[i].rng = e.StreamRng(i);
    e.At(0, Act{&actors[i]});
  }
  e.RunUntil(200'000);  // warm-up
  uint64_t before = g_allocation_count;
  uint64_t run_before = e.stats().events_run;
  e.RunUntil(2'000'000);
  EXPECT_GT(before, at_start);  // the counter works: building and warming up allocated
  EXPECT_EQ(g_allocation_count, before);
  EXPECT_GT(e.stats().events_run - run_before, 500'000u);
  EXPECT_GT(e.stats().heap_compactions, 0u);  // the stale long timeouts were compacted away
}

// A randomized workload: actors that reschedule themselves with small random delays (many
// equal times), set timeouts and cancel some. Its trace is a hash of (time, actor, draw) for
// every event in run order.
struct TraceResult {
  uint64_t hash = 0;
  EngineStats stats;
  uint64_t end_ns = 0;
  std::vector<std::pair<uint64_t, int>> head;  // first events, for a readable diff
};

TraceResult RunRandomWorkload(uint64_t seed, uint64_t event_count) {
  Engine e(seed);
  TraceResult result;
  struct Actor {
    int id;
    Rng rng{0};
    EventId timer;
  };
  std::vector<Actor> actors(64);
  struct Ctx {
    Engine* e;
    TraceResult* out;
    uint64_t event_count;
  } ctx{&e, &result, event_count};
  struct Act {
    Ctx* c;
    Actor* a;
    void Note(int what) const {
      uint64_t x = c->e->now() * 1'000'003 + static_cast<uint64_t>(a->id * 4 + what);
      c->out->hash = Mix64(c->out->hash ^ x);
      if (c->out->head.size() < 200) c->out->head.emplace_back(c->e->now(), a->id * 4 + what);
    }
    void operator()() const {
      Note(0);
      if (c->e->stats().events_run >= c->event_count) return;
      uint64_t r = a->rng.Next();
      if (r % 4 == 0) c->e->Cancel(a->timer);
      if (r % 3 == 0) {
        Act self = *this;
        a->timer = c->e->After((r >> 8) % 64, [self] { self.Note(1); });
      }
      c->e->After((r >> 20) % 16, *this);  // delays 0..15: many events share a time
    }
  };
  for (int i = 0; i < 64; i++) {
    actors[i].id = i;
    // Half the actors use order-dependent forks, half order-independent streams.
    actors[i].rng = i % 2 == 0 ? e.Fork() : e.StreamRng(static_cast<uint64_t>(i));
    e.At(e.rng().Uniform(10), Act{&ctx, &actors[i]});
  }
  while (e.Step()) {
  }
  result.stats = e.stats();
  result.end_ns = e.now();
  return result;
}

TEST(EngineTest, SameSeedGivesIdenticalTraces) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TraceResult a = RunRandomWorkload(seed, 200'000);
  TraceResult b = RunRandomWorkload(seed, 200'000);
  EXPECT_EQ(a.head, b.head);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.stats.events_run, b.stats.events_run);
  EXPECT_EQ(a.stats.events_cancelled, b.stats.events_cancelled);
  EXPECT_GT(a.stats.events_cancelled, 0u);

  TraceResult c = RunRandomWorkload(seed + 1, 200'000);
  EXPECT_NE(a.hash, c.hash);
}

// The engine pops exactly what a naive reference queue ordered by (time, scheduling order)
// would, through random schedules, cancels (enough to force compactions), steps and RunUntils.
// Delays are short (many equal times on the wheel), straddle the wheel's span, or reach well
// beyond it (the overflow heap), so events also move from the heap to the wheel mid-run.
TEST(EngineTest, MatchesAReferenceQueue) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng r(seed);
  Engine e(seed);
  constexpr uint64_t kSpan = Engine::kWheelSpanNs;
  std::set<std::pair<uint64_t, uint64_t>> ref;  // (time, scheduling number)
  std::vector<std::pair<EventId, std::pair<uint64_t, uint64_t>>> live;
  std::vector<uint64_t> ran;  // scheduling numbers in the order the engine ran them
  uint64_t number = 0;
  for (int op = 0; op < 300'000; op++) {
    // Phases that grow the queue alternate with phases that cancel most of it, so that stale
    // entries come to outnumber live ones and compactions happen mid-run.
    const bool shrink = (op / 30'000) % 2 == 1;
    uint64_t dice = r.Uniform(100);
    if (dice < (shrink ? 10u : 50u)) {
      uint64_t kind = r.Uniform(10);
      uint64_t delay = kind < 6   ? r.Uniform(50)
                       : kind < 8 ? kSpan - 25 + r.Uniform(50)
                                  : kSpan + r.Uniform(30 * kSpan);
      uint64_t t = e.now() + delay;
      uint64_t n = number++;
      EventId id = e.At(t, [&ran, n] { ran.push_back(n); });
      ref.insert({t, n});
      live.push_back({id, {t, n}});
    } else if (dice < 80 && !live.empty()) {  // shrink: 70% cancels
      size_t i = r.Uniform(live.size());
      bool was_pending = ref.count(live[i].second) > 0;
      EXPECT_EQ(e.Cancel(live[i].first), was_pending);
      ref.erase(live[i].second);
      live[i] = live.back();
      live.pop_back();
    } else if (dice < 99) {
      bool stepped = e.Step();
      ASSERT_EQ(stepped, !ref.empty());
      if (!stepped) continue;
      ASSERT_EQ(ran.back(), ref.begin()->second);
      EXPECT_EQ(e.now(), ref.begin()->first);
      ref.erase(ref.begin());
    } else {
      // A jump of the clock that runs what is due on the way, as a driver's RunUntil does.
      uint64_t until = e.now() + r.Uniform(kSpan / 32);
      size_t ran_before = ran.size();
      e.RunUntil(until);
      for (size_t k = ran_before; k < ran.size(); k++) {
        ASSERT_FALSE(ref.empty());
        ASSERT_EQ(ran[k], ref.begin()->second);
        ASSERT_LE(ref.begin()->first, until);
        ref.erase(ref.begin());
      }
      ASSERT_TRUE(ref.empty() || ref.begin()->first > until);
      EXPECT_EQ(e.now(), until);
    }
    ASSERT_EQ(e.pending(), ref.size());
    ASSERT_EQ(e.NextEventNs(), ref.empty() ? UINT64_MAX : ref.begin()->first);
  }
  EXPECT_GT(e.stats().heap_compactions, 0u);
}

// An event scheduled beyond the wheel's span waits in the heap; one scheduled for the same time
// later, once that time is within the span, goes straight onto the wheel. The earlier-scheduled
// one must still run first.
TEST(EngineTest, EventFromBeyondTheSpanRunsBeforeLaterOnesOfItsTime) {
  Engine e(1);
  const uint64_t t = 3 * Engine::kWheelSpanNs + 7;
  std::vector<int> seen;
  e.At(t, [&] { seen.push_back(1); });  // in the heap: t is beyond now + span
  e.At(t - 10, [&] {                    // by now t is within the span
    e.At(t, [&] { seen.push_back(2); });
  });
  e.At(2 * Engine::kWheelSpanNs + 100, [&] { e.At(t, [&] { seen.push_back(3); }); });
  while (e.Step()) {
  }
  EXPECT_EQ(seen, (std::vector<int>{1, 3, 2}));
}

// A cancelled event on the wheel keeps its slot until its time comes; then the slot is reused,
// so cancel-heavy runs do not grow the slot pool without bound.
TEST(EngineTest, CancelledWheelSlotsAreReclaimed) {
  Engine e(1);
  for (int round = 0; round < 10'000; round++) {
    EventId id = e.After(100, [] { FAIL() << "cancelled event ran"; });
    EXPECT_TRUE(e.Cancel(id));
    EXPECT_FALSE(e.IsPending(id));
    e.RunUntil(e.now() + 1000);
  }
  EXPECT_EQ(e.pending(), 0u);
  EXPECT_EQ(e.NextEventNs(), UINT64_MAX);
  EXPECT_EQ(e.stats().events_cancelled, 10'000u);
}

TEST(EngineTest, StreamRngDependsOnlyOnSeedAndId) {
  Engine a(42), b(42), c(43);
  b.rng().Next();  // b's own stream has moved on; its named streams must not
  (void)b.Fork();
  Rng a1 = a.StreamRng(1), b1 = b.StreamRng(1), a2 = a.StreamRng(2), c1 = c.StreamRng(1);
  uint64_t x = a1.Next();
  EXPECT_EQ(x, b1.Next());
  EXPECT_NE(x, a2.Next());
  EXPECT_NE(x, c1.Next());
  EXPECT_NE(x, Rng(42).Next());
}

TEST(EngineTest, ForkIsDeterministicButOrderDependent) {
  Engine a(5), b(5);
  Rng fa = a.Fork(), fb = b.Fork();
  EXPECT_EQ(fa.Next(), fb.Next());
  Rng fa2 = a.Fork();
  EXPECT_NE(fa2.Next(), Rng(5).Next());
}

}  // namespace
}  // namespace pond::sim
