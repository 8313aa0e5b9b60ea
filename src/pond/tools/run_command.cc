#include "pond/tools/run_command.h"

#include <fmt/core.h>

#include <cstdio>

#include "pond/bench/build_info.h"
#include "pond/bench/report.h"
#include "pond/tools/command.h"
#include "pond/tools/run_flags.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

std::string RunSettings(const bench::RunOptions& o, const bench::Workload& w) {
  return fmt::format(
      "{}, {} MN(s), {} CN(s) x {} worker(s) x {} coro(s), R={}, N={}, {}, {} {}s, seed {}",
      IsolationName(o.cluster.isolation), o.cluster.mns, o.cluster.cns, o.cluster.workers_per_cn,
      o.coros, o.cluster.replication, o.cluster.versions, w.Settings(), o.seconds,
      o.sim ? "virtual " : "", o.cluster.seed);
}

void PrintMeasures(const bench::RunResult& r, const char* unit, const char* latency_unit) {
  std::printf("throughput   %s txn/s%s (%lu committed in %.3f s; %lu %s%s)\n",
              HumanRate(bench::Throughput(r)).c_str(), unit,
              static_cast<unsigned long>(r.committed), r.elapsed_s,
              static_cast<unsigned long>(r.committed_rw), r.rw_name.c_str(),
              r.declined ? fmt::format(", {} declined", *r.declined).c_str() : "");
  if (r.headline) {
    std::printf("%-12s %s%s (%lu committed)\n", (r.headline->name + "/s").c_str(),
                HumanRate(bench::HeadlineThroughput(r)).c_str(), unit,
                static_cast<unsigned long>(r.headline->committed));
  }
  if (!r.committed_by_txn.empty()) {
    std::string mix;
    for (const auto& [name, count] : r.committed_by_txn) {
      mix += fmt::format("{}{} {}", mix.empty() ? "" : ", ", name, count);
    }
    std::printf("committed    %s\n", mix.c_str());
  }
  std::printf("abort rate   %.2f%% (%s)\n", 100.0 * bench::AbortRate(r),
              bench::AbortBreakdown(r.stats.aborts).c_str());
  std::printf("latency      p50 %.1f us, p99 %.1f us, p999 %.1f us%s\n",
              static_cast<double>(r.latency_ns.Percentile(0.5)) / 1e3,
              static_cast<double>(r.latency_ns.Percentile(0.99)) / 1e3,
              static_cast<double>(r.latency_ns.Percentile(0.999)) / 1e3, latency_unit);
}

void PrintCheck(const bench::RunResult& r) {
  if (r.check) {
    std::printf("%-12s %s: %s%s%s\n", r.check->label.c_str(), r.check->ok ? "ok" : "FAILED",
                r.check->summary.c_str(), r.check->ok ? "" : ": ", r.check->detail.c_str());
  }
}

void PrintRunResult(const bench::RunOptions& o, const bench::RunResult& r) {
  const ClusterStats& s = r.stats;
  const double per = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
  const char* unit = o.sim ? " (virtual)" : "";
  if (!o.sim) std::printf("loaded %s in %.1f s\n", r.loaded.c_str(), r.load_s);
  PrintMeasures(r, unit, unit);
  std::string routed =
      fmt::format("{} calls routed to another CN", static_cast<unsigned long>(s.remote_calls));
  std::printf(
      "per txn      %.2f READ, %.2f WRITE, %.2f CAS, %.2f FAA, %.2f doorbell batches, "
      "%.2f CN messages%s%s\n",
      static_cast<double>(s.reads) * per, static_cast<double>(s.writes) * per,
      static_cast<double>(s.cas) * per, static_cast<double>(s.faa) * per,
      static_cast<double>(s.batches) * per, static_cast<double>(s.messages) * per,
      s.scan_leaves_read > 0
          ? fmt::format(" (scans: {:.2f} B+Tree leaves, {:.2f} entries of absent keys; {} emptied "
                        "leaves merged)",
                        static_cast<double>(s.scan_leaves_read) * per,
                        static_cast<double>(s.scan_entries_absent) * per,
                        static_cast<unsigned long>(s.tree_leaf_merges))
                .c_str()
          : "",
      r.report_caches ? "" : ("; " + routed).c_str());
  if (r.report_caches) {
    std::printf("VT cache     %lu hits, %lu misses, %lu invalidations; %s\n",
                static_cast<unsigned long>(s.vt_hits), static_cast<unsigned long>(s.vt_misses),
                static_cast<unsigned long>(s.vt_invalidations), routed.c_str());
    if (r.sim) {
      std::printf(
          "simulation   %lu events, %lu CPU rounds over the whole run (load included); "
          "%.2f us of worker CPU per committed txn\n",
          static_cast<unsigned long>(r.sim->events), static_cast<unsigned long>(r.sim->cpu_rounds),
          static_cast<double>(r.sim_cpu_busy_ns) * per / 1e3);
    }
  }
  if (r.sim) {
    const double window = r.elapsed_s * 1e9;
    for (size_t mn = 0; mn < r.sim->mn_nics.size(); mn++) {
      std::printf("MN %zu NIC     %s\n", mn, bench::NicLine(r.sim->mn_nics[mn], window).c_str());
    }
    if (!r.sim_cores.empty()) {
      std::printf("CPU          %s\n", bench::CoreLoadLine(bench::CoreLoadOf(r)).c_str());
    }
  }
  PrintCheck(r);
  PrintFailover(r);
}

namespace {

// Each partition, CN crash and MN crash of the run, and what followed it.
void PrintNodeFailures(const FailoverStats& f) {
  for (const auto& p : f.partitions) {
    const auto ms = [&p](uint64_t t) { return static_cast<double>(t - p.cut_ns) / 1e6; };
    std::string fate = p.fenced_ns != 0
                           ? fmt::format("it fenced itself +{:.3f} ms", ms(p.fenced_ns))
                           : std::string("it went on serving");
    if (p.healed_ns != 0) {
      fate += fmt::format(", healed +{:.3f} ms", ms(p.healed_ns));
    } else {
      fate += ", not healed in the run";
    }
    const std::string what =
        p.apart_from >= 0 ? fmt::format("cut from host {}", p.apart_from) : "partitioned";
    std::printf("failover     CN %u %s at %.3f ms: %s\n", p.cn, what.c_str(),
                static_cast<double>(p.cut_ns) / 1e6, fate.c_str());
  }
  for (const auto& x : f.failures) {
    const auto ms = [&x](uint64_t t) { return static_cast<double>(t - x.crash_ns) / 1e6; };
    std::printf(
        "failover     CN %u %s at %.3f ms: lease expired +%.3f ms, recovered +%.3f ms "
        "(%lu log records: %lu rolled forward, %lu rolled back), its shards served again "
        "+%.3f ms\n",
        x.cn, x.fenced ? "fenced itself" : "crashed", static_cast<double>(x.crash_ns) / 1e6,
        ms(x.detected_ns), ms(x.recovered_ns), static_cast<unsigned long>(x.log_records),
        static_cast<unsigned long>(x.rolled_forward), static_cast<unsigned long>(x.rolled_back),
        ms(x.open_ns));
    if (x.restart_ns != 0) {
      std::printf(
          "failover     CN %u restarted: running clients +%.3f ms, %s\n", x.cn, ms(x.restart_ns),
          x.returned_ns != 0
              ? fmt::format("its shards its own again +{:.3f} ms", ms(x.returned_ns)).c_str()
              : "some or all of its shards stay where its failure put them");
    }
  }
  for (const auto& x : f.mn_failures) {
    const auto ms = [&x](uint64_t t) { return static_cast<double>(t - x.crash_ns) / 1e6; };
    std::printf(
        "failover     MN %u crashed at %.3f ms: lease expired +%.3f ms, every CN on the "
        "replicas left +%.3f ms\n",
        x.mn, static_cast<double>(x.crash_ns) / 1e6, ms(x.detected_ns), ms(x.down_ns));
    if (x.restart_ns == 0) continue;
    std::printf("failover     MN %u restarted +%.3f ms: copying +%.3f ms", x.mn, ms(x.restart_ns),
                ms(x.copy_start_ns));
    if (x.readable_ns != 0) {
      std::printf(", %lu slots copied +%.3f ms, readable (R copies again) +%.3f ms\n",
                  static_cast<unsigned long>(x.slots_copied), ms(x.copied_ns), ms(x.readable_ns));
    } else {
      std::printf(", crashed again before it was readable\n");
    }
  }
}

// The membership line: epochs, puts, unknown calls, lost packets and batches.
void PrintMembership(const FailoverStats& f, const bench::RunResult& r) {
  std::printf(
      "membership   epoch %lu, %lu configuration puts; %lu calls "
      "ended unknown, %lu unknown outcomes booked; %lu packets lost to crashes%s; of crashed "
      "CNs' batches in flight %lu landed (%lu of them in part), %lu did not%s%s%s%s%s\n",
      static_cast<unsigned long>(f.epoch), static_cast<unsigned long>(f.config_puts),
      static_cast<unsigned long>(f.unknown_calls), static_cast<unsigned long>(r.unknown),
      static_cast<unsigned long>(f.lost_packets),
      f.partitions.empty() ? "" : fmt::format(", {} to partitions", f.cut_packets).c_str(),
      static_cast<unsigned long>(f.landed_batches), static_cast<unsigned long>(f.cut_batches),
      static_cast<unsigned long>(f.lost_batches),
      f.tso_moves > 0 ? fmt::format("; the timestamp oracle moved {} time(s), to CN {}",
                                    f.tso_moves, f.tso_host)
                            .c_str()
                      : "",
      r.stats.gone_lock_words_freed + r.stats.gone_tree_words_taken > 0
          ? fmt::format("; lock words of failed CNs freed: {} on records, {} on tree nodes",
                        r.stats.gone_lock_words_freed, r.stats.gone_tree_words_taken)
                .c_str()
          : "",
      f.faults_not_reached > 0
          ? fmt::format("; {} faults after the run's end never happened", f.faults_not_reached)
                .c_str()
          : "",
      f.faults_given_up > 0
          ? fmt::format("; {} partitions or CN or MN crashes given up: the cluster would not "
                        "have survived them within {} ms",
                        f.faults_given_up, static_cast<double>(kMnsOutWaitNsMax) / 1e6)
                .c_str()
          : "",
      r.stats.commit_rounds_posted_again > 0
          ? fmt::format("; {} commit rounds posted again to an MN that had not answered",
                        r.stats.commit_rounds_posted_again)
                .c_str()
          : "");
}

// The crashes aimed at a commit step, if any.
void PrintStepCrashes(const FailoverStats& f) {
  std::string aimed;
  static constexpr const char* kStepNames[kCommitSteps] = {
      "", "locked", "read", "logged", "timestamped", "visible", "unlocked"};
  for (int i = 1; i < kCommitSteps; i++) {
    if (f.step_crashes[i] == 0) continue;
    aimed += fmt::format("{}{} {}", aimed.empty() ? "" : ", ", kStepNames[i], f.step_crashes[i]);
  }
  if (!aimed.empty() || f.step_crashes_unaimed > 0) {
    std::printf(
        "failover     crashes aimed at a commit step: %s%s\n",
        aimed.empty() ? "none at their step" : aimed.c_str(),
        f.step_crashes_unaimed > 0
            ? fmt::format("; {} found no transaction at their step within {} ms",
                          f.step_crashes_unaimed, static_cast<double>(kStepCrashWaitNsMax) / 1e6)
                  .c_str()
            : "");
  }
}

// Commits in each millisecond of the run: throughput over time.
void PrintPerMs(const bench::RunResult& r) {
  std::string series;
  for (size_t i = 0; i < r.committed_per_ms.size(); i++) {
    series += fmt::format("{}{}", i == 0 ? "" : " ", r.committed_per_ms[i]);
  }
  std::printf("per ms       %s (commits in each millisecond of the run)\n", series.c_str());
}

// A run with a failure in it: commits per millisecond and recovery_ms.
void PrintRecovery(const bench::RunResult& r) {
  PrintPerMs(r);
  std::optional<double> rec = bench::RecoveryMs(r);
  if (rec) {
    std::printf("recovery_ms  %.0f (throughput back within 5%% of its level before the crash)\n",
                *rec);
  } else {
    std::printf(
        "recovery_ms  not reached (throughput did not come back within 5%% of its "
        "level before the crash by the end of the run)\n");
  }
}

void PrintReplicas(const ReplicaCheck& c) {
  if (c.ok()) {
    // Committed writes are looked for only in runs with node faults (Cluster::ScheduleFaults).
    std::printf(
        "replicas     ok: %lu slots and %lu versions agree on every replica%s, nothing "
        "INVISIBLE or locked%s\n",
        static_cast<unsigned long>(c.slots), static_cast<unsigned long>(c.versions),
        c.tree_nodes > 0 ? fmt::format(", {} B+Tree nodes on every copy", c.tree_nodes).c_str()
                         : "",
        c.acked > 0 ? fmt::format("; {} committed writes all found", c.acked).c_str() : "");
  } else {
    std::printf(
        "replicas     FAILED: %lu disagreements, %lu INVISIBLE, %lu locked, %lu lost "
        "commits, %lu slots with no replica up; first: %s\n",
        static_cast<unsigned long>(c.disagreements), static_cast<unsigned long>(c.invisible),
        static_cast<unsigned long>(c.locked), static_cast<unsigned long>(c.lost_commits),
        static_cast<unsigned long>(c.lost_groups), c.problems.empty() ? "" : c.problems[0].c_str());
  }
}

}  // namespace

void PrintFailover(const bench::RunResult& r) {
  if (r.moves) {
    const bench::RunResult::Moves& m = *r.moves;
    std::printf(
        "resharding   %lu shard moves made (%lu shards), %lu given up, %lu called off; shards "
        "closed %.3f ms at most, %.3f ms a move\n",
        static_cast<unsigned long>(m.made), static_cast<unsigned long>(m.shards),
        static_cast<unsigned long>(m.given_up), static_cast<unsigned long>(m.called_off),
        static_cast<double>(m.closed_ns_max) / 1e6,
        m.made == 0 ? 0.0
                    : static_cast<double>(m.closed_ns_total) / 1e6 / static_cast<double>(m.made));
  }
  if (r.failover) {
    const FailoverStats& f = *r.failover;
    PrintNodeFailures(f);
    PrintMembership(f, r);
    std::printf("exercised    %s\n", bench::CountExercised(f).ToString().c_str());
    PrintStepCrashes(f);
    if (!f.failures.empty() || !f.mn_failures.empty() || !f.partitions.empty()) {
      PrintRecovery(r);
    } else if (r.moves) {
      PrintPerMs(r);
    }
  } else if (r.moves) {
    PrintPerMs(r);
  }
  if (r.replicas) PrintReplicas(*r.replicas);
}

void PrintRunHeader(const std::string& what, const bench::Workload& w, const bench::RunOptions& o) {
  const bool simulate = o.sim.has_value();
  std::printf("pond %s: build %s, transport %s%s, protocol %s, %s\n", what.c_str(),
              bench::kBuildType, bench::TransportLabel(o).c_str(),
              simulate ? (", model " + o.sim->name).c_str() : "", o.cluster.protocol.name.c_str(),
              RunSettings(o, w).c_str());
  if (simulate) std::printf("model        %s\n", o.sim->ToJson().c_str());
  if (!o.faults.empty()) std::printf("faults       %s\n", o.faults.c_str());
  if (const ReshardConfig& rs = o.cluster.reshard; rs.policy != ReshardConfig::Policy::kNone) {
    std::printf(
        "resharding   %s: every %.3f ms, over %.2fx the mean for %d intervals, drain "
        "%.3f ms\n",
        ReshardPolicyName(rs.policy), static_cast<double>(rs.interval_ns) / 1e6, rs.over,
        rs.intervals, static_cast<double>(rs.drain_ns) / 1e6);
  }
  if (!o.faults_horizon.empty()) std::printf("faults       %s\n", o.faults_horizon.c_str());
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
  std::fflush(stdout);
}

void PrintHistoryVerdict(const bench::HistoryVerdict& h, const std::string& history_path) {
  std::printf("history      %lu transactions %s; pond check --model %s:\n",
              static_cast<unsigned long>(h.txns),
              history_path.empty() ? "(not kept: --history FILE keeps them)"
                                   : ("written to " + history_path).c_str(),
              h.model.c_str());
  std::printf("%s", h.report.c_str());
  std::fflush(stdout);
}

int RunOnce(const std::string& what, bench::Workload& w, const bench::RunOptions& o,
            const std::string& json_path, const std::string& history_path) {
  if (Status valid = bench::ValidateRun(w, o); !valid.ok()) return Fail(what, valid.message());
  const bool simulate = o.sim.has_value();
  PrintRunHeader(what, w, o);
  FILE* progress_out = simulate ? stderr : stdout;
  auto failed = [&](const std::string& why) {
    if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
    std::fprintf(stderr, "pond %s: %s\n", what.c_str(), why.c_str());
    return 1;
  };
  Result<bench::RunResult> result =
      bench::RunWorkload(w, o, KvsProgressPrinter(progress_out, simulate, ""));
  if (!result.ok()) return failed(result.status().ToString());
  PrintRunResult(o, *result);
  if (!json_path.empty()) {
    if (!WriteFile(json_path, bench::RunResultJson(o, w, *result).dump(2) + "\n")) {
      return Fail(what, "cannot write " + json_path);
    }
    std::printf("results written to %s\n", json_path.c_str());
  }
  if (simulate) {
    // The one line that depends on the machine, not the seed.
    const uint64_t events = result->sim ? result->sim->events : 0;
    std::printf("wall clock   %.2f s for the measured run, %lu events, %.2f M events/s\n",
                result->wall_s, static_cast<unsigned long>(events),
                result->wall_s > 0 ? static_cast<double>(events) / result->wall_s / 1e6 : 0.0);
  }
  std::fflush(stdout);
  if (const auto& h = result->history) {
    // The recorded run, judged as `pond check` would: strict serializability under SR, snapshot
    // isolation under SI.
    if (!history_path.empty() && !WriteFile(history_path, h->text)) {
      return Fail(what, "cannot write " + history_path);
    }
    PrintHistoryVerdict(*h, history_path);
    if (!h->ok) {
      return failed("the history check failed (" + history_path + "): " + h->detail);
    }
  }
  if (result->replicas && !result->replicas->ok()) {
    return failed("the replica check failed: " + (result->replicas->problems.empty()
                                                      ? std::string("see above")
                                                      : result->replicas->problems[0]));
  }
  if (result->check && !result->check->ok) {
    return failed(result->check->name + " failed: " + result->check->detail);
  }
  // Last, so that it is the last line: every check held, but not every fault was tested.
  if (result->failover && result->failover->faults_not_reached > 0 && !o.allow_unplayed_faults) {
    if (simulate) std::fprintf(stderr, "replay: %s\n", CommandLine().c_str());
    std::fprintf(stderr,
                 "pond %s: %lu of the schedule's faults never happened: the run ended at %.3f ms, "
                 "before their time (schedule them earlier; --allow-unplayed-faults accepts "
                 "this)\n",
                 what.c_str(), static_cast<unsigned long>(result->failover->faults_not_reached),
                 result->elapsed_s * 1e3);
    return kExitUnplayedFaults;
  }
  return 0;
}

}  // namespace pond::tools
