// `pond bench ...`: benchmarks on real threads. Each subcommand prints a header with the build
// and every setting, a table, and (with --json) a machine-readable copy of the results.
#include <fmt/core.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "pond/bench/build_info.h"
#include "pond/bench/kvs_bench.h"
#include "pond/bench/raw_bench.h"
#include "pond/tools/command.h"

namespace pond::tools {

namespace {

int Fail(const std::string& what, const std::string& why) {
  std::fprintf(stderr, "pond %s: %s\n", what.c_str(), why.c_str());
  return 2;
}

std::string HumanRate(double per_sec) {
  if (per_sec >= 1e6) return fmt::format("{:.2f} M", per_sec / 1e6);
  if (per_sec >= 1e3) return fmt::format("{:.1f} K", per_sec / 1e3);
  return fmt::format("{:.0f}", per_sec);
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  return static_cast<bool>(f);
}

void AddRaw(CLI::App& bench, CommandAction* action) {
  auto* o = new bench::RawBenchOptions();  // lives as long as the process, like the CLI app
  auto* json_path = new std::string();
  auto* verbs = new std::vector<std::string>();
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
  raw->add_option("--verbs", *verbs, "verbs to run (READ WRITE CAS FAA)")
      ->check(CLI::IsMember({"READ", "WRITE", "CAS", "FAA"}, CLI::ignore_case));
  raw->add_option("--json", *json_path, "also write the results as JSON to this file");
  raw->callback([=] {
    *action = [=]() -> int {
      if (!verbs->empty()) {
        static const std::map<std::string, Verb> kByName = {{"READ", Verb::kRead},
                                                            {"WRITE", Verb::kWrite},
                                                            {"CAS", Verb::kCas},
                                                            {"FAA", Verb::kFaa}};
        o->verbs.clear();
        for (auto v : *verbs) {
          for (auto& ch : v) ch = static_cast<char>(std::toupper(ch));
          o->verbs.push_back(kByName.at(v));
        }
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

void AddKvs(CLI::App& bench, CommandAction* action) {
  auto* o = new bench::KvsOptions();
  auto* json_path = new std::string();
  auto* isolation = new std::string("sr");
  CLI::App* kvs = bench.add_subcommand(
      "kvs", "Lotus KVS benchmark: UpdateOne/ReadOne transactions on an embedded cluster");
  kvs->add_option("--mns", o->cluster.mns, "memory nodes")->capture_default_str();
  kvs->add_option("--cns", o->cluster.cns, "compute nodes")->capture_default_str();
  kvs->add_option("--workers", o->cluster.workers_per_cn, "worker threads per CN")
      ->capture_default_str();
  kvs->add_option("--coros", o->coros, "client coroutines per worker")->capture_default_str();
  kvs->add_option("--keys", o->keys, "keys in the table")->capture_default_str();
  kvs->add_option("--seconds", o->seconds, "measured run time")->capture_default_str();
  kvs->add_option("--rw-ratio", o->rw_ratio, "fraction of UpdateOne (read-write) transactions")
      ->capture_default_str();
  kvs->add_option("--theta", o->theta, "zipf skew of keys; 0 = uniform (the papers use 0.99)")
      ->capture_default_str();
  kvs->add_option("--isolation", *isolation, "sr (serializable) or si (snapshot isolation)")
      ->check(CLI::IsMember({"sr", "si"}, CLI::ignore_case))
      ->capture_default_str();
  kvs->add_option("--replication", o->cluster.replication, "copies of each record")
      ->capture_default_str();
  kvs->add_option("--versions", o->cluster.versions, "version cells per record")
      ->capture_default_str();
  kvs->add_option("--region-mib", o->cluster.region_mib, "MiB of memory per MN")
      ->capture_default_str();
  kvs->add_option("--seed", o->cluster.seed, "seed for keys and routing")->capture_default_str();
  kvs->add_option("--json", *json_path, "also write the results as JSON to this file");
  kvs->callback([=] {
    *action = [=]() -> int {
      o->cluster.isolation = (*isolation == "si" || *isolation == "SI") ? Isolation::kSnapshot
                                                                        : Isolation::kSerializable;
      Status valid = bench::ValidateKvsOptions(*o);
      if (!valid.ok()) return Fail("bench kvs", valid.message());
      std::printf(
          "pond bench kvs: build %s, transport local, protocol lotus, %s, %d MN(s), %d CN(s) x %d "
          "worker(s) x %d coro(s), R=%d, N=%d, %lu keys, %s keys, %.0f%% UpdateOne, %.1f s, "
          "seed %lu\n",
          bench::kBuildType, IsolationName(o->cluster.isolation), o->cluster.mns, o->cluster.cns,
          o->cluster.workers_per_cn, o->coros, o->cluster.replication, o->cluster.versions,
          static_cast<unsigned long>(o->keys),
          o->theta == 0 ? "uniform" : fmt::format("zipf({})", o->theta).c_str(), o->rw_ratio * 100,
          o->seconds, static_cast<unsigned long>(o->cluster.seed));
      if (bench::kAssertsOn) {
        std::printf("warning: asserts are on; numbers are not comparable with Release\n");
      }
      std::fflush(stdout);
      uint64_t last_committed = 0, last_aborted = 0;
      double last_t = 0;
      auto result = bench::RunKvs(*o, [&](const bench::KvsProgress& p) {
        double dt = p.elapsed_s - last_t;
        uint64_t dc = p.committed - last_committed, da = p.aborted - last_aborted;
        std::printf(
            "  %5.1f s  %10.0f committed/s  abort rate %5.2f%%\n", p.elapsed_s,
            dt > 0 ? static_cast<double>(dc) / dt : 0.0,
            dc + da > 0 ? 100.0 * static_cast<double>(da) / static_cast<double>(dc + da) : 0.0);
        std::fflush(stdout);
        last_t = p.elapsed_s;
        last_committed = p.committed;
        last_aborted = p.aborted;
      });
      if (!result.ok()) return Fail("bench kvs", result.status().ToString());
      const bench::KvsResult& r = *result;
      const ClusterStats& s = r.stats;
      double tput = static_cast<double>(r.committed) / r.elapsed_s;
      uint64_t attempts = r.committed + r.aborted;
      double per = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
      std::printf("loaded %lu keys in %.1f s\n", static_cast<unsigned long>(o->keys), r.load_s);
      std::printf("throughput   %s txn/s (%lu committed in %.2f s; %lu UpdateOne)\n",
                  HumanRate(tput).c_str(), static_cast<unsigned long>(r.committed), r.elapsed_s,
                  static_cast<unsigned long>(r.committed_rw));
      std::printf(
          "abort rate   %.2f%% (lock conflict %lu, newer version %lu, snapshot too old "
          "%lu, torn read %lu, invisible wait %lu)\n",
          attempts ? 100.0 * static_cast<double>(r.aborted) / static_cast<double>(attempts) : 0.0,
          static_cast<unsigned long>(s.aborts.lock_conflict),
          static_cast<unsigned long>(s.aborts.newer_version),
          static_cast<unsigned long>(s.aborts.snapshot_too_old),
          static_cast<unsigned long>(s.aborts.torn_read),
          static_cast<unsigned long>(s.aborts.invisible_wait));
      std::printf("latency      p50 %.1f us, p99 %.1f us, p999 %.1f us\n",
                  static_cast<double>(r.latency_ns.Percentile(0.5)) / 1e3,
                  static_cast<double>(r.latency_ns.Percentile(0.99)) / 1e3,
                  static_cast<double>(r.latency_ns.Percentile(0.999)) / 1e3);
      std::printf(
          "per txn      %.2f READ, %.2f WRITE, %.2f CAS, %.2f FAA, %.2f doorbell "
          "batches, %.2f CN messages\n",
          static_cast<double>(s.reads) * per, static_cast<double>(s.writes) * per,
          static_cast<double>(s.cas) * per, static_cast<double>(s.faa) * per,
          static_cast<double>(s.batches) * per, static_cast<double>(s.messages) * per);
      std::printf(
          "VT cache     %lu hits, %lu misses, %lu invalidations; %lu calls routed to "
          "another CN\n",
          static_cast<unsigned long>(s.vt_hits), static_cast<unsigned long>(s.vt_misses),
          static_cast<unsigned long>(s.vt_invalidations),
          static_cast<unsigned long>(s.remote_calls));
      if (!json_path->empty()) {
        if (!WriteFile(*json_path, bench::KvsResultJson(*o, r))) {
          return Fail("bench kvs", "cannot write " + *json_path);
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
  AddKvs(*bench, action);
}

}  // namespace pond::tools
