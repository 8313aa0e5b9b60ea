// `pond bench kvs` and `pond sim kvs`: the KVS benchmark on real threads or on the simulated
// cluster. The simulated form prints only what the seed determines on stdout — so two runs with
// one seed print identical bytes — except one last line with the wall-clock cost; its progress
// lines (wall time) go to stderr.
#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "pond/bench/build_info.h"
#include "pond/bench/kvs_bench.h"
#include "pond/tools/command.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct KvsArgs {
  bench::KvsOptions o;
  std::string json_path;
  std::string isolation = "sr";
  std::string model = "cx3";
  std::string sweep;  // KEY=V1,V2,...
};

const char* kVerbNames[4] = {"READ", "WRITE", "CAS", "FAA"};

std::string Header(const KvsArgs& a, bool simulate) {
  const bench::KvsOptions& o = a.o;
  return fmt::format(
      "pond {} kvs: build {}, transport {}{}, protocol lotus, {}, {} MN(s), {} CN(s) x {} "
      "worker(s) x {} coro(s), R={}, N={}, {} keys, {} keys, {:.0f}% UpdateOne, {} {}s, seed {}",
      simulate ? "sim" : "bench", bench::kBuildType, simulate ? "sim" : "local",
      simulate ? ", model " + o.sim->name : std::string(), IsolationName(o.cluster.isolation),
      o.cluster.mns, o.cluster.cns, o.cluster.workers_per_cn, o.coros, o.cluster.replication,
      o.cluster.versions, o.keys, o.theta == 0 ? "uniform" : fmt::format("zipf({})", o.theta),
      o.rw_ratio * 100, o.seconds, simulate ? "virtual " : "", o.cluster.seed);
}

// Busy share of an MN's NIC over the measured run, total and by verb.
std::string NicLine(const SimStats::Nic& n, double window_ns) {
  uint64_t busy = 0;
  for (uint64_t b : n.busy_ns) busy += b;
  std::string s = fmt::format("{:5.1f}%", 100.0 * static_cast<double>(busy) / window_ns);
  s += " (";
  for (int k = 0; k < 4; k++) {
    s += fmt::format("{}{} {:.1f}%", k ? ", " : "", kVerbNames[k],
                     100.0 * static_cast<double>(n.busy_ns[k]) / window_ns);
  }
  return s + ")";
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
      "abort rate   %.2f%% (lock conflict %lu, newer version %lu, snapshot too old %lu, "
      "torn read %lu, invisible wait %lu)\n",
      attempts ? 100.0 * static_cast<double>(r.aborted) / static_cast<double>(attempts) : 0.0,
      static_cast<unsigned long>(s.aborts.lock_conflict),
      static_cast<unsigned long>(s.aborts.newer_version),
      static_cast<unsigned long>(s.aborts.snapshot_too_old),
      static_cast<unsigned long>(s.aborts.torn_read),
      static_cast<unsigned long>(s.aborts.invisible_wait));
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
      std::printf("MN %zu NIC     %s\n", mn, NicLine(r.sim->mn_nics[mn], window).c_str());
    }
  }
}

// Applies one sweep point ("coros=4") to the options; false if the key is unknown.
bool ApplySweep(bench::KvsOptions* o, const std::string& key, double v) {
  if (key == "coros")
    o->coros = static_cast<int>(v);
  else if (key == "rw-ratio")
    o->rw_ratio = v;
  else if (key == "theta")
    o->theta = v;
  else if (key == "cns")
    o->cluster.cns = static_cast<int>(v);
  else if (key == "workers")
    o->cluster.workers_per_cn = static_cast<int>(v);
  else
    return false;
  return true;
}

// "KEY=V1,V2,..." or "KEY=A..B" (integers A to B).
Status ParseSweep(const std::string& spec, std::string* key, std::vector<double>* values) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) return InvalidArgument("--sweep must be KEY=V1,V2,...");
  *key = spec.substr(0, eq);
  bench::KvsOptions probe;
  if (!ApplySweep(&probe, *key, 1)) {
    return InvalidArgument("--sweep key must be coros, rw-ratio, theta, cns or workers");
  }
  std::string list = spec.substr(eq + 1);
  auto dots = list.find("..");
  try {
    if (dots != std::string::npos) {
      int a = std::stoi(list.substr(0, dots)), b = std::stoi(list.substr(dots + 2));
      if (a > b || b - a > 64)
        return InvalidArgument("--sweep range must be A..B with A <= B, at most 65 points");
      for (int v = a; v <= b; v++) values->push_back(v);
    } else {
      std::stringstream ss(list);
      std::string item;
      while (std::getline(ss, item, ',')) values->push_back(std::stod(item));
    }
  } catch (const std::exception&) {
    return InvalidArgument("--sweep values must be numbers: " + list);
  }
  if (values->empty() || values->size() > 65)
    return InvalidArgument("--sweep needs 1 to 65 values");
  return Status::Ok();
}

int RunKvsCommand(KvsArgs& a, bool simulate) {
  const char* what = simulate ? "sim kvs" : "bench kvs";
  a.o.cluster.isolation = (a.isolation == "si" || a.isolation == "SI") ? Isolation::kSnapshot
                                                                       : Isolation::kSerializable;
  if (simulate) {
    Result<SimModel> m = SimModel::FromFlag(a.model);
    if (!m.ok()) return Fail(what, m.status().message());
    a.o.sim = *m;
  }
  std::string sweep_key;
  std::vector<double> sweep_values;
  if (!a.sweep.empty()) {
    Status s = ParseSweep(a.sweep, &sweep_key, &sweep_values);
    if (!s.ok()) return Fail(what, s.message());
  }
  Status valid = bench::ValidateKvsOptions(a.o);
  if (!valid.ok()) return Fail(what, valid.message());
  for (double v : sweep_values) {
    bench::KvsOptions p = a.o;
    ApplySweep(&p, sweep_key, v);
    Status pv = bench::ValidateKvsOptions(p);
    if (!pv.ok())
      return Fail(what,
                  "sweep point " + sweep_key + "=" + fmt::format("{}", v) + ": " + pv.message());
  }

  std::printf("%s\n", Header(a, simulate).c_str());
  if (simulate) std::printf("model        %s\n", a.o.sim->ToJson().c_str());
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
  std::fflush(stdout);
  // Progress is in wall time: on stdout for real runs, on stderr for simulated ones (so that
  // stdout depends on the seed alone).
  FILE* progress_out = simulate ? stderr : stdout;
  auto progress = [&, last = bench::KvsProgress{0, 0, 0}](const bench::KvsProgress& p) mutable {
    double dt = p.elapsed_s - last.elapsed_s;
    uint64_t dc = p.committed - last.committed, da = p.aborted - last.aborted;
    std::fprintf(
        progress_out, "  %8.4f %ss  %10.0f committed/s  abort rate %5.2f%%\n", p.elapsed_s,
        simulate ? "virtual " : "", dt > 0 ? static_cast<double>(dc) / dt : 0.0,
        dc + da > 0 ? 100.0 * static_cast<double>(da) / static_cast<double>(dc + da) : 0.0);
    std::fflush(progress_out);
    last = p;
  };

  double wall_total = 0;
  uint64_t events_total = 0;
  if (sweep_values.empty()) {
    auto result = bench::RunKvs(a.o, progress);
    if (!result.ok()) {
      if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
      return Fail(what, result.status().ToString());
    }
    PrintResult(a.o, *result, simulate);
    if (!a.json_path.empty()) {
      if (!WriteFile(a.json_path, bench::KvsResultJson(a.o, *result))) {
        return Fail(what, "cannot write " + a.json_path);
      }
      std::printf("results written to %s\n", a.json_path.c_str());
    }
    wall_total = result->wall_s;
    if (result->sim) events_total = result->sim->events;
  } else {
    std::printf("%-10s %12s %8s %10s %10s %10s\n", sweep_key.c_str(), "txn/s", "abort%", "p50 us",
                "p99 us", simulate ? "max NIC%" : "");
    std::string json = "[\n";
    for (size_t i = 0; i < sweep_values.size(); i++) {
      bench::KvsOptions p = a.o;
      ApplySweep(&p, sweep_key, sweep_values[i]);
      auto r = bench::RunKvs(p, progress);
      if (!r.ok()) {
        if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
        return Fail(what, r.status().ToString());
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
      std::printf(
          "%-10g %12.0f %8.2f %10.1f %10.1f %10s\n", sweep_values[i],
          static_cast<double>(r->committed) / r->elapsed_s,
          attempts ? 100.0 * static_cast<double>(r->aborted) / static_cast<double>(attempts) : 0.0,
          static_cast<double>(r->latency_ns.Percentile(0.5)) / 1e3,
          static_cast<double>(r->latency_ns.Percentile(0.99)) / 1e3,
          simulate ? fmt::format("{:.1f}", nic_max).c_str() : "");
      std::fflush(stdout);
      json += bench::KvsResultJson(p, *r) + (i + 1 < sweep_values.size() ? ",\n" : "\n");
    }
    json += "]\n";
    if (!a.json_path.empty()) {
      if (!WriteFile(a.json_path, json)) return Fail(what, "cannot write " + a.json_path);
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
  if (simulate) {
    // The Lotus testbed (§8.1): 3 MNs, 9 CNs of 8 cores, 6 coroutines each, N = 2 versions.
    a->o.cluster.cns = 9;
    a->o.cluster.workers_per_cn = 8;
    a->o.coros = 6;
    a->o.cluster.versions = 2;
    a->o.seconds = 0.01;
  }
  CLI::App* kvs = parent.add_subcommand(
      "kvs", simulate
                 ? "Lotus KVS benchmark on the simulated cluster (virtual time)"
                 : "Lotus KVS benchmark: UpdateOne/ReadOne transactions on an embedded cluster");
  bench::KvsOptions& o = a->o;
  kvs->add_option("--mns", o.cluster.mns, "memory nodes")->capture_default_str();
  kvs->add_option("--cns", o.cluster.cns, "compute nodes")->capture_default_str();
  kvs->add_option("--workers", o.cluster.workers_per_cn, "worker threads (cores) per CN")
      ->capture_default_str();
  kvs->add_option("--coros", o.coros, "client coroutines per worker")->capture_default_str();
  kvs->add_option("--keys", o.keys, "keys in the table")->capture_default_str();
  kvs->add_option(simulate ? "--virtual-seconds" : "--seconds", o.seconds,
                  simulate ? "measured run time, in virtual seconds" : "measured run time")
      ->capture_default_str();
  kvs->add_option("--rw-ratio", o.rw_ratio, "fraction of UpdateOne (read-write) transactions")
      ->capture_default_str();
  kvs->add_option("--theta", o.theta, "zipf skew of keys; 0 = uniform (the papers use 0.99)")
      ->capture_default_str();
  kvs->add_option("--isolation", a->isolation, "sr (serializable) or si (snapshot isolation)")
      ->check(CLI::IsMember({"sr", "si"}, CLI::ignore_case))
      ->capture_default_str();
  kvs->add_option("--replication", o.cluster.replication, "copies of each record")
      ->capture_default_str();
  kvs->add_option("--versions", o.cluster.versions, "version cells per record")
      ->capture_default_str();
  kvs->add_option("--region-mib", o.cluster.region_mib, "MiB of memory per MN")
      ->capture_default_str();
  kvs->add_option("--seed", o.cluster.seed, "seed for keys, routing (and the whole simulation)")
      ->capture_default_str();
  kvs->add_option("--sweep", a->sweep,
                  "run one point per value: KEY=V1,V2,... or KEY=A..B; KEY is coros, rw-ratio, "
                  "theta, cns or workers");
  if (simulate) {
    kvs->add_option("--model", a->model, "cx3, cx5 or a JSON model file")->capture_default_str();
  }
  kvs->add_option("--json", a->json_path, "also write the results as JSON to this file");
  kvs->callback(
      [a, action, simulate] { *action = [a, simulate] { return RunKvsCommand(*a, simulate); }; });
}

void AddSimCommand(CLI::App& root, CommandAction* action) {
  CLI::App* sim = root.add_subcommand(
      "sim", "Workloads on a simulated cluster: one thread, virtual time, one seed per run");
  sim->require_subcommand(1);
  AddKvsCommand(*sim, action, /*simulate=*/true);
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
