// Clock: the only way Pond code learns the time, and what Session::clock() and Cluster::clock()
// hand a client.
//
// Protocol code takes a Clock& and never calls std::chrono or the OS directly, so the same code
// runs on real time (an embedded cluster) and on a simulated cluster's virtual time, where
// the time a client sees is the simulation's. Times are nanoseconds since an arbitrary,
// per-clock epoch; they only ever grow.
//
// Thread rules: a cluster's real-time clock may be read from any thread; a simulated cluster's
// clock only from inside its Run (one thread).
#pragma once

#include <cstdint>

namespace pond {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t NowNs() = 0;
};

}  // namespace pond
