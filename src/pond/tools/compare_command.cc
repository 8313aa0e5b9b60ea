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
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pond/bench/build_info.h"
#include "pond/bench/checked_run.h"
#include "pond/bench/kvs_bench.h"
#include "pond/bench/report.h"
#include "pond/bench/run_faults.h"
#include "pond/tools/command.h"
#include "pond/tools/compare.h"
#include "pond/tools/kvs_sweep.h"
#include "pond/tools/run_command.h"
#include "pond/tools/run_flags.h"
#include "pond/tools/tool_util.h"
#include "pond/tools/workload_registry.h"
#include "pond/transport/endpoint.h"

namespace pond::tools {

namespace {

constexpr uint32_t kCheckTxnsMax = 1'000'000;

// One protocol's run at one point.
struct Row {
  std::string name;   // the protocol or ablation step
  size_t point = 0;   // the sweep point (0 without a sweep)
  std::string label;  // name, and the point's settings in a sweep: "lotus coros=2"
  bench::RunOptions run;
  std::unique_ptr<bench::Workload> w;
  bench::RunResult r;
};

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

}  // namespace

CompareArgs SingleProtocolSweep(std::unique_ptr<bench::Workload> w, const bench::RunOptions& run,
                                const std::string& protocol, const std::string& sweep,
                                const std::string& json_path) {
  CompareArgs c;
  c.command = w->name();
  c.workload = w->name();
  c.w = std::move(w);
  c.run = run;
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

namespace {

// One comparison as RunCompare works through it: the rows and their layout, then what running
// and checking them measured.
struct Comparison {
  std::string what;  // "sim compare"
  bool simulate = false;
  std::vector<std::string> names;  // the rows at one point
  std::string baseline;
  size_t base_index = 0;  // of the baseline in names
  KvsSweep sweep;
  bool swept = false;
  size_t points = 1;
  std::vector<Row> rows;  // point-major
  double wall_runs = 0, wall_checks = 0;
  uint64_t events = 0;
  bool all_ok = true;
  std::vector<bench::HistoryCheck> checks, workload_checks;  // one per name, if checked

  // Each row's ratio is to the baseline at the same point.
  const Row& BaselineOf(const Row& row) const {
    return rows[row.point * names.size() + base_index];
  }
};

// The settings, the rows' names and the baseline, and the sweep; an exit code if they are bad.
std::optional<int> PlanRows(const CompareArgs& a, Comparison* c) {
  const std::string& what = c->what;
  if (a.check_txns < 1 || a.check_txns > kCheckTxnsMax) {
    return Fail(what, fmt::format("--check-txns must be 1 to {}", kCheckTxnsMax));
  }
  Result<std::vector<std::string>> names = RowNames(a);
  if (!names.ok()) return Fail(what, names.status().message());
  c->names = *std::move(names);
  c->baseline = a.baseline;
  if (c->baseline.empty()) {
    bool has_motor = std::find(c->names.begin(), c->names.end(), "motor") != c->names.end();
    c->baseline = has_motor ? "motor" : c->names.front();
  }
  auto base_it = std::find(c->names.begin(), c->names.end(), c->baseline);
  if (base_it == c->names.end()) {
    std::string list;
    for (const std::string& n : c->names) list += (list.empty() ? "" : ", ") + n;
    return Fail(what, "--baseline '" + c->baseline + "' is not one of the rows (" + list + ")");
  }
  c->base_index = static_cast<size_t>(base_it - c->names.begin());
  if (!a.sweep.empty()) {
    Result<KvsSweep> parsed = ParseKvsSweep(a.sweep);
    if (!parsed.ok()) return Fail(what, parsed.status().message());
    c->sweep = *std::move(parsed);
    Status fits = c->sweep.CheckWorkload(*a.w);
    if (!fits.ok()) return Fail(what, fits.message());
  }
  c->swept = !c->sweep.axes.empty();
  c->points = c->swept ? c->sweep.PointCount() : 1;
  return std::nullopt;
}

// Rows point-major: all protocols at the first point, then the next, so a long sweep shows
// every protocol early. Every row is validated before the first runs, so a long sweep cannot
// fail half-way on input. An exit code if a row is bad.
std::optional<int> MakeRows(const CompareArgs& a, Comparison* c) {
  for (size_t p = 0; p < c->points; p++) {
    for (const std::string& name : c->names) {
      Row row;
      row.name = name;
      row.point = p;
      row.label = c->swept ? name + " " + c->sweep.PointName(p) : name;
      row.run = a.run;
      row.run.cluster.protocol = *ProtocolByName(name);
      row.w = a.w->Clone();
      Status valid = c->swept ? c->sweep.Apply(p, &row.run, row.w.get()) : Status::Ok();
      if (valid.ok()) valid = bench::ValidateRun(*row.w, row.run);
      if (!valid.ok()) return Fail(c->what, row.label + ": " + valid.message());
      c->rows.push_back(std::move(row));
    }
  }
  // One fault schedule for every row, so that the rows differ in protocol only: it must fit
  // every protocol, and `random` draws only what all of them survive.
  if (!a.faults.empty()) {
    if (c->swept) return Fail(c->what, "--faults applies to one point; not with --sweep");
    std::vector<bench::RunOptions*> runs;
    for (Row& row : c->rows) runs.push_back(&row.run);
    Status f = bench::ResolveFaultsForAll(runs, a.faults);
    if (!f.ok()) return Fail(c->what, f.message());
  }
  return std::nullopt;
}

void PrintCompareHeader(const CompareArgs& a, const Comparison& c) {
  std::string row_list;
  for (const std::string& n : c.names) row_list += (row_list.empty() ? "" : ",") + n;
  const bench::RunOptions& o = a.run;
  std::printf(
      "pond %s: build %s, workload %s, transport %s%s, %s %s, baseline %s, %s%s\n", c.what.c_str(),
      bench::kBuildType, a.workload.c_str(), bench::TransportLabel(o).c_str(),
      c.simulate ? (", model " + o.sim->name).c_str() : "", a.ablation ? "ablation" : "protocols",
      row_list.c_str(), c.baseline.c_str(), RunSettings(o, *a.w).c_str(),
      c.swept ? fmt::format(", sweep {} ({} points)", a.sweep, c.points).c_str() : "");
  if (c.simulate) std::printf("model        %s\n", o.sim->ToJson().c_str());
  if (!a.faults.empty()) std::printf("faults       %s\n", c.rows.front().run.faults.c_str());
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
  std::fflush(stdout);
}

// Runs every row; false (with one line on stderr) if a run failed.
bool RunRows(Comparison* c, FILE* progress_out) {
  for (size_t i = 0; i < c->rows.size(); i++) {
    Row& row = c->rows[i];
    std::fprintf(progress_out, "running %s (%zu of %zu)\n", row.label.c_str(), i + 1,
                 c->rows.size());
    std::fflush(progress_out);
    Result<bench::RunResult> ran = bench::RunWorkload(
        *row.w, row.run, KvsProgressPrinter(progress_out, c->simulate, row.label));
    if (!ran.ok()) {
      if (c->simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
      std::fprintf(stderr, "pond %s: %s: %s\n", c->what.c_str(), row.label.c_str(),
                   ran.status().ToString().c_str());
      return false;
    }
    row.r = *std::move(ran);
    c->wall_runs += row.r.wall_s;
    if (row.r.sim) c->events += row.r.sim->events;
  }
  return true;
}

// The table: one line per row, the baseline ratio at the row's point.
void PrintTable(const Comparison& c, const bench::RunOptions& o) {
  int name_w = 8;
  for (const std::string& n : c.names) name_w = std::max(name_w, static_cast<int>(n.size()));
  std::string vs = "vs " + c.baseline;
  int vs_w = std::max(8, static_cast<int>(vs.size()));
  if (c.swept) {
    for (const SweepAxis& axis : c.sweep.axes) std::printf("%-8s ", axis.name.c_str());
  }
  // A workload with a rate of its own (TPC-C's New-Orders) shows it beside txn/s.
  const std::string headline =
      c.rows.front().r.headline ? c.rows.front().r.headline->name + "/s" : std::string();
  std::printf("%-*s %12s", name_w, "protocol", "txn/s");
  if (!headline.empty()) std::printf(" %12s", headline.c_str());
  std::printf(" %*s %8s %9s %9s %12s", vs_w, vs.c_str(), "abort%", "p50 us", "p99 us",
              "atomics/txn");
  if (c.simulate) {
    for (int v = 0; v < kNumVerbs; v++) {
      std::printf(" %7s", (std::string(VerbName(static_cast<Verb>(v))) + "%").c_str());
    }
  }
  std::printf("\n");
  for (const Row& row : c.rows) {
    const bench::RunResult& r = row.r;
    double tput = bench::Throughput(r), base_tput = bench::Throughput(c.BaselineOf(row).r);
    if (c.swept) {
      for (double v : c.sweep.Point(row.point)) std::printf("%-8g ", v);
    }
    std::printf("%-*s %12.0f", name_w, row.name.c_str(), tput);
    if (!headline.empty()) std::printf(" %12.0f", bench::HeadlineThroughput(r));
    std::printf(" %*.2f %8.2f %9.1f %9.1f %12.2f", vs_w, base_tput > 0 ? tput / base_tput : 0.0,
                100.0 * bench::AbortRate(r),
                static_cast<double>(r.latency_ns.Percentile(0.5)) / 1e3,
                static_cast<double>(r.latency_ns.Percentile(0.99)) / 1e3, bench::AtomicsPerTxn(r));
    if (c.simulate) {
      for (int v = 0; v < 4; v++) std::printf(" %7.1f", 100.0 * bench::NicShare(r, v));
    }
    std::printf("\n");
  }
  std::printf("%s = throughput / %s's%s; atomics/txn = (CAS + FAA) per committed txn%s\n",
              vs.c_str(), c.baseline.c_str(), c.swept ? " at the same point" : "",
              c.simulate ? fmt::format("; READ% .. FAA% = MN NIC busy share by verb, mean over "
                                       "the {} MN(s)",
                                       o.cluster.mns)
                               .c_str()
                         : "");
  std::fflush(stdout);
}

// What failover did in a row with a fault schedule: crashes, partitions, recovery.
std::string FailoverSummary(const Row& row) {
  const FailoverStats& f = *row.r.failover;
  std::optional<double> rec = bench::RecoveryMs(row.r);
  const bool any = !f.failures.empty() || !f.mn_failures.empty() || !f.partitions.empty();
  auto ms = [&](std::optional<double> v) {
    return v ? fmt::format("{:.0f}", *v) : std::string(any ? "not reached" : "-");
  };
  std::string summary = fmt::format(
      "{} CN and {} MN crash(es), {} CN partition(s), {} calls unknown, recovery_ms {}",
      f.failures.size(), f.mn_failures.size(), f.partitions.size(), row.r.unknown, ms(rec));
  // The first CN failure's recovery, as Lotus's Fig. 15 measures it, beside the throughput.
  if (!f.failures.empty()) {
    const FailoverStats::Failure& x = f.failures.front();
    auto after = [&x](uint64_t ns) {
      return ns == 0 ? std::string("never") : fmt::format("+{:.3f} ms", (ns - x.crash_ns) / 1e6);
    };
    const std::optional<double> back90 = bench::RecoveryMs(row.r, 0.9);
    summary += fmt::format(
        "; CN {} declared {}, recovered {}, served again {}, throughput back to 90% {} "
        "({:.2f} M txn/s)",
        x.cn, after(x.detected_ns), after(x.recovered_ns), after(x.open_ns),
        back90 ? fmt::format("+{:.0f} ms", *back90) : "never", bench::Throughput(row.r) / 1e6);
  }
  return summary;
}

// The workload's own check per row (SmallBank's money, TATP's references), and with --faults
// what failover did and the replica check (docs/recovery.md); false if one failed.
bool PrintRowChecks(const std::vector<Row>& rows) {
  bool all_ok = true;
  for (const Row& row : rows) {
    if (!row.r.check) continue;
    const bench::WorkloadCheck& c = *row.r.check;
    if (c.ok) {
      std::printf("%s %s: ok (%s)\n", c.name.c_str(), row.label.c_str(), c.brief.c_str());
    } else {
      all_ok = false;
      std::printf("%s %s: FAILED: %s\n", c.name.c_str(), row.label.c_str(), c.detail.c_str());
    }
  }
  for (const Row& row : rows) {
    if (!row.r.failover) continue;
    const std::string summary = FailoverSummary(row);
    const bool ok = row.r.replicas && row.r.replicas->ok();
    all_ok &= ok;
    if (ok) {
      std::printf("faults %s: %s; replicas ok (%lu committed writes all found)\n",
                  row.label.c_str(), summary.c_str(),
                  static_cast<unsigned long>(row.r.replicas->acked));
    } else {
      std::printf("faults %s: %s; replicas FAILED: %s\n", row.label.c_str(), summary.c_str(),
                  row.r.replicas && !row.r.replicas->problems.empty()
                      ? row.r.replicas->problems[0].c_str()
                      : "not checked");
    }
  }
  // Without faults, only a failing replica check is worth a line.
  for (const Row& row : rows) {
    if (row.r.failover || !row.r.replicas || row.r.replicas->ok()) continue;
    all_ok = false;
    std::printf("replicas %s: FAILED: %s\n", row.label.c_str(),
                row.r.replicas->problems.empty() ? "" : row.r.replicas->problems[0].c_str());
  }
  std::fflush(stdout);
  return all_ok;
}

// Reports a history check; a failing history is kept in the temp directory (as
// `stem`-PROTOCOL-seedN.jsonl) for `pond check` and named in the detail.
void ReportHistoryCheck(const std::string& label, bench::HistoryCheck& hc, const std::string& stem,
                        const bench::RunOptions& o, Comparison* c) {
  c->wall_checks += hc.wall_s;
  c->events += hc.events;
  if (!hc.ok && !hc.history.empty()) {
    std::string path =
        (std::filesystem::temp_directory_path() /
         fmt::format("{}-{}-seed{}.jsonl", stem, o.cluster.protocol.name, o.cluster.seed))
            .string();
    if (WriteFile(path, hc.history)) {
      hc.detail +=
          "; history kept at " + path + " (pond check " + path + " --model " + hc.model + ")";
    }
  }
  if (hc.ok) {
    std::printf("history check %s: ok (%lu txns, model %s)\n", label.c_str(),
                static_cast<unsigned long>(hc.committed), hc.model.c_str());
  } else {
    c->all_ok = false;
    std::printf("history check %s: FAILED (model %s): %s\n", label.c_str(), hc.model.c_str(),
                hc.detail.c_str());
  }
  std::fflush(stdout);
}

// The history checks: one per protocol, at the settings as given (not per sweep point: the
// protocol is what is judged, and a check per point would multiply a sweep's time).
void RunHistoryChecks(const CompareArgs& a, Comparison* c, FILE* progress_out) {
  // Whether the measured workload can record its own history (SmallBank can).
  bench::RunOptions recorded = a.run;
  recorded.record = true;
  recorded.calls_max = a.check_txns;
  const bench::Workload& base_w = *a.w;
  const bool measured_records = bench::ValidateRun(base_w, recorded).ok();
  for (size_t i = 0; i < c->names.size(); i++) {
    const std::string& name = c->names[i];
    std::fprintf(progress_out, "checking %s (%zu of %zu)\n", name.c_str(), i + 1, c->names.size());
    std::fflush(progress_out);
    bench::RunOptions co = a.run;
    co.cluster.protocol = *ProtocolByName(name);
    bench::HistoryCheck hc = bench::CheckIsolation(co, a.check_txns);
    ReportHistoryCheck(name, hc, "pond-compare", co, c);
    c->checks.push_back(std::move(hc));
    if (measured_records) {
      // The measured workload itself, recorded, beside the list-append check.
      bench::HistoryCheck sc = bench::CheckWorkloadHistory(base_w, co, a.check_txns);
      ReportHistoryCheck(name + " (" + base_w.name() + ")", sc,
                         std::string("pond-compare-") + base_w.name(), co, c);
      c->workload_checks.push_back(std::move(sc));
    }
  }
}

nlohmann::json HistoryCheckJson(const bench::HistoryCheck& hc) {
  return nlohmann::json{{"ok", hc.ok},
                        {"model", hc.model},
                        {"committed", hc.committed},
                        {"failed", hc.failed},
                        {"detail", hc.detail}};
}

// One row of the JSON file: its run, its ratio, its point, and its protocol's history checks.
nlohmann::json RowJson(const CompareArgs& a, const Comparison& c, const Row& row) {
  nlohmann::json j = bench::RunResultJson(row.run, *row.w, row.r);
  double base_tput = bench::Throughput(c.BaselineOf(row).r);
  j["throughput_vs_baseline"] = base_tput > 0 ? bench::Throughput(row.r) / base_tput : 0.0;
  j["atomics_per_committed_txn"] = bench::AtomicsPerTxn(row.r);
  if (c.swept) j["sweep_point"] = c.sweep.PointJson(row.point);
  if (c.simulate) {
    nlohmann::json share;
    for (int v = 0; v < kNumVerbs; v++) {
      share[VerbName(static_cast<Verb>(v))] = bench::NicShare(row.r, v);
    }
    j["mn_nic_busy_share_mean"] = share;
    j["mn_nic_busy_share_max"] = bench::MaxNicShare(row.r);
  }
  auto name_it = std::find(c.names.begin(), c.names.end(), row.name);
  size_t ci = static_cast<size_t>(name_it - c.names.begin());
  if (ci < c.checks.size()) j["history_check"] = HistoryCheckJson(c.checks[ci]);
  if (ci < c.workload_checks.size()) {
    j[a.workload + "_history_check"] = HistoryCheckJson(c.workload_checks[ci]);
  }
  return j;
}

// Writes --json; false if the file cannot be written.
bool WriteCompareJson(const CompareArgs& a, const Comparison& c) {
  nlohmann::json out;
  out["bench"] = "compare";
  out["command"] = c.what;
  out["workload"] = a.workload;
  out["baseline"] = c.baseline;
  out["ablation"] = a.ablation;
  if (c.swept) out["sweep"] = a.sweep;
  nlohmann::json jrows = nlohmann::json::array();
  for (const Row& row : c.rows) jrows.push_back(RowJson(a, c, row));
  out["rows"] = jrows;
  return WriteFile(a.json_path, out.dump(2) + "\n");
}

}  // namespace

int RunCompare(CompareArgs& a, bool simulate) {
  Comparison c;
  c.what = std::string(simulate ? "sim " : "bench ") + a.command;
  c.simulate = simulate;
  if (std::optional<int> bad = PlanRows(a, &c)) return *bad;
  if (std::optional<int> bad = MakeRows(a, &c)) return *bad;
  PrintCompareHeader(a, c);
  FILE* progress_out = simulate ? stderr : stdout;
  if (!RunRows(&c, progress_out)) return 1;
  PrintTable(c, a.run);
  c.all_ok = PrintRowChecks(c.rows);
  if (!a.no_check) RunHistoryChecks(a, &c, progress_out);
  if (!c.all_ok && simulate) std::printf("replay: %s\n", CommandLine().c_str());
  if (!a.json_path.empty()) {
    if (!WriteCompareJson(a, c)) return Fail(c.what, "cannot write " + a.json_path);
    std::printf("results written to %s\n", a.json_path.c_str());
  }
  if (simulate) {
    // The one line that depends on the machine, not the seed.
    double wall = c.wall_runs + c.wall_checks;
    std::printf(
        "wall clock   %.2f s for the measured runs, %.2f s for the history checks, %lu events, "
        "%.2f M events/s\n",
        c.wall_runs, c.wall_checks, static_cast<unsigned long>(c.events),
        wall > 0 ? static_cast<double>(c.events) / wall / 1e6 : 0.0);
  }
  return c.all_ok ? 0 : 1;
}

namespace {

// compare's action: the workload --workload names, made from its flags, and the cluster flags
// resolved into a.run, then RunCompare.
int RunCompareCommand(CompareArgs& a, RunFlags* f, const CompareWorkloadFlags& workloads,
                      const CLI::App& cmd, bool simulate) {
  const std::string what = std::string(simulate ? "sim " : "bench ") + a.command;
  a.w = workloads.Make(a.workload, cmd, &f->run.cluster);
  if (!a.w) {
    return Fail(
        what, "unknown workload '" + a.workload + "' (choices: " + CompareWorkloadChoices() + ")");
  }
  if (Status s = ResolveClusterFlags(f, simulate); !s.ok()) return Fail(what, s.message());
  a.run = f->run;
  return RunCompare(a, simulate);
}

}  // namespace

void AddCompareCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<CompareArgs>();
  auto f = std::make_shared<RunFlags>();
  auto workloads = std::make_shared<CompareWorkloadFlags>();
  CLI::App* cmd = parent.add_subcommand(
      "compare", simulate ? "Every protocol (or ablation step) on one workload, one seed, one "
                            "table; simulated cluster, virtual time"
                          : "Every protocol (or ablation step) on one workload with identical "
                            "settings and seed, one table");
  cmd->add_option("--workload", a->workload,
                  "the workload every row runs (choices: " + CompareWorkloadChoices() + ")")
      ->capture_default_str();
  AddRunFlags(cmd, f.get(), simulate);
  workloads->Add(cmd);
  CLI::Option* protocols = cmd->add_option(
      "--protocols", a->protocols,
      "comma-separated rows (default: lotus,motor,ford,pond); each is " + ProtocolChoices());
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
  // The history checks run without it: they judge the protocol, not the schedule.
  if (simulate) AddFaultsFlag(cmd, &a->faults, nullptr);
  cmd->callback([a, f, workloads, action, cmd, simulate] {
    *action = [a, f, workloads, cmd, simulate] {
      return RunCompareCommand(*a, f.get(), *workloads, *cmd, simulate);
    };
  });
}

}  // namespace pond::tools
