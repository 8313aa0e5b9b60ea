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
  };
  std::coroutine_handle<promise_type> h;
};

// co_await CurrentHandle{} yields the awaiting coroutine's own handle without suspending.
struct CurrentHandle {
  std::coroutine_handle<> h;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> self) noexcept {
    h = self;
    return false;
  }
  std::coroutine_handle<> await_resume() const noexcept { return h; }
};

RootTask RunRoot(Task<void> task, Scheduler* sched) {
  co_await std::move(task);
  RootFinished(sched, co_await CurrentHandle{});
}

}  // namespace

void RootFinished(Scheduler* s, std::coroutine_handle<> root) {
  size_t erased = s->roots_.erase(root.address());
  POND_ASSERT(erased == 1);
  (void)erased;
}

Scheduler::~Scheduler() { DestroyUnfinished(); }

void Scheduler::DestroyUnfinished() {
  // Destroying a root frame destroys the task it awaits, and so on down the chain.
  std::unordered_set<void*> roots;
  roots.swap(roots_);
  for (void* frame : roots) std::coroutine_handle<>::from_address(frame).destroy();
  ready_.clear();
  timers_ = {};
}

void Scheduler::Spawn(Task<void> task) {
  RootTask root = RunRoot(std::move(task), this);
  roots_.insert(root.h.address());
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
      Ready(timers_.top().h);
      timers_.pop();
      progress = true;
    }
  }
  // Poll before EndRound, so that replies a message handler produces leave in this round.
  for (Poller* p : pollers_) progress |= p->Poll();
  for (auto it = pollers_.rbegin(); it != pollers_.rend(); ++it) (*it)->EndRound();
  return progress;
}

void Scheduler::RunUntilIdle() {
  while (live() > 0) RunOnce();
}

}  // namespace pond
