// SimDriver: runs every worker of a cluster on one thread in virtual time, and models their CPUs.
//
// A worker is one core. When it has work — a coroutine made ready (a completion, a reply), a
// packet in its inbox, a timer due — the driver runs one scheduling round at the time the core
// is free, charges the round's CPU time from the Testbed (per round, per coroutine resumed, per op
// posted, per doorbell batch, per message), and lets what the round posted leave the CN when that
// CPU time ends. Everything happens in engine events, so a run is one seed and replays exactly.
//
// Thread rules: single-threaded, on the thread that steps the engine.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "pond/sim/engine.h"
#include "pond/transport/sim/sim_fabric.h"

namespace pond::node {

class WorkerContext;

struct SimCpuStats {
  uint64_t rounds = 0;
  uint64_t busy_ns = 0;
};

// One core's share of SimCpuStats: which address it serves now (a restarted CN's core keeps its
// address and its counts).
struct SimCoreStats {
  WorkerAddr addr;
  SimCpuStats cpu;
};

class SimDriver {
 public:
  SimDriver(sim::Engine& engine, SimFabric& fabric) : engine_(engine), fabric_(fabric) {}

  // Takes over the worker's wake-ups. Call once per worker, before any work is spawned.
  void AddWorker(WorkerContext* w);
  // The same for a bare scheduler and its endpoint (a benchmark below the transaction layer, such
  // as the B+Tree's): one core that runs `sched`'s rounds and posts through `ep`.
  void AddCore(Scheduler& sched, Endpoint& ep);
  // Steps the engine until done() holds; false if the simulation ran out of events first.
  template <typename Done>
  bool RunUntil(Done&& done) {
    while (!done()) {
      if (!engine_.Step()) return false;
    }
    return true;
  }

  SimCpuStats cpu_stats() const;
  // Every core's, in the order they were added.
  std::vector<SimCoreStats> core_stats() const;
  // The workers of CN `cn` crashed: they run no more rounds (their coroutines stay parked).
  void StopCn(uint16_t cn);
  // CN `cn` restarted: `workers` (its new incarnation's, in index order) take over the cores
  // of the stopped ones, which never run again.
  void RestartCn(uint16_t cn, const std::vector<WorkerContext*>& workers);
  // The same for one core of a restarted CN that is not a worker's (its membership's): `sched`
  // and `ep`, at the address of a stopped core, take it over.
  void RestartCore(Scheduler& sched, Endpoint& ep);

 private:
  struct Core {
    Scheduler* sched = nullptr;
    Endpoint* ep = nullptr;
    uint64_t busy_until_ns = 0;
    bool queued = false;                  // a round is scheduled
    uint64_t timer_wake_ns = UINT64_MAX;  // earliest timer wake-up scheduled
    uint64_t resumes_seen = 0;
    bool stopped = false;
    uint32_t incarnation = 0;  // events of an earlier one find it changed and do nothing
    SimCpuStats stats;
  };
  // `sched` and `ep` take over the stopped `core` as a new incarnation of it.
  void Rebind(size_t core, Scheduler& sched, Endpoint& ep);
  void Wake(size_t core);
  void Round(size_t core);
  void WakeForTimer(size_t core, uint64_t at_ns);

  sim::Engine& engine_;
  SimFabric& fabric_;
  std::vector<Core> cores_;
  std::unordered_map<uint32_t, size_t> core_of_;  // worker address -> core; looked up only
};

}  // namespace pond::node
