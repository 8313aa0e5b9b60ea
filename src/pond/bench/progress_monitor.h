// ProgressMonitor: calls `tick` about once a wall-clock second from a thread of its own while a
// benchmark runs, and stops when Stop() is called or it is destroyed.
//
// The run's clock may be virtual and advanced by another thread, so `tick` must read only what
// clients publish in atomics (committed counts, the run's latest time), never the clock itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace pond::bench {

class ProgressMonitor {
 public:
  explicit ProgressMonitor(std::function<void()> tick)
      : tick_(std::move(tick)), thread_([this] { Loop(); }) {}
  ~ProgressMonitor() { Stop(); }
  ProgressMonitor(const ProgressMonitor&) = delete;
  ProgressMonitor& operator=(const ProgressMonitor&) = delete;

  void Stop() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (!done_) {
      if (cv_.wait_for(lock, std::chrono::seconds(1), [&] { return done_; })) break;
      tick_();
    }
  }

  std::function<void()> tick_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: started after the members it uses
};

}  // namespace pond::bench
