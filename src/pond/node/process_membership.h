// ProcessMembership: runs the membership and recovery machine (recovery/cn_membership.h) for
// one CN of a cluster of processes (`pond cn` daemons), and is the CN's controls it acts
// through (recovery/cn_controls.h). docs/recovery.md "Processes" argues the machine.
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
#include "pond/recovery/cn_controls.h"
#include "pond/recovery/cn_membership.h"
#include "pond/recovery/cn_start.h"
#include "pond/runtime/scheduler.h"
#include "pond/transport/endpoint.h"

namespace pond::node {

class ClusterImpl;
class WorkerContext;

class ProcessMembership final : public recovery::CnControls {
 public:
  explicit ProcessMembership(ClusterImpl& cl);
  ~ProcessMembership() override;
  ProcessMembership(const ProcessMembership&) = delete;
  ProcessMembership& operator=(const ProcessMembership&) = delete;

  // Starts the threads; the cluster serves by now (tasks go to the workers' inboxes).
  void Start();
  // Stops the threads; recovery work left undone is another CN's to finish.
  void Stop();
  // This CN is alive in the newest epoch applied (a restarted one: once it was let back in).
  bool alive() const { return machine_->alive(); }

  // recovery::CnControls.
  bool ApplyOnWorkers(const cluster::Configuration& next, const std::vector<uint16_t>& failed,
                      const std::vector<uint16_t>& restarted, bool oracle_moved) override;
  Status ReachRestarted(uint16_t cn, uint16_t incarnation) override;
  void MoveOracle(uint16_t host) override;
  void AssignShard(uint32_t s, uint16_t cn) override;
  uint16_t ShardOwner(uint32_t s) const override;
  void OpenShard(uint32_t s) override;
  void CloseShard(uint32_t s) override;
  std::optional<size_t> LocksHeldIn(const std::vector<uint32_t>& shards) override;
  uint16_t ShardHome(uint32_t s) const override;
  void StopReading(MnId mn) override;
  void MarkDown(MnId mn) override;
  Status ReachRestartedMn(MnId mn, uint16_t incarnation) override;
  void MnJoining(MnId mn) override;
  void MnFrozen(MnId mn) override;
  void MnUp(MnId mn) override;
  std::vector<uint64_t> TxnMark() override;
  std::optional<bool> EndedSince(const std::vector<uint64_t>& mark) override;
  // Copiers and the cursors' sync run as coroutines on the workers (posted to their threads);
  // what they did is read here, on the membership's thread.
  void StartCopy(MnId mn, std::vector<recovery::CopyUnit> units) override;
  std::optional<Result<uint64_t>> CopyResult() override;
  void StartSync(MnId mn) override;
  std::optional<Status> SyncResult() override;
  void SetVisibleGate(bool closed) override;
  std::optional<size_t> CommitsMidVisible() override;
  bool ReleaseLocksOf(uint16_t dead) override;
  std::optional<size_t> LiveContacting(uint16_t dead) override;
  std::optional<uint64_t> CheckLinks(uint64_t probe, uint64_t quiet_ns,
                                     uint64_t silent_ns) override;
  const store::Catalog& catalog() const override;
  const store::Placement& placement() const override;
  void Event(const std::string& line) override;
  [[noreturn]] void Fence(const std::string& why) override;

 private:
  void Loop();
  void CoordLoop();
  // Runs `fn` on every worker of this CN, on its thread, and waits for them all; the sum of
  // what they answer. False in *ok if the cluster stopped first.
  size_t OnWorkers(const std::function<size_t(WorkerContext&)>& fn, bool* ok);

  // A copy onto a rejoining MN, or its cursors' sync, running on the workers: they take units
  // under `mu` and count down `running`; the membership's thread reads the outcome.
  struct CopyJob {
    std::mutex mu;
    std::deque<recovery::CopyUnit> todo;
    Status error;
    std::atomic<int> running{0};
    std::atomic<uint64_t> slots{0};
    std::atomic<bool> stop{false};  // the CN stops: take no more units
  };
  struct SyncJob {
    std::atomic<bool> done{false};
    Status status;  // written before done
  };

  ClusterImpl& cl_;
  const uint16_t cn_;
  Scheduler sched_;
  std::unique_ptr<Endpoint> ep_;  // to the memory pool; it sends no packets
  std::unique_ptr<recovery::CnMembership> machine_;
  std::thread thread_, coord_thread_;
  std::atomic<bool> stop_{false};
  std::shared_ptr<CopyJob> copy_;
  std::shared_ptr<SyncJob> sync_;
  // Wakes the coordination thread before its period ends: the configuration's watch fired, or
  // Stop. Shared with the watch's callback, which the store keeps as long as it lives.
  struct Wake {
    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;
  };
  std::shared_ptr<Wake> wake_ = std::make_shared<Wake>();
};

}  // namespace pond::node
