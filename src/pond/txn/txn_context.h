// TxnContext: everything a transaction uses of the worker that runs it, and nothing else.
//
// The protocols (TxnState and its subclasses) see one worker's parts — its endpoint, lock and
// timestamp clients, allocator, commit log, B+Tree handles and counts — and, read-only, its
// compute node's: the lock table it serves, the caches, the placement and shard map as this CN
// knows them, and the gate a rejoining MN closes. The node runtime (node/worker_context.h) builds
// these parts and is the only one that changes them; it also carries what transactions never
// touch (routed calls, serving, membership, the simulator), so protocol code cannot reach it.
// LevelDB's DB sees an Env in the same way.
//
// Thread rules: used only by its worker's thread, except `stats()`, which any thread may read.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "pond/base/relaxed_counter.h"
#include "pond/btree/btree.h"
#include "pond/cache/vt_cache.h"
#include "pond/cluster.h"
#include "pond/lock/lock_client.h"
#include "pond/lock/lock_table.h"
#include "pond/lock/shard_map.h"
#include "pond/runtime/scheduler.h"
#include "pond/store/allocator.h"
#include "pond/store/catalog.h"
#include "pond/store/commit_log.h"
#include "pond/store/gone_holders.h"
#include "pond/store/layout.h"
#include "pond/store/placement.h"
#include "pond/testbed.h"
#include "pond/transport/endpoint.h"
#include "pond/txn/timestamp_oracle.h"

namespace pond::txn {

// A worker's counts: its thread adds to them, and any thread may read them meanwhile
// (Cluster::Stats while serving: a daemon's metrics). So each is a RelaxedCounter, which costs the
// worker no locked instruction.
struct WorkerStats {
  RelaxedCounter committed;
  RelaxedCounter committed_read_only;
  // AbortCounts' reasons, one for one (Totals copies them over).
  struct Aborts {
    RelaxedCounter lock_conflict, newer_version, snapshot_too_old, torn_read, invisible_wait,
        duplicate_key, validation, user, mn_unreachable;
  } aborts;
  RelaxedCounter remote_calls;
  RelaxedCounter gone_lock_words_freed;       // ClusterStats'
  RelaxedCounter gone_tree_words_taken;       // ClusterStats'
  RelaxedCounter commit_rounds_posted_again;  // ClusterStats'
  RelaxedCounter tree_entries_removed;        // ClusterStats'
  RelaxedCounter tree_entries_kept;           // ClusterStats'
  RelaxedCounter tree_leaf_merges;            // ClusterStats'
  RelaxedCounter scan_leaves_read;            // ClusterStats'
  RelaxedCounter scan_entries_absent;         // ClusterStats'
  // LatencyBuckets, counted by this worker.
  std::array<RelaxedCounter, LatencyBuckets::kBoundsNs.size() + 1> commit_latency;
  RelaxedCounter commit_latency_sum_ns;

  void RecordCommit(uint64_t latency_ns) {
    commit_latency[LatencyBuckets::BucketOf(latency_ns)]++;
    commit_latency_sum_ns += latency_ns;
  }
  // Adds these counts to `s`.
  void AddTo(ClusterStats& s) const;
};

// What a worker's transactions share with the other workers of their compute node. The runtime
// owns these; a worker holds pointers, which stay valid for the worker's life.
struct CnParts {
  uint16_t id = 0;
  lock::LockTable* locks = nullptr;  // the shards this CN manages
  cache::VtCache* vt = nullptr;      // null if disabled
  cache::AddrCache* addr = nullptr;  // null if disabled
  // Which MNs it writes and reads, and which CN manages each shard, as this CN knows them (its
  // membership changes them between rounds of its workers).
  const store::Placement* placement = nullptr;
  const lock::ShardMap* shard_map = nullptr;
  // Commits wait before their write-visible rounds while this is closed: a restarted MN is
  // becoming readable (recovery/mn_rejoin.h).
  const std::atomic<bool>* visible_gate_closed = nullptr;
  // The CN incarnations whose MN lock words are free (GoneHolders).
  const store::GoneHolders* gone = nullptr;
};

class TxnContext {
 public:
  TxnContext(const TxnContext&) = delete;
  TxnContext& operator=(const TxnContext&) = delete;

  const ClusterConfig& config() const { return config_; }
  const ProtocolConfig& protocol() const { return config_.protocol; }
  const store::PoolLayout& layout() const { return layout_; }
  // Table `id` of the catalog; nullptr if there is none.
  const store::TableInfo* Table(uint16_t id) const { return catalog_.Find(id); }

  uint16_t cn_id() const { return cn_.id; }
  uint16_t index() const { return index_; }
  Scheduler& sched() { return sched_; }
  Clock& clock() { return sched_.clock(); }
  Endpoint& ep() { return *ep_; }
  const Endpoint& ep() const { return *ep_; }
  lock::LockClient& locks() { return *locks_; }
  TsoClient& tso() { return *tso_; }
  const TsoClient& tso() const { return *tso_; }
  store::Allocator& alloc() { return *alloc_; }
  store::CommitLog& log() { return *log_; }
  // This worker's handle on ordered table `t`'s B+Tree, opened on first use (ordered.cc).
  btree::BTree& Tree(const store::TableInfo& t);
  WorkerStats& stats() { return stats_; }
  const WorkerStats& stats() const { return stats_; }
  uint64_t NextTxnId() { return next_txn_id_++; }
  // Where an operation whose result nobody reads may write it: it lives as long as the worker,
  // and only the worker's thread completes its operations.
  uint64_t* discard_word() { return &discard_; }

  // Its CN's parts (CnParts).
  const store::Placement& placement() const { return *cn_.placement; }
  const lock::ShardMap& shard_map() const { return *cn_.shard_map; }
  lock::LockTable& cn_locks() { return *cn_.locks; }
  cache::VtCache* vt_cache() { return cn_.vt; }
  cache::AddrCache* addr_cache() { return cn_.addr; }
  // Whether MN lock word value `word` names a CN incarnation that failed and was recovered.
  bool HolderGone(uint64_t word) const { return cn_.gone != nullptr && cn_.gone->Gone(word); }
  // GoneHolders::generation(): taken before posting READs whose lock words HolderGone judges.
  uint64_t gone_generation() const { return cn_.gone != nullptr ? cn_.gone->generation() : 0; }
  bool visible_gate_closed() const {
    return cn_.visible_gate_closed->load(std::memory_order_acquire);
  }

  // Commits of this worker between the start of their first write-visible round and the end of
  // their second: a rejoining MN turns readable only when this is 0 on every worker.
  int64_t& commits_mid_visible() { return mid_visible_; }
  // Commits of this worker answered early and still publishing (ProtocolConfig::early_ack): each
  // will send unlocks to other CNs, so a run is not over, nor is serving, while one is left
  // (WorkerContext::Awaiting).
  size_t& commits_publishing() { return publishing_; }
  size_t commits_publishing() const { return publishing_; }
  // A transaction of this worker reached `step` of its commit path: a simulated run may crash
  // the CN right there (the runtime's step probe). One test when no probe is set.
  void Reached(CommitStep step) {
    if (*step_probe_) (*step_probe_)(cn_.id, step);
  }
  // Writes acknowledged to clients as committed, newest commit timestamp per (table, key), kept
  // while tracking is on (a simulated run with faults) for the after-run check that none is lost.
  void TrackAcknowledged(bool on) { track_acked_ = on; }
  bool tracking_acknowledged() const { return track_acked_; }
  void Acknowledged(uint16_t table, uint64_t key, uint64_t commit_ts) {
    if (!track_acked_) return;
    if (acked_.size() <= table) acked_.resize(size_t{table} + 1);
    uint64_t& ts = acked_[table][key];
    if (ts < commit_ts) ts = commit_ts;
  }
  const std::vector<std::unordered_map<uint64_t, uint64_t>>& acknowledged() const { return acked_; }

  using StepProbe = std::function<void(uint16_t cn, CommitStep step)>;

 protected:
  // The parts behind the pointers (ep_, locks_, tso_, alloc_, log_) are made by the runtime
  // that derives from this, before any transaction runs. `step_probe` outlives the worker.
  TxnContext(const ClusterConfig& config, const store::PoolLayout& layout,
             const store::Catalog& catalog, const CnParts& cn, uint16_t index, Clock& clock,
             uint64_t first_txn_id, const StepProbe& step_probe)
      : config_(config),
        layout_(layout),
        catalog_(catalog),
        cn_(cn),
        index_(index),
        sched_(clock),
        next_txn_id_(first_txn_id),
        step_probe_(&step_probe) {}
  ~TxnContext() = default;

  const ClusterConfig& config_;
  const store::PoolLayout& layout_;
  const store::Catalog& catalog_;
  const CnParts cn_;
  const uint16_t index_;
  // Declared before the parts that use it, so that it is destroyed after them.
  Scheduler sched_;
  std::unique_ptr<Endpoint> ep_;
  std::unique_ptr<lock::LockClient> locks_;
  std::unique_ptr<TsoClient> tso_;
  std::unique_ptr<store::Allocator> alloc_;
  std::unique_ptr<store::CommitLog> log_;

 private:
  std::vector<std::unique_ptr<btree::BTree>> trees_;  // by table id; null until used
  WorkerStats stats_;
  uint64_t next_txn_id_;
  uint64_t discard_ = 0;
  int64_t mid_visible_ = 0;
  size_t publishing_ = 0;
  const StepProbe* step_probe_;
  bool track_acked_ = false;
  std::vector<std::unordered_map<uint64_t, uint64_t>> acked_;  // by table: key -> commit ts
};

}  // namespace pond::txn
