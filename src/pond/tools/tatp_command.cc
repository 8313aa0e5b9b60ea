// `pond bench tatp` and `pond sim tatp`: the TATP workload (bench/tatp.h) on real threads or
// on the simulated cluster, then the referential check. Exit 0 if the check holds,
// 1 (with one line on stderr) if it does not, 2 on bad input. As with `pond sim kvs`, the
// simulated form prints only what the seed determines on stdout, except one last wall-clock
// line; progress goes to stderr.
#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <string>

#include "pond/bench/build_info.h"
#include "pond/bench/report.h"
#include "pond/bench/tatp.h"
#include "pond/tools/command.h"
#include "pond/tools/compare.h"
#include "pond/tools/kvs_flags.h"
#include "pond/tools/kvs_sweep.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct TatpArgs {
  bench::TatpOptions o;
  std::string isolation = "sr";
  std::string model = "cx3";
  std::string protocol = "lotus";
  std::string json_path;
  std::string sweep;  // KvsSweep grammar: run through RunCompare with this protocol as its row
};

void PrintResult(const bench::TatpOptions& o, const bench::TatpResult& r, bool simulate) {
  const ClusterStats& s = r.stats;
  double tput = r.elapsed_s > 0 ? static_cast<double>(r.committed) / r.elapsed_s : 0;
  uint64_t attempts = r.committed + r.aborted;
  double per = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
  const char* unit = simulate ? " (virtual)" : "";
  if (!simulate) {
    std::printf("loaded %lu subscribers (%lu rows) in %.1f s\n",
                static_cast<unsigned long>(o.subscribers),
                static_cast<unsigned long>(r.rows_loaded), r.load_s);
  }
  std::printf("throughput   %s txn/s%s (%lu committed in %.3f s; %lu read-write, %lu declined)\n",
              HumanRate(tput).c_str(), unit, static_cast<unsigned long>(r.committed), r.elapsed_s,
              static_cast<unsigned long>(r.committed_rw), static_cast<unsigned long>(r.declined));
  std::string mix;
  for (int k = 0; k < bench::kTatpTxnCount; k++) {
    mix += fmt::format("{}{} {}", k ? ", " : "", bench::TatpTxnName(static_cast<bench::TatpTxn>(k)),
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
  std::printf("ref. check   %s: %lu rows after the run (%lu loaded)%s%s\n",
              r.check_ok ? "ok" : "FAILED", static_cast<unsigned long>(r.rows_after),
              static_cast<unsigned long>(r.rows_loaded), r.check_ok ? "" : ": ",
              r.check_detail.c_str());
}

// --sweep: through `compare`, with this command's protocol as the only row.
int RunSweep(TatpArgs& a, bool simulate) {
  CompareArgs c = SingleProtocolSweep("tatp", a.o.cluster, a.o.coros, a.o.seconds, a.isolation,
                                      a.model, a.protocol, a.sweep, a.json_path);
  c.subscribers = a.o.subscribers;
  return RunCompare(c, simulate);
}

int RunTatpCommand(TatpArgs& a, bool simulate) {
  if (!a.sweep.empty()) return RunSweep(a, simulate);
  const char* what = simulate ? "sim tatp" : "bench tatp";
  bench::TatpOptions& o = a.o;
  Status resolved = ResolveClusterFlags(&o.cluster, &o.sim, a.isolation, a.model, simulate);
  if (!resolved.ok()) return Fail(what, resolved.message());
  Result<ProtocolConfig> protocol = ProtocolByName(a.protocol);
  if (!protocol.ok()) return Fail(what, protocol.status().message());
  o.cluster.protocol = *protocol;
  Status valid = bench::ValidateTatpOptions(o);
  if (!valid.ok()) return Fail(what, valid.message());

  std::printf(
      "pond %s tatp: build %s, transport %s%s, protocol %s, %s, %d MN(s), %d CN(s) x %d "
      "worker(s) x %d coro(s), R=%d, N=%d, %lu subscribers, "
      "%g %ss, seed %lu\n",
      simulate ? "sim" : "bench", bench::kBuildType, simulate ? "sim" : "local",
      simulate ? (", model " + o.sim->name).c_str() : "", o.cluster.protocol.name.c_str(),
      IsolationName(o.cluster.isolation), o.cluster.mns, o.cluster.cns, o.cluster.workers_per_cn,
      o.coros, o.cluster.replication, o.cluster.versions, static_cast<unsigned long>(o.subscribers),
      o.seconds, simulate ? "virtual " : "", static_cast<unsigned long>(o.cluster.seed));
  if (simulate) std::printf("model        %s\n", o.sim->ToJson().c_str());
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
  std::fflush(stdout);
  FILE* progress_out = simulate ? stderr : stdout;
  auto result = bench::RunTatp(o, KvsProgressPrinter(progress_out, simulate, ""));
  if (!result.ok()) {
    if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
    std::fprintf(stderr, "pond %s: %s\n", what, result.status().ToString().c_str());
    return 1;
  }
  PrintResult(o, *result, simulate);
  if (!a.json_path.empty()) {
    if (!WriteFile(a.json_path, bench::TatpResultJson(o, *result))) {
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
  if (!result->check_ok) {
    if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
    std::fprintf(stderr, "pond %s: referential check failed: %s\n", what,
                 result->check_detail.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void AddTatpCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<TatpArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "tatp", simulate ? "TATP (seven telecom transactions, 80% read-only, referential check) on "
                         "the simulated cluster (virtual time)"
                       : "TATP: seven telecom transactions, 80% read-only, on an embedded cluster, "
                         "then a referential check of every row");
  AddClusterFlags(cmd, &a->o.cluster, &a->o.coros, &a->o.seconds, &a->isolation, &a->model,
                  simulate);
  cmd->add_option("--subscribers", a->o.subscribers, "subscribers (rows of the subscriber table)")
      ->capture_default_str();
  cmd->add_option("--protocol", a->protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  AddOltpSweepFlag(cmd, &a->sweep);
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");
  cmd->callback(
      [a, action, simulate] { *action = [a, simulate] { return RunTatpCommand(*a, simulate); }; });
}

}  // namespace pond::tools
