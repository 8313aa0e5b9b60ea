// How a run's result is reported: the abort breakdown (every reason in AbortCounts::Reasons()),
// the simulated MN NICs' busy shares, the measures tables compare runs by, and the one JSON
// object every workload's run is written as (docs/workloads.md "Results").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pond/bench/workload.h"
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

// The simulated cores' load over the measured run (RunMeasures::sim_cores): the mean core's busy
// share, and the busiest core's with the mean of its CN's cores; the first place to look when
// throughput stops growing with the cluster.
struct CoreLoad {
  double mean_share = 0;
  uint16_t busiest_cn = 0, busiest_worker = 0;
  double busiest_share = 0;
  double busiest_cn_share = 0;  // the busiest core's CN: the mean of its cores
};
CoreLoad CoreLoadOf(const RunMeasures& r);
// "mean core 41.2% busy; busiest CN 0 worker 3, 97.5% (CN 0's cores 88.0%)".
std::string CoreLoadLine(const CoreLoad& l);

// Committed calls per second of the run's (virtual) time; 0 for an empty run.
double Throughput(const RunMeasures& r);
// Commits of the workload's headline kind (RunResult::headline) per second; 0 without one.
double HeadlineThroughput(const RunResult& r);
// Aborted calls over all calls; 0 without calls.
double AbortRate(const RunMeasures& r);
// (CAS + FAA) per committed call.
double AtomicsPerTxn(const RunMeasures& r);
// The mean over MN NICs of the busy share of one verb (0 READ .. 3 FAA), and the busiest NIC's
// share over all verbs; 0 unless simulated.
double NicShare(const RunMeasures& r, int verb);
double MaxNicShare(const RunMeasures& r);

// What a faulty run's faults exercised, from its FailoverStats: one line of the report and an
// object of its JSON, so that a pass shows what it tested.
struct FaultsExercised {
  uint64_t cn_crashes = 0;     // crash-cn that happened
  uint64_t fenced = 0;         // CNs that stopped themselves (a partition outlasted the lease)
  uint64_t cn_restarts = 0;    // CNs back as a new incarnation, running clients
  uint64_t recoveries = 0;     // CN failures recovered: their shards served again
  uint64_t mn_crashes = 0;     // crash-mn that happened
  uint64_t mn_restarts = 0;    // MNs back blank
  uint64_t mn_readable = 0;    // of those, readable again: R copies restored
  uint64_t partitions = 0;     // partition-cn that happened
  uint64_t host_cuts = 0;      // partition-host that happened
  uint64_t hosts_apart = 0;    // cut-hosts that happened (two hosts cut apart)
  uint64_t mns_cut_lost = 0;   // MNs declared while cut off with their host (back as restarts)
  uint64_t coord_outages = 0;  // crash-coord that happened
  // Transactions caught mid-commit: recovery found them not yet visible everywhere and rolled
  // them forward or back (of log_records read from the failed CNs' logs).
  uint64_t mid_commit = 0;
  uint64_t rolled_forward = 0, rolled_back = 0, log_records = 0;
  uint64_t at_step = 0;      // crashes that hit the commit step they were aimed at
  uint64_t not_reached = 0;  // faults after the run's end: never happened

  // "2 CN crashes (1 fenced), 1 CN restart, 2 recoveries, ...; 14 transactions caught
  // mid-commit (9 rolled forward, 5 back)".
  std::string ToString() const;
  nlohmann::json ToJson() const;
};
FaultsExercised CountExercised(const FailoverStats& f);

// What a run's header names as its transport: "sim", "local", "ucx" or "ucx (shm)".
std::string TransportLabel(const RunOptions& o);

// What every run's JSON "result" holds, embedded or driven through the client API: commits,
// aborts, latency, the mix, the headline, the workload's check and the history's verdict.
nlohmann::json MeasuresJson(const RunResult& r);

// The run as JSON: the workload, build, transport, protocol, the settings (the cluster's and the
// workload's), every measure, the workload's counts and check, the history's verdict if it was
// recorded, and the simulation's model and NICs if simulated.
nlohmann::json RunResultJson(const RunOptions& o, const Workload& w, const RunResult& r);

}  // namespace pond::bench
