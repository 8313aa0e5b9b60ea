// ProcessMembership: runs the membership and recovery machine (recovery/cn_membership.h) for
// one CN of a cluster of processes (`pond cn` daemons), and is the CN's controls it acts
// through: NodeControls, the same the simulated CNs have, reaching the workers by posting to
// their inboxes. docs/recovery.md "Processes" argues the machine.
//
// Thread rules: two threads of its own (Start to Stop): the beat thread runs the machine's beat
// half on a scheduler and endpoint only it uses (beats, lease pages, log recoveries), and the
// coordination thread its coordination half, which talks to the coordination service and
// reaches the workers' own state (their views, lock clients, routed calls) through tasks it
// posts to their inboxes while the cluster serves. A slow coordination service then delays
// declarations, never beats. The coordination half runs once a period, and at once when a new
// configuration is put (a ZooKeeper watch on its key): every CN applies an epoch as soon as the
// service has it, not up to a period later.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pond/cluster/membership.h"
#include "pond/node/node_controls.h"
#include "pond/recovery/cn_membership.h"
#include "pond/recovery/cn_start.h"
#include "pond/runtime/scheduler.h"
#include "pond/transport/endpoint.h"

namespace pond::cluster {
class ZkConfigStore;
}  // namespace pond::cluster

namespace pond::deploy {

class ProcessMembership final : public node::NodeControls {
 public:
  // The membership of the one CN `cl` runs, agreeing with the others through `coord`.
  ProcessMembership(node::ClusterImpl& cl, cluster::ZkConfigStore& coord);
  ~ProcessMembership() override;

  // Starts the threads; the cluster serves by now (tasks go to the workers' inboxes).
  void Start();
  // Stops the coordination thread, which posts to the workers; the beats go on (a stopping
  // CN's workers end while it keeps its lease).
  void PauseCoordination();
  // A clean stop, once the workers ended: the beats say this CN left (CnMembership::Leave),
  // until every MN up took one or half a lease passed.
  void Leave();
  // Stops the threads; recovery work left undone is another CN's to finish.
  void Stop();
  // This CN is alive in the newest epoch applied (a restarted one: once it was let back in).
  bool alive() const { return machine_->alive(); }

  // What NodeControls leaves to a deployment: a restarted peer is reached at the address its
  // process published; fencing exits.
  Status ReachRestarted(uint16_t cn, uint16_t incarnation) override;
  Status ReachRestartedMn(MnId mn, uint16_t incarnation) override;
  void Event(const std::string& line) override;
  [[noreturn]] void Fence(const std::string& why) override;

 private:
  void Post(node::WorkerContext& w, std::function<void(node::WorkerContext&)> fn) override;
  std::optional<size_t> OnWorkers(const std::function<size_t(node::WorkerContext&)>& fn) override;
  void Loop();
  void CoordLoop();

  cluster::ZkConfigStore& coord_;
  Scheduler sched_;
  std::unique_ptr<Endpoint> ep_;  // to the memory pool; it sends no packets
  std::unique_ptr<recovery::CnMembership> machine_;
  std::thread thread_, coord_thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> coord_stop_{false};  // PauseCoordination, or Stop
  // Wakes the coordination thread before its period ends: the configuration's watch fired, or
  // Stop. Shared with the watch's callback, which the store keeps as long as it lives.
  struct Wake {
    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;
  };
  std::shared_ptr<Wake> wake_ = std::make_shared<Wake>();
};

}  // namespace pond::deploy
