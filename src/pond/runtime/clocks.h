// The Clock implementations outside the simulator: SystemClock, real time for embedded
// clusters and `pond bench`, and ManualClock for tests. The interface is public
// (include/pond/clock.h); the simulator's clock is sim/virtual_clock.h.
#pragma once

#include <cstdint>

#include "pond/clock.h"

namespace pond {

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
