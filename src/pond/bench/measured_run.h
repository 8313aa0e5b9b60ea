// MeasuredRun: the measured phase every workload driver (KVS, SmallBank, TATP) shares. It takes
// the cluster's counters and clocks when it is made, reports progress about once a wall second,
// books each client call as committed (with its latency) or aborted, keeps the first unexpected
// failure, and in the end fills the measures every workload's result carries. A driver keeps
// its own per-worker counters only for what it alone knows (its mix, declines, deposits).
//
// Threads: made and finished on the thread that calls Cluster::Run; Running, Book and Publish
// are called by client coroutines on every worker, each booking into its own worker's slot.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "pond/base/histogram.h"
#include "pond/bench/progress_monitor.h"
#include "pond/cluster.h"

namespace pond::bench {

struct KvsProgress {
  double elapsed_s;  // of the measured run, in the cluster's time (virtual when simulated)
  uint64_t committed;
  uint64_t aborted;
};

// What every workload reports about its measured run.
struct RunMeasures {
  double elapsed_s = 0;  // in the cluster's time (virtual when simulated)
  uint64_t committed = 0;
  uint64_t committed_rw = 0;
  uint64_t aborted = 0;
  // Calls whose outcome is not known: the CN running them failed (Code::kUnknown).
  uint64_t unknown = 0;
  // Commits per millisecond of the run's time, from its start (for recovery curves).
  std::vector<uint64_t> committed_per_ms;
  double load_s = 0;             // wall time of loading, before the run (set by the driver)
  Histogram latency_ns;          // committed calls, as the client saw them
  ClusterStats stats;            // over the measured run only
  double wall_s = 0;             // real time of the measured run
  std::optional<SimStats> sim;   // simulated runs: NICs over the measured run, engine counters
  uint64_t sim_cpu_busy_ns = 0;  // simulated runs: worker CPU time spent in the measured run
  std::vector<SimStats::Core> sim_cores;  // simulated runs: each core's, in the measured run
};

// A run's commits per millisecond are kept for its first this many milliseconds.
inline constexpr uint64_t kPerMsBucketsMax = 100'000;

class MeasuredRun {
 public:
  // Starts the run now; `progress` (may be empty) is called about once a wall second.
  MeasuredRun(Cluster& cluster, const ClusterConfig& config, double seconds,
              std::function<void(const KvsProgress&)> progress);
  MeasuredRun(const MeasuredRun&) = delete;
  MeasuredRun& operator=(const MeasuredRun&) = delete;

  // Whether a client should start another call.
  bool Running(Session& s) const { return s.clock().NowNs() < deadline_; }
  // Books a call that ran from t0 to t1 (s.clock()): OK is a commit, kAborted an abort, and
  // kUnavailable (a call to a failed CN, refused unsent) too; kUnknown is counted apart (its CN
  // failed under it). Any other status is kept as the run's failure (the first one) and false is
  // returned: the client should stop.
  bool Book(Session& s, const Status& st, uint64_t t0, uint64_t t1, bool read_write);
  // Publishes the run's time for progress without booking (a call the workload counts itself).
  void Publish(uint64_t t1) { run_now_.store(t1, std::memory_order_relaxed); }

  // After Cluster::Run: stops progress and fills `out` (all but load_s), or returns the first
  // unexpected failure a client booked.
  Status Finish(RunMeasures* out);

 private:
  struct alignas(64) Counters {
    std::atomic<uint64_t> committed{0}, committed_rw{0}, aborted{0}, unknown{0};
    Histogram latency;
    std::vector<uint64_t> per_ms;  // written by the worker's own thread only
  };
  void Tick();

  Cluster& cluster_;
  const int workers_per_cn_;
  std::function<void(const KvsProgress&)> progress_;
  std::vector<Counters> counters_;
  ClusterStats before_;
  // Simulated runs: the CPU counters at the start (SimStats::cpu_busy_ns, then SimStats::cores).
  uint64_t cpu_before_ = 0;
  std::vector<uint64_t> cores_before_;
  uint64_t start_ = 0, wall_start_ = 0, deadline_ = 0;
  // The monitor thread must not read a virtual clock another thread advances; clients publish
  // the run's time here instead.
  std::atomic<uint64_t> run_now_{0};
  std::mutex failure_mu_;
  Status failure_;  // guarded by failure_mu_: the first unexpected status
  std::atomic<bool> failed_{false};
  ProgressMonitor monitor_;  // last: its thread starts when everything above is set
};

}  // namespace pond::bench
