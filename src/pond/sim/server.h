// Server: a FIFO queueing resource with one processing unit — a NIC's request processor, a CPU
// core. Requests are served one at a time in arrival order; each takes a service time given by
// the caller's model. Serve() is pure arithmetic (no events, O(1)): it returns when the request
// completes, and the caller schedules whatever happens then.
//
// Busy time, request counts and queueing delay are kept per request kind (a small int, e.g. a
// verb kind), so a report can show what a resource spent its time on: "this MN's NIC was 95%
// busy, 80% of it on CAS".
//
// Thread rules: single-threaded, like the engine whose events call it.
// Invariants: calls come in nondecreasing arrival order — call Serve from the event that
// models the arrival, so a request that arrives later can never be queued ahead of one that
// arrived earlier; 0 <= kind < kKindCountMax; busy_until_ns() never decreases.
//
// Utilisation over a window counts each request's whole service time when it is accepted.
// Work queued across a window edge is therefore counted in the window it arrived in; the error
// is at most the backlog at each edge (BacklogNs), which is microseconds against windows of
// virtual seconds. Reporters that use short windows should print the backlog beside it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "pond/base/assert.h"

namespace pond::sim {

class Server {
 public:
  static constexpr int kKindCountMax = 16;

  // Accepts a request arriving at arrival_ns that needs service_ns of the unit; returns its
  // completion time, max(arrival_ns, busy_until_ns()) + service_ns.
  uint64_t Serve(uint64_t arrival_ns, uint64_t service_ns, int kind) {
    POND_ASSERT(kind >= 0 && kind < kKindCountMax);
    POND_ASSERT_MSG(arrival_ns >= last_arrival_ns_, "Serve calls must come in arrival order");
    last_arrival_ns_ = arrival_ns;
    uint64_t start_ns = std::max(arrival_ns, busy_until_ns_);
    POND_ASSERT(service_ns <= UINT64_MAX - start_ns);
    busy_until_ns_ = start_ns + service_ns;
    uint64_t wait_ns = start_ns - arrival_ns;
    KindStats& k = kinds_[kind];
    k.busy_ns += service_ns;
    k.served_count++;
    k.wait_ns += wait_ns;
    wait_ns_max_ = std::max(wait_ns_max_, wait_ns);
    return busy_until_ns_;
  }

  // When the unit finishes the work accepted so far.
  uint64_t busy_until_ns() const { return busy_until_ns_; }
  // Work accepted but not finished at now_ns.
  uint64_t BacklogNs(uint64_t now_ns) const {
    return busy_until_ns_ > now_ns ? busy_until_ns_ - now_ns : 0;
  }

  // Since the last ResetStats: service time accepted, requests accepted, and total time those
  // requests waited in the queue before service began.
  uint64_t BusyNs(int kind) const { return Kind(kind).busy_ns; }
  uint64_t BusyNs() const {
    uint64_t sum = 0;
    for (const KindStats& k : kinds_) sum += k.busy_ns;
    return sum;
  }
  uint64_t ServedCount(int kind) const { return Kind(kind).served_count; }
  uint64_t WaitNs(int kind) const { return Kind(kind).wait_ns; }
  uint64_t wait_ns_max() const { return wait_ns_max_; }

  // Share of [window_start_ns, window_end_ns) the unit spent on `kind` / on anything, for a
  // window that began with ResetStats(). May exceed 1 by the backlog at the window's end.
  double Utilisation(int kind, uint64_t window_start_ns, uint64_t window_end_ns) const {
    return Share(BusyNs(kind), window_start_ns, window_end_ns);
  }
  double Utilisation(uint64_t window_start_ns, uint64_t window_end_ns) const {
    return Share(BusyNs(), window_start_ns, window_end_ns);
  }

  // Starts a new measuring window. The queue itself (busy_until_ns) is untouched.
  void ResetStats() {
    kinds_ = {};
    wait_ns_max_ = 0;
  }

 private:
  struct KindStats {
    uint64_t busy_ns = 0;
    uint64_t served_count = 0;
    uint64_t wait_ns = 0;
  };
  const KindStats& Kind(int kind) const {
    POND_ASSERT(kind >= 0 && kind < kKindCountMax);
    return kinds_[kind];
  }
  static double Share(uint64_t busy_ns, uint64_t window_start_ns, uint64_t window_end_ns) {
    POND_ASSERT(window_end_ns > window_start_ns);
    return static_cast<double>(busy_ns) / static_cast<double>(window_end_ns - window_start_ns);
  }

  uint64_t busy_until_ns_ = 0;
  uint64_t last_arrival_ns_ = 0;
  uint64_t wait_ns_max_ = 0;
  std::array<KindStats, kKindCountMax> kinds_{};
};

}  // namespace pond::sim
