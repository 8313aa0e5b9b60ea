// The raw one-sided benchmark: how many READs, WRITEs, CASes and FAAs per second the transport
// serves, and at what latency, with random addresses over a large region. This is the physical
// limit every transaction number in Pond is held against (docs/perf.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pond/base/histogram.h"
#include "pond/status.h"
#include "pond/transport/endpoint.h"

namespace pond::bench {

struct RawBenchOptions {
  int threads = 2;             // worker threads, each with its own scheduler and endpoint
  int coros = 1;               // coroutines per thread, each with one op in flight
  double seconds = 2.0;        // per verb
  uint32_t size = 64;          // bytes per READ/WRITE (atomics are always 8)
  uint64_t region_mib = 1024;  // per MN
  int mns = 1;
  uint64_t seed = 1;
  std::vector<Verb> verbs = {Verb::kRead, Verb::kWrite, Verb::kCas, Verb::kFaa};
};

struct RawVerbResult {
  Verb verb;
  uint64_t ops = 0;
  double elapsed_s = 0;
  double ops_per_sec = 0;
  Histogram latency_ns;
};

// Checks every option; InvalidArgument with a one-line reason if any is out of range.
Status ValidateRawOptions(const RawBenchOptions& o);

// Runs each verb in turn; `on_verb_done` (may be empty) is called after each, for progress.
Result<std::vector<RawVerbResult>> RunRawBench(
    const RawBenchOptions& o, const std::function<void(const RawVerbResult&)>& on_verb_done);

std::string RawResultsJson(const RawBenchOptions& o, const std::vector<RawVerbResult>& results);

}  // namespace pond::bench
