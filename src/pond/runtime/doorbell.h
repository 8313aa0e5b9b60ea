// Doorbell: how a worker thread with nothing to do sleeps until another thread has work for it
// (a call submitted to it, a message for it), or a bound passes — or, if it names one, until a
// file descriptor is readable (a transport's event descriptor: UCX's, armed). Ringing costs a
// store and a load while the worker is awake; only a sleeping worker costs the ringer a write to
// an eventfd. An eventfd rather than a condition variable, so that one sleep waits on both.
#pragma once

#include <atomic>
#include <chrono>

namespace pond {

class Doorbell {
 public:
  Doorbell();
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  // Any thread: there is work for the owner. A ring while it is awake makes its next Wait return
  // at once, so none is lost.
  void Ring() {
    rung_.store(true);
    // Both sequentially consistent, as in Wait: either this sees it sleeping, or it sees the ring.
    if (sleeping_.load()) Wake();
  }
  // The owner's thread: returns once rung (since the last Wait), once `fd` is readable (if not
  // -1), or after `most`.
  void Wait(std::chrono::microseconds most, int fd = -1);

 private:
  void Wake();

  std::atomic<bool> rung_{false}, sleeping_{false};
  int event_fd_;
};

}  // namespace pond
