#include "pond/runtime/scheduler.h"

#include "pond/base/assert.h"

namespace pond {

namespace {

// The frame that owns a spawned task: it awaits the task, deregisters, and frees itself.
struct RootTask {
  struct promise_type {
    RootTask get_return_object() {
      return RootTask{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
    // From the frame pool like every Task frame: a root is spawned per routed call.
    static void* operator new(size_t bytes) { return detail::AllocateFrame(bytes); }
    static void operator delete(void* p, size_t bytes) { detail::FreeFrame(p, bytes); }
    detail::RootLink link;
  };
  std::coroutine_handle<promise_type> h;
};

// co_await OwnLink{} yields the awaiting root's list link without suspending.
struct OwnLink {
  detail::RootLink* link = nullptr;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<RootTask::promise_type> self) noexcept {
    link = &self.promise().link;
    return false;
  }
  detail::RootLink* await_resume() const noexcept { return link; }
};

RootTask RunRoot(Task<void> task, Scheduler* sched) {
  co_await std::move(task);
  RootFinished(sched, co_await OwnLink{});
}

}  // namespace

void RootStarted(Scheduler* s, detail::RootLink* link) {
  link->prev = &s->roots_;
  link->next = s->roots_.next;
  s->roots_.next->prev = link;
  s->roots_.next = link;
  s->live_++;
}

void RootFinished(Scheduler* s, detail::RootLink* link) {
  POND_ASSERT(s->live_ > 0 && link->next->prev == link && link->prev->next == link);
  link->prev->next = link->next;
  link->next->prev = link->prev;
  s->live_--;
}

Scheduler::Scheduler(Clock& clock) : clock_(clock) {
  roots_.prev = &roots_;
  roots_.next = &roots_;
}

Scheduler::~Scheduler() { DestroyUnfinished(); }

void Scheduler::DestroyUnfinished() {
  // Destroying a root frame destroys the task it awaits, and so on down the chain. The frames
  // are taken off the list first, so that whatever their destruction does to the scheduler
  // cannot disturb the walk.
  std::vector<std::coroutine_handle<>> frames;
  frames.reserve(live_);
  for (RootLink* l = roots_.next; l != &roots_; l = l->next) frames.push_back(l->frame);
  roots_.prev = &roots_;
  roots_.next = &roots_;
  live_ = 0;
  for (std::coroutine_handle<> frame : frames) frame.destroy();
  ready_.clear();
  timers_ = {};
}

void Scheduler::Spawn(Task<void> task) {
  RootTask root = RunRoot(std::move(task), this);
  root.h.promise().link.frame = root.h;
  RootStarted(this, &root.h.promise().link);
  Ready(root.h);
}

bool Scheduler::RunOnce() {
  rounds_++;
  bool progress = false;
  running_.swap(ready_);
  for (auto h : running_) {
    h.resume();
    progress = true;
  }
  resumes_ += running_.size();
  running_.clear();
  if (!timers_.empty()) {
    uint64_t now = clock_.NowNs();
    while (!timers_.empty() && timers_.top().deadline <= now) {
      Timer t = timers_.top();
      timers_.pop();
      if (t.alarm != nullptr) {
        t.alarm->OnAlarm();  // may set alarms: they go into the heap and wait their turn
      } else {
        Ready(t.h);
      }
      progress = true;
    }
  }
  // Poll before EndRound, so that replies a message handler produces leave in this round.
  for (Poller* p : pollers_) progress |= p->Poll();
  for (auto it = pollers_.rbegin(); it != pollers_.rend(); ++it) (*it)->EndRound();
  if (!round_end_.empty()) {
    ending_.swap(round_end_);
    for (auto& fn : ending_) fn();
    ending_.clear();
    progress = true;
  }
  return progress;
}

void Scheduler::CancelAlarms(const Alarm* a) {
  std::vector<Timer> keep;
  keep.reserve(timers_.size());
  for (; !timers_.empty(); timers_.pop()) {
    if (timers_.top().alarm != a) keep.push_back(timers_.top());
  }
  timers_ = decltype(timers_)(std::greater<>(), std::move(keep));
}

void Scheduler::RunUntilIdle() {
  while (live() > 0) RunOnce();
}

}  // namespace pond
