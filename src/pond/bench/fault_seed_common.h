// What fault_seed_test's files share: the seed range a sweep runs, the command that replays a
// seed, a scheduled SmallBank run, and the checks every faulty run gets.
#pragma once

#include <cstdint>
#include <string>

#include "pond/bench/report.h"
#include "pond/bench/run_faults.h"
#include "pond/bench/seed_runs.h"
#include "pond/bench/smallbank.h"

namespace pond::bench {

// Seeds 1 to `default_count`, or what POND_FAULT_SEED / POND_FAULT_SEEDS ask for.
SeedRange Seeds(uint64_t default_count);

// The `pond sim` command that replays `seed` of a random schedule.
std::string Replay(const std::string& protocol, Isolation iso, uint64_t seed,
                   const std::string& workload);

// Every fault of `o`'s schedule happened within the run, and the report's counts of what the
// faults exercised (bench::CountExercised) match the schedule's: each crash-cn, crash-mn and
// partition-cn shows as one, each CN failure was recovered.
void ExpectPlayed(const RunOptions& o, const FailoverStats& f, const std::string& where);

// SmallBank under `protocol` with the schedule `spec` (empty: none) on `accounts` accounts;
// recorded and judged by the isolation checker if `record`.
Result<RunResult> RunScheduled(const std::string& spec, uint64_t seed, double seconds = 0.008,
                               Isolation iso = Isolation::kSerializable, uint64_t accounts = 20000,
                               bool record = false, const std::string& protocol = "lotus");

// The checks after every faulty run: the workload's own, and every replica of every record.
void ExpectChecksHold(const RunResult& r, const std::string& where);

}  // namespace pond::bench
