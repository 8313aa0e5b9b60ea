// For the workload tests: the small cluster they run on, and one checked run of a workload.
#pragma once

#include <string>

#include "pond/bench/workload.h"

namespace pond::bench {

// 3 MNs, 2 CNs (2 workers each when simulated, else 1) x 3 clients, R = 2, small lock and cache
// tables, seed 5; `seconds` of (virtual) run.
inline RunOptions SmallTestRun(const std::string& protocol, Isolation iso, bool simulate,
                               double seconds) {
  RunOptions o;
  ClusterConfig& c = o.cluster;
  c.protocol = ProtocolByName(protocol).value();
  c.mns = 3;
  c.cns = 2;
  c.workers_per_cn = simulate ? 2 : 1;
  c.replication = 2;
  c.isolation = iso;
  c.region_mib = 64;
  c.lock_buckets = 1 << 12;
  c.vt_cache_entries = 1 << 12;
  c.addr_cache_entries = 1 << 14;
  c.seed = 5;
  o.coros = 3;
  o.seconds = seconds;
  if (simulate) o.sim = Testbed{};
  return o;
}

// Validates, then runs; a run after which the replicas disagree (Cluster::CheckReplicas) is an
// error, so every workload test also checks replica agreement.
inline Result<RunResult> ValidateAndRun(Workload& w, const RunOptions& o) {
  POND_RETURN_IF_ERROR(ValidateRun(w, o));
  Result<RunResult> r = RunWorkload(w, o, nullptr);
  if (r.ok() && r->replicas && !r->replicas->ok()) {
    return Internal("the replica check failed after the run: " +
                    (r->replicas->problems.empty() ? std::string() : r->replicas->problems[0]));
  }
  return r;
}

}  // namespace pond::bench
