// ReferenceExecutor: a tiny in-memory list-append database that produces histories with known
// answers, to test the checker against more than hand-written cases.
//
// It simulates process_count clients, each running one transaction at a time, with invocations
// and completions interleaved on a virtual clock (so transactions overlap). Without a flaw,
// each transaction takes effect atomically at one instant between its invocation and its
// completion, so every history is strictly serializable. Each flaw breaks one guarantee in a
// known way. Everything is drawn from one seed: the same options give the same history, byte
// for byte. Single-threaded.
#pragma once

#include <cstdint>
#include <string_view>

#include "pond/check/recorder.h"
#include "pond/status.h"

namespace pond::check {

enum class ExecutorFlaw : uint8_t {
  kNone,               // atomic, in real-time order: strict serializable
  kSnapshotIsolation,  // correct SI (begin-time snapshot, first committer wins): write skew
  kStaleSnapshot,      // begin-time snapshot, no conflict detection: lost updates, G-single
  kLostUpdate,         // read-modify-write of one key from a begin-time read: lost updates
  kAbortedRead,        // some failed transactions' appends stay visible: G1a
  kIntermediateRead,   // a transaction's state between two appends to a key is visible: G1b
};

std::string_view ExecutorFlawName(ExecutorFlaw flaw);

struct ExecutorOptions {
  uint64_t seed = 1;
  uint64_t txn_count = 1000;
  uint32_t process_count = 8;
  uint32_t active_key_count = 8;      // keys in use at once
  uint32_t appends_per_key_max = 32;  // then the key is retired for a fresh one (short reads)
  uint32_t mops_per_txn_min = 1;
  uint32_t mops_per_txn_max = 4;
  double read_fraction = 0.5;
  double fail_fraction = 0.02;  // transactions that abort
  double info_fraction = 0.02;  // transactions whose outcome is unknown (applied or not: 50/50)
  ExecutorFlaw flaw = ExecutorFlaw::kNone;
};

struct ExecutorStats {
  uint64_t ok = 0, fail = 0, info = 0;
};

// Runs options.txn_count transactions, recording them to `recorder` (which may be disabled).
// Fails only on bad options or a recorder error.
Result<ExecutorStats> RunReferenceExecutor(const ExecutorOptions& options, Recorder& recorder);

}  // namespace pond::check
