// Compare: the engine of `pond bench|sim compare` — every protocol (or ablation step) on one
// workload with identical settings and seed, one table, the workload's own check per row and a
// history check per protocol — and, with a sweep, of the throughput–latency curves: the same
// rows at every point of a KvsSweep. `pond bench|sim smallbank|tatp|tpcc --sweep` run through it
// with their one protocol as the only row. Called from the CLI's thread only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "pond/bench/workload.h"
#include "pond/tools/run_flags.h"

namespace pond::tools {

struct CompareArgs {
  std::string command = "compare";  // for the header and messages: "sim smallbank", ...
  bench::RunOptions run;            // the cluster flags, resolved (ResolveClusterFlags)
  std::string workload = "kvs";
  // The workload --workload names, with its flags (workload_registry.h); every row runs a Clone.
  // Null: no compare workload has that name.
  std::shared_ptr<const bench::Workload> w;
  std::string protocols;  // comma-separated; empty: ProtocolNames()
  bool ablation = false;
  std::string baseline;  // empty: motor if it is a row, else the first row
  std::string sweep;     // KvsSweep grammar; empty: one point, the flags as given
  bool no_check = false;
  uint32_t check_txns = 5000;
  std::string json_path;
  std::string faults;  // --faults (simulated): one schedule for every row
};

// The CompareArgs of `pond bench|sim WORKLOAD --sweep ...`: `w` the workload with its settings,
// `run` the cluster flags as that command resolved them, its one protocol as the only row, no
// history check (`compare --sweep` runs every protocol and checks each).
CompareArgs SingleProtocolSweep(std::unique_ptr<bench::Workload> w, const bench::RunOptions& run,
                                const std::string& protocol, const std::string& sweep,
                                const std::string& json_path);

// Registers --sweep on `pond bench|sim smallbank|tatp|tpcc` (the keys those workloads take).
void AddOltpSweepFlag(CLI::App* cmd, std::string* sweep);

// Runs the comparison and prints it (a.w set, a.run resolved); returns the exit code (0 every check
// held, 1 a check failed or a run failed, 2 bad input with one line on stderr).
int RunCompare(CompareArgs& a, bool simulate);

}  // namespace pond::tools
