// RunFlags: the command-line flags of the cluster a workload runs on and of the run, shared by
// `pond bench|sim WORKLOAD` and `pond bench|sim compare` so that all take the same flags with the
// same defaults. CLI11 keeps --isolation, --model and --protocol as the text given (the help and
// the error messages quote it); ResolveClusterFlags and ResolveRunFlags turn them into the run's
// typed settings once, right after parsing, and nothing past them sees the text. Called from the
// CLI's thread only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "pond/bench/kvs_bench.h"
#include "pond/status.h"

namespace pond::tools {

struct RunFlags {
  bench::RunOptions run;  // typed: what the flags give, resolved
  std::string isolation = "sr";
  std::string model = "cx3";  // simulated runs only
  std::string protocol = "lotus";
};

// The cluster flags every workload command shares: sets the defaults (simulated: the Lotus
// testbed, §8.1) and registers --mns --cns --workers --coros --seconds (--virtual-seconds)
// --isolation --replication --versions --region-mib --seed, and --model if simulated. The
// pointers must outlive the parse and the command's action; a null `coros` or `seconds` leaves
// that flag out (a cluster that serves has no run of its own).
void AddClusterFlags(CLI::App* cmd, ClusterConfig* c, int* coros, double* seconds,
                     std::string* isolation, std::string* model, bool simulate);
// --reshard and its settings (simulated runs: AddClusterFlags registers them), into *r.
void AddReshardFlags(CLI::App* cmd, ReshardConfig* r);

// After parsing: applies `isolation` to c and (simulated) loads `model` into *sim.
// InvalidArgument with a one-line reason on a bad model.
Status ResolveClusterFlags(ClusterConfig* c, std::optional<Testbed>* sim,
                           const std::string& isolation, const std::string& model, bool simulate);

// AddClusterFlags into f: every cluster flag but --protocol (each command places its own).
void AddRunFlags(CLI::App* cmd, RunFlags* f, bool simulate);
// After parsing: --isolation, --model (simulated) and --coord into f->run.
Status ResolveClusterFlags(RunFlags* f, bool simulate);
// ResolveClusterFlags, then --protocol into f->run.cluster.protocol.
Status ResolveRunFlags(RunFlags* f, bool simulate);

// A RunWorkload progress callback that prints one line per call on `out` (about once a wall
// second): elapsed (virtual) time, commits per second and abort rate since the previous line, after
// `label` if not empty. Each run needs its own (it remembers the previous line).
std::function<void(const bench::KvsProgress&)> KvsProgressPrinter(FILE* out, bool simulate,
                                                                  std::string label);

// Registers --faults SPEC (simulated runs; docs/fault_schedules.md) into *spec.
// --faults, and --allow-unplayed-faults if `allow_unplayed` is given (a command that runs once:
// RunOnce's exit status 3).
void AddFaultsFlag(CLI::App* cmd, std::string* spec, bool* allow_unplayed);
// After ResolveRunFlags: bench::ResolveFaults (bench/run_faults.h).
Status ResolveFaults(bench::RunOptions* o, const std::string& spec);

// "lotus, motor, ford, or an ablation step: +full-record, ..., +vt-cache", for --help.
std::string ProtocolChoices();

}  // namespace pond::tools
