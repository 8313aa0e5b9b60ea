// One measured run of one workload, as `pond bench|sim kvs|smallbank|tatp` print it: the header
// line, the run (progress on stdout, or on stderr when simulated so that stdout depends on the
// seed alone), the report, the JSON file if asked, the recorded history's verdict if recorded,
// and the exit code. Called from the CLI's thread only.
#pragma once

#include <string>

#include "pond/bench/workload.h"

namespace pond::tools {

// The settings part of a header line: "serializable, 3 MN(s), 9 CN(s) x 8 worker(s) x 6
// coro(s), R=3, N=2, <the workload's settings>, 0.01 virtual s, seed 1".
std::string RunSettings(const bench::RunOptions& o, const bench::Workload& w);

// The header of a run: "pond WHAT: build B, transport T[, model M], protocol P, SETTINGS", the
// model's JSON (simulated), and a warning if asserts are on.
void PrintRunHeader(const std::string& what, const bench::Workload& w, const bench::RunOptions& o);

// The lines every run's report shares, embedded or driven through the client API (--connect):
// throughput (`unit` after rates, " (virtual)" when simulated), the headline, the committed mix,
// aborts by reason and latency (`latency_unit` after it); and the workload's check.
void PrintMeasures(const bench::RunResult& r, const char* unit, const char* latency_unit);
void PrintCheck(const bench::RunResult& r);

// The report of a run, as lines on stdout: throughput, the committed mix, aborts by reason,
// latency, operations per transaction, NICs (simulated), the workload's check.
void PrintRunResult(const bench::RunOptions& o, const bench::RunResult& r);
// A run with a fault schedule (part of PrintRunResult): each crash and its recovery, membership,
// the commits per millisecond and recovery_ms, and the replica check.
void PrintFailover(const bench::RunResult& r);

// The "history" line of a recorded run and the checker's report under it.
void PrintHistoryVerdict(const bench::HistoryVerdict& h, const std::string& history_path);

// Runs `w` once with `o` and reports it; `what` is the command ("sim kvs"). `json_path`: also
// write the result there; `history_path`: the recorded run's history goes there (o.record).
// Returns the exit code: 0 every check held, 1 the run or a check failed, 2 the settings do not
// make a run (bench::ValidateRun; one line says why), kExitUnplayedFaults every check held but
// faults of the schedule fell after the run's end (unless o.allow_unplayed_faults).
inline constexpr int kExitUnplayedFaults = 3;
int RunOnce(const std::string& what, bench::Workload& w, const bench::RunOptions& o,
            const std::string& json_path, const std::string& history_path);

}  // namespace pond::tools
