// `pond bench btree` and `pond sim btree`: Sherman's B+Tree benchmark (bench/btree_bench.h) on
// real threads or on the simulated cluster, and with --ablation Sherman's breakdown (Fig. 11):
// one run per step on the same seed, each step's throughput beside the first's. After every run
// the whole tree is walked and checked (tree_check.h); a broken tree exits 1. Exit 2 on bad
// input. As with the other `pond sim` commands, the simulated form prints on stdout only what the
// seed determines, except the wall-clock line.
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "pond/bench/btree_bench.h"
#include "pond/bench/build_info.h"
#include "pond/tools/command.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct BtreeArgs {
  bench::BtreeBenchOptions o;
  std::string model = "cx5";
  bool ablation = false;
  bool host_locks = false;
  std::string json_path;
};

void PrintResult(const bench::BtreeBenchResult& r, bool simulate) {
  const double ops = static_cast<double>(r.ops);
  const double per_op = ops > 0 ? 1.0 / ops : 0;
  std::printf("throughput   %s ops/s (%lu in %.3f %s s: %lu inserts, %lu lookups, %lu ranges)\n",
              HumanRate(ops / r.elapsed_s).c_str(), static_cast<unsigned long>(r.ops), r.elapsed_s,
              simulate ? "virtual" : "wall", static_cast<unsigned long>(r.inserts),
              static_cast<unsigned long>(r.lookups), static_cast<unsigned long>(r.ranges));
  std::printf("latency      p50 %.1f us, p99 %.1f us, p999 %.1f us\n",
              static_cast<double>(r.latency_ns.Percentile(0.5)) / 1e3,
              static_cast<double>(r.latency_ns.Percentile(0.99)) / 1e3,
              static_cast<double>(r.latency_ns.Percentile(0.999)) / 1e3);
  std::printf(
      "per op       %.2f READ, %.2f WRITE, %.2f CAS, %.2f FAA; %.0f B read, %.0f B written\n",
      static_cast<double>(r.verb_ops[0]) * per_op, static_cast<double>(r.verb_ops[1]) * per_op,
      static_cast<double>(r.verb_ops[2]) * per_op, static_cast<double>(r.verb_ops[3]) * per_op,
      static_cast<double>(r.verb_bytes[0]) * per_op, static_cast<double>(r.verb_bytes[1]) * per_op);
  const btree::TreeStats& t = r.tree;
  std::printf(
      "writes       %lu new keys, %lu updates; %lu entry and %lu node write-backs; %lu leaf "
      "splits; %lu failed lock CASes, %lu hand-overs, %lu local waits\n",
      static_cast<unsigned long>(t.inserts), static_cast<unsigned long>(t.updates),
      static_cast<unsigned long>(t.entry_writebacks), static_cast<unsigned long>(t.node_writebacks),
      static_cast<unsigned long>(t.leaf_splits), static_cast<unsigned long>(t.lock_cas_failed),
      static_cast<unsigned long>(r.handovers), static_cast<unsigned long>(r.local_waits));
  std::printf(
      "reads        %lu of %lu lookups found; %.1f entries per range; %lu torn node and "
      "%lu torn entry copies re-read; %lu restarts\n",
      static_cast<unsigned long>(r.found), static_cast<unsigned long>(r.lookups),
      r.ranges > 0 ? static_cast<double>(r.range_entries) / static_cast<double>(r.ranges) : 0.0,
      static_cast<unsigned long>(t.torn_node_reads), static_cast<unsigned long>(t.torn_entry_reads),
      static_cast<unsigned long>(t.restarts));
  std::printf(
      "tree check   ok: %d levels, every node whole, keys sorted across leaves; %lu nodes for %lu "
      "entries, %.1f B of tree per entry (one copy)\n",
      r.levels, static_cast<unsigned long>(r.nodes), static_cast<unsigned long>(r.entries),
      r.entries > 0
          ? static_cast<double>(r.nodes) * btree::kNodeBytes / static_cast<double>(r.entries)
          : 0.0);
  if (simulate) {
    std::printf("device mem   %lu atomics served from NIC memory\n",
                static_cast<unsigned long>(r.device_atomics));
  }
}

nlohmann::json ResultJson(const bench::BtreeBenchResult& r) {
  return {{"ops", r.ops},
          {"ops_per_sec", static_cast<double>(r.ops) / r.elapsed_s},
          {"elapsed_s", r.elapsed_s},
          {"inserts", r.inserts},
          {"lookups", r.lookups},
          {"ranges", r.ranges},
          {"p50_ns", r.latency_ns.Percentile(0.5)},
          {"p99_ns", r.latency_ns.Percentile(0.99)},
          {"p999_ns", r.latency_ns.Percentile(0.999)},
          {"reads", r.verb_ops[0]},
          {"writes", r.verb_ops[1]},
          {"cas", r.verb_ops[2]},
          {"faa", r.verb_ops[3]},
          {"lock_cas_failed", r.tree.lock_cas_failed},
          {"handovers", r.handovers},
          {"levels", r.levels},
          {"nodes", r.nodes},
          {"entries", r.entries},
          {"device_atomics", r.device_atomics}};
}

// The header line of a run, and the warning if asserts are on.
void PrintHeader(const char* what, const bench::BtreeBenchOptions& o, bool simulate) {
  std::printf(
      "pond %s: build %s, %s%s, %u MN(s), %u CN(s) x %d worker(s) x %d coro(s), %s, %lu keys, "
      "%s, seed %lu\n",
      what, bench::kBuildType, simulate ? "model " : "transport local",
      simulate ? o.sim->name.c_str() : "", o.mns, o.cns, o.workers, o.coros, o.mix.c_str(),
      static_cast<unsigned long>(o.keys),
      o.theta == 0 ? "uniform" : fmt::format("zipf {}", o.theta).c_str(),
      static_cast<unsigned long>(o.seed));
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
}

// The JSON file: the settings and every run (one per ablation step).
nlohmann::json RunsJson(const char* what, const bench::BtreeBenchOptions& o, bool simulate,
                        const nlohmann::json& runs) {
  return {{"command", what},
          {"build_type", bench::kBuildType},
          {"settings",
           {{"mix", o.mix},
            {"mns", o.mns},
            {"cns", o.cns},
            {"workers", o.workers},
            {"coros", o.coros},
            {"keys", o.keys},
            {"theta", o.theta},
            {"range_size", o.range_size},
            {"seconds", o.seconds},
            {"model", simulate ? o.sim->ToJson() : ""},
            {"seed", o.seed}}},
          {"runs", runs}};
}

int RunBtreeCommand(BtreeArgs& a, bool simulate) {
  const char* what = simulate ? "sim btree" : "bench btree";
  bench::BtreeBenchOptions& o = a.o;
  if (simulate) {
    Result<Testbed> model = Testbed::FromName(a.model);
    if (!model.ok()) return Fail(what, model.status().message());
    o.sim = *model;
  }
  o.device_locks = !a.host_locks;
  if (Status v = bench::ValidateBtreeOptions(o); !v.ok()) return Fail(what, v.message());
  PrintHeader(what, o, simulate);
  std::fflush(stdout);
  FILE* progress_out = simulate ? stderr : stdout;
  auto progress = [progress_out](double s, uint64_t ops) {
    std::fprintf(progress_out, "  %8.3f s  %12lu ops\n", s, static_cast<unsigned long>(ops));
    std::fflush(progress_out);
  };
  nlohmann::json runs = nlohmann::json::array();
  double wall = 0, first = 0;
  std::vector<bench::BtreeStep> steps;
  if (a.ablation) {
    steps = bench::BtreeAblationSteps();
  } else {
    steps.push_back({"", [](bench::BtreeBenchOptions&) {}});
  }
  bench::BtreeBenchOptions step_options = o;
  for (const bench::BtreeStep& step : steps) {
    step.apply(step_options);
    if (a.ablation) std::printf("\n== %s\n", step.name);
    std::fflush(stdout);
    Result<bench::BtreeBenchResult> r = bench::RunBtreeBench(step_options, progress);
    if (!r.ok()) {
      std::fprintf(stderr, "pond %s: %s\n", what, r.status().ToString().c_str());
      return 1;
    }
    PrintResult(*r, simulate);
    const double rate = static_cast<double>(r->ops) / r->elapsed_s;
    if (first == 0) first = rate;
    if (a.ablation) std::printf("vs baseline  %.2fx\n", first > 0 ? rate / first : 0.0);
    wall += r->wall_s + r->load_wall_s;
    nlohmann::json j = ResultJson(*r);
    if (a.ablation) j["step"] = step.name;
    runs.push_back(j);
  }
  if (!a.json_path.empty()) {
    nlohmann::json out = RunsJson(what, o, simulate, runs);
    if (!WriteFile(a.json_path, out.dump(2) + "\n"))
      return Fail(what, "cannot write " + a.json_path);
    std::printf("results written to %s\n", a.json_path.c_str());
  }
  std::printf("wall clock   %.2f s\n", wall);
  return 0;
}

}  // namespace

void AddBtreeCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<BtreeArgs>();
  bench::BtreeBenchOptions& o = a->o;
  if (simulate) {
    // Sherman's testbed shape, scaled to what one thread simulates in seconds.
    o.mns = 8;
    o.cns = 8;
    o.workers = 4;
    o.coros = 4;
    o.seconds = 0.002;
    o.keys = 1'000'000;
  }
  CLI::App* cmd = parent.add_subcommand(
      "btree", std::string("Sherman's B+Tree benchmark: lookups, inserts and range queries on one "
                           "tree in the memory pool") +
                   (simulate ? " (simulated cluster, virtual time)" : " (local transport)"));
  cmd->add_option("--mix", o.mix,
                  "write-only, write-intensive (50% insert), read-intensive (5% insert), "
                  "range-only, range-write (Sherman Table 3)")
      ->capture_default_str();
  cmd->add_option("--mns", o.mns, "memory nodes")->capture_default_str();
  cmd->add_option("--cns", o.cns, "compute nodes")->capture_default_str();
  cmd->add_option("--workers", o.workers, "worker threads (cores) per CN")->capture_default_str();
  cmd->add_option("--coros", o.coros, "client coroutines per worker")->capture_default_str();
  cmd->add_option("--keys", o.keys, "keys loaded before the run (inserts draw from 1.5x as many)")
      ->capture_default_str();
  cmd->add_option("--theta", o.theta, "zipf skew of the keys drawn; 0 is uniform")
      ->capture_default_str();
  cmd->add_option("--range-size", o.range_size, "entries a range query asks for")
      ->capture_default_str();
  cmd->add_option(simulate ? "--virtual-seconds" : "--seconds", o.seconds,
                  simulate ? "measured run time, in virtual seconds" : "measured run time")
      ->capture_default_str();
  cmd->add_option("--region-mib", o.region_mib, "MiB of memory per MN")->capture_default_str();
  cmd->add_option("--lock-words", o.lock_words, "global lock words per MN")->capture_default_str();
  cmd->add_option("--handover-max", o.tree.handover_max,
                  "HOCL: hand-overs in a row before a release")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "seed for the keys (and the whole simulation)")
      ->capture_default_str();
  cmd->add_flag("--ablation", a->ablation,
                "run Sherman's breakdown: baseline, +combine, +on-chip, +hierarchical, "
                "+two-level, each step beside the baseline");
  if (simulate) {
    cmd->add_option("--model", a->model, "cx3, cx5, lotus-testbed or a JSON model file")->capture_default_str();
    cmd->add_flag("--host-locks", a->host_locks,
                  "keep the lock words in host memory, not the NIC's (on-chip) memory");
  }
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");
  cmd->callback(
      [a, action, simulate] { *action = [a, simulate] { return RunBtreeCommand(*a, simulate); }; });
}

}  // namespace pond::tools
