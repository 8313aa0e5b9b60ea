// SmallBank (Lotus §8.1, in the form of FaSST and FORD): two tables, `savings` and `checking`,
// one 8-byte signed balance per account in each, and six transactions in the standard mix —
// Amalgamate 15%, Balance 15% (the read-only one), DepositChecking 15%, SendPayment 25%,
// TransactSavings 15%, WriteCheck 15%. A hot set of accounts (4% by default) receives 90% of the
// accesses. Keys carry the account's shard in bits 0..11 (critical field, Lotus §4.2), so an
// account's two rows share a shard and a lock CN; calls are routed by hybrid routing (§4.3) on
// their first account. Every call is one attempt, as in the KVS benchmark.
//
// The run checks its answer: every committed transaction adds its net deposit (DepositChecking,
// TransactSavings and WriteCheck change the total; Amalgamate and SendPayment move money) to a
// counter of the worker that committed it, and after the run the sum of all balances must equal
// the initial sum plus those deposits. docs/workloads.md describes the workload.
//
// Thread rules: RunSmallBank is called from one thread; it starts and stops its own cluster.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "pond/base/histogram.h"
#include "pond/bench/kvs_bench.h"
#include "pond/cluster.h"

namespace pond::bench {

enum class SmallBankTxn : uint8_t {
  kAmalgamate,
  kBalance,
  kDepositChecking,
  kSendPayment,
  kTransactSavings,
  kWriteCheck,
};
constexpr int kSmallBankTxnCount = 6;
const char* SmallBankTxnName(SmallBankTxn t);
// The standard mix, in percent, indexed by SmallBankTxn.
constexpr std::array<int, kSmallBankTxnCount> kSmallBankMixPct = {15, 15, 15, 25, 15, 15};

struct SmallBankOptions {
  ClusterConfig cluster;
  int coros = 4;  // client coroutines per worker
  uint64_t accounts = 100'000;
  double seconds = 10;
  double hot_fraction = 0.04;  // share of the accounts in the hot set
  double hot_access = 0.90;    // share of the account draws that go to the hot set
  // Set: run on the simulated cluster with this model; `seconds` are then virtual seconds.
  std::optional<Testbed> sim;
  // Set: record every transaction (and the final scan) and write the run as a list-append
  // history to this file for the isolation checker (smallbank_history.h). Rows then carry a
  // writer tag beside the balance (16-byte values). Meant for test-sized runs: the run stops
  // issuing transactions after history_calls_max calls (at most kSmallBankHistoryTxnsMax).
  std::string history_path;
  uint64_t history_calls_max = 200'000;
};

inline constexpr uint64_t kSmallBankHistoryTxnsMax = 200'000;

// The measures of the run (committed: all six kinds; committed_rw: all but Balance), and
// SmallBank's own counts and check.
struct SmallBankResult : RunMeasures {
  // Committed without writing: a SendPayment or TransactSavings the balance did not cover
  // (the business rule declines it; it is a commit, not an abort).
  uint64_t declined = 0;
  std::array<uint64_t, kSmallBankTxnCount> committed_by_txn{};
  // The money check.
  int64_t initial_total = 0;
  int64_t net_deposits = 0;  // sum of the committed transactions' net changes
  int64_t final_total = 0;   // read back after the run
  bool check_ok = false;
  std::string check_detail;   // why the check failed
  uint64_t history_txns = 0;  // transactions written to history_path
};

Status ValidateSmallBankOptions(const SmallBankOptions& o);

// Starts a cluster, loads both tables, runs for o.seconds (progress about once a wall second),
// then reads every balance back and does the money check. A failed check is not an error: it
// is reported in the result (check_ok, check_detail).
Result<SmallBankResult> RunSmallBank(const SmallBankOptions& o,
                                     const std::function<void(const KvsProgress&)>& progress);

std::string SmallBankResultJson(const SmallBankOptions& o, const SmallBankResult& r);

// The key of an account's row (in either table): the account id above bits 0..11, its shard
// (the account id's low 12 bits) in them.
inline uint64_t SmallBankKey(uint64_t account) { return (account << 12) | (account & 0xfff); }

}  // namespace pond::bench
