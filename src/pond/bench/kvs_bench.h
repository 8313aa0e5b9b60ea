// The KVS benchmark (Lotus §8.2): 8-byte keys, 40-byte values, UpdateOne (read-write: read a
// key, write it back changed) and ReadOne (read-only) transactions in a chosen mix, keys uniform
// or zipf(theta), routed by hybrid routing (§4.3). Every call is one attempt: an abort counts as
// an abort, not as a retry, so the abort rate is the protocol's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "pond/bench/measured_run.h"
#include "pond/cluster.h"

namespace pond::bench {

struct KvsOptions {
  ClusterConfig cluster;  // cns, mns, workers, isolation, replication, versions, seed
  int coros = 4;          // client coroutines per worker
  uint64_t keys = 1'000'000;
  double seconds = 10;
  double rw_ratio = 0.5;  // fraction of UpdateOne
  double theta = 0.0;     // 0: uniform; else zipf(theta), e.g. 0.99
  uint32_t value_bytes = 40;
  // Set: run on the simulated cluster with this model; `seconds` are then virtual seconds.
  std::optional<Testbed> sim;
};

// The measures of a KVS run; the workload has nothing to add.
struct KvsResult : RunMeasures {};

Status ValidateKvsOptions(const KvsOptions& o);

// Starts a cluster, loads the keys, runs for o.seconds, calls `progress` about once a second.
Result<KvsResult> RunKvs(const KvsOptions& o,
                         const std::function<void(const KvsProgress&)>& progress);

std::string KvsResultJson(const KvsOptions& o, const KvsResult& r);

}  // namespace pond::bench
