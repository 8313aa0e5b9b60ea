// Workload: what one benchmark workload is — its tables and load, its procedures, one client's
// issue loop, its invariant check and the fields it adds to a result — and RunWorkload, the one
// driver that runs any workload on real threads or on the simulated cluster, measured, with or
// without a recorded history. KVS (kvs_bench.h), SmallBank (smallbank.h), TATP (tatp.h), TPC-C
// (tpcc.h) and list-append (list_append.h) implement it; a new workload is one more subclass and
// its test.
//
// A run: RunWorkload starts a fresh cluster, calls Setup, starts the measured run (MeasuredRun),
// runs RunClient on every client coroutine until each returns, and calls Finish, which checks the
// workload's invariant and adds its own fields to the result. A recorded run (RunOptions::record)
// gives the workload an in-memory Recorder; after Finish the driver judges the history with the
// isolation checker — strict serializability under SR, snapshot isolation under SI — and returns
// the verdict with the history's text, so a caller writes it to a file only when it wants one.
//
// Thread rules: a Workload is used by one run at a time (Clone for another run). Setup and Finish
// run on the thread that calls RunWorkload; RunClient runs on every worker, so what it shares
// across clients is atomic or per worker (RunContext::Worker).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pond/bench/measured_run.h"
#include "pond/bench/region_size.h"
#include "pond/bench/served.h"
#include "pond/check/recorder.h"
#include "pond/cluster.h"

namespace pond::server {
class ServiceDirectory;
}

namespace pond::bench {

// What every run takes besides its workload's own settings.
struct RunOptions {
  ClusterConfig cluster;
  int coros = 4;        // client coroutines per worker
  double seconds = 10;  // the measured run; virtual seconds when simulated
  // Set: run on the simulated cluster with this model.
  std::optional<Testbed> sim;
  // Record every transaction as a list-append history and judge it after the run. Meant for
  // test-sized runs: the history is kept in memory (calls_max bounds it).
  bool record = false;
  // Stop issuing after this many calls over all clients; 0: no cap (a recorded run needs one).
  uint64_t calls_max = 0;
  // Simulated runs: a fault schedule (docs/fault_schedules.md), as its canonical spec (empty:
  // none) and its node faults; its message faults are in sim->faults. With a schedule, the run
  // ends with the failover report and the replica check.
  std::string faults;
  std::vector<NodeFault> node_faults;
  // A fault the schedule puts after the run's end never happens; such a run fails (the CLI's
  // exit status 3) unless this is set (--allow-unplayed-faults): a pass must have tested what
  // it claims.
  bool allow_unplayed_faults = false;
  // Set when a random schedule was drawn within less than `seconds` (ResolveFaultsFor): why, for
  // the run's header.
  std::string faults_horizon;
};

inline constexpr uint64_t kRecordedCallsMax = 1'000'000;

// InvalidArgument naming the flag: coros, seconds, and a recorded run's call cap. The cluster
// config is Cluster::Start's to check (ValidateConfig).
Status ValidateRunOptions(const RunOptions& o);

// The workload's own invariant, checked after the run.
struct WorkloadCheck {
  std::string name;   // "money check"
  std::string label;  // in a run's report, at most 12 characters: "ref. check"
  bool ok = false;
  std::string summary;   // what was found, ok or not: "total 5 = initial 3 + net deposits 2"
  std::string brief;     // the same in a comparison's row: "total 5 = initial 3 + deposits 2"
  std::string detail;    // why it failed
  std::string json_key;  // its object in a result's JSON: "money_check"
  nlohmann::json json;
};

// The isolation checker's verdict on a recorded run.
struct HistoryVerdict {
  std::string model;   // "strict-serializable", "snapshot-isolation"
  uint64_t txns = 0;   // transactions in the history
  uint64_t infos = 0;  // of them, with an unknown outcome (caught by a crash)
  bool ok = false;
  std::string detail;  // the forbidden anomalies found, or why the history could not be read
  std::string report;  // the checker's full text report (what `pond check` prints)
  std::string text;    // the history itself (JSONL, history.h's format)
};

// Judges a recorded history as `pond check` would, without a file in between: strict
// serializability under SR, snapshot isolation under SI.
HistoryVerdict JudgeHistory(std::string text, Isolation isolation);

// A workload's own rate beside txn/s: the commits of the one kind its metric counts (TPC-C's
// tpmC counts New-Orders, and papers differ on which of the two they report).
struct HeadlineRate {
  std::string name;      // "New-Order": reported as "New-Order/s"
  std::string json_key;  // "new_orders": JSON's new_orders_committed and new_orders_per_sec
  uint64_t committed = 0;
};

// What a run reports: the measures every run has, the workload's own counts and check, and the
// history's verdict if the run was recorded.
struct RunResult : RunMeasures {
  std::string workload;  // Workload::name()
  std::string loaded;    // what Setup loaded, for the report: "1000 keys"
  // Committed calls by transaction kind, in the workload's order; empty if it has one kind.
  std::vector<std::pair<std::string, uint64_t>> committed_by_txn;
  // Committed without effect by the workload's rules; unset if the workload has no such rule.
  std::optional<uint64_t> declined;
  // The workload's own rate, if it has one.
  std::optional<HeadlineRate> headline;
  // What a read-write commit is called in the report ("UpdateOne"; "read-write").
  std::string rw_name = "read-write";
  // The report shows the cache counters (and the simulation's engine line): the KVS workload's
  // one-key transactions are where the version table cache shows.
  bool report_caches = false;
  std::optional<WorkloadCheck> check;
  std::optional<HistoryVerdict> history;
  // Runs with a fault schedule: what failover did, and whether the replicas agree afterwards.
  std::optional<FailoverStats> failover;
  std::optional<ReplicaCheck> replicas;
  // Runs with resharding on (docs/resharding.md): what the shard moves did, over every CN.
  struct Moves {
    const char* policy = "none";  // ReshardPolicyName
    uint64_t made = 0, given_up = 0, called_off = 0;
    uint64_t shards = 0;                              // in the moves made
    uint64_t closed_ns_total = 0, closed_ns_max = 0;  // shards granted by nobody, per move
    std::vector<uint64_t> made_ns;                    // when each was made, from the run's start
  };
  std::optional<Moves> moves;
};

// From the first crash of a run with a crash in it: the milliseconds until throughput stays at
// or above `fraction` (0.95: within 5%) of its mean over the milliseconds before the crash, to
// the end of the run (the last, partial millisecond left out); nullopt if it never does (or
// there was no crash, or too little before it to measure).
std::optional<double> RecoveryMs(const RunResult& r, double fraction = 0.95);

class Workload;
class RunContext;
Result<RunResult> RunWorkload(Workload& w, const RunOptions& o,
                              const std::function<void(const KvsProgress&)>& progress);

// What the driver hands a workload during one run.
class RunContext {
 public:
  RunContext(const RunOptions& o, check::Recorder* recorder) : o_(o), recorder_(recorder) {}

  const RunOptions& options() const { return o_; }
  // The run's recorder, or nullptr if the run is not recorded.
  check::Recorder* recorder() const { return recorder_; }

  // Whether a client should issue another call: the measured run is on and, if calls are
  // capped, this call is within the cap. Counts the call.
  bool NextCall(Session& s);
  // Books a call as MeasuredRun::Book does; false: the client should stop.
  bool Book(Session& s, const Status& st, uint64_t t0, uint64_t t1, bool read_write) {
    return run_->Book(s, st, t0, t1, read_write);
  }
  // Publishes the run's time without booking (a call the workload counts itself).
  void Publish(uint64_t t1) { run_->Publish(t1); }

  // Workers over the cluster, clients over the cluster, and this session's index in each.
  size_t workers() const;
  uint64_t clients() const;
  size_t Worker(const Session& s) const;
  uint64_t Client(const Session& s) const;

 private:
  friend Result<RunResult> RunWorkload(Workload&, const RunOptions&,
                                       const std::function<void(const KvsProgress&)>&);
  const RunOptions& o_;
  check::Recorder* recorder_;
  MeasuredRun* run_ = nullptr;  // set by the driver for the measured run
  std::atomic<uint64_t> issued_{0};
};

class Workload {
 public:
  virtual ~Workload() = default;

  // "kvs", "smallbank", "tatp", "list-append": JSON's "bench" and a result's workload.
  virtual const char* name() const = 0;
  // "KVS", "SmallBank": in messages.
  virtual const char* title() const = 0;
  // A new workload with these settings and no state, for another run.
  virtual std::unique_ptr<Workload> Clone() const = 0;
  // Sets a numeric setting a sweep varies ("rw-ratio"); InvalidArgument if it has none by that
  // name. The cluster's keys (coros, workers, cns) are the driver's, not the workload's.
  virtual Status Set(std::string_view key, double value);
  // Its own settings, and what it needs of the run's (a recorded run's cap); InvalidArgument
  // naming the flag.
  virtual Status Validate(const RunOptions& o) const = 0;
  // Its settings for a header line ("1000 keys, uniform keys, 50% UpdateOne") and for JSON.
  virtual std::string Settings() const = 0;
  virtual nlohmann::json SettingsJson() const = 0;

  // On the fresh cluster: creates the tables, loads them, registers the procedures.
  virtual Status Setup(Cluster& cluster, RunContext& ctx) = 0;
  // One client's loop: issues calls while ctx.NextCall(s), booking each with ctx.Book.
  virtual Task<void> RunClient(Session& s, RunContext& ctx) = 0;
  // After the measured run: checks the invariant (reading the store back if it must) and fills
  // the workload's fields of `r`; writes the history to ctx.recorder() if it kept it aside.
  virtual Status Finish(Cluster& cluster, RunContext& ctx, RunResult* r) = 0;

  // Serving (served.h): on a fresh cluster that will serve network clients, creates and loads
  // the tables as Setup does and registers the procedures, naming both in `dir`
  // ("smallbank.amalgamate"), with each procedure's argument size and its check of arguments.
  // Procedures answer what a remote driver books (SmallBank: the net deposit). InvalidArgument
  // if the workload cannot be served, or a name is served already.
  virtual Status Serve(Cluster& cluster, server::ServiceDirectory* dir);
  // The tables Serve creates, with the rows it loads or its clients may insert: what each MN's
  // region must hold (region_size.h), known before anything starts. Empty if it cannot be served.
  virtual std::vector<TableNeed> ServedTables() const;
  // A driver of a served copy of this workload, fitted to the server's tables (their capacities
  // give the key ranges); InvalidArgument naming a table the server lacks.
  virtual Result<std::unique_ptr<RemoteDriver>> Remote(
      const std::vector<RemoteTable>& tables) const;

 protected:
  // What Serve hands Setup in place of a run: a context over the cluster's shape, no recorder,
  // one client per worker. Kept by the workload for as long as its procedures may run.
  RunContext& ServingContext(const Cluster& cluster);

 private:
  std::unique_ptr<RunOptions> serving_options_;
  std::unique_ptr<RunContext> serving_ctx_;
};

// A transaction kind drawn by a mix in percent (summing to 100): the index of the kind.
size_t DrawFromMix(Rng& rng, std::span<const int> mix_pct);

// Everything a run needs of its inputs: the cluster config (ValidateConfig), the run's options
// and the workload's. Callers check it where they parse the options, once, before anything runs.
Status ValidateRun(const Workload& w, const RunOptions& o);

// Runs `w` once on a fresh cluster (see the top of this file); `progress` (may be empty) is
// called about once a wall second. REQUIRES: ValidateRun(w, o) is OK (Cluster::Start checks the
// config again; nothing else is checked twice). An error if the cluster cannot start, a call
// fails unexpectedly or the workload cannot finish; a failed invariant or history check is not
// an error: it is in the result.
Result<RunResult> RunWorkload(Workload& w, const RunOptions& o,
                              const std::function<void(const KvsProgress&)>& progress);

}  // namespace pond::bench
