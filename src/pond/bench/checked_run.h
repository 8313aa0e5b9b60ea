// Checked runs: a protocol judged by the isolation checker on a short recorded run — the
// list-append workload sized for a number of transactions, or a workload that records itself
// (SmallBank) capped at a number of calls. The history stays in memory; a failing one comes back
// with the verdict, for the caller to keep where it likes.
//
// Thread rules: called from one thread; each call starts and stops its own cluster.
#pragma once

#include <cstdint>
#include <string>

#include "pond/bench/workload.h"

namespace pond::bench {

struct HistoryCheck {
  bool ok = false;
  uint64_t committed = 0;
  uint64_t failed = 0;  // aborted calls
  std::string model;    // the model judged against: the one the isolation level promises
  std::string detail;   // why it failed
  std::string history;  // a failing run's history (JSONL), empty if there is none
  double wall_s = 0;    // of the measured run
  uint64_t events = 0;  // simulated runs: engine events
};

// Runs `w` recorded with `o` (record is set here) and judges it.
HistoryCheck RecordedCheck(Workload& w, RunOptions o);

// The list-append workload on a fresh cluster with `o`'s settings (protocol, nodes, isolation,
// seed, and model if simulated), about `txns` transactions in all.
HistoryCheck CheckIsolation(RunOptions o, uint32_t txns);

// `measured` itself, recorded: a run of `o`'s settings that stops after `calls` calls.
// REQUIRES: `measured` records (Validate accepts a recorded run).
HistoryCheck CheckWorkloadHistory(const Workload& measured, RunOptions o, uint32_t calls);

}  // namespace pond::bench
