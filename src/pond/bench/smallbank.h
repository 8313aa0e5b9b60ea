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
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pond/bench/workload.h"

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
constexpr std::array<const char*, kSmallBankTxnCount> kSmallBankTxnNames = {
    "Amalgamate", "Balance", "DepositChecking", "SendPayment", "TransactSavings", "WriteCheck"};
// The standard mix, in percent, indexed by SmallBankTxn.
constexpr std::array<int, kSmallBankTxnCount> kSmallBankMixPct = {15, 15, 15, 25, 15, 15};

struct SmallBankParams {
  uint64_t accounts = 100'000;
  double hot_fraction = 0.04;  // share of the accounts in the hot set
  double hot_access = 0.90;    // share of the account draws that go to the hot set
  // Above 0: the hot set lies in as few consecutive shards as hold it — so on one CN, where
  // hybrid routing sends its read-write calls — and jumps to other shards every this many ms of
  // the run's clock (docs/resharding.md: the load moving resharding answers). 0: the hot set is
  // accounts 0 to hot - 1, spread over every shard, and stays.
  double moving_hotspot_ms = 0;
};

// A recorded run (RunOptions::record, for the isolation checker; smallbank_history.h) makes rows
// carry a writer tag beside the balance (16-byte values) and must cap its calls
// (RunOptions::calls_max) at this many. Its history grows with the square of the writes per row:
// 143 000 calls on 500 accounts (a fast half second) wrote more than 4 GB of it.
inline constexpr uint64_t kSmallBankHistoryTxnsMax = 30'000;

// Per worker: what the workers committed. `net` and `declined` are written by the worker that
// ran the procedure (maybe another CN's, after routing), the rest by the calling client's
// worker; the monitor thread reads none of them.
struct SmallBankCounters;

class SmallBankWorkload : public Workload {
 public:
  explicit SmallBankWorkload(const SmallBankParams& p);
  ~SmallBankWorkload() override;
  const SmallBankParams& params() const { return p_; }

  const char* name() const override { return "smallbank"; }
  const char* title() const override { return "SmallBank"; }
  std::unique_ptr<Workload> Clone() const override {
    return std::make_unique<SmallBankWorkload>(p_);
  }
  Status Validate(const RunOptions& o) const override;
  std::string Settings() const override;
  nlohmann::json SettingsJson() const override;
  Status Setup(Cluster& cluster, RunContext& ctx) override;
  Task<void> RunClient(Session& s, RunContext& ctx) override;
  // Reads every balance back and does the money check; writes the recorded history.
  Status Finish(Cluster& cluster, RunContext& ctx, RunResult* r) override;
  // smallbank_served.cc: procedures that reply with their net deposit and decline.
  Status Serve(Cluster& cluster, server::ServiceDirectory* dir) override;
  std::vector<TableNeed> ServedTables() const override;
  Result<std::unique_ptr<RemoteDriver>> Remote(
      const std::vector<RemoteTable>& tables) const override;

 private:
  SmallBankParams p_;
  bool serving_ = false;            // Setup registers reply procedures (Serve)
  std::vector<ProcedureId> procs_;  // as registered, in SmallBankTxn order
  uint16_t ts_ = 0, tc_ = 0;        // savings, checking
  uint64_t hot_ = 1;
  uint64_t start_ns_ = 0;  // the run's clock at Setup: a moving hot set's places count from it
  int64_t initial_total_ = 0;
  std::vector<SmallBankCounters> counters_;
};

// The key of an account's row (in either table): the account id above bits 0..11, its shard
// (the account id's low 12 bits) in them.
inline uint64_t SmallBankKey(uint64_t account) { return (account << 12) | (account & 0xfff); }

// The arguments of every SmallBank procedure, as they travel to a served one too
// (docs/formats.md "Served procedures"): the accounts (a1 for Amalgamate and SendPayment),
// the amount, and the history tag of a recorded call.
struct SmallBankArgs {
  uint64_t a0 = 0, a1 = 0;
  int64_t amount = 0;
  uint64_t tag = 0;  // recording: (client + 1) << 32 | call
};
static_assert(sizeof(SmallBankArgs) == 32, "four 8-byte words, no padding");

// A served procedure's reply (Workload::Serve): the net deposit it committed (i64) and whether
// it declined (one byte, 0 or 1).
inline constexpr size_t kSmallBankReplyBytes = 9;
// The served procedures' names, in SmallBankTxn order.
inline constexpr std::array<const char*, kSmallBankTxnCount> kSmallBankProcedureNames = {
    "smallbank.amalgamate",   "smallbank.balance",          "smallbank.deposit_checking",
    "smallbank.send_payment", "smallbank.transact_savings", "smallbank.write_check"};

// One call as a client draws it: the kind by the standard mix, accounts under the hot-set skew
// (`hot` accounts in the hot set; with a moving hot set, where it is in its `place`-th place:
// SmallBankHotAccount), the amount.
struct SmallBankCall {
  SmallBankTxn kind = SmallBankTxn::kBalance;
  SmallBankArgs args;
};
SmallBankCall DrawSmallBankCall(Rng& rng, const SmallBankParams& p, uint64_t hot, uint64_t tag,
                                uint64_t place = 0);
// A moving hot set's account `k` (0 <= k < hot) in its `place`-th place: the hot set fills the
// consecutive shards from (place * 1553) mod 4096 on, as many as hold `hot` accounts, and each
// place starts far from the one before (1553 / 4096 is near the golden ratio), so on another CN.
uint64_t SmallBankHotAccount(uint64_t accounts, uint64_t hot, uint64_t k, uint64_t place);
// Whether `a` is a call a served SmallBank of `accounts` accounts runs: accounts in range, two
// distinct ones where the transaction names two, an amount of the sign it needs and at most
// 2^40 in size (so balances cannot overflow). InvalidArgument with one line otherwise.
Status CheckSmallBankArgs(SmallBankTxn kind, const SmallBankArgs& a, uint64_t accounts);
// The total of every row's loaded balance.
int64_t SmallBankInitialTotal(uint64_t accounts);
// Whether `diff` is the sum of some of `in_doubt`: the money check's allowance for transactions
// whose outcome is unknown (each took effect or did not); false if it cannot tell.
bool SmallBankInDoubtExplains(int64_t diff, const std::vector<int64_t>& in_doubt);
// The same where each in-doubt transaction had one of several effects when taken (a WriteCheck
// heard of only as unknown: its amount, or one unit more if it paid the penalty).
bool SmallBankInDoubtExplainsAny(int64_t diff, const std::vector<std::vector<int64_t>>& in_doubt);

}  // namespace pond::bench
