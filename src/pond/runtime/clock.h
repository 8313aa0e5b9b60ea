// Clock: the only way Pond code learns the time.
//
// Protocol code takes a Clock& and never calls std::chrono or the OS directly, so the same code
// runs on real time (SystemClock, for `pond bench`) and on the simulator's virtual time. Times
// are nanoseconds since an arbitrary, per-clock epoch; they only ever grow.
#pragma once

#include <cstdint>

namespace pond {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t NowNs() = 0;
};

// Monotonic real time (CLOCK_MONOTONIC). Thread-safe.
class SystemClock final : public Clock {
 public:
  uint64_t NowNs() override;
  // The process-wide instance.
  static SystemClock& Get();
};

// A clock that moves only when told to. For tests; not thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(uint64_t start_ns = 0) : now_ns_(start_ns) {}
  uint64_t NowNs() override { return now_ns_; }
  void Advance(uint64_t ns) { now_ns_ += ns; }
  void Set(uint64_t ns) { now_ns_ = ns; }

 private:
  uint64_t now_ns_;
};

}  // namespace pond
