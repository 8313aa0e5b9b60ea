// The list-append workload's transactions as a user writes them (the "user" mode of
// list_append.h): keys that start absent, inserts and deletes that clients race on, reads of absent
// keys, keys read and then promoted to read-write, Execute called once per step with keys
// computed from what earlier steps read, reads of the transaction's own writes — run directly,
// through Session::RunTxn, or as a procedure through Session::Call.
//
// Logical keys and their rows. The checker sees logical keys L whose values are lists. A logical
// key lives in two rows of the table: its live row 2L and its graveyard row 2L+1.
//   - L's list is the live row's value if that row exists, else the graveyard row's, else [].
//   - An append of e to L writes list+[e] to the live row, inserting it if it is absent.
//   - A delete of L moves list+[d] to the graveyard row (inserting it if absent) and deletes the
//     live row, in one transaction; d is a fresh element, so to the checker a delete is an append
//     of d. A later append re-inserts the live row. (Deleting an L whose live row is absent
//     still appends d to the graveyard row.)
//   - A step that would take a list past max_appends elements aborts the transaction instead.
// So a transaction that commits appends every element its plan names, whatever it read: a
// client that does not know whether its transaction committed (its CN died) records exactly
// the plan's appends, as info, and the checker may hold them to it.
// So every list only grows, as Elle's list-append needs, while the rows underneath are inserted,
// deleted and re-inserted. A reader that sees one row of a transaction's effects and not another
// (an insert that is not atomic with the rest) reads a list that breaks the version order the
// other lists imply, and the checker names the cycle.
//
// A Plan is drawn by the client (with every element it will append, so a procedure that runs
// twice appends the same elements twice, which the checker sees); RunPlan executes it in a Txn
// and logs what each step read and appended, for the client to record.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "pond/bench/zipf.h"
#include "pond/cluster.h"
#include "pond/rng.h"

namespace pond::bench {

struct ListAppendOptions;

struct PlanMop {
  enum Kind : uint8_t { kRead, kAppend, kDelete };
  Kind kind = kRead;
  uint64_t key = 0;      // logical
  uint64_t element = 0;  // append, delete: the element it adds
};

struct Plan {
  bool read_only = false;
  bool upfront = false;  // add every key before the first step (else each step adds its own)
  bool promote = false;  // with upfront: add every key read-only first, promote on write
  std::vector<PlanMop> mops;
};

// One logged micro-op: a read of `key` that returned `list`, or an append of `element`.
struct LoggedMop {
  bool append = false;
  uint64_t key = 0;
  uint64_t element = 0;
  std::vector<uint64_t> list;
};

struct PlanLog {
  std::vector<LoggedMop> mops;
  std::vector<uint64_t> full;  // logical keys found holding max_appends elements
};

// A row's value: the element count, then the elements (8 bytes each, little-endian).
// Corruption if the count does not fit the value (a served table's rows can be written by any
// client's put).
Result<std::vector<uint64_t>> DecodeList(std::span<const std::byte> v);
// A row's size when it holds up to `max_appends` elements.
inline uint32_t ListValueBytes(uint32_t max_appends) { return 8 * (1 + max_appends); }
void EncodeList(const std::vector<uint64_t>& list, std::vector<std::byte>* v);

inline uint64_t LiveRow(uint64_t logical) { return 2 * logical; }
inline uint64_t GraveRow(uint64_t logical) { return 2 * logical + 1; }

// The (key, element) pairs a plan appends if it commits: each of its appends and deletes.
std::vector<std::pair<uint64_t, uint64_t>> PlanAppends(const Plan& plan);

// A user-mode plan over the active window [base, base + o.window): zipf-drawn keys, each step a
// read or (read-write plans) an append or delete of a fresh element from `next_element`.
Plan DrawPlan(Rng& rng, const Zipf& zipf, uint64_t base, const ListAppendOptions& o,
              std::atomic<uint64_t>* next_element);

// Runs `plan` in `t` (not committing it) and logs each step into `log`. A non-OK Status is the
// transaction's abort; Code::kAborted (a list full, or the protocol's) or kAlreadyExists (an
// insert that lost a race) are expected.
Task<Status> RunPlan(Txn& t, uint16_t table, uint32_t max_appends, const Plan& plan, PlanLog* log);

// What a routed call carries: the plan, and where the callee leaves its log (the caller's
// memory: procedures run in this process).
std::vector<std::byte> EncodeCall(const Plan& plan, PlanLog* log);
// InvalidArgument on bytes that EncodeCall did not make.
Status DecodeCall(std::span<const std::byte> bytes, Plan* plan, PlanLog** log);

// A served plan (docs/formats.md "list-append procedures"): EncodeCall's bytes with no log
// pointer, and the log coming back as the procedure's reply. The server never reads a pointer
// from a client: DecodePlan requires the word to be zero.
inline constexpr size_t kPlanMopsMax = 64;
std::vector<std::byte> EncodePlan(const Plan& plan);
Status DecodePlan(std::span<const std::byte> bytes, Plan* plan);
std::vector<std::byte> EncodeLog(const PlanLog& log);
// InvalidArgument on bytes that EncodeLog did not make.
Status DecodeLog(std::span<const std::byte> bytes, PlanLog* log);

}  // namespace pond::bench
