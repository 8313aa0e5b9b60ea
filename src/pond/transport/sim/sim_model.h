// What the sim transport derives from a Testbed (include/pond/testbed.h, the public description
// of the simulated hardware): the time an MN's NIC spends on one op, the time bytes take on the
// wire, and the fault knobs in the form the engine's FaultModel takes. Pure functions of the
// testbed, so every caller (fabric, driver, tests) computes the same numbers.
#pragma once

#include <cstdint>

#include "pond/sim/faults.h"
#include "pond/testbed.h"

namespace pond {

inline uint64_t WireNs(const Testbed& t, uint64_t bytes) {
  return static_cast<uint64_t>(static_cast<double>(bytes) * 8.0 / t.link_gbps);
}

// Service time of one op of `verb_kind` (0 READ, 1 WRITE, 2 CAS, 3 FAA) carrying `bytes`; an
// atomic on the NIC's device memory (`device`) at that memory's rate.
inline uint64_t NicServiceNs(const Testbed& t, int verb_kind, uint32_t bytes, bool device = false) {
  double mops = verb_kind == 0   ? t.mn_read_mops
                : verb_kind == 1 ? t.mn_write_mops
                : device         ? t.mn_device_atomic_mops
                                 : t.mn_atomic_mops;
  return static_cast<uint64_t>(1000.0 / mops) + WireNs(t, bytes);
}

inline sim::FaultConfig FaultConfigOf(const MessageFaults& f) {
  sim::FaultConfig c;
  c.drop_probability = f.drop_probability;
  c.duplicate_probability = f.duplicate_probability;
  c.delay_probability = f.delay_probability;
  c.delay_distribution = f.delay_distribution == DelayDistribution::kExponential
                             ? sim::DelayDistribution::kExponential
                             : sim::DelayDistribution::kUniform;
  c.delay_ns_min = f.delay_ns_min;
  c.delay_ns_max = f.delay_ns_max;
  c.delay_ns_mean = f.delay_ns_mean;
  return c;
}

}  // namespace pond
