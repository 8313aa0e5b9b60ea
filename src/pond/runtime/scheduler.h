// Scheduler: one per worker thread; runs that worker's coroutines and never blocks the thread.
//
// A round (RunOnce) resumes every coroutine that was ready when the round began, wakes sleepers
// whose time has come, then lets each Poller (the transport endpoint, the message inbox) poll for
// completions and messages, and finally flush what the round buffered (EndRound). So everything a
// worker's coroutines send to one destination during one round leaves as one batch (Dandelion's
// batching), across coroutines.
//
// Thread rules: all methods are called from the owning worker thread only. Other threads reach a
// worker through the transport, never through its scheduler.
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "pond/clock.h"
#include "pond/task.h"

namespace pond {

namespace detail {
// The frame of every unfinished root task is on an intrusive list through its promise, so
// spawning one (once per routed call) allocates nothing beyond the frame itself.
struct RootLink {
  RootLink* prev = nullptr;
  RootLink* next = nullptr;
  std::coroutine_handle<> frame;
};
}  // namespace detail

// Something the scheduler polls once per round.
class Poller {
 public:
  virtual ~Poller() = default;
  // Moves finished work to the ready queue; returns true if it found any.
  virtual bool Poll() = 0;
  // Called once per round after the ready coroutines ran: send what they buffered. Pollers are
  // called in reverse order of registration, so a higher layer registered later (e.g. a lock
  // client batching requests) can hand its batch to a lower one (the endpoint) in the same round.
  virtual void EndRound() {}
};

// Something woken at a deadline that is not a coroutine: a client that resends the requests
// whose answer is overdue. A pending alarm is not a root task, so it keeps no Run alive, and it
// costs nothing until its deadline.
class Alarm {
 public:
  virtual ~Alarm() = default;
  // Called in the first round at or after the deadline, before the round's polls, so that what
  // it sends leaves in that round.
  virtual void OnAlarm() = 0;
};

class Scheduler {
 public:
  explicit Scheduler(Clock& clock);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Takes ownership of a root task and makes it runnable; the frame is freed when it finishes.
  void Spawn(Task<void> task);
  // Makes a suspended coroutine runnable in the next round.
  void Ready(std::coroutine_handle<> h) {
    if (ready_.empty() && wake_) wake_();
    ready_.push_back(h);
  }
  // Called when an idle scheduler gets work (its ready queue becomes non-empty), so that a
  // driver that runs many schedulers on one thread (the simulator) knows whom to run next.
  // Real threads poll instead and need no hook.
  void SetWakeHook(std::function<void()> hook) { wake_ = std::move(hook); }
  // Asks for a round although no coroutine is ready: something outside the rounds (a change of
  // membership) left work for the pollers or alarms, and a simulated worker that is idle would
  // otherwise not run until its next timer.
  void Poke() {
    if (ready_.empty() && wake_) wake_();
  }
  bool has_ready() const { return !ready_.empty(); }
  void AddPoller(Poller* p) { pollers_.push_back(p); }

  // One round. Returns true if anything ran or completed.
  bool RunOnce();
  // Runs rounds until every spawned task has finished.
  void RunUntilIdle();

  // Root tasks not finished yet.
  size_t live() const { return live_; }
  // Destroys every unfinished root task (and so the tasks it awaits), e.g. coroutines parked on
  // a reply that will never come. Owners call it while the objects those coroutines use still
  // exist; the destructor calls it too.
  void DestroyUnfinished();
  Clock& clock() { return clock_; }
  uint64_t rounds() const { return rounds_; }
  uint64_t resumes() const { return resumes_; }  // coroutine resumptions, over all rounds

  // co_await sched.Yield(): let the other ready coroutines run first.
  auto Yield() {
    struct Awaiter {
      Scheduler* s;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { s->Ready(h); }
      void await_resume() const noexcept {}
    };
    return Awaiter{this};
  }

  // co_await sched.SleepUntil(t): resume in the first round at or after clock time t.
  auto SleepUntil(uint64_t deadline_ns) {
    struct Awaiter {
      Scheduler* s;
      uint64_t deadline;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { s->AddTimer(deadline, h); }
      void await_resume() const noexcept {}
    };
    return Awaiter{this, deadline_ns};
  }
  auto SleepFor(uint64_t ns) { return SleepUntil(clock_.NowNs() + ns); }

  // Calls a->OnAlarm() in the first round at or after clock time `deadline_ns`. An alarm set
  // twice fires twice. CancelAlarms drops every pending call of `a` (its owner calls it before
  // it goes away).
  void SetAlarm(uint64_t deadline_ns, Alarm* a) {
    timers_.push(Timer{deadline_ns, timer_seq_++, {}, a});
  }
  void CancelAlarms(const Alarm* a);

  // Calls `fn` once at the end of the current round, after the pollers' EndRound (or of the next
  // round, if called between rounds or from such a call): work that many coroutines of one round
  // leave behind for another thread — answers to write to one client — is then done once for
  // them all rather than once each.
  void AtRoundEnd(std::function<void()> fn) { round_end_.push_back(std::move(fn)); }

  // Earliest pending timer, or UINT64_MAX; lets a simulated clock jump ahead.
  uint64_t NextTimerNs() const { return timers_.empty() ? UINT64_MAX : timers_.top().deadline; }

 private:
  struct Timer {
    uint64_t deadline;
    uint64_t seq;               // ties broken by insertion order, so wake-ups are deterministic
    std::coroutine_handle<> h;  // a sleeper, or
    Alarm* alarm = nullptr;     // an alarm
    bool operator>(const Timer& o) const {
      return deadline != o.deadline ? deadline > o.deadline : seq > o.seq;
    }
  };
  void AddTimer(uint64_t deadline, std::coroutine_handle<> h) {
    timers_.push(Timer{deadline, timer_seq_++, h, nullptr});
  }
  using RootLink = detail::RootLink;
  friend void RootStarted(Scheduler* s, RootLink* link);
  friend void RootFinished(Scheduler* s, RootLink* link);

  Clock& clock_;
  std::vector<std::coroutine_handle<>> ready_;
  std::vector<std::coroutine_handle<>> running_;
  std::vector<Poller*> pollers_;
  std::vector<std::function<void()>> round_end_, ending_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  RootLink roots_;  // sentinel of the circular list of unfinished roots, freed in ~Scheduler
  size_t live_ = 0;
  uint64_t timer_seq_ = 0;
  uint64_t rounds_ = 0;
  uint64_t resumes_ = 0;
  std::function<void()> wake_;
};

}  // namespace pond
