// Checker: decides whether a list-append history (history.h) satisfies an isolation level, and
// if not, says why with small examples a person can read.
//
// It follows Adya's dependency graphs and Elle's list-append inference: each key's version
// order is recovered from the longest read of it; ww, wr and rw edges link the committed (and
// the observed indeterminate) transactions; cycles are found per strongly connected component
// and classified (G0, G1c, G-single, G-nonadjacent, G2-item, and their real-time variants);
// non-cycle anomalies (G1a, G1b, internal, lost update, ...) are found directly.
// docs/checker.md defines every anomaly and which model forbids it.
//
// Check() is a pure function of its inputs: it reads no clock and no global state, and may run
// on many histories from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "pond/check/dependency_graph.h"
#include "pond/check/history.h"
#include "pond/status.h"

namespace pond::check {

enum class Model : uint8_t {
  kSerializable,        // Adya PL-3: no dependency cycle at all
  kSnapshotIsolation,   // Adya PL-SI as Elle reads it: cycles need two adjacent rw edges
  kStrictSerializable,  // PL-3 plus real-time order: no cycle even with real-time edges
};

Result<Model> ParseModel(std::string_view name);
std::string_view ModelName(Model model);

enum class Anomaly : uint8_t {
  // Cycles in the dependency graph, named by their edges (docs/checker.md).
  kG0,
  kG1c,
  kGSingle,
  kGNonadjacent,
  kG2Item,
  // The same cycles when they need a real-time edge (checked for strict-serializable only).
  kG0Realtime,
  kG1cRealtime,
  kGSingleRealtime,
  kGNonadjacentRealtime,
  kG2ItemRealtime,
  // Found without cycles.
  kG1a,                // read of an element appended by a failed transaction
  kG1b,                // read of a state that was not its writer's final append to the key
  kInternal,           // a read that contradicts the transaction's own earlier reads and appends
  kLostUpdate,         // two committed transactions read the same state of a key and appended
  kIncompatibleOrder,  // two reads of a key that are not prefixes of one list
  kDuplicateElements,  // a read that holds the same element twice
  kGarbageRead,        // a read of an element that no transaction appended
  kCount,
};
inline constexpr size_t kAnomalyCount = static_cast<size_t>(Anomaly::kCount);

std::string_view AnomalyName(Anomaly a);
bool Forbids(Model model, Anomaly a);

// One edge of an example cycle, between two transactions (History::txns() positions).
struct CycleStep {
  uint32_t from;
  uint32_t to;
  EdgeKind kind;
  std::string why;  // e.g. "T9 read key 3 = [1 2] and did not see T12's append of 4"
};

struct AnomalyExample {
  std::string summary;           // one line
  std::vector<uint32_t> txns;    // the transactions involved (History::txns() positions)
  std::vector<CycleStep> cycle;  // cycle anomalies: the edges in order, last one closing it
};

struct AnomalyReport {
  uint64_t count = 0;
  std::vector<AnomalyExample> examples;  // at most CheckerOptions::examples_per_anomaly_max
};

struct CheckerOptions {
  Model model = Model::kStrictSerializable;
  uint32_t examples_per_anomaly_max = 3;
  // rw edges from readers of a key's last observed state to its never-observed appends grow as
  // readers x appenders; past this many for one key the rest are dropped (and a note says so).
  uint64_t final_state_edges_per_key_max = uint64_t{1} << 20;
};
inline constexpr uint32_t kExamplesPerAnomalyLimit = 100;  // cap on examples_per_anomaly_max

struct CheckResult {
  Model model = Model::kStrictSerializable;
  bool valid = true;  // no anomaly that the model forbids
  std::array<AnomalyReport, kAnomalyCount> anomalies;
  uint64_t txn_count = 0, ok_count = 0, fail_count = 0, info_count = 0, graph_txn_count = 0;
  uint64_t key_count = 0, edge_count = 0;
  std::vector<std::string> notes;  // limits that were hit; the check is then incomplete

  const AnomalyReport& operator[](Anomaly a) const { return anomalies[static_cast<size_t>(a)]; }
};

CheckResult Check(const History& history, const CheckerOptions& options);

// Renders a result for a person (several lines) or as JSON (docs/checker.md shows both).
std::string FormatText(const History& history, const CheckResult& result);
nlohmann::json ToJson(const History& history, const CheckResult& result);

// "T9 ok process 3 [append 5 12] [r 6 [1 4 12]]": one transaction as it appears in examples.
std::string DescribeTxn(const History& history, uint32_t txn);

}  // namespace pond::check
