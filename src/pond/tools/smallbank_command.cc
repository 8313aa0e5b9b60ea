// `pond bench smallbank` and `pond sim smallbank`: the SmallBank workload (bench/smallbank.h)
// on real threads or on the simulated cluster, then the money check. Exit 0 if the check holds,
// 1 (with one line on stderr) if it does not, 2 on bad input. As with `pond sim kvs`, the
// simulated form prints only what the seed determines on stdout, except one last wall-clock
// line; progress goes to stderr.
#include <fmt/core.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "pond/bench/build_info.h"
#include "pond/bench/report.h"
#include "pond/bench/smallbank.h"
#include "pond/check/run_check.h"
#include "pond/tools/command.h"
#include "pond/tools/compare.h"
#include "pond/tools/kvs_flags.h"
#include "pond/tools/kvs_sweep.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct SmallBankArgs {
  bench::SmallBankOptions o;
  std::string isolation = "sr";
  std::string model = "cx3";
  std::string protocol = "lotus";
  std::string json_path;
  std::string sweep;  // KvsSweep grammar: run through RunCompare with this protocol as its row
};

void PrintResult(const bench::SmallBankOptions& o, const bench::SmallBankResult& r, bool simulate) {
  const ClusterStats& s = r.stats;
  double tput = r.elapsed_s > 0 ? static_cast<double>(r.committed) / r.elapsed_s : 0;
  uint64_t attempts = r.committed + r.aborted;
  double per = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
  const char* unit = simulate ? " (virtual)" : "";
  if (!simulate) {
    std::printf("loaded %lu accounts (2 rows each) in %.1f s\n",
                static_cast<unsigned long>(o.accounts), r.load_s);
  }
  std::printf("throughput   %s txn/s%s (%lu committed in %.3f s; %lu read-write, %lu declined)\n",
              HumanRate(tput).c_str(), unit, static_cast<unsigned long>(r.committed), r.elapsed_s,
              static_cast<unsigned long>(r.committed_rw), static_cast<unsigned long>(r.declined));
  std::string mix;
  for (int k = 0; k < bench::kSmallBankTxnCount; k++) {
    mix += fmt::format("{}{} {}", k ? ", " : "",
                       bench::SmallBankTxnName(static_cast<bench::SmallBankTxn>(k)),
                       r.committed_by_txn[static_cast<size_t>(k)]);
  }
  std::printf("committed    %s\n", mix.c_str());
  std::printf(
      "abort rate   %.2f%% (%s)\n",
      attempts ? 100.0 * static_cast<double>(r.aborted) / static_cast<double>(attempts) : 0.0,
      bench::AbortBreakdown(s.aborts).c_str());
  std::printf("latency      p50 %.1f us, p99 %.1f us, p999 %.1f us%s\n",
              static_cast<double>(r.latency_ns.Percentile(0.5)) / 1e3,
              static_cast<double>(r.latency_ns.Percentile(0.99)) / 1e3,
              static_cast<double>(r.latency_ns.Percentile(0.999)) / 1e3, unit);
  std::printf(
      "per txn      %.2f READ, %.2f WRITE, %.2f CAS, %.2f FAA, %.2f doorbell batches, "
      "%.2f CN messages; %lu calls routed to another CN\n",
      static_cast<double>(s.reads) * per, static_cast<double>(s.writes) * per,
      static_cast<double>(s.cas) * per, static_cast<double>(s.faa) * per,
      static_cast<double>(s.batches) * per, static_cast<double>(s.messages) * per,
      static_cast<unsigned long>(s.remote_calls));
  if (r.sim) {
    double window = r.elapsed_s * 1e9;
    for (size_t mn = 0; mn < r.sim->mn_nics.size(); mn++) {
      std::printf("MN %zu NIC     %s\n", mn, bench::NicLine(r.sim->mn_nics[mn], window).c_str());
    }
  }
  std::printf("money check  %s: total %ld = initial %ld + committed net deposits %ld\n",
              r.check_ok ? "ok" : "FAILED", static_cast<long>(r.final_total),
              static_cast<long>(r.initial_total), static_cast<long>(r.net_deposits));
}

// --sweep: through `compare`, with this command's protocol as the only row.
int RunSweep(SmallBankArgs& a, bool simulate) {
  CompareArgs c = SingleProtocolSweep("smallbank", a.o.cluster, a.o.coros, a.o.seconds, a.isolation,
                                      a.model, a.protocol, a.sweep, a.json_path);
  c.accounts = a.o.accounts;
  c.hot_fraction = a.o.hot_fraction;
  c.hot_access = a.o.hot_access;
  return RunCompare(c, simulate);
}

int RunSmallBankCommand(SmallBankArgs& a, bool simulate) {
  if (!a.sweep.empty()) {
    if (!a.o.history_path.empty()) {
      return Fail(simulate ? "sim smallbank" : "bench smallbank",
                  "--history records one run; it does not go with --sweep");
    }
    return RunSweep(a, simulate);
  }
  const char* what = simulate ? "sim smallbank" : "bench smallbank";
  bench::SmallBankOptions& o = a.o;
  Status resolved = ResolveClusterFlags(&o.cluster, &o.sim, a.isolation, a.model, simulate);
  if (!resolved.ok()) return Fail(what, resolved.message());
  Result<ProtocolConfig> protocol = ProtocolByName(a.protocol);
  if (!protocol.ok()) return Fail(what, protocol.status().message());
  o.cluster.protocol = *protocol;
  Status valid = bench::ValidateSmallBankOptions(o);
  if (!valid.ok()) return Fail(what, valid.message());

  std::printf(
      "pond %s smallbank: build %s, transport %s%s, protocol %s, %s, %d MN(s), %d CN(s) x %d "
      "worker(s) x %d coro(s), R=%d, N=%d, %lu accounts, %.0f%% of accesses to %.1f%% hot, "
      "%g %ss, seed %lu\n",
      simulate ? "sim" : "bench", bench::kBuildType, simulate ? "sim" : "local",
      simulate ? (", model " + o.sim->name).c_str() : "", o.cluster.protocol.name.c_str(),
      IsolationName(o.cluster.isolation), o.cluster.mns, o.cluster.cns, o.cluster.workers_per_cn,
      o.coros, o.cluster.replication, o.cluster.versions, static_cast<unsigned long>(o.accounts),
      o.hot_access * 100, o.hot_fraction * 100, o.seconds, simulate ? "virtual " : "",
      static_cast<unsigned long>(o.cluster.seed));
  if (simulate) std::printf("model        %s\n", o.sim->ToJson().c_str());
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
  std::fflush(stdout);
  FILE* progress_out = simulate ? stderr : stdout;
  auto result = bench::RunSmallBank(o, KvsProgressPrinter(progress_out, simulate, ""));
  if (!result.ok()) {
    if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
    std::fprintf(stderr, "pond %s: %s\n", what, result.status().ToString().c_str());
    return 1;
  }
  PrintResult(o, *result, simulate);
  if (!a.json_path.empty()) {
    if (!WriteFile(a.json_path, bench::SmallBankResultJson(o, *result))) {
      return Fail(what, "cannot write " + a.json_path);
    }
    std::printf("results written to %s\n", a.json_path.c_str());
  }
  if (simulate) {
    // The one line that depends on the machine, not the seed.
    uint64_t events = result->sim ? result->sim->events : 0;
    std::printf("wall clock   %.2f s for the measured run, %lu events, %.2f M events/s\n",
                result->wall_s, static_cast<unsigned long>(events),
                result->wall_s > 0 ? static_cast<double>(events) / result->wall_s / 1e6 : 0.0);
  }
  std::fflush(stdout);
  int history_exit = check::kExitValid;
  if (!o.history_path.empty()) {
    // The recorded run, judged as `pond check` would: strict serializability under SR, snapshot
    // isolation under SI.
    check::CheckOptions co;
    co.history_path = o.history_path;
    co.model = o.cluster.isolation == Isolation::kSnapshot ? check::Model::kSnapshotIsolation
                                                           : check::Model::kStrictSerializable;
    std::printf("history      %lu transactions written to %s; pond check --model %s:\n",
                static_cast<unsigned long>(result->history_txns), o.history_path.c_str(),
                std::string(check::ModelName(co.model)).c_str());
    std::fflush(stdout);
    history_exit = check::RunCheck(co, std::cout, std::cerr);
    std::cout.flush();
  }
  if (history_exit != check::kExitValid) {
    if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
    std::fprintf(stderr, "pond %s: the history check failed (%s)\n", what, o.history_path.c_str());
    return 1;
  }
  if (!result->check_ok) {
    if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
    std::fprintf(stderr, "pond %s: money check failed: %s\n", what, result->check_detail.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void AddSmallBankCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<SmallBankArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "smallbank", simulate ? "SmallBank (six banking transactions, hot-set skew, money check) on "
                              "the simulated cluster (virtual time)"
                            : "SmallBank: six banking transactions with hot-set skew on an "
                              "embedded cluster, then a check that no money appeared or vanished");
  AddClusterFlags(cmd, &a->o.cluster, &a->o.coros, &a->o.seconds, &a->isolation, &a->model,
                  simulate);
  cmd->add_option("--accounts", a->o.accounts, "accounts (rows in each of savings and checking)")
      ->capture_default_str();
  cmd->add_option("--hot-fraction", a->o.hot_fraction, "share of the accounts in the hot set")
      ->capture_default_str();
  cmd->add_option("--hot-access", a->o.hot_access,
                  "share of the account draws that go to the hot set")
      ->capture_default_str();
  cmd->add_option("--protocol", a->protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  cmd->add_option("--history", a->o.history_path,
                  fmt::format("record every transaction, write the run as a list-append history "
                              "to this file and judge it with the isolation checker (for "
                              "test-sized runs: stops after {} transactions)",
                              bench::kSmallBankHistoryTxnsMax));
  AddOltpSweepFlag(cmd, &a->sweep);
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");
  cmd->callback([a, action, simulate] {
    *action = [a, simulate] { return RunSmallBankCommand(*a, simulate); };
  });
}

}  // namespace pond::tools
