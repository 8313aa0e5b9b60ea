// The runtime objects of a cluster: one ClusterImpl, a CnContext per compute node and a
// WorkerContext per worker thread. Internal to node/; users see Cluster and Session. Their state
// is private: transactions see only the TxnContext each WorkerContext implements
// (txn/txn_context.h); the rest of the runtime reads the cluster through ClusterImpl's const
// accessors; only the Cluster facade changes the cluster.
//
// Ownership and threads: ClusterImpl owns everything. A CnContext's lock table and caches are
// shared by that CN's workers (they are thread-safe). A WorkerContext — scheduler, endpoint, lock
// and timestamp clients, allocator, RNG — is used only by its own worker thread.
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
#include "pond/cluster/membership.h"
#include "pond/lock/lock_client.h"
#include "pond/lock/lock_server.h"
#include "pond/lock/lock_table.h"
#include "pond/lock/shard_map.h"
#include "pond/node/cn_process.h"
#include "pond/node/routed_call.h"
#include "pond/recovery/cn_controls.h"
#include "pond/recovery/cn_start.h"
#include "pond/rng.h"
#include "pond/runtime/scheduler.h"
#include "pond/store/allocator.h"
#include "pond/store/catalog.h"
#include "pond/store/commit_log.h"
#include "pond/store/placement.h"
#include "pond/transport/fabric.h"
#include "pond/txn/timestamp_oracle.h"
#include "pond/txn/txn_context.h"

// Only a pointer to the simulator is kept here, so that runtime code including this header does
// not see it; the coordination service and UCX are known only above node/ (deploy/).
namespace pond::sim {
class Engine;
}  // namespace pond::sim
namespace pond {
class SimFabric;
}  // namespace pond

namespace pond::node {

// The layout of a cluster that formats its own MN regions (simulated, or embedded without MN
// daemons), with the record chunk and log ring sizes store::WorkerSpaceFor gives its workers
// (config.cns x config.workers_per_cn); InvalidArgument naming --region-mib if the region
// cannot hold them beside the tables.
Result<std::pair<store::PoolLayout, store::WorkerSpace>> OwnPoolLayout(const ClusterConfig& c);

class ClusterImpl;
class ServingInbox;
struct Serving;
class CnContext;

// One worker: what its transactions, clients and handlers use. Its parts are built by the
// constructor (endpoint, lock client and server, timestamp client and server, allocator, routed
// calls) and by Init (the commit log, which needs the memory pool); nothing outside changes them.
class WorkerContext : public txn::TxnContext {
 public:
  // `incarnation`: of its CN, 0 until the CN first restarts; stamped on its packets and in the
  // high bits of its transaction and call numbers, so no number of an earlier incarnation
  // recurs.
  WorkerContext(ClusterImpl& cluster, CnContext& cn, uint16_t index, uint64_t seed,
                uint16_t incarnation = 0);
  // Coroutines still parked (none after a normal Run) hold transactions that release their
  // locks when destroyed, so they go first, while the lock client still exists.
  ~WorkerContext() { sched_.DestroyUnfinished(); }

  // Carves this worker's commit log on its MN, running the worker until it is done.
  Status Init();
  // A restarted worker takes over its earlier incarnation's log areas, which the recovery of
  // that incarnation left zeroed (cluster/log_recovery.h).
  void InitWithLog(const store::CommitLog& earlier);
  // ... and its chunks of record space (store::Allocator::TakeOver).
  void TakeOverChunks(const store::Allocator& earlier) { alloc_->TakeOver(earlier); }

  const ClusterImpl& cluster() const { return cluster_; }
  CnContext& cn() { return cn_ctx_; }
  lock::LockServer& lock_server() { return *lock_server_; }
  // This worker's CN now hosts the timestamp oracle `o` (the old host failed): it serves other
  // CNs' requests for worker index() and takes its own timestamps from `o` directly.
  void HostTso(txn::TimestampOracle& o);
  RoutedCalls& calls() { return *calls_; }
  Rng& rng() { return rng_; }
  // Clients of the current Run still running on this worker (simulated runs: a crash of the
  // CN takes them away).
  int64_t& clients_running() { return clients_running_; }
  // Requests this worker sent to other CNs and awaits answers for (locks, ends, timestamps,
  // routed calls), and commits answered early that have yet to send their unlocks. A run is over
  // only when no worker awaits one: a request may be resent, and its peer must still be there to
  // answer.
  size_t Awaiting() const {
    return locks_->awaiting() + tso_->awaiting() + calls_->awaited() + commits_publishing();
  }

  // The membership this worker's endpoint filters packets by: its CN's view, copied in when it
  // changes (SimMembership, ProcessMembership: the CN's controls), on this worker's thread.
  const cluster::Configuration& view() const { return view_; }
  void SetView(const cluster::Configuration& v) { view_ = v; }

  // Runs a registered procedure on this worker, for a call routed here; what a reply procedure
  // answers goes to *reply (dropped if null).
  Task<Status> RunProcedure(ProcedureId proc, std::span<const std::byte> args,
                            std::vector<std::byte>* reply);

 private:
  ClusterImpl& cluster_;
  CnContext& cn_ctx_;
  std::unique_ptr<lock::LockServer> lock_server_;
  std::unique_ptr<txn::TsoServer> tso_server_;  // grants on the TSO host only
  std::unique_ptr<RoutedCalls> calls_;          // made by and to this worker
  Rng rng_;
  cluster::Configuration view_;
  int64_t clients_running_ = 0;
};

// A registered procedure: exactly one of the two is set.
struct ProcedureEntry {
  Procedure plain;
  ReplyProcedure replying;
};
// The CN a call made on `w` with `hint` runs on (hybrid routing, by `w`'s shard map).
uint16_t CallTarget(const WorkerContext& w, const RouteHint& hint);
// Runs `p` as `s`; what a reply procedure answers goes to *reply (dropped if null).
Task<Status> RunProcedureAs(Session& s, const ProcedureEntry& p, std::span<const std::byte> args,
                            std::vector<std::byte>* reply);

// One compute node: what its workers share. Built by ClusterImpl; its lock table and caches are
// thread-safe, its worker list fixed once built.
class CnContext {
 public:
  CnContext(ClusterImpl& cluster, uint16_t id);

  const uint16_t id;
  lock::LockTable locks;
  std::unique_ptr<cache::VtCache> vt;            // null if disabled
  std::unique_ptr<cache::AddrCache> addr;        // null if disabled
  std::unique_ptr<txn::TimestampOracle> oracle;  // on the TSO host only
  std::vector<std::unique_ptr<WorkerContext>> workers;
  // This CN's view of membership (simulated runs with node faults): its workers' endpoints
  // refuse packets of CNs it holds dead. Empty: no membership, accept everything.
  cluster::Configuration view;
  // Which MNs it writes and reads, and which CN manages each shard, as this CN knows them: its
  // own copies, changed as it applies epochs — as each CN process has its own — so that in the
  // simulator too one CN may act on a newer epoch than another. A new CnContext starts from the
  // cluster's (ClusterImpl::placement_, shard_map_).
  store::Placement placement;
  lock::ShardMap shard_map;
  // This CN's commits wait before their write-visible rounds while a restarted MN becomes read
  // (recovery/mn_rejoin.h); its workers read it, its membership sets it.
  std::atomic<bool> visible_gate_closed{false};
  // The CN incarnations whose MN lock words are free: raised as failures are recovered, and to
  // every incarnation older than the one a view names (one is let back in only once its
  // predecessor's failure is recovered everywhere).
  store::GoneHolders gone;
  void GoneBelowView() {
    for (uint16_t c = 0; c < view.cns.size(); c++) gone.GoneBelow(c, view.cns[c].incarnation);
  }

  // What its workers' transactions see of it (txn/txn_context.h).
  txn::CnParts Parts() {
    return {.id = id,
            .locks = &locks,
            .vt = vt.get(),
            .addr = addr.get(),
            .placement = &placement,
            .shard_map = &shard_map,
            .visible_gate_closed = &visible_gate_closed,
            .gone = &gone};
  }
};

// A Run's clients, kept while it goes on so that a restarted CN's new workers run them too.
struct RunClients {
  const std::function<Task<void>(Session&)>* client = nullptr;  // null: no Run going on
  int per_worker = 0;
  std::vector<std::unique_ptr<Session>> sessions;
};

class SimDriver;
class SimFaults;
class SimMembership;

// What the membership of a CN process did (CnStats): its thread counts, any thread reads.
using MembershipCounts = recovery::MembershipCounts;

// The cluster: its config, the memory pool's layout and placement, the catalog, the shard map,
// the timestamp oracle, the CNs and the registered procedures. Transactions read it through the
// const accessors; only the Cluster facade (setup, tables, procedures, runs) changes it.
class ClusterImpl {
 public:
  ClusterImpl(const ClusterConfig& c, std::unique_ptr<sim::Engine> e, std::unique_ptr<Fabric> f,
              Clock& clock, store::PoolLayout l);
  ~ClusterImpl();

  // Formats the MN regions and builds the CNs and their workers (a simulated cluster's driver
  // is set first, by Cluster::StartSimulated).
  Status Build();
  // MNs served by daemons: their layout must be ours, and they must hold no tables yet.
  Status CheckDaemonsPool(WorkerContext& w);

  const ClusterConfig& config() const { return config_; }
  Clock& clock() const { return clock_; }
  const store::PoolLayout& layout() const { return layout_; }
  // The cluster's own view, which every CN's starts from: the newest configuration's (the
  // simulator's membership keeps it so; a CN process's is its one CN's). Loads and the checks
  // after a run read it; transactions read their CN's (WorkerContext::placement).
  const store::Placement& placement() const { return placement_; }
  const lock::ShardMap& shard_map() const { return shard_map_; }
  // A CN process's controls (ProcessMembership) change the cluster's view with its one CN's: the
  // cluster's, and the CN's.
  void ChangePlacementEverywhere(const std::function<void(store::Placement&)>& change);
  void AssignShardEverywhere(uint32_t s, uint16_t cn);
  const store::TableInfo* Table(uint16_t id) const { return catalog_.Find(id); }
  const store::Catalog& catalog() const { return catalog_; }
  // Whether timestamp requests go through relays (the protocol's tso_combine, with groups of two
  // or more: TsoAsk).
  bool TsoRelays() const;
  // Where worker `worker` of CN `cn` sends its timestamp requests while CN `host` holds the
  // oracle: without relays, to the host's worker of the same index. With them, a CN's workers
  // are split into groups of g = min(workers, ceil(sqrt(CNs))), each with one relay, which sends
  // to the host's worker of its own index. Each of the host's cores then hears from about
  // CNs / g relays, and each relay from g - 1 workers: both about sqrt(CNs), where a host core
  // alone heard from all CNs. A group's relay is chosen by the CN, so that the relays spread
  // over the host's cores. Meaningless on the host, which grants without asking.
  WorkerAddr TsoAsk(uint16_t cn, uint16_t worker, uint16_t host) const;
  // The registered procedure `id`; nullptr if there is none.
  const ProcedureEntry* Procedure(ProcedureId id) const {
    return id < procedures_.size() ? &procedures_[id] : nullptr;
  }
  bool simulated() const { return driver_ != nullptr; }
  // Whether this process runs CN `cn`'s workers (all CNs but in a cluster of `pond cn`
  // processes, where each runs one: TransportConfig.cn).
  bool Hosts(uint16_t cn) const { return config_.transport.cn < 0 || config_.transport.cn == cn; }
  // The worker setup work runs on (tables, loading): the first one this process hosts.
  WorkerContext& SetupWorker();

  // A CN of a cluster of processes: the membership it starts from (read by Build) and what the
  // process adds (cn_process.h), both given by the deployment that starts it (deploy/) before
  // Build.
  void SetProcess(recovery::CnStart start, std::unique_ptr<CnProcess> process);
  const recovery::CnStart* process_start() const { return process_start_.get(); }
  CnProcess* process() { return process_.get(); }
  // What the deployments above node/ reach: the fabric, a CN's context, the membership's
  // counts, the event log (Cluster::SetEventLog).
  Fabric& fabric() { return *fabric_; }
  CnContext& cn_context(uint16_t cn) { return *cns_[cn]; }
  MembershipCounts& membership_counts() { return membership_counts_; }
  void Log(const std::string& line) const {
    if (event_log_) event_log_(line);
  }
  // While serving: runs `fn` on worker `w`'s thread, between its rounds (serve.cc).
  void PostTo(WorkerContext& w, std::function<void(WorkerContext&)> fn);

  // Runs until done() holds: on the simulation's engine, or (local, setup only: no worker
  // threads running) by rounds of worker w.
  void Drive(WorkerContext& w, const std::function<bool()>& done);

  // Simulated clusters: CN `cn` (crashed, recovered) comes back as incarnation `incarnation`
  // with empty lock tables and caches, managing no shard, its workers on its earlier
  // incarnation's logs; StartClients then runs the current Run's clients on its workers, once
  // the others hold it alive. The dead incarnation is kept
  // (its coroutines stay parked; its counters still count) until the cluster goes.
  void RestartCn(uint16_t cn, uint16_t incarnation, const cluster::Configuration& view);
  // Every worker of every incarnation, the dead ones included (stats, acknowledged writes).
  template <typename F>
  void ForEachWorkerEver(F&& f) const {
    for (const auto* list : {&cns_, &retired_}) {
      for (const auto& cn : *list) {
        for (const auto& w : cn->workers) f(*w);
      }
    }
  }

 private:
  friend class pond::Cluster;  // tables, procedures, runs, stats
  friend class WorkerContext;  // builds its parts from the cluster's services
  friend class SimMembership;  // the same for the simulated CNs, and crashes them
  friend class NodeControls;   // the controls of one CN, in any deployment

  // Runs the Run's clients on `w` (simulated runs).
  void StartClients(WorkerContext& w);
  // While serving (serve.cc): worker `w`'s thread, running the calls its inbox gets.
  void ServeWorker(WorkerContext& w, ServingInbox& inbox);

  // Simulated clusters only; declared first so that it is destroyed last.
  std::unique_ptr<sim::Engine> engine_;
  const ClusterConfig config_;
  std::unique_ptr<Fabric> fabric_;
  SimFabric* sim_fabric_ = nullptr;          // = fabric_, when simulated
  std::unique_ptr<SimDriver> driver_;        // when simulated
  std::unique_ptr<SimFaults> sim_faults_;    // when simulated: carries out node faults
  std::vector<NodeFault> scheduled_faults_;  // for the next Run
  Clock& clock_;  // real time on the local transport, virtual time in the simulator
  const store::PoolLayout layout_;
  // Each worker's log ring bytes (and the layout's chunk): store::WorkerSpaceFor for a cluster
  // that formats its own regions (OwnPoolLayout), the fixed sizes for MN daemons'.
  store::WorkerSpace space_;
  store::Placement placement_;  // its down MNs change with the epoch (ProcessMembership)
  store::Catalog catalog_;
  lock::ShardMap shard_map_;
  uint16_t tso_cn_ = 0;  // the CN hosting the timestamp oracle (its CnContext has it)
  std::vector<std::unique_ptr<CnContext>> cns_;
  std::vector<std::unique_ptr<CnContext>> retired_;  // crashed incarnations of restarted CNs
  RunClients run_;
  std::vector<ProcedureEntry> procedures_;
  // Run() bookkeeping: clients still running over all workers, and the requests they await
  // (WorkerContext::Awaiting; threads publish their own share).
  std::atomic<int64_t> clients_running_{0};
  std::atomic<int64_t> awaiting_{0};
  std::unique_ptr<Serving> serving_;  // while the cluster serves (Cluster::StartServing)
  // A CN of a cluster of processes: the membership it started from, what its membership counts
  // and reports (Cluster::SetEventLog), and what the process adds; declared in this order so
  // that the counts and the log outlive the membership.
  std::unique_ptr<recovery::CnStart> process_start_;
  bool joined_ = false;  // its tables were made by an earlier process: CreateTable opens them
  MembershipCounts membership_counts_;
  std::function<void(const std::string&)> event_log_;
  std::unique_ptr<CnProcess> process_;
  // Simulated clusters: told when a transaction reaches a commit step (SimMembership's, for
  // crashes aimed at a step); empty otherwise.
  txn::TxnContext::StepProbe step_probe_;
};

}  // namespace pond::node
