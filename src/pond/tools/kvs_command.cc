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
#include "pond/tools/kvs_flags.h"
#include "pond/tools/kvs_sweep.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct KvsArgs {
  KvsFlags flags;
  std::string protocol = "lotus";
  std::string json_path;
  std::string sweep;  // KvsSweep grammar (kvs_sweep.h)
};

std::string Header(const bench::KvsOptions& o, bool simulate) {
  return fmt::format("pond {} kvs: build {}, transport {}{}, protocol {}, {}",
                     simulate ? "sim" : "bench", bench::kBuildType, simulate ? "sim" : "local",
                     simulate ? ", model " + o.sim->name : std::string(), o.cluster.protocol.name,
                     KvsSettings(o, simulate));
}

void PrintResult(const bench::KvsOptions& o, const bench::KvsResult& r, bool simulate) {
  const ClusterStats& s = r.stats;
  double tput = static_cast<double>(r.committed) / r.elapsed_s;
  uint64_t attempts = r.committed + r.aborted;
  double per = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
  const char* unit = simulate ? " (virtual)" : "";
  if (!simulate)
    std::printf("loaded %lu keys in %.1f s\n", static_cast<unsigned long>(o.keys), r.load_s);
  std::printf("throughput   %s txn/s%s (%lu committed in %.3f s; %lu UpdateOne)\n",
              HumanRate(tput).c_str(), unit, static_cast<unsigned long>(r.committed), r.elapsed_s,
              static_cast<unsigned long>(r.committed_rw));
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
      "%.2f CN messages\n",
      static_cast<double>(s.reads) * per, static_cast<double>(s.writes) * per,
      static_cast<double>(s.cas) * per, static_cast<double>(s.faa) * per,
      static_cast<double>(s.batches) * per, static_cast<double>(s.messages) * per);
  std::printf(
      "VT cache     %lu hits, %lu misses, %lu invalidations; %lu calls routed to another "
      "CN\n",
      static_cast<unsigned long>(s.vt_hits), static_cast<unsigned long>(s.vt_misses),
      static_cast<unsigned long>(s.vt_invalidations), static_cast<unsigned long>(s.remote_calls));
  if (r.sim) {
    std::printf(
        "simulation   %lu events, %lu CPU rounds over the whole run (load included); "
        "%.2f us of worker CPU per committed txn\n",
        static_cast<unsigned long>(r.sim->events), static_cast<unsigned long>(r.sim->cpu_rounds),
        static_cast<double>(r.sim_cpu_busy_ns) * per / 1e3);
    double window = r.elapsed_s * 1e9;
    for (size_t mn = 0; mn < r.sim->mn_nics.size(); mn++) {
      std::printf("MN %zu NIC     %s\n", mn, bench::NicLine(r.sim->mn_nics[mn], window).c_str());
    }
  }
}

int RunKvsCommand(KvsArgs& a, bool simulate) {
  const char* what = simulate ? "sim kvs" : "bench kvs";
  Status resolved = ResolveKvsFlags(&a.flags, simulate);
  if (!resolved.ok()) return Fail(what, resolved.message());
  bench::KvsOptions& o = a.flags.o;
  Result<ProtocolConfig> protocol = ProtocolByName(a.protocol);
  if (!protocol.ok()) return Fail(what, protocol.status().message());
  o.cluster.protocol = *protocol;
  KvsSweep sweep;
  if (!a.sweep.empty()) {
    Result<KvsSweep> parsed = ParseKvsSweep(a.sweep);
    if (!parsed.ok()) return Fail(what, parsed.status().message());
    sweep = *std::move(parsed);
  }
  Status valid = bench::ValidateKvsOptions(o);
  if (!valid.ok()) return Fail(what, valid.message());
  // Every point is checked before the first runs, so a long sweep cannot fail half-way on input.
  for (size_t i = 0; i < sweep.PointCount(); i++) {
    Status pv = bench::ValidateKvsOptions(sweep.Apply(o, i));
    if (!pv.ok()) return Fail(what, "sweep point " + sweep.PointName(i) + ": " + pv.message());
  }

  std::printf("%s\n", Header(o, simulate).c_str());
  if (simulate) std::printf("model        %s\n", o.sim->ToJson().c_str());
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
  std::fflush(stdout);
  // Progress is in wall time: on stdout for real runs, on stderr for simulated ones (so that
  // stdout depends on the seed alone).
  FILE* progress_out = simulate ? stderr : stdout;

  double wall_total = 0;
  uint64_t events_total = 0;
  if (sweep.axes.empty()) {
    auto result = bench::RunKvs(o, KvsProgressPrinter(progress_out, simulate, ""));
    if (!result.ok()) {
      if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
      return Fail(what, result.status().ToString());
    }
    PrintResult(o, *result, simulate);
    if (!a.json_path.empty()) {
      if (!WriteFile(a.json_path, bench::KvsResultJson(o, *result))) {
        return Fail(what, "cannot write " + a.json_path);
      }
      std::printf("results written to %s\n", a.json_path.c_str());
    }
    wall_total = result->wall_s;
    if (result->sim) events_total = result->sim->events;
  } else {
    for (const SweepAxis& axis : sweep.axes) std::printf("%-10s ", axis.name.c_str());
    std::printf("%12s %8s %10s %10s %10s\n", "txn/s", "abort%", "p50 us", "p99 us",
                simulate ? "max NIC%" : "");
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < sweep.PointCount(); i++) {
      bench::KvsOptions p = sweep.Apply(o, i);
      auto r = bench::RunKvs(p, KvsProgressPrinter(progress_out, simulate, sweep.PointName(i)));
      if (!r.ok()) {
        if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
        return Fail(what, "sweep point " + sweep.PointName(i) + ": " + r.status().ToString());
      }
      uint64_t attempts = r->committed + r->aborted;
      double nic_max = 0;
      if (r->sim) {
        for (const auto& n : r->sim->mn_nics) {
          uint64_t busy = 0;
          for (uint64_t b : n.busy_ns) busy += b;
          nic_max = std::max(nic_max, 100.0 * static_cast<double>(busy) / (r->elapsed_s * 1e9));
        }
        events_total += r->sim->events;
      }
      wall_total += r->wall_s;
      std::vector<double> point = sweep.Point(i);
      for (double v : point) std::printf("%-10g ", v);
      std::printf(
          "%12.0f %8.2f %10.1f %10.1f %10s\n", static_cast<double>(r->committed) / r->elapsed_s,
          attempts ? 100.0 * static_cast<double>(r->aborted) / static_cast<double>(attempts) : 0.0,
          static_cast<double>(r->latency_ns.Percentile(0.5)) / 1e3,
          static_cast<double>(r->latency_ns.Percentile(0.99)) / 1e3,
          simulate ? fmt::format("{:.1f}", nic_max).c_str() : "");
      std::fflush(stdout);
      nlohmann::json row = nlohmann::json::parse(bench::KvsResultJson(p, *r));
      row["sweep_point"] = sweep.PointJson(i);
      rows.push_back(row);
    }
    if (!a.json_path.empty()) {
      if (!WriteFile(a.json_path, rows.dump(2) + "\n")) {
        return Fail(what, "cannot write " + a.json_path);
      }
      std::printf("results written to %s\n", a.json_path.c_str());
    }
  }
  if (simulate) {
    // The one line that depends on the machine, not the seed.
    std::printf("wall clock   %.2f s for the measured run(s), %lu events, %.2f M events/s\n",
                wall_total, static_cast<unsigned long>(events_total),
                wall_total > 0 ? static_cast<double>(events_total) / wall_total / 1e6 : 0.0);
  }
  return 0;
}

}  // namespace

void AddKvsCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<KvsArgs>();
  CLI::App* kvs = parent.add_subcommand(
      "kvs", simulate
                 ? "Lotus KVS benchmark on the simulated cluster (virtual time)"
                 : "Lotus KVS benchmark: UpdateOne/ReadOne transactions on an embedded cluster");
  AddKvsWorkloadFlags(kvs, &a->flags, simulate);
  kvs->add_option("--protocol", a->protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  kvs->add_option("--sweep", a->sweep,
                  fmt::format("run one point per combination: KEY=V1,V2,...[,KEY2=A..B...] (A..B: "
                              "integers A to B; first key outermost; at most {} points); KEY is "
                              "coros, workers (or threads), cns, rw-ratio or theta",
                              kSweepPointsMax));
  kvs->add_option("--json", a->json_path, "also write the results as JSON to this file");
  kvs->callback(
      [a, action, simulate] { *action = [a, simulate] { return RunKvsCommand(*a, simulate); }; });
}

void AddSimCommand(CLI::App& root, CommandAction* action) {
  CLI::App* sim = root.add_subcommand(
      "sim", "Workloads on a simulated cluster: one thread, virtual time, one seed per run");
  sim->require_subcommand(1);
  AddKvsCommand(*sim, action, /*simulate=*/true);
  AddCompareCommand(*sim, action, /*simulate=*/true);
  AddSmallBankCommand(*sim, action, /*simulate=*/true);
  AddTatpCommand(*sim, action, /*simulate=*/true);
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
