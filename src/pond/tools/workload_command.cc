// `pond bench WORKLOAD` and `pond sim WORKLOAD` for every workload of the registry
// (workload_registry.h) that takes the generic command: the workload on real threads or on the
// simulated cluster, then its check. Exit 0 if the check holds, 1 (with one line on stderr) if it
// does not, 2 on bad input. The simulated form prints only what the seed determines on stdout,
// except one last wall-clock line; progress goes to stderr. --sweep runs through `compare` with
// the command's protocol as the only row; --connect drives a served copy of the workload.
#include <fmt/core.h>

#include <memory>
#include <string>

#include "pond/bench/run_faults.h"
#include "pond/tools/command.h"
#include "pond/tools/compare.h"
#include "pond/tools/connect_bench.h"
#include "pond/tools/run_command.h"
#include "pond/tools/run_flags.h"
#include "pond/tools/tool_util.h"
#include "pond/tools/workload_registry.h"

namespace pond::tools {

namespace {

struct WorkloadArgs {
  const WorkloadEntry* entry = nullptr;
  std::unique_ptr<WorkloadFlags> workload;  // the workload's own flags
  RunFlags flags;                           // the cluster flags and --protocol
  std::string json_path;
  std::string history_path;  // --history (workloads that record their own history)
  std::string sweep;         // KvsSweep grammar: run through RunCompare with the one protocol
  std::string faults;        // --faults (simulated)
  ConnectFlags connect;      // --connect (real threads)
};

// --sweep: through `compare`, with this command's protocol as the only row.
int RunSwept(const std::string& what, WorkloadArgs& a, bool simulate) {
  if (!a.history_path.empty()) {
    return Fail(what, "--history records one run; it does not go with --sweep");
  }
  if (!a.faults.empty()) return Fail(what, "--faults applies to one run; not with --sweep");
  if (Status s = ResolveClusterFlags(&a.flags, simulate); !s.ok()) return Fail(what, s.message());
  CompareArgs c =
      SingleProtocolSweep(a.workload->Make(), a.flags.run, a.flags.protocol, a.sweep, a.json_path);
  return RunCompare(c, simulate);
}

int RunWorkloadCommand(WorkloadArgs& a, const CLI::App& cmd, bool simulate) {
  const std::string what = std::string(simulate ? "sim " : "bench ") + a.entry->name;
  if (Status c = CheckConnectFlags(cmd, a.connect); !c.ok()) return Fail(what, c.message());
  if (!a.connect.address.empty()) {
    if (!a.history_path.empty()) {
      return Fail(what,
                  "--history records an embedded run (bench list-append --connect records "
                  "what clients see)");
    }
    return RunConnected(what, *a.workload->Make(), a.connect, a.flags.run.seconds,
                        a.flags.run.cluster.seed, a.json_path);
  }
  a.workload->Resolve(cmd, &a.flags.run.cluster);
  if (!a.sweep.empty()) return RunSwept(what, a, simulate);
  Status resolved = ResolveRunFlags(&a.flags, simulate);
  bench::RunOptions& o = a.flags.run;
  if (!a.history_path.empty()) {
    o.record = true;
    o.calls_max = a.entry->history_txns_max;
  }
  std::unique_ptr<bench::Workload> w = a.workload->Make();
  // After the cap is set: a recorded run's faults are drawn within the time its calls last.
  if (resolved.ok()) resolved = bench::ResolveFaultsFor(*w, &o, a.faults);
  if (!resolved.ok()) return Fail(what, resolved.message());
  return RunOnce(what, *w, o, a.json_path, a.history_path);
}

void AddWorkloadCommand(CLI::App& parent, const WorkloadEntry& e, CommandAction* action,
                        bool simulate) {
  auto a = std::make_shared<WorkloadArgs>();
  a->entry = &e;
  a->workload = e.flags();
  CLI::App* cmd = parent.add_subcommand(e.name, simulate ? e.sim_help : e.bench_help);
  AddRunFlags(cmd, &a->flags, simulate);
  a->workload->Add(cmd, /*compare=*/false);
  cmd->add_option("--protocol", a->flags.protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  if (simulate) AddFaultsFlag(cmd, &a->faults, &a->flags.run.allow_unplayed_faults);
  if (e.history_txns_max > 0) {
    cmd->add_option("--history", a->history_path,
                    fmt::format("record every transaction, write the run as a list-append "
                                "history to this file and judge it with the isolation checker "
                                "(for test-sized runs: stops after {} transactions)",
                                e.history_txns_max));
  }
  AddOltpSweepFlag(cmd, &a->sweep);
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");
  if (!simulate) AddConnectFlags(cmd, &a->connect);
  cmd->callback([a, action, cmd, simulate] {
    *action = [a, cmd, simulate] { return RunWorkloadCommand(*a, *cmd, simulate); };
  });
}

}  // namespace

void AddWorkloadCommands(CLI::App& parent, CommandAction* action, bool simulate) {
  for (const WorkloadEntry& e : Workloads()) {
    if (e.bench_help != nullptr) AddWorkloadCommand(parent, e, action, simulate);
  }
}

}  // namespace pond::tools
