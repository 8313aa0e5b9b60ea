// check_speed: how fast the checker is. Generates a history with the reference executor,
// writes it as Elle JSON lines, then times what `pond check` does with it: parse, then check.
// The figure in docs/checker.md comes from this program.
//
//   check_speed [--txns N] [--mops N] [--seed S] [--flaw NAME] [--model M] [--file PATH]
//
// Output: a header of '#' lines (build, settings), then one JSON object. Exit 1 if the verdict
// is wrong (a flawless executor's history must pass, a flawed one's must not). Timing uses
// std::chrono directly: this is a measuring program, not checker code.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "pond/check/checker.h"
#include "pond/check/history.h"
#include "pond/check/recorder.h"
#include "pond/check/reference_executor.h"

namespace {

using pond::check::ExecutorFlaw;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double MaxRssMib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

int Usage() {
  std::fprintf(stderr,
               "usage: check_speed [--txns N] [--mops N] [--seed S] [--flaw none|"
               "snapshot-isolation|stale-snapshot|lost-update|aborted-read|intermediate-read] "
               "[--model serializable|snapshot-isolation|strict-serializable] [--file PATH]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  pond::check::ExecutorOptions exec;
  exec.txn_count = 1'000'000;
  exec.mops_per_txn_min = exec.mops_per_txn_max = 4;
  exec.process_count = 16;
  exec.active_key_count = 10;
  exec.appends_per_key_max = 32;
  std::string model_name = "strict-serializable";
  std::string file = "/tmp/check_speed.jsonl";
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    std::string v = argv[++i];
    if (a == "--txns") {
      exec.txn_count = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--mops") {
      exec.mops_per_txn_min = exec.mops_per_txn_max = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (a == "--seed") {
      exec.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--flaw") {
      bool found = false;
      for (auto f : {ExecutorFlaw::kNone, ExecutorFlaw::kSnapshotIsolation,
                     ExecutorFlaw::kStaleSnapshot, ExecutorFlaw::kLostUpdate,
                     ExecutorFlaw::kAbortedRead, ExecutorFlaw::kIntermediateRead}) {
        if (pond::check::ExecutorFlawName(f) == v) exec.flaw = f, found = true;
      }
      if (!found) return Usage();
    } else if (a == "--model") {
      model_name = v;
    } else if (a == "--file") {
      file = v;
    } else {
      return Usage();
    }
  }
  auto model = pond::check::ParseModel(model_name);
  if (!model.ok()) return Usage();

#ifdef POND_BUILD_TYPE
  const char* build = POND_BUILD_TYPE;
#else
  const char* build = "unknown";
#endif
  std::printf("# check_speed: build %s\n", build);
#ifndef __OPTIMIZE__
  std::printf("# WARNING: built without optimisation; timings are meaningless\n");
#endif
  std::printf(
      "# txns %llu, mops/txn %u, processes %u, active keys %u, appends/key %u, "
      "seed %llu, flaw %s, model %s, file %s\n",
      static_cast<unsigned long long>(exec.txn_count), exec.mops_per_txn_max, exec.process_count,
      exec.active_key_count, exec.appends_per_key_max, static_cast<unsigned long long>(exec.seed),
      std::string(pond::check::ExecutorFlawName(exec.flaw)).c_str(), model_name.c_str(),
      file.c_str());
  std::fflush(stdout);

  auto t0 = std::chrono::steady_clock::now();
  {
    auto rec = pond::check::Recorder::OpenFile(file);
    if (!rec.ok()) {
      std::fprintf(stderr, "check_speed: %s\n", rec.status().ToString().c_str());
      return 2;
    }
    auto stats = pond::check::RunReferenceExecutor(exec, **rec);
    pond::Status closed = (*rec)->Close();
    if (!stats.ok() || !closed.ok()) {
      std::fprintf(stderr, "check_speed: %s\n",
                   (!stats.ok() ? stats.status() : closed).ToString().c_str());
      return 2;
    }
  }
  double generate_s = Seconds(t0);
  uint64_t file_bytes = std::filesystem::file_size(file);

  auto t1 = std::chrono::steady_clock::now();
  auto history = pond::check::ReadHistoryFile(file);
  if (!history.ok()) {
    std::fprintf(stderr, "check_speed: %s\n", history.status().ToString().c_str());
    return 2;
  }
  double parse_s = Seconds(t1);
  auto t2 = std::chrono::steady_clock::now();
  pond::check::CheckerOptions options;
  options.model = *model;
  pond::check::CheckResult r = pond::check::Check(*history, options);
  double check_s = Seconds(t2);

  nlohmann::json out = {{"txns", r.txn_count},
                        {"ok", r.ok_count},
                        {"in_graph", r.graph_txn_count},
                        {"keys", r.key_count},
                        {"edges", r.edge_count},
                        {"file_mib", static_cast<double>(file_bytes) / (1 << 20)},
                        {"generate_s", generate_s},
                        {"parse_s", parse_s},
                        {"check_s", check_s},
                        {"parse_and_check_s", parse_s + check_s},
                        {"max_rss_mib", MaxRssMib()},
                        {"valid", r.valid}};
  std::printf("%s\n", out.dump().c_str());
  bool want_valid =
      exec.flaw == ExecutorFlaw::kNone || (exec.flaw == ExecutorFlaw::kSnapshotIsolation &&
                                           *model == pond::check::Model::kSnapshotIsolation);
  if (r.valid != want_valid) {
    std::fprintf(stderr, "check_speed: wrong verdict (valid=%d)\n%s", r.valid,
                 pond::check::FormatText(*history, r).c_str());
    return 1;
  }
  return 0;
}
