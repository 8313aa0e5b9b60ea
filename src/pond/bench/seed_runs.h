// What the seed tests share (sim_seed_test, fault_seed_test, list_append_fault_test): which seeds
// a run takes, and the simulated cluster that random fault schedules are drawn for.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "pond/bench/workload.h"

namespace pond::bench {

struct SeedRange {
  uint64_t first, count;
};

// Seeds 1 to `default_count`; the environment variable `many` asks for 1 to K (POND_FAULT_SEEDS=K)
// or A to B (POND_FAULT_SEEDS=A-B, a soak split over cores), and `one` (POND_FAULT_SEED=N) for
// seed N alone.
inline SeedRange SeedsFromEnv(const char* one, const char* many, uint64_t default_count) {
  if (const char* n = std::getenv(one)) return {std::strtoull(n, nullptr, 10), 1};
  if (const char* k = std::getenv(many)) {
    char* dash = nullptr;
    const uint64_t a = std::strtoull(k, &dash, 10);
    if (dash != nullptr && *dash == '-') {
      const uint64_t b = std::strtoull(dash + 1, nullptr, 10);
      return {a, b >= a ? b - a + 1 : 0};
    }
    return {1, a};
  }
  return {1, default_count};
}

// With POND_SEED_TRACE set, names each seed on stderr before it runs: a soak that stops on an
// assertion (which does not name the seed it was in) then shows which seed to replay.
inline void TraceSeed(uint64_t seed) {
  static const bool on = std::getenv("POND_SEED_TRACE") != nullptr;
  if (on) std::fprintf(stderr, "seed %lu\n", static_cast<unsigned long>(seed));
}

// The cluster the fault seeds run: 5 CNs x 2 workers x 3 clients, 3 MNs, R = 3, 2 versions, 8
// virtual ms; the daemons' membership machine, one per simulated CN, recovers from the faults.
inline RunOptions FaultyRun(const std::string& protocol, Isolation iso, uint64_t seed) {
  RunOptions o;
  o.cluster.protocol = ProtocolByName(protocol).value();
  o.cluster.mns = 3;
  o.cluster.cns = 5;
  o.cluster.workers_per_cn = 2;
  o.cluster.replication = 3;
  o.cluster.versions = 2;
  o.cluster.isolation = iso;
  o.cluster.region_mib = 64;
  o.cluster.lock_buckets = 1 << 12;
  o.cluster.vt_cache_entries = 1 << 12;
  o.cluster.addr_cache_entries = 1 << 14;
  o.cluster.seed = seed;
  o.coros = 3;
  o.seconds = 0.008;
  o.sim = Testbed{};
  return o;
}

}  // namespace pond::bench
