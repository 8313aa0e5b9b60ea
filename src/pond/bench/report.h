// The pieces of a benchmark's report that every workload prints and writes alike: the abort
// breakdown (every reason in AbortCounts::Reasons()) and the simulated MN NICs' busy shares.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pond/cluster.h"

namespace pond::bench {

// "lock conflict 3, newer version 0, ..., user 0": every reason, in table order.
std::string AbortBreakdown(const AbortCounts& a);
// {"lock_conflict": 3, ...}: every reason.
nlohmann::json AbortsJson(const AbortCounts& a);

// One MN NIC over a window of `window_ns`: " 61.3% (READ 20.1%, WRITE 41.2%, CAS 0.0%, FAA 0.0%)".
std::string NicLine(const SimStats::Nic& n, double window_ns);
// Every MN NIC: [{"READ": {"ops": N, "busy_share": F}, ...}, ...].
nlohmann::json NicsJson(const SimStats& s, double window_ns);

}  // namespace pond::bench
