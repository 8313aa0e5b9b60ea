// The list-append workload (Elle's): every value is a list of unique elements; transactions read
// lists and append to them, and every one is recorded in a history that `pond check` judges.
// Because each append adds a unique element and reads return whole lists, the checker can
// recover each key's version order from the data and find any isolation anomaly.
//
// Keys are used a bounded number of times: a key takes at most `max_appends` elements, after
// which the window of active keys slides on (as Elle's generator retires keys), so contention
// stays high — zipf(theta) over `window` active keys — while values stay small.
//
// `write_skew` mode is the classic write-skew pattern instead: read both keys of a pair, append
// to one. Snapshot isolation lets two such transactions commit; serializability does not.
//
// `user` mode runs the transactions a user writes (list_append_plan.h): half the keys start
// absent, appends insert them and deletes remove them while other clients race to insert and read
// them, keys are promoted from read-only to read-write, Execute runs once per step with keys
// computed from earlier reads, and each transaction reads its own writes back. Some transactions
// run through Session::RunTxn (every attempt recorded) and some, read-write ones, as procedures
// through Session::Call (routed to another CN by hybrid routing).
#pragma once

#include <cstdint>
#include <memory>

#include "pond/bench/workload.h"

namespace pond::bench {

struct ListAppendOptions {
  uint64_t keys = 20000;  // preloaded keys; the window must not run past them
  uint32_t window = 100;  // active keys (pairs in write-skew mode)
  double theta = 0.99;
  uint32_t max_appends = 32;  // elements a key holds
  uint32_t txns_per_client = 1000;
  double read_only_fraction = 0.25;
  uint32_t mops_max = 4;  // micro-ops per transaction: 1 to mops_max
  bool write_skew = false;
  bool user = false;
  // user mode: shares of read-write micro-ops that delete (the rest of the writes append), of
  // transactions that add every key first (else step by step), of those that add them read-only
  // and promote, and of transactions run through RunTxn and through Call.
  double delete_fraction = 0.15;
  double upfront_fraction = 0.3;
  double promote_fraction = 0.5;
  double retry_fraction = 0.2;
  double call_fraction = 0.3;
  uint64_t seed = 1;
};

// The run's shared state: the window, the element counter.
struct ListAppendShared;

// The workload. Every run is recorded (RunOptions::record) and ends when every client has run
// txns_per_client transactions (or the measured run's time is up: give it room).
class ListAppendWorkload : public Workload {
 public:
  explicit ListAppendWorkload(const ListAppendOptions& o);
  ~ListAppendWorkload() override;

  const char* name() const override { return "list-append"; }
  const char* title() const override { return "list-append"; }
  std::unique_ptr<Workload> Clone() const override {
    return std::make_unique<ListAppendWorkload>(o_);
  }
  Status Validate(const RunOptions& o) const override;
  std::string Settings() const override;
  nlohmann::json SettingsJson() const override;
  // Creates the table (named "lists") and loads `keys` empty lists (in user mode: the live rows
  // of every even key; the odd ones start absent), and in user mode registers the plan
  // procedure.
  Status Setup(Cluster& cluster, RunContext& ctx) override;
  Task<void> RunClient(Session& s, RunContext& ctx) override;
  // OutOfSpace if the window ran past the loaded keys.
  Status Finish(Cluster& cluster, RunContext& ctx, RunResult* r) override;

  // Serving (served.h, list_append_served.cc): the table "lists" as in user mode, and the plans
  // as two procedures, list-append.read and list-append.txn, that reply with what each step
  // read. The remote driver draws user-mode plans and records every call; its history is the
  // run's, judged by the checker like an embedded run's.
  Status Serve(Cluster& cluster, server::ServiceDirectory* dir) override;
  std::vector<TableNeed> ServedTables() const override;
  Result<std::unique_ptr<RemoteDriver>> Remote(
      const std::vector<RemoteTable>& tables) const override;

  // After a run: the highest key the window reached.
  uint64_t window_end() const;

 private:
  ListAppendOptions o_;
  uint16_t table_ = 0;
  ProcedureId proc_ = 0;  // user mode: the plan procedure routed calls run
  std::unique_ptr<ListAppendShared> shared_;
};

}  // namespace pond::bench
