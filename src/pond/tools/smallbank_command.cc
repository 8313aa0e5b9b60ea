// `pond bench smallbank` and `pond sim smallbank`: the SmallBank workload (bench/smallbank.h)
// on real threads or on the simulated cluster, then the money check. Exit 0 if the check holds,
// 1 (with one line on stderr) if it does not, 2 on bad input. As with `pond sim kvs`, the
// simulated form prints only what the seed determines on stdout, except one last wall-clock
// line; progress goes to stderr.
#include <fmt/core.h>

#include <memory>
#include <string>

#include "pond/bench/run_faults.h"
#include "pond/bench/smallbank.h"
#include "pond/tools/command.h"
#include "pond/tools/compare.h"
#include "pond/tools/connect_bench.h"
#include "pond/tools/kvs_flags.h"
#include "pond/tools/run_command.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct SmallBankArgs {
  bench::RunOptions run;
  bench::SmallBankParams p;
  std::string isolation = "sr";
  std::string model = "cx3";
  std::string protocol = "lotus";
  std::string json_path;
  std::string history_path;
  std::string sweep;     // KvsSweep grammar: run through RunCompare with this protocol as its row
  std::string faults;    // --faults (simulated)
  ConnectFlags connect;  // --connect (real threads)
};

int RunSmallBankCommand(SmallBankArgs& a, const CLI::App& cmd, bool simulate) {
  const char* what = simulate ? "sim smallbank" : "bench smallbank";
  if (Status c = CheckConnectFlags(cmd, a.connect); !c.ok()) return Fail(what, c.message());
  if (!a.connect.address.empty()) {
    if (!a.history_path.empty()) {
      return Fail(what,
                  "--history records an embedded run (bench list-append --connect records "
                  "what clients see)");
    }
    return RunConnected(what, bench::SmallBankWorkload(a.p), a.connect, a.run.seconds,
                        a.run.cluster.seed, a.json_path);
  }
  if (!a.sweep.empty()) {
    if (!a.history_path.empty()) {
      return Fail(what, "--history records one run; it does not go with --sweep");
    }
    if (!a.faults.empty()) return Fail(what, "--faults applies to one run; not with --sweep");
    // Through `compare`, with this command's protocol as the only row.
    CompareArgs c = SingleProtocolSweep(std::make_unique<bench::SmallBankWorkload>(a.p), a.run,
                                        a.isolation, a.model, a.protocol, a.sweep, a.json_path);
    return RunCompare(c, simulate);
  }
  bench::RunOptions& o = a.run;
  Status resolved = ResolveRunFlags(&o, a.isolation, a.model, a.protocol, simulate);
  if (!a.history_path.empty()) {
    o.record = true;
    o.calls_max = bench::kSmallBankHistoryTxnsMax;
  }
  bench::SmallBankWorkload w(a.p);
  // After the cap is set: a recorded run's faults are drawn within the time its calls last.
  if (resolved.ok()) resolved = bench::ResolveFaultsFor(w, &o, a.faults);
  if (!resolved.ok()) return Fail(what, resolved.message());
  return RunOnce(what, w, o, a.json_path, a.history_path);
}

}  // namespace

void AddSmallBankCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<SmallBankArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "smallbank", simulate ? "SmallBank (six banking transactions, hot-set skew, money check) on "
                              "the simulated cluster (virtual time)"
                            : "SmallBank: six banking transactions with hot-set skew on an "
                              "embedded cluster, then a check that no money appeared or vanished");
  AddClusterFlags(cmd, &a->run.cluster, &a->run.coros, &a->run.seconds, &a->isolation, &a->model,
                  simulate);
  cmd->add_option("--accounts", a->p.accounts, "accounts (rows in each of savings and checking)")
      ->capture_default_str();
  cmd->add_option("--hot-fraction", a->p.hot_fraction, "share of the accounts in the hot set")
      ->capture_default_str();
  cmd->add_option("--hot-access", a->p.hot_access,
                  "share of the account draws that go to the hot set")
      ->capture_default_str();
  cmd->add_option("--protocol", a->protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  if (simulate) AddFaultsFlag(cmd, &a->faults, &a->run.allow_unplayed_faults);
  cmd->add_option("--history", a->history_path,
                  fmt::format("record every transaction, write the run as a list-append history "
                              "to this file and judge it with the isolation checker (for "
                              "test-sized runs: stops after {} transactions)",
                              bench::kSmallBankHistoryTxnsMax));
  AddOltpSweepFlag(cmd, &a->sweep);
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");
  if (!simulate) AddConnectFlags(cmd, &a->connect);
  cmd->callback([a, action, cmd, simulate] {
    *action = [a, cmd, simulate] { return RunSmallBankCommand(*a, *cmd, simulate); };
  });
}

}  // namespace pond::tools
