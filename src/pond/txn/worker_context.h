// The runtime objects of an embedded cluster: one ClusterImpl, a CnContext per compute node and
// a WorkerContext per worker thread. Internal to txn/; users see Cluster and Session.
//
// Ownership and threads: ClusterImpl owns everything. A CnContext's lock table and caches are
// shared by that CN's workers (they are thread-safe). A WorkerContext — scheduler, endpoint, lock
// and timestamp clients, allocator, RNG — is used only by its own worker thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "pond/cache/vt_cache.h"
#include "pond/cluster.h"
#include "pond/lock/lock_client.h"
#include "pond/lock/lock_server.h"
#include "pond/lock/lock_table.h"
#include "pond/lock/shard_map.h"
#include "pond/rng.h"
#include "pond/runtime/scheduler.h"
#include "pond/sim/engine.h"
#include "pond/store/allocator.h"
#include "pond/store/catalog.h"
#include "pond/store/placement.h"
#include "pond/transport/fabric.h"
#include "pond/transport/sim/sim_fabric.h"
#include "pond/txn/commit_log.h"
#include "pond/txn/routed_call.h"
#include "pond/txn/timestamp_oracle.h"

namespace pond::txn {

class ClusterImpl;
class CnContext;

struct WorkerStats {
  uint64_t committed = 0;
  uint64_t committed_read_only = 0;
  AbortCounts aborts;
  uint64_t remote_calls = 0;
};

class WorkerContext {
 public:
  WorkerContext(ClusterImpl& cluster, CnContext& cn, uint16_t index, uint64_t seed);
  // Coroutines still parked (none after a normal Run) hold transactions that release their
  // locks when destroyed, so they go first, while the lock client still exists.
  ~WorkerContext() { sched.DestroyUnfinished(); }

  ClusterImpl& cluster;
  CnContext& cn;
  uint16_t index;
  Scheduler sched;
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<lock::LockClient> locks;
  std::unique_ptr<lock::LockServer> lock_server;
  std::unique_ptr<TsoClient> tso;
  std::unique_ptr<TsoServer> tso_server;  // on the TSO host only
  std::unique_ptr<store::Allocator> alloc;
  std::unique_ptr<CommitLog> log;
  Rng rng;
  WorkerStats stats;
  uint64_t next_txn_id = 1;

  std::unique_ptr<RoutedCalls> calls;  // made by and to this worker
  uint16_t cn_id() const;
  Clock& clock() { return sched.clock(); }

  // Runs a registered procedure on this worker, for a call routed here; what a reply procedure
  // answers goes to *reply (dropped if null).
  Task<Status> RunProcedure(ProcedureId proc, std::span<const std::byte> args,
                            std::vector<std::byte>* reply);
};

// A registered procedure: exactly one of the two is set.
struct ProcedureEntry {
  Procedure plain;
  ReplyProcedure replying;
};
// Runs `p` as `s`; what a reply procedure answers goes to *reply (dropped if null).
Task<Status> RunProcedureAs(Session& s, const ProcedureEntry& p, std::span<const std::byte> args,
                            std::vector<std::byte>* reply);

class CnContext {
 public:
  CnContext(ClusterImpl& cluster, uint16_t id);

  uint16_t id;
  lock::LockTable locks;
  std::unique_ptr<cache::VtCache> vt;      // null if disabled
  std::unique_ptr<cache::AddrCache> addr;  // null if disabled
  std::vector<std::unique_ptr<WorkerContext>> workers;
};

class SimDriver;

class ClusterImpl {
 public:
  // Simulated clusters only; declared first so that it is destroyed last.
  std::unique_ptr<sim::Engine> engine;
  ClusterConfig config;
  std::unique_ptr<Fabric> fabric;
  SimFabric* sim_fabric = nullptr;    // = fabric, when simulated
  std::unique_ptr<SimDriver> driver;  // when simulated
  Clock& clock;  // real time on the local transport, virtual time in the simulator
  store::PoolLayout layout;
  store::Placement placement;
  store::Catalog catalog;
  lock::ShardMap shard_map;
  TimestampOracle oracle;
  std::vector<std::unique_ptr<CnContext>> cns;
  std::vector<ProcedureEntry> procedures;

  // Run() bookkeeping: clients still running over all workers.
  std::atomic<int64_t> clients_running{0};

  ClusterImpl(const ClusterConfig& c, std::unique_ptr<sim::Engine> e, std::unique_ptr<Fabric> f,
              Clock& clock, store::PoolLayout l);
  ~ClusterImpl();

  // Runs until done() holds: on the simulation's engine, or (local, setup only: no worker
  // threads running) by rounds of worker w.
  void Drive(WorkerContext& w, const std::function<bool()>& done);
  const store::TableInfo* Table(uint16_t id) const { return catalog.Find(id); }
  WorkerAddr TsoHost(uint16_t worker) const { return WorkerAddr{0, worker}; }
};

}  // namespace pond::txn
