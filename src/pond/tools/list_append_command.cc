// `pond bench list-append` and `pond sim list-append`: Elle's list-append workload
// (bench/list_append.h), every transaction recorded and the history judged by the isolation
// checker. With --connect the transactions come from this process's clients through the client
// API (a cluster serving `--workload list-append`), and the history is what those clients saw —
// calls whose CN died mid-commit included, as unknown. Exit 0 if the history holds under the
// cluster's isolation, 1 if it does not (or the run failed), 2 on bad input.
#include <fmt/core.h>

#include <memory>
#include <string>

#include "pond/bench/list_append.h"
#include "pond/tools/command.h"
#include "pond/tools/connect_bench.h"
#include "pond/tools/run_command.h"
#include "pond/tools/run_flags.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct ListAppendArgs {
  RunFlags flags;  // the cluster flags and --protocol
  bench::ListAppendOptions o;
  std::string mode = "user";
  std::string json_path;
  std::string history_path;
  std::string faults;    // --faults (simulated)
  ConnectFlags connect;  // --connect (real threads)
};

// The flags that shape the embedded run's data; a served cluster decides them.
constexpr const char* kEmbeddedListFlags[] = {"--lists", "--list-appends", "--mode",
                                              "--txns-per-client"};

int RunListAppendCommand(ListAppendArgs& a, const CLI::App& cmd, bool simulate) {
  const char* what = simulate ? "sim list-append" : "bench list-append";
  a.o.user = a.mode == "user";
  a.o.write_skew = a.mode == "write-skew";
  a.o.seed = a.flags.run.cluster.seed;
  if (Status c = CheckConnectFlags(cmd, a.connect); !c.ok()) return Fail(what, c.message());
  if (!a.connect.address.empty()) {
    for (const char* flag : kEmbeddedListFlags) {
      if (cmd.count(flag) > 0) {
        return Fail(what, std::string(flag) + " shapes an embedded run; with --connect the " +
                              "server's lists and the user-mode plans are used");
      }
    }
    return RunConnected(what, bench::ListAppendWorkload(a.o), a.connect, a.flags.run.seconds,
                        a.flags.run.cluster.seed, a.json_path, a.history_path);
  }
  bench::RunOptions& o = a.flags.run;
  Status resolved = ResolveRunFlags(&a.flags, simulate);
  if (resolved.ok()) resolved = ResolveFaults(&o, a.faults);
  if (!resolved.ok()) return Fail(what, resolved.message());
  o.record = true;
  bench::ListAppendWorkload w(a.o);
  return RunOnce(what, w, o, a.json_path, a.history_path);
}

}  // namespace

void AddListAppendCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<ListAppendArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "list-append",
      "Elle's list-append: transactions that read lists and append unique elements, every one "
      "recorded and the history judged by the isolation checker" +
          std::string(simulate ? " (simulated cluster)" : ""));
  AddRunFlags(cmd, &a->flags, simulate);
  cmd->add_option("--lists", a->o.keys, "lists loaded (the active window slides over them)")
      ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 28))
      ->capture_default_str();
  cmd->add_option("--list-appends", a->o.max_appends, "elements a list holds before it retires")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--window", a->o.window, "active lists")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--theta", a->o.theta, "zipf skew over the active lists")
      ->check(CLI::Range(0.0, 5.0))
      ->capture_default_str();
  cmd->add_option("--mops-max", a->o.mops_max, "micro-ops per transaction: 1 to this")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--txns-per-client", a->o.txns_per_client,
                  "an embedded run ends when every client has run this many")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--mode", a->mode,
                  "user: inserts, deletes, promotions and procedures (list_append_plan.h); "
                  "plain: reads and appends; write-skew: the classic pattern SI allows")
      ->check(CLI::IsMember({"user", "plain", "write-skew"}))
      ->capture_default_str();
  cmd->add_option("--protocol", a->flags.protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  if (simulate) AddFaultsFlag(cmd, &a->faults, &a->flags.run.allow_unplayed_faults);
  cmd->add_option("--history", a->history_path,
                  "also write the recorded history to this file (pond check reads it)");
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");
  if (!simulate) AddConnectFlags(cmd, &a->connect);
  cmd->callback([a, action, cmd, simulate] {
    *action = [a, cmd, simulate] { return RunListAppendCommand(*a, *cmd, simulate); };
  });
}

}  // namespace pond::tools
