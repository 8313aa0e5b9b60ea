// `pond bench compare` and `pond sim compare`: every protocol (or, with --ablation, every step
// of the Lotus ablation) on one workload with identical settings and seed, then one table —
// throughput, its ratio to a baseline row, abort rate, latency, atomics per committed
// transaction and (simulated) each verb's share of the MN NICs. Afterwards every row's protocol
// runs a short list-append workload on the same cluster settings and seed, and the isolation
// checker judges its history (--no-check skips this).
//
// Like `pond sim kvs`, the simulated form prints only what the seed determines on stdout, except
// one last wall-clock line; progress goes to stderr.
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pond/bench/build_info.h"
#include "pond/bench/kvs_bench.h"
#include "pond/bench/list_append.h"
#include "pond/bench/smallbank.h"
#include "pond/bench/tatp.h"
#include "pond/check/checker.h"
#include "pond/check/history.h"
#include "pond/check/recorder.h"
#include "pond/runtime/clocks.h"
#include "pond/tools/command.h"
#include "pond/tools/compare.h"
#include "pond/tools/kvs_flags.h"
#include "pond/tools/kvs_sweep.h"
#include "pond/tools/tool_util.h"
#include "pond/transport/endpoint.h"

namespace pond::tools {

namespace {

constexpr uint32_t kCheckTxnsMax = 1'000'000;

// One protocol's run. The table reads `r`; a SmallBank row keeps its own options and result
// too (for its money check and JSON) and copies the shared measures into `r`.
struct Row {
  std::string name;   // the protocol or ablation step
  size_t point = 0;   // the sweep point (0 without a sweep)
  std::string label;  // name, and the point's settings in a sweep: "lotus coros=2"
  bench::KvsOptions o;
  bench::KvsResult r;
  std::optional<bench::SmallBankOptions> sb;
  std::optional<bench::SmallBankResult> sbr;
  std::optional<bench::TatpOptions> ta;
  std::optional<bench::TatpResult> tar;
};

bench::TatpOptions TatpOf(const CompareArgs& a, const bench::KvsOptions& o) {
  bench::TatpOptions t;
  t.cluster = o.cluster;
  t.coros = o.coros;
  t.seconds = o.seconds;
  t.sim = o.sim;
  t.subscribers = a.subscribers;
  return t;
}

bench::SmallBankOptions SmallBankOf(const CompareArgs& a, const bench::KvsOptions& o) {
  bench::SmallBankOptions sb;
  sb.cluster = o.cluster;
  sb.coros = o.coros;
  sb.seconds = o.seconds;
  sb.sim = o.sim;
  sb.accounts = a.accounts;
  sb.hot_fraction = a.hot_fraction;
  sb.hot_access = a.hot_access;
  return sb;
}

// The measures the table shows, from a SmallBank or TATP run.
bench::KvsResult AsKvsResult(const bench::RunMeasures& m) {
  bench::KvsResult r;
  static_cast<bench::RunMeasures&>(r) = m;
  return r;
}

std::string TatpSettings(const bench::TatpOptions& o, bool simulate) {
  return fmt::format(
      "{}, {} MN(s), {} CN(s) x {} worker(s) x {} coro(s), R={}, N={}, {} subscribers, {} {}s, "
      "seed {}",
      IsolationName(o.cluster.isolation), o.cluster.mns, o.cluster.cns, o.cluster.workers_per_cn,
      o.coros, o.cluster.replication, o.cluster.versions, o.subscribers, o.seconds,
      simulate ? "virtual " : "", o.cluster.seed);
}

std::string SmallBankSettings(const bench::SmallBankOptions& o, bool simulate) {
  return fmt::format(
      "{}, {} MN(s), {} CN(s) x {} worker(s) x {} coro(s), R={}, N={}, {} accounts, {:.0f}% of "
      "accesses to {:.1f}% hot, {} {}s, seed {}",
      IsolationName(o.cluster.isolation), o.cluster.mns, o.cluster.cns, o.cluster.workers_per_cn,
      o.coros, o.cluster.replication, o.cluster.versions, o.accounts, o.hot_access * 100,
      o.hot_fraction * 100, o.seconds, simulate ? "virtual " : "", o.cluster.seed);
}

struct HistoryCheck {
  bool ok = false;
  uint64_t committed = 0;
  uint64_t failed = 0;
  std::string model;
  std::string detail;  // why it failed
  double wall_s = 0;
  uint64_t events = 0;
};

// Parses and checks a history under `model`: true (out->ok) if it satisfies it; else false with
// the anomalies the model forbids (or why it could not be read) in out->detail.
bool JudgeHistory(std::istream& in, const std::string& source, check::Model model,
                  HistoryCheck* out) {
  Result<check::History> history = check::ParseHistory(in, source);
  if (!history.ok()) {
    out->detail = "unreadable history: " + history.status().ToString();
    return false;
  }
  check::CheckerOptions co;
  co.model = model;
  check::CheckResult result = check::Check(*history, co);
  if (result.valid) {
    out->ok = true;
    return true;
  }
  for (size_t i = 0; i < check::kAnomalyCount; i++) {
    const check::AnomalyReport& rep = result.anomalies[i];
    auto a = static_cast<check::Anomaly>(i);
    if (rep.count == 0 || !check::Forbids(model, a)) continue;
    out->detail +=
        fmt::format("{}{} x{}", out->detail.empty() ? "" : ", ", check::AnomalyName(a), rep.count);
    if (!rep.examples.empty()) out->detail += " (" + rep.examples[0].summary + ")";
  }
  return false;
}

check::Model ModelOf(Isolation iso) {
  return iso == Isolation::kSnapshot ? check::Model::kSnapshotIsolation
                                     : check::Model::kStrictSerializable;
}

// The list-append workload on a fresh cluster with `o`'s settings (protocol, nodes, isolation,
// seed, and model if simulated), about `txns` transactions in all, judged by the checker under
// strict serializability (SR) or snapshot isolation (SI). A failing history is written to a file
// named in `detail`.
HistoryCheck CheckHistory(const bench::KvsOptions& o, uint32_t txns) {
  HistoryCheck out;
  check::Model model = ModelOf(o.cluster.isolation);
  out.model = std::string(check::ModelName(model));
  auto started = o.sim ? Cluster::StartSimulated(o.cluster, *o.sim) : Cluster::Start(o.cluster);
  if (!started.ok()) {
    out.detail = "cannot start the cluster: " + started.status().ToString();
    return out;
  }
  Cluster& cluster = **started;
  const uint64_t clients = static_cast<uint64_t>(o.cluster.cns) *
                           static_cast<uint64_t>(o.cluster.workers_per_cn) *
                           static_cast<uint64_t>(o.coros);
  bench::ListAppendOptions lo;
  lo.seed = o.cluster.seed;
  // At least one active key per client: contended (zipf 0.99), but not so much that few of the
  // transactions on a large cluster commit and the history says little.
  lo.window =
      static_cast<uint32_t>(std::max<uint64_t>(lo.window, std::min<uint64_t>(clients, 1 << 16)));
  lo.txns_per_client = static_cast<uint32_t>(std::max<uint64_t>(1, (txns + clients - 1) / clients));
  // A key retires after max_appends elements and a transaction appends at most mops_max, so this
  // many keys hold the window for every transaction the run can make.
  uint64_t total = lo.txns_per_client * clients;
  lo.keys = 2 * uint64_t{lo.window} + total * lo.mops_max / lo.max_appends + 64;
  Result<bench::ListAppendTable> table = bench::SetupListAppend(cluster, lo);
  if (!table.ok()) {
    out.detail = "cannot load the lists: " + table.status().ToString();
    return out;
  }
  std::ostringstream text;
  check::Recorder recorder(&text);
  Clock& wall = SystemClock::Get();
  uint64_t wall_start = wall.NowNs();
  uint64_t events_before = cluster.simulated() ? cluster.GetSimStats().events : 0;
  Result<bench::ListAppendResult> run =
      bench::RunListAppend(cluster, *table, lo, recorder, o.coros);
  out.wall_s = static_cast<double>(wall.NowNs() - wall_start) / 1e9;
  if (cluster.simulated()) out.events = cluster.GetSimStats().events - events_before;
  Status closed = recorder.Close();
  if (!run.ok()) {
    out.detail = "list-append failed: " + run.status().ToString();
    return out;
  }
  if (!closed.ok()) {
    out.detail = "recording failed: " + closed.ToString();
    return out;
  }
  out.committed = run->committed;
  out.failed = run->failed;
  std::istringstream in(text.str());
  if (JudgeHistory(in, "history of " + o.cluster.protocol.name, model, &out)) return out;
  std::string path =
      (std::filesystem::temp_directory_path() /
       fmt::format("pond-compare-{}-seed{}.jsonl", o.cluster.protocol.name, o.cluster.seed))
          .string();
  if (WriteFile(path, text.str())) {
    out.detail +=
        "; history kept at " + path + " (pond check " + path + " --model " + out.model + ")";
  }
  return out;
}

// SmallBank itself, recorded (smallbank_history.h): a run of `o`'s settings that stops after
// `calls` calls, judged like CheckHistory's. The history file is kept only if it fails.
HistoryCheck CheckSmallBankHistory(bench::SmallBankOptions o, uint32_t calls) {
  HistoryCheck out;
  check::Model model = ModelOf(o.cluster.isolation);
  out.model = std::string(check::ModelName(model));
  o.history_path = (std::filesystem::temp_directory_path() /
                    fmt::format("pond-compare-smallbank-{}-seed{}.jsonl", o.cluster.protocol.name,
                                o.cluster.seed))
                       .string();
  o.history_calls_max = calls;
  // Long enough for `calls` calls at any load; the call cap ends the run.
  o.seconds = std::max(o.seconds, 1.0);
  Result<bench::SmallBankResult> run = bench::RunSmallBank(o, nullptr);
  if (!run.ok()) {
    out.detail = "recorded SmallBank run failed: " + run.status().ToString();
    return out;
  }
  out.wall_s = run->wall_s;
  out.events = run->sim ? run->sim->events : 0;
  out.committed = run->committed;
  out.failed = run->aborted;
  if (!run->check_ok) {
    out.detail = "money check failed: " + run->check_detail;
    return out;
  }
  std::ifstream in(o.history_path);
  if (JudgeHistory(in, o.history_path, model, &out)) {
    std::filesystem::remove(o.history_path);
  } else {
    out.detail += "; history kept at " + o.history_path + " (pond check " + o.history_path +
                  " --model " + out.model + ")";
  }
  return out;
}

double NicShare(const bench::KvsResult& r, int verb) {
  if (!r.sim || r.sim->mn_nics.empty()) return 0;
  double busy = 0;
  for (const auto& n : r.sim->mn_nics) busy += static_cast<double>(n.busy_ns[verb]);
  return busy / static_cast<double>(r.sim->mn_nics.size()) / (r.elapsed_s * 1e9);
}

double Throughput(const bench::KvsResult& r) {
  return r.elapsed_s > 0 ? static_cast<double>(r.committed) / r.elapsed_s : 0;
}

double AtomicsPerTxn(const bench::KvsResult& r) {
  return r.committed > 0
             ? static_cast<double>(r.stats.cas + r.stats.faa) / static_cast<double>(r.committed)
             : 0;
}

double AbortRate(const bench::KvsResult& r) {
  uint64_t attempts = r.committed + r.aborted;
  return attempts > 0 ? static_cast<double>(r.aborted) / static_cast<double>(attempts) : 0;
}

// The rows a command line asks for; InvalidArgument on an unknown or repeated name.
Result<std::vector<std::string>> RowNames(const CompareArgs& a) {
  if (a.ablation) return AblationSteps();
  if (a.protocols.empty()) return ProtocolNames();
  std::vector<std::string> names;
  std::stringstream ss(a.protocols);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty())
      return InvalidArgument("--protocols has an empty name: '" + a.protocols + "'");
    Result<ProtocolConfig> p = ProtocolByName(name);
    if (!p.ok()) return InvalidArgument("--protocols: " + p.status().message());
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return InvalidArgument("--protocols names " + name + " twice");
    }
    names.push_back(name);
  }
  if (a.protocols.back() == ',') {
    return InvalidArgument("--protocols has an empty name: '" + a.protocols + "'");
  }
  return names;
}

// Runs `row`'s workload and fills its results; the error of a run that failed.
Status RunRow(Row& row, FILE* progress_out, bool simulate) {
  auto progress = KvsProgressPrinter(progress_out, simulate, row.label);
  if (row.sb) {
    auto r = bench::RunSmallBank(*row.sb, progress);
    if (!r.ok()) return r.status();
    row.r = AsKvsResult(*r);
    row.sbr = *std::move(r);
  } else if (row.ta) {
    auto r = bench::RunTatp(*row.ta, progress);
    if (!r.ok()) return r.status();
    row.r = AsKvsResult(*r);
    row.tar = *std::move(r);
  } else {
    auto r = bench::RunKvs(row.o, progress);
    if (!r.ok()) return r.status();
    row.r = *std::move(r);
  }
  return Status::Ok();
}

double MaxNicShare(const bench::KvsResult& r) {
  double m = 0;
  if (!r.sim) return m;
  for (const auto& n : r.sim->mn_nics) {
    uint64_t busy = 0;
    for (uint64_t b : n.busy_ns) busy += b;
    m = std::max(m, static_cast<double>(busy) / (r.elapsed_s * 1e9));
  }
  return m;
}

}  // namespace

CompareArgs SingleProtocolSweep(const std::string& workload, const ClusterConfig& cluster,
                                int coros, double seconds, const std::string& isolation,
                                const std::string& model, const std::string& protocol,
                                const std::string& sweep, const std::string& json_path) {
  CompareArgs c;
  c.command = workload;
  c.workload = workload;
  c.flags.o.cluster = cluster;
  c.flags.o.coros = coros;
  c.flags.o.seconds = seconds;
  c.flags.isolation = isolation;
  c.flags.model = model;
  c.protocols = protocol;
  c.sweep = sweep;
  c.no_check = true;
  c.json_path = json_path;
  return c;
}

void AddOltpSweepFlag(CLI::App* cmd, std::string* sweep) {
  cmd->add_option("--sweep", *sweep,
                  fmt::format("run one point per combination and print one row each: "
                              "KEY=V1,V2,...[,KEY2=A..B...] (A..B: integers A to B; first key "
                              "outermost; at most {} points); KEY is coros, workers (or threads) "
                              "or cns. The throughput-latency curve of bench/plot.py",
                              kSweepPointsMax));
}

int RunCompare(CompareArgs& a, bool simulate) {
  const std::string what = std::string(simulate ? "sim " : "bench ") + a.command;
  if (a.workload != "kvs" && a.workload != "smallbank" && a.workload != "tatp") {
    return Fail(what, "unknown workload '" + a.workload + "' (choices: kvs, smallbank, tatp)");
  }
  const bool smallbank = a.workload == "smallbank", tatp = a.workload == "tatp";
  Status resolved = ResolveKvsFlags(&a.flags, simulate);
  if (!resolved.ok()) return Fail(what, resolved.message());
  if (a.check_txns < 1 || a.check_txns > kCheckTxnsMax) {
    return Fail(what, fmt::format("--check-txns must be 1 to {}", kCheckTxnsMax));
  }
  Result<std::vector<std::string>> names = RowNames(a);
  if (!names.ok()) return Fail(what, names.status().message());
  std::string baseline = a.baseline;
  if (baseline.empty()) {
    bool has_motor = std::find(names->begin(), names->end(), "motor") != names->end();
    baseline = has_motor ? "motor" : names->front();
  }
  auto base_it = std::find(names->begin(), names->end(), baseline);
  if (base_it == names->end()) {
    std::string list;
    for (const std::string& n : *names) list += (list.empty() ? "" : ", ") + n;
    return Fail(what, "--baseline '" + baseline + "' is not one of the rows (" + list + ")");
  }
  const size_t base_index = static_cast<size_t>(base_it - names->begin());
  KvsSweep sweep;
  if (!a.sweep.empty()) {
    Result<KvsSweep> parsed = ParseKvsSweep(a.sweep);
    if (!parsed.ok()) return Fail(what, parsed.status().message());
    sweep = *std::move(parsed);
    Status fits = sweep.CheckWorkload(a.workload);
    if (!fits.ok()) return Fail(what, fits.message());
  }
  const bool swept = !sweep.axes.empty();
  const size_t points = swept ? sweep.PointCount() : 1;

  // Rows point-major: all protocols at the first point, then the next, so a long sweep shows
  // every protocol early. Every row is validated before the first runs, so a long sweep cannot
  // fail half-way on input.
  std::vector<Row> rows;
  for (size_t p = 0; p < points; p++) {
    for (const std::string& name : *names) {
      Row row;
      row.name = name;
      row.point = p;
      row.label = swept ? name + " " + sweep.PointName(p) : name;
      row.o = swept ? sweep.Apply(a.flags.o, p) : a.flags.o;
      row.o.cluster.protocol = *ProtocolByName(name);
      Status valid = bench::ValidateKvsOptions(row.o);
      if (smallbank && valid.ok()) {
        row.sb = SmallBankOf(a, row.o);
        valid = bench::ValidateSmallBankOptions(*row.sb);
      }
      if (tatp && valid.ok()) {
        row.ta = TatpOf(a, row.o);
        valid = bench::ValidateTatpOptions(*row.ta);
      }
      if (!valid.ok()) return Fail(what, row.label + ": " + valid.message());
      rows.push_back(std::move(row));
    }
  }

  std::string row_list;
  for (const std::string& n : *names) row_list += (row_list.empty() ? "" : ",") + n;
  const bench::KvsOptions& o = a.flags.o;
  std::printf("pond %s: build %s, workload %s, transport %s%s, %s %s, baseline %s, %s%s\n",
              what.c_str(), bench::kBuildType, a.workload.c_str(), simulate ? "sim" : "local",
              simulate ? (", model " + o.sim->name).c_str() : "",
              a.ablation ? "ablation" : "protocols", row_list.c_str(), baseline.c_str(),
              smallbank ? SmallBankSettings(SmallBankOf(a, o), simulate).c_str()
              : tatp    ? TatpSettings(TatpOf(a, o), simulate).c_str()
                        : KvsSettings(o, simulate).c_str(),
              swept ? fmt::format(", sweep {} ({} points)", a.sweep, points).c_str() : "");
  if (simulate) std::printf("model        %s\n", o.sim->ToJson().c_str());
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
  std::fflush(stdout);

  FILE* progress_out = simulate ? stderr : stdout;
  double wall_runs = 0, wall_checks = 0;
  uint64_t events = 0;
  for (size_t i = 0; i < rows.size(); i++) {
    std::fprintf(progress_out, "running %s (%zu of %zu)\n", rows[i].label.c_str(), i + 1,
                 rows.size());
    std::fflush(progress_out);
    Status ran = RunRow(rows[i], progress_out, simulate);
    if (!ran.ok()) {
      if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
      std::fprintf(stderr, "pond %s: %s: %s\n", what.c_str(), rows[i].label.c_str(),
                   ran.ToString().c_str());
      return 1;
    }
    wall_runs += rows[i].r.wall_s;
    if (rows[i].r.sim) events += rows[i].r.sim->events;
  }

  // The table; each row's ratio is to the baseline at the same point.
  auto baseline_of = [&](const Row& row) -> const Row& {
    return rows[row.point * names->size() + base_index];
  };
  int name_w = 8;
  for (const std::string& n : *names) name_w = std::max(name_w, static_cast<int>(n.size()));
  std::string vs = "vs " + baseline;
  int vs_w = std::max(8, static_cast<int>(vs.size()));
  if (swept) {
    for (const SweepAxis& axis : sweep.axes) std::printf("%-8s ", axis.name.c_str());
  }
  std::printf("%-*s %12s %*s %8s %9s %9s %12s", name_w, "protocol", "txn/s", vs_w, vs.c_str(),
              "abort%", "p50 us", "p99 us", "atomics/txn");
  if (simulate) {
    for (int v = 0; v < kNumVerbs; v++) {
      std::printf(" %7s", (std::string(VerbName(static_cast<Verb>(v))) + "%").c_str());
    }
  }
  std::printf("\n");
  for (const Row& row : rows) {
    const bench::KvsResult& r = row.r;
    double tput = Throughput(r), base_tput = Throughput(baseline_of(row).r);
    if (swept) {
      for (double v : sweep.Point(row.point)) std::printf("%-8g ", v);
    }
    std::printf("%-*s %12.0f %*.2f %8.2f %9.1f %9.1f %12.2f", name_w, row.name.c_str(), tput, vs_w,
                base_tput > 0 ? tput / base_tput : 0.0, 100.0 * AbortRate(r),
                static_cast<double>(r.latency_ns.Percentile(0.5)) / 1e3,
                static_cast<double>(r.latency_ns.Percentile(0.99)) / 1e3, AtomicsPerTxn(r));
    if (simulate) {
      for (int v = 0; v < 4; v++) std::printf(" %7.1f", 100.0 * NicShare(r, v));
    }
    std::printf("\n");
  }
  std::printf("%s = throughput / %s's%s; atomics/txn = (CAS + FAA) per committed txn%s\n",
              vs.c_str(), baseline.c_str(), swept ? " at the same point" : "",
              simulate ? fmt::format("; READ% .. FAA% = MN NIC busy share by verb, mean over the "
                                     "{} MN(s)",
                                     o.cluster.mns)
                             .c_str()
                       : "");
  std::fflush(stdout);

  // The workload's own check, one per row: SmallBank's money, TATP's references.
  bool all_ok = true;
  for (const Row& row : rows) {
    if (row.sbr) {
      const bench::SmallBankResult& r = *row.sbr;
      if (r.check_ok) {
        std::printf("money check %s: ok (total %ld = initial %ld + net deposits %ld)\n",
                    row.label.c_str(), static_cast<long>(r.final_total),
                    static_cast<long>(r.initial_total), static_cast<long>(r.net_deposits));
      } else {
        all_ok = false;
        std::printf("money check %s: FAILED: %s\n", row.label.c_str(), r.check_detail.c_str());
      }
    }
    if (row.tar) {
      const bench::TatpResult& r = *row.tar;
      if (r.check_ok) {
        std::printf("referential check %s: ok (%lu rows after the run, %lu loaded)\n",
                    row.label.c_str(), static_cast<unsigned long>(r.rows_after),
                    static_cast<unsigned long>(r.rows_loaded));
      } else {
        all_ok = false;
        std::printf("referential check %s: FAILED: %s\n", row.label.c_str(),
                    r.check_detail.c_str());
      }
    }
  }
  std::fflush(stdout);

  // The history checks: one per protocol, at the settings as given (not per sweep point: the
  // protocol is what is judged, and a check per point would multiply a sweep's time).
  std::vector<HistoryCheck> checks, smallbank_checks;
  auto report = [&](const std::string& label, const HistoryCheck& c) {
    wall_checks += c.wall_s;
    events += c.events;
    if (c.ok) {
      std::printf("history check %s: ok (%lu txns, model %s)\n", label.c_str(),
                  static_cast<unsigned long>(c.committed), c.model.c_str());
    } else {
      all_ok = false;
      std::printf("history check %s: FAILED (model %s): %s\n", label.c_str(), c.model.c_str(),
                  c.detail.c_str());
    }
    std::fflush(stdout);
  };
  if (!a.no_check) {
    for (size_t i = 0; i < names->size(); i++) {
      const std::string& name = (*names)[i];
      std::fprintf(progress_out, "checking %s (%zu of %zu)\n", name.c_str(), i + 1, names->size());
      std::fflush(progress_out);
      bench::KvsOptions co = a.flags.o;
      co.cluster.protocol = *ProtocolByName(name);
      HistoryCheck c = CheckHistory(co, a.check_txns);
      report(name, c);
      checks.push_back(std::move(c));
      if (smallbank) {
        // The measured workload itself, recorded, beside the list-append check.
        HistoryCheck sc = CheckSmallBankHistory(SmallBankOf(a, co), a.check_txns);
        report(name + " (smallbank)", sc);
        smallbank_checks.push_back(std::move(sc));
      }
    }
  }

  if (!all_ok && simulate) std::printf("replay: %s\n", CommandLine().c_str());

  if (!a.json_path.empty()) {
    nlohmann::json out;
    out["bench"] = "compare";
    out["command"] = what;
    out["workload"] = a.workload;
    out["baseline"] = baseline;
    out["ablation"] = a.ablation;
    if (swept) out["sweep"] = a.sweep;
    nlohmann::json jrows = nlohmann::json::array();
    for (const Row& row : rows) {
      std::string row_json = row.sbr   ? bench::SmallBankResultJson(*row.sb, *row.sbr)
                             : row.tar ? bench::TatpResultJson(*row.ta, *row.tar)
                                       : bench::KvsResultJson(row.o, row.r);
      nlohmann::json j = nlohmann::json::parse(row_json);
      double base_tput = Throughput(baseline_of(row).r);
      j["throughput_vs_baseline"] = base_tput > 0 ? Throughput(row.r) / base_tput : 0.0;
      j["atomics_per_committed_txn"] = AtomicsPerTxn(row.r);
      if (swept) j["sweep_point"] = sweep.PointJson(row.point);
      if (simulate) {
        nlohmann::json share;
        for (int v = 0; v < kNumVerbs; v++) {
          share[VerbName(static_cast<Verb>(v))] = NicShare(row.r, v);
        }
        j["mn_nic_busy_share_mean"] = share;
        j["mn_nic_busy_share_max"] = MaxNicShare(row.r);
      }
      auto name_it = std::find(names->begin(), names->end(), row.name);
      size_t ci = static_cast<size_t>(name_it - names->begin());
      auto check_json = [](const HistoryCheck& c) {
        return nlohmann::json{{"ok", c.ok},
                              {"model", c.model},
                              {"committed", c.committed},
                              {"failed", c.failed},
                              {"detail", c.detail}};
      };
      if (ci < checks.size()) j["history_check"] = check_json(checks[ci]);
      if (ci < smallbank_checks.size()) {
        j["smallbank_history_check"] = check_json(smallbank_checks[ci]);
      }
      jrows.push_back(j);
    }
    out["rows"] = jrows;
    if (!WriteFile(a.json_path, out.dump(2) + "\n")) {
      return Fail(what, "cannot write " + a.json_path);
    }
    std::printf("results written to %s\n", a.json_path.c_str());
  }
  if (simulate) {
    // The one line that depends on the machine, not the seed.
    double wall = wall_runs + wall_checks;
    std::printf(
        "wall clock   %.2f s for the measured runs, %.2f s for the history checks, %lu events, "
        "%.2f M events/s\n",
        wall_runs, wall_checks, static_cast<unsigned long>(events),
        wall > 0 ? static_cast<double>(events) / wall / 1e6 : 0.0);
  }
  return all_ok ? 0 : 1;
}

void AddCompareCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "compare", simulate ? "Every protocol (or ablation step) on one workload, one seed, one "
                            "table; simulated cluster, virtual time"
                          : "Every protocol (or ablation step) on one workload with identical "
                            "settings and seed, one table");
  cmd->add_option("--workload", a->workload,
                  "the workload every row runs (choices: kvs, smallbank, tatp)")
      ->capture_default_str();
  AddKvsWorkloadFlags(cmd, &a->flags, simulate);
  cmd->add_option("--accounts", a->accounts, "smallbank: accounts")->capture_default_str();
  cmd->add_option("--hot-fraction", a->hot_fraction,
                  "smallbank: share of the accounts in the hot set")
      ->capture_default_str();
  cmd->add_option("--hot-access", a->hot_access,
                  "smallbank: share of the account draws that go to the hot set")
      ->capture_default_str();
  cmd->add_option("--subscribers", a->subscribers, "tatp: subscribers")->capture_default_str();
  CLI::Option* protocols = cmd->add_option(
      "--protocols", a->protocols,
      "comma-separated rows (default: lotus,motor,ford); each is " + ProtocolChoices());
  CLI::Option* ablation =
      cmd->add_flag("--ablation", a->ablation,
                    "rows are the Lotus ablation steps instead: motor, +full-record, +log-visible, "
                    "+lock-sharding, +load-balancing, +vt-cache");
  protocols->excludes(ablation);
  cmd->add_option("--baseline", a->baseline,
                  "the row the throughput ratio is taken against (default: motor if it is a row, "
                  "else the first)");
  cmd->add_flag("--no-check", a->no_check,
                "skip the history check (a short list-append run per row judged by the "
                "isolation checker), for pure speed runs");
  cmd->add_option("--check-txns", a->check_txns,
                  "transactions (attempts, over all clients, about) in each row's history check")
      ->capture_default_str();
  cmd->add_option("--sweep", a->sweep,
                  fmt::format("run every row at each point: KEY=V1,V2,...[,KEY2=A..B...] (A..B: "
                              "integers A to B; first key outermost; at most {} points); KEY is "
                              "coros, workers (or threads), cns, and for kvs also rw-ratio or "
                              "theta. The throughput-latency curves of bench/plot.py",
                              kSweepPointsMax));
  cmd->add_option("--json", a->json_path, "also write every row as JSON to this file");
  cmd->callback(
      [a, action, simulate] { *action = [a, simulate] { return RunCompare(*a, simulate); }; });
}

}  // namespace pond::tools
