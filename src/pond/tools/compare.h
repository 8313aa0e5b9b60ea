// Compare: the engine of `pond bench|sim compare` — every protocol (or ablation step) on one
// workload with identical settings and seed, one table, the workload's own check per row and a
// history check per protocol — and, with a sweep, of the throughput–latency curves: the same
// rows at every point of a KvsSweep. `pond bench|sim smallbank|tatp --sweep` run through it
// with their one protocol as the only row. Called from the CLI's thread only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "pond/bench/smallbank.h"
#include "pond/bench/tatp.h"
#include "pond/bench/tpcc.h"
#include "pond/tools/kvs_flags.h"

namespace pond::tools {

struct CompareArgs {
  std::string command = "compare";  // for the header and messages: "sim smallbank", ...
  KvsFlags flags;
  std::string workload = "kvs";
  // --workload smallbank: its own workload flags; the cluster flags are KvsFlags'.
  uint64_t accounts = bench::SmallBankParams{}.accounts;
  double hot_fraction = bench::SmallBankParams{}.hot_fraction;
  double hot_access = bench::SmallBankParams{}.hot_access;
  uint64_t subscribers = bench::TatpParams{}.subscribers;  // --workload tatp
  bench::TpccParams tpcc;                                  // --workload tpcc
  std::string protocols;  // comma-separated; empty: ProtocolNames()
  bool ablation = false;
  std::string baseline;  // empty: motor if it is a row, else the first row
  std::string sweep;     // KvsSweep grammar; empty: one point, the flags as given
  bool no_check = false;
  uint32_t check_txns = 5000;
  std::string json_path;
  std::string faults;  // --faults (simulated): one schedule for every row
};

// The CompareArgs of `pond bench|sim WORKLOAD --sweep ...`: the cluster flags as that command
// parsed them, its one protocol as the only row, no history check (`compare --sweep` runs every
// protocol and checks each). The caller sets the workload's own fields.
CompareArgs SingleProtocolSweep(const std::string& workload, const bench::RunOptions& run,
                                const std::string& isolation, const std::string& model,
                                const std::string& protocol, const std::string& sweep,
                                const std::string& json_path);

// Registers --sweep on `pond bench|sim smallbank|tatp|tpcc` (the keys those workloads take).
void AddOltpSweepFlag(CLI::App* cmd, std::string* sweep);

// TPC-C's flags (tpcc_command.cc): --warehouses --items --customers --order-room, each help text
// after `prefix` ("tpcc: " under compare). After parsing, ResolveTpccFlags gives a command
// line without --warehouses one warehouse per CN of `c`, and one without --region-mib regions
// that hold the tables (bench::TpccRegionMib; memory is taken as it is written).
void AddTpccFlags(CLI::App* cmd, bench::TpccParams* p, const std::string& prefix);
void ResolveTpccFlags(const CLI::App& cmd, ClusterConfig* c, bench::TpccParams* p);

// Runs the comparison and prints it; returns the exit code (0 every check held, 1 a check
// failed or a run failed, 2 bad input with one line on stderr).
int RunCompare(CompareArgs& a, bool simulate);

}  // namespace pond::tools
