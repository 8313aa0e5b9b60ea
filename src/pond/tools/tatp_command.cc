// `pond bench tatp` and `pond sim tatp`: the TATP workload (bench/tatp.h) on real threads or on
// the simulated cluster, then the referential check. Exit 0 if the check holds, 1 (with one line
// on stderr) if it does not, 2 on bad input. The simulated form prints only what the seed
// determines on stdout, except one last wall-clock line; progress goes to stderr.
#include <memory>
#include <string>

#include "pond/bench/tatp.h"
#include "pond/tools/command.h"
#include "pond/tools/compare.h"
#include "pond/tools/connect_bench.h"
#include "pond/tools/kvs_flags.h"
#include "pond/tools/run_command.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct TatpArgs {
  bench::RunOptions run;
  bench::TatpParams p;
  std::string isolation = "sr";
  std::string model = "cx3";
  std::string protocol = "lotus";
  std::string json_path;
  std::string sweep;     // KvsSweep grammar: run through RunCompare with this protocol as its row
  std::string faults;    // --faults (simulated)
  ConnectFlags connect;  // --connect (real threads)
};

int RunTatpCommand(TatpArgs& a, const CLI::App& cmd, bool simulate) {
  const char* what = simulate ? "sim tatp" : "bench tatp";
  if (Status c = CheckConnectFlags(cmd, a.connect); !c.ok()) return Fail(what, c.message());
  if (!a.connect.address.empty()) {
    return RunConnected(what, bench::TatpWorkload(a.p), a.connect, a.run.seconds,
                        a.run.cluster.seed, a.json_path);
  }
  if (!a.sweep.empty() && !a.faults.empty()) {
    return Fail(what, "--faults applies to one run; not with --sweep");
  }
  if (!a.sweep.empty()) {
    // Through `compare`, with this command's protocol as the only row.
    CompareArgs c = SingleProtocolSweep(std::make_unique<bench::TatpWorkload>(a.p), a.run,
                                        a.isolation, a.model, a.protocol, a.sweep, a.json_path);
    return RunCompare(c, simulate);
  }
  bench::RunOptions& o = a.run;
  Status resolved = ResolveRunFlags(&o, a.isolation, a.model, a.protocol, simulate);
  if (resolved.ok()) resolved = ResolveFaults(&o, a.faults);
  if (!resolved.ok()) return Fail(what, resolved.message());
  bench::TatpWorkload w(a.p);
  return RunOnce(what, w, o, a.json_path, "");
}

}  // namespace

void AddTatpCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<TatpArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "tatp", simulate ? "TATP (seven telecom transactions, 80% read-only, referential check) on "
                         "the simulated cluster (virtual time)"
                       : "TATP: seven telecom transactions, 80% read-only, on an embedded cluster, "
                         "then a referential check of every row");
  AddClusterFlags(cmd, &a->run.cluster, &a->run.coros, &a->run.seconds, &a->isolation, &a->model,
                  simulate);
  cmd->add_option("--subscribers", a->p.subscribers, "subscribers (rows of the subscriber table)")
      ->capture_default_str();
  cmd->add_option("--protocol", a->protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  if (simulate) AddFaultsFlag(cmd, &a->faults, &a->run.allow_unplayed_faults);
  AddOltpSweepFlag(cmd, &a->sweep);
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");
  if (!simulate) AddConnectFlags(cmd, &a->connect);
  cmd->callback([a, action, cmd, simulate] {
    *action = [a, cmd, simulate] { return RunTatpCommand(*a, *cmd, simulate); };
  });
}

}  // namespace pond::tools
