// The workload registry: every workload the `pond` CLI runs by name, with the flags it takes.
// `pond bench|sim WORKLOAD` (workload_command.cc) and `pond bench|sim compare --workload W`
// (compare_command.cc) are built from it, so a new workload is one bench::Workload subclass and
// one entry in Workloads() (workload_registry.cc) with its flags. Called from the CLI's thread
// only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pond/bench/workload.h"

namespace pond::tools {

// One workload's settings as a command line gives them. The object holds the values the flags
// write into, so it must outlive the parse and the command's action.
class WorkloadFlags {
 public:
  virtual ~WorkloadFlags() = default;
  // Registers the workload's flags on `cmd`, after the cluster flags (TPC-C rewrites the help of
  // --region-mib); `compare`: under `compare`, where every workload's flags sit side by side and
  // each help text names its workload.
  virtual void Add(CLI::App* cmd, bool compare) = 0;
  // After parsing, before Make: settings whose default depends on the cluster (TPC-C: one
  // warehouse per CN, regions that hold the tables). Nothing by default.
  virtual void Resolve(const CLI::App& cmd, ClusterConfig* c) {
    (void)cmd;
    (void)c;
  }
  // The workload with the settings as parsed (and resolved).
  virtual std::unique_ptr<bench::Workload> Make() const = 0;
};

struct WorkloadEntry {
  const char* name;  // the subcommand and compare's --workload value: "smallbank"
  // The help of `pond bench NAME` and `pond sim NAME`; null: the workload has a command of its
  // own (kvs, with its own sweep table), not the generic one (workload_command.cc).
  const char* bench_help;
  const char* sim_help;
  bool in_compare;  // a choice of compare's --workload
  // Above 0: the command takes --history, and a recorded run stops after this many calls.
  uint64_t history_txns_max;
  std::unique_ptr<WorkloadFlags> (*flags)();
};

// Every workload, in the order their commands are listed.
const std::vector<WorkloadEntry>& Workloads();

// The entry named `name`; null if there is none.
const WorkloadEntry* FindWorkload(std::string_view name);

// compare's choices for --workload: "kvs, smallbank, tatp, tpcc".
std::string CompareWorkloadChoices();

// Every compare workload's flags on one command: compare's --workload picks one after parsing.
class CompareWorkloadFlags {
 public:
  void Add(CLI::App* cmd);
  // The workload `name` names, made from its flags after Resolve; null if no compare workload
  // has that name.
  std::unique_ptr<bench::Workload> Make(std::string_view name, const CLI::App& cmd,
                                        ClusterConfig* c) const;

 private:
  std::vector<std::pair<const WorkloadEntry*, std::unique_ptr<WorkloadFlags>>> sets_;
};

}  // namespace pond::tools
