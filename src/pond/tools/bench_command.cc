// `pond bench ...`: benchmarks on real threads. Each subcommand prints a header with the build
// and every setting, a table, and (with --json) a machine-readable copy of the results.
#include <fmt/core.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pond/bench/build_info.h"
#include "pond/bench/raw_bench.h"
#include "pond/tools/command.h"
#include "pond/tools/tool_util.h"
#include "pond/transport/endpoint.h"

namespace pond::tools {

namespace {

struct RawArgs {
  bench::RawBenchOptions o;
  std::string json_path;
  std::vector<std::string> verbs;  // as typed; empty: every verb
};

// The verb named `name` in any case ("read", "CAS"), by VerbName.
std::optional<Verb> VerbByName(std::string name) {
  for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (int v = 0; v < kNumVerbs; v++) {
    if (name == VerbName(static_cast<Verb>(v))) return static_cast<Verb>(v);
  }
  return std::nullopt;
}

void AddRaw(CLI::App& bench, CommandAction* action) {
  auto a = std::make_shared<RawArgs>();
  bench::RawBenchOptions* o = &a->o;
  std::vector<std::string> names;
  for (int v = 0; v < kNumVerbs; v++) names.push_back(VerbName(static_cast<Verb>(v)));
  CLI::App* raw = bench.add_subcommand(
      "raw", "One-sided READ/WRITE/CAS/FAA rate and latency on the local transport");
  raw->add_option("--threads", o->threads, "worker threads")->capture_default_str();
  raw->add_option("--coros", o->coros, "coroutines per thread (ops in flight)")
      ->capture_default_str();
  raw->add_option("--seconds", o->seconds, "seconds per verb")->capture_default_str();
  raw->add_option("--size", o->size, "bytes per READ/WRITE")->capture_default_str();
  raw->add_option("--region-mib", o->region_mib, "MiB of memory per MN")->capture_default_str();
  raw->add_option("--mns", o->mns, "memory nodes")->capture_default_str();
  raw->add_option("--seed", o->seed, "seed for the random addresses")->capture_default_str();
  raw->add_option("--verbs", a->verbs, "verbs to run (READ WRITE CAS FAA)")
      ->check(CLI::IsMember(names, CLI::ignore_case));
  raw->add_option("--json", a->json_path, "also write the results as JSON to this file");
  raw->callback([a, o, action] {
    *action = [a, o]() -> int {
      const std::string* json_path = &a->json_path;
      if (!a->verbs.empty()) {
        o->verbs.clear();
        for (const std::string& v : a->verbs) o->verbs.push_back(*VerbByName(v));
      }
      Status valid = bench::ValidateRawOptions(*o);
      if (!valid.ok()) return Fail("bench raw", valid.message());
      std::printf(
          "pond bench raw: build %s, transport local, %d thread(s) x %d coro(s), %u-byte "
          "READ/WRITE, %d MN(s) x %lu MiB, %.1f s per verb, seed %lu\n",
          bench::kBuildType, o->threads, o->coros, o->size, o->mns,
          static_cast<unsigned long>(o->region_mib), o->seconds,
          static_cast<unsigned long>(o->seed));
      if (bench::kAssertsOn) {
        std::printf("warning: asserts are on; numbers are not comparable with Release\n");
      }
      std::printf("%-6s %12s %10s %10s %10s %10s\n", "verb", "ops/s", "mean ns", "p50 ns", "p99 ns",
                  "p999 ns");
      std::fflush(stdout);
      auto results = bench::RunRawBench(*o, [](const bench::RawVerbResult& r) {
        std::printf("%-6s %12s %10.0f %10lu %10lu %10lu\n", VerbName(r.verb),
                    HumanRate(r.ops_per_sec).c_str(), r.latency_ns.Mean(),
                    static_cast<unsigned long>(r.latency_ns.Percentile(0.50)),
                    static_cast<unsigned long>(r.latency_ns.Percentile(0.99)),
                    static_cast<unsigned long>(r.latency_ns.Percentile(0.999)));
        std::fflush(stdout);
      });
      if (!results.ok()) return Fail("bench raw", results.status().ToString());
      if (!json_path->empty()) {
        if (!WriteFile(*json_path, bench::RawResultsJson(*o, *results))) {
          return Fail("bench raw", "cannot write " + *json_path);
        }
        std::printf("results written to %s\n", json_path->c_str());
      }
      return 0;
    };
  });
}

}  // namespace

void AddBenchCommand(CLI::App& root, CommandAction* action) {
  CLI::App* bench = root.add_subcommand("bench", "Benchmarks on real threads (local transport)");
  bench->require_subcommand(1);
  AddRaw(*bench, action);
  AddKvsCommand(*bench, action, /*simulate=*/false);
  AddCompareCommand(*bench, action, /*simulate=*/false);
  AddWorkloadCommands(*bench, action, /*simulate=*/false);
  AddListAppendCommand(*bench, action, /*simulate=*/false);
  AddBtreeCommand(*bench, action, /*simulate=*/false);
}

}  // namespace pond::tools
