// `pond bench kvs` and `pond sim kvs`: the KVS benchmark on real threads or on the simulated
// cluster. The simulated form prints only what the seed determines on stdout — so two runs with
// one seed print identical bytes — except one last line with the wall-clock cost; its progress
// lines (wall time) go to stderr.
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pond/bench/build_info.h"
#include "pond/bench/kvs_bench.h"
#include "pond/bench/report.h"
#include "pond/tools/command.h"
#include "pond/tools/connect_bench.h"
#include "pond/tools/kvs_sweep.h"
#include "pond/tools/run_command.h"
#include "pond/tools/run_flags.h"
#include "pond/tools/tool_util.h"
#include "pond/tools/workload_registry.h"

namespace pond::tools {

namespace {

struct KvsArgs {
  RunFlags flags;                           // the cluster flags and --protocol
  std::unique_ptr<WorkloadFlags> workload;  // --keys --rw-ratio --theta (workload_registry.h)
  std::string json_path;
  std::string sweep;     // KvsSweep grammar (kvs_sweep.h)
  std::string faults;    // --faults (simulated)
  ConnectFlags connect;  // --connect (real threads)
};

// --sweep: one run of `kvs` per point, one row each, every point checked before the first runs.
int RunKvsSweep(const char* what, const bench::Workload& kvs, const bench::RunOptions& o,
                const std::string& spec, const std::string& json_path, bool simulate) {
  Result<KvsSweep> parsed = ParseKvsSweep(spec);
  if (!parsed.ok()) return Fail(what, parsed.status().message());
  const KvsSweep sweep = *std::move(parsed);
  // Every point is checked before the first runs, so a long sweep cannot fail half-way on input.
  std::vector<std::pair<bench::RunOptions, std::unique_ptr<bench::Workload>>> points;
  for (size_t i = 0; i < sweep.PointCount(); i++) {
    bench::RunOptions p = o;
    std::unique_ptr<bench::Workload> w = kvs.Clone();
    Status pv = sweep.Apply(i, &p, w.get());
    if (pv.ok()) pv = bench::ValidateRun(*w, p);
    if (!pv.ok()) return Fail(what, "sweep point " + sweep.PointName(i) + ": " + pv.message());
    points.emplace_back(std::move(p), std::move(w));
  }

  PrintRunHeader(what, kvs, o);
  // Progress is in wall time: on stdout for real runs, on stderr for simulated ones (so that
  // stdout depends on the seed alone).
  FILE* progress_out = simulate ? stderr : stdout;
  double wall_total = 0;
  uint64_t events_total = 0;
  for (const SweepAxis& axis : sweep.axes) std::printf("%-10s ", axis.name.c_str());
  std::printf("%12s %8s %10s %10s %10s\n", "txn/s", "abort%", "p50 us", "p99 us",
              simulate ? "max NIC%" : "");
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < points.size(); i++) {
    auto& [p, w] = points[i];
    auto r =
        bench::RunWorkload(*w, p, KvsProgressPrinter(progress_out, simulate, sweep.PointName(i)));
    if (!r.ok()) {
      if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
      return Fail(what, "sweep point " + sweep.PointName(i) + ": " + r.status().ToString());
    }
    if (r->sim) events_total += r->sim->events;
    wall_total += r->wall_s;
    for (double v : sweep.Point(i)) std::printf("%-10g ", v);
    std::printf("%12.0f %8.2f %10.1f %10.1f %10s\n", bench::Throughput(*r),
                100.0 * bench::AbortRate(*r),
                static_cast<double>(r->latency_ns.Percentile(0.5)) / 1e3,
                static_cast<double>(r->latency_ns.Percentile(0.99)) / 1e3,
                simulate ? fmt::format("{:.1f}", 100.0 * bench::MaxNicShare(*r)).c_str() : "");
    std::fflush(stdout);
    nlohmann::json row = bench::RunResultJson(p, *w, *r);
    row["sweep_point"] = sweep.PointJson(i);
    rows.push_back(row);
  }
  if (!json_path.empty()) {
    if (!WriteFile(json_path, rows.dump(2) + "\n")) {
      return Fail(what, "cannot write " + json_path);
    }
    std::printf("results written to %s\n", json_path.c_str());
  }
  if (simulate) {
    // The one line that depends on the machine, not the seed.
    std::printf("wall clock   %.2f s for the measured runs, %lu events, %.2f M events/s\n",
                wall_total, static_cast<unsigned long>(events_total),
                wall_total > 0 ? static_cast<double>(events_total) / wall_total / 1e6 : 0.0);
  }
  return 0;
}

int RunKvsCommand(KvsArgs& a, const CLI::App& cmd, bool simulate) {
  const char* what = simulate ? "sim kvs" : "bench kvs";
  if (Status c = CheckConnectFlags(cmd, a.connect); !c.ok()) return Fail(what, c.message());
  if (!a.connect.address.empty()) {
    return RunConnected(what, *a.workload->Make(), a.connect, a.flags.run.seconds,
                        a.flags.run.cluster.seed, a.json_path);
  }
  bench::RunOptions& o = a.flags.run;
  Status resolved = ResolveRunFlags(&a.flags, simulate);
  if (resolved.ok()) resolved = ResolveFaults(&o, a.faults);
  if (!resolved.ok()) return Fail(what, resolved.message());
  if (!a.sweep.empty() && !a.faults.empty()) {
    return Fail(what, "--faults applies to one run; not with --sweep");
  }
  const std::unique_ptr<bench::Workload> kvs = a.workload->Make();
  if (a.sweep.empty()) {
    return RunOnce(what, *kvs, o, a.json_path, "");
  }
  return RunKvsSweep(what, *kvs, o, a.sweep, a.json_path, simulate);
}

}  // namespace

void AddKvsCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<KvsArgs>();
  a->workload = FindWorkload("kvs")->flags();
  CLI::App* kvs = parent.add_subcommand(
      "kvs", simulate
                 ? "Lotus KVS benchmark on the simulated cluster (virtual time)"
                 : "Lotus KVS benchmark: UpdateOne/ReadOne transactions on an embedded cluster");
  AddRunFlags(kvs, &a->flags, simulate);
  a->workload->Add(kvs, /*compare=*/false);
  kvs->add_option("--protocol", a->flags.protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  if (simulate) AddFaultsFlag(kvs, &a->faults, &a->flags.run.allow_unplayed_faults);
  kvs->add_option("--sweep", a->sweep,
                  fmt::format("run one point per combination: KEY=V1,V2,...[,KEY2=A..B...] (A..B: "
                              "integers A to B; first key outermost; at most {} points); KEY is "
                              "coros, workers (or threads), cns, rw-ratio or theta",
                              kSweepPointsMax));
  kvs->add_option("--json", a->json_path, "also write the results as JSON to this file");
  if (!simulate) AddConnectFlags(kvs, &a->connect);
  kvs->callback([a, action, kvs, simulate] {
    *action = [a, kvs, simulate] { return RunKvsCommand(*a, *kvs, simulate); };
  });
}

void AddSimCommand(CLI::App& root, CommandAction* action) {
  CLI::App* sim = root.add_subcommand(
      "sim", "Workloads on a simulated cluster: one thread, virtual time, one seed per run");
  sim->require_subcommand(1);
  AddKvsCommand(*sim, action, /*simulate=*/true);
  AddCompareCommand(*sim, action, /*simulate=*/true);
  AddWorkloadCommands(*sim, action, /*simulate=*/true);
  AddListAppendCommand(*sim, action, /*simulate=*/true);
  AddBtreeCommand(*sim, action, /*simulate=*/true);
}

namespace {
std::string& CommandLineStorage() {
  static std::string line;
  return line;
}
}  // namespace

void SetCommandLine(int argc, char** argv) {
  std::string& line = CommandLineStorage();
  line.clear();
  for (int i = 0; i < argc; i++) {
    if (i > 0) line += ' ';
    line += argv[i];
  }
}

const std::string& CommandLine() { return CommandLineStorage(); }

}  // namespace pond::tools
