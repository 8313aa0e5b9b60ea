#include "pond/bench/report.h"

#include <fmt/format.h>

#include "pond/transport/endpoint.h"

namespace pond::bench {

std::string AbortBreakdown(const AbortCounts& a) {
  std::string s;
  for (const AbortCounts::Reason& r : AbortCounts::Reasons()) {
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", r.words, a.*r.count);
  }
  return s;
}

nlohmann::json AbortsJson(const AbortCounts& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const AbortCounts::Reason& r : AbortCounts::Reasons()) j[r.key] = a.*r.count;
  return j;
}

std::string NicLine(const SimStats::Nic& n, double window_ns) {
  uint64_t busy = 0;
  for (uint64_t b : n.busy_ns) busy += b;
  std::string s = fmt::format("{:5.1f}% (", 100.0 * static_cast<double>(busy) / window_ns);
  for (int k = 0; k < kNumVerbs; k++) {
    s += fmt::format("{}{} {:.1f}%", k ? ", " : "", VerbName(static_cast<Verb>(k)),
                     100.0 * static_cast<double>(n.busy_ns[k]) / window_ns);
  }
  return s + ")";
}

nlohmann::json NicsJson(const SimStats& s, double window_ns) {
  nlohmann::json nics = nlohmann::json::array();
  for (const SimStats::Nic& n : s.mn_nics) {
    nlohmann::json nic;
    for (int k = 0; k < kNumVerbs; k++) {
      nic[VerbName(static_cast<Verb>(k))] = {
          {"ops", n.ops[k]}, {"busy_share", static_cast<double>(n.busy_ns[k]) / window_ns}};
    }
    nics.push_back(nic);
  }
  return nics;
}

}  // namespace pond::bench
