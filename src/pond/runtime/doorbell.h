// Doorbell: how a worker thread with nothing to do sleeps until another thread has work for it
// (a call submitted to it, a message for it), or a bound passes. Ringing costs a store and a load
// while the worker is awake; only a sleeping worker costs the ringer a lock and a wake.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace pond {

class Doorbell {
 public:
  // Any thread: there is work for the owner. A ring while it is awake makes its next Wait return
  // at once, so none is lost.
  void Ring() {
    rung_.store(true);
    // Both sequentially consistent, as in Wait: either this sees it sleeping, or it sees the ring.
    if (sleeping_.load()) {
      std::lock_guard lock(mu_);
      woken_.notify_one();
    }
  }
  // The owner's thread: returns once rung (since the last Wait) or after `most`.
  void Wait(std::chrono::microseconds most) {
    if (rung_.exchange(false)) return;
    std::unique_lock lock(mu_);
    sleeping_.store(true);
    woken_.wait_for(lock, most, [this] { return rung_.load(); });
    sleeping_.store(false);
    rung_.store(false);
  }

 private:
  std::atomic<bool> rung_{false}, sleeping_{false};
  std::mutex mu_;
  std::condition_variable woken_;
};

}  // namespace pond
