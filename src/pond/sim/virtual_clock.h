// VirtualClock: simulated time, the pond::Clock that code running inside the simulator sees.
//
// The clock belongs to one sim::Engine, which is the only thing that moves it: to the time of
// each event it runs, and to the end of each RunUntil. Protocol code holds it as a Clock& and
// cannot tell it from SystemClock, except that time stands still while an event runs (a
// simulated CPU spends time only where a model says so, by scheduling later events).
//
// Thread rules: single-threaded, like the engine that owns it.
// Invariant: NowNs() never decreases. AdvanceTo checks it in every build, because a clock that
// went back would silently reorder a whole simulated history.
#pragma once

#include <cstdint>

#include "pond/base/assert.h"
#include "pond/clock.h"

namespace pond::sim {

class VirtualClock final : public Clock {
 public:
  VirtualClock() = default;
  VirtualClock(const VirtualClock&) = delete;
  VirtualClock& operator=(const VirtualClock&) = delete;

  uint64_t NowNs() override { return now_ns_; }
  uint64_t now_ns() const { return now_ns_; }

 private:
  friend class Engine;
  void AdvanceTo(uint64_t t_ns) {
    POND_CHECK_MSG(t_ns >= now_ns_, "virtual time must not go backwards");
    now_ns_ = t_ns;
  }

  uint64_t now_ns_ = 0;
};

}  // namespace pond::sim
