// Test support for the B+Tree: a tree space on a local or simulated pool, and workers to drive
// it. For tests only (setup errors are POND_CHECKs).
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "pond/base/assert.h"
#include "pond/btree/btree.h"
#include "pond/btree/tree_check.h"
#include "pond/runtime/clocks.h"
#include "pond/runtime/scheduler.h"
#include "pond/sim/engine.h"
#include "pond/transport/local/local_fabric.h"
#include "pond/transport/sim/sim_fabric.h"
#include "pond/transport/test_worker.h"

namespace pond::btree::testing {

// A tree on every MN of a pool: each region from 4 KiB to its end.
inline TreeSpace WholePoolSpace(uint16_t mns, uint64_t region_bytes, uint32_t lock_count = 1024,
                                uint64_t chunk_bytes = 64 << 10) {
  TreeSpace s;
  for (MnId m = 0; m < mns; m++) s.ranges.push_back(MnRange{m, 4096, region_bytes});
  s.lock_count = lock_count;
  s.chunk_bytes = chunk_bytes;
  return s;
}

inline std::unique_ptr<LocalFabric> LocalPool(uint16_t mns, uint64_t region_bytes) {
  auto f = LocalFabric::Create(mns, region_bytes);
  POND_CHECK_MSG(f.ok(), f.status().ToString().c_str());
  return std::move(f).value();
}

using Worker = pond::testing_transport::Worker;

// A simulated cluster: `cns` CNs of one worker each on a SimFabric; a worker with work runs one
// round at the current virtual time, with no CPU cost (as in the transport's own tests).
struct SimCluster {
  sim::Engine engine;
  std::unique_ptr<SimFabric> fabric;
  struct SimWorker {
    std::unique_ptr<Scheduler> sched;
    std::unique_ptr<Endpoint> ep;
    bool queued = false;
    bool down = false;  // crashed: runs no more rounds
  };
  std::vector<SimWorker> workers;

  SimCluster(int cns, uint16_t mns, uint64_t region_bytes, uint64_t seed) : engine(seed) {
    auto f = SimFabric::Create(engine, Testbed{}, mns, region_bytes);
    POND_CHECK(f.ok());
    fabric = std::move(f).value();
    workers.resize(static_cast<size_t>(cns));
    for (int i = 0; i < cns; i++) {
      SimWorker& w = workers[static_cast<size_t>(i)];
      w.sched = std::make_unique<Scheduler>(engine.clock());
      w.ep = fabric->CreateEndpoint(WorkerAddr{static_cast<uint16_t>(i), 0}, *w.sched);
      w.sched->SetWakeHook([this, i] { Wake(i); });
    }
    fabric->SetPacketHook([this](WorkerAddr a) { Wake(a.cn); });
  }
  ~SimCluster() {
    for (auto& w : workers) w.sched->DestroyUnfinished();
  }
  void Wake(int i) {
    SimWorker& w = workers[static_cast<size_t>(i)];
    if (w.queued) return;
    w.queued = true;
    engine.At(engine.now(), [this, i] {
      SimWorker& w = workers[static_cast<size_t>(i)];
      w.queued = false;
      if (w.down) return;
      w.sched->RunOnce();
      fabric->Launch(WorkerAddr{static_cast<uint16_t>(i), 0}, engine.now());
      if (w.sched->has_ready()) {
        Wake(i);
      } else if (const uint64_t t = w.sched->NextTimerNs(); t != UINT64_MAX) {
        // A coroutine sleeps (a write-back waiting for an MN to be declared down): run the
        // worker again when it wakes.
        engine.At(std::max(t, engine.now()), [this, i] { Wake(i); });
      }
    });
  }
  void Run() {
    while (engine.Step()) {
    }
  }
  // Runs at most `events` events; false once nothing is left to run.
  bool RunFor(uint64_t events) {
    for (uint64_t i = 0; i < events; i++) {
      if (!engine.Step()) return false;
    }
    return true;
  }
  // CN `cn` crashes now: the fabric's crash (its batches in flight land or not), and its worker
  // runs no more rounds; its coroutines stay parked until the cluster goes.
  void Crash(int cn) {
    fabric->CrashCn(static_cast<uint16_t>(cn));
    workers[static_cast<size_t>(cn)].down = true;
  }
};

}  // namespace pond::btree::testing
