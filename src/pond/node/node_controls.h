// NodeControls: the compute node's controls (recovery/cn_controls.h), one implementation for
// every deployment. What the recovery machine asks of a CN — apply an epoch on its workers, open
// and close shards, release a dead CN's locks, copy onto a rejoining MN, gate commits, check its
// links — is done here, to the CN's CnContext and workers, in the simulator exactly as in a
// `pond cn` process, so every fault seed runs the daemons' controls too.
//
// What differs between the deployments is left to a subclass: how code reaches the workers'
// threads (at once in the simulator, which runs every CN on one thread; posted to the worker's
// inbox in a process, from the membership's threads), how a restarted peer is reached over the
// fabric, what fencing does, where events go; and the simulator's own checks and counts.
//
// Thread rules: called by the machine (one thread at a time); what touches a worker runs on its
// thread, through Post or OnWorkers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pond/cluster.h"
#include "pond/recovery/cn_controls.h"
#include "pond/recovery/cn_membership.h"

namespace pond::txn {
class TimestampOracle;
}  // namespace pond::txn

namespace pond::node {

class ClusterImpl;
class CnContext;
class WorkerContext;

// The membership machine's options for the cluster's resharding settings (docs/resharding.md):
// its load and locality policies, and the drain bound of a move.
inline void SetReshardOptions(const ClusterConfig& c, recovery::MembershipOptions* o) {
  const ReshardConfig& r = c.reshard;
  using P = ReshardConfig::Policy;
  o->load =
      recovery::LoadPolicyOptions{.on = r.policy == P::kLoad || r.policy == P::kBoth,
                                  .locality = r.policy == P::kLocality || r.policy == P::kBoth,
                                  .interval_ns = r.interval_ns,
                                  .over = r.over,
                                  .intervals = r.intervals};
  o->move_drain_ns = r.drain_ns;
}

class NodeControls : public recovery::CnControls {
 public:
  // The controls of CN `cn` of `cl`. `cluster_follows`: the cluster's own view (placement and
  // shard map) is this CN's, as in a process that runs this one CN; in the simulator the cluster
  // keeps the newest configuration's, and each CN its own.
  NodeControls(ClusterImpl& cl, uint16_t cn, bool cluster_follows);
  ~NodeControls() override;
  NodeControls(const NodeControls&) = delete;
  NodeControls& operator=(const NodeControls&) = delete;

  bool ApplyOnWorkers(const cluster::Configuration& next, const std::vector<uint16_t>& failed,
                      const std::vector<uint16_t>& restarted, bool oracle_moved) override;
  void MoveOracle(uint16_t host) override;
  void AssignShard(uint32_t s, uint16_t cn) override;
  uint16_t ShardOwner(uint32_t s) const override;
  void OpenShard(uint32_t s) override;
  void CloseShard(uint32_t s) override;
  std::optional<size_t> LocksHeldIn(const std::vector<uint32_t>& shards) override;
  std::optional<recovery::CnLoad> Load() override;
  uint16_t ShardHome(uint32_t s) const override;
  void StopReading(MnId mn) override;
  void MarkDown(MnId mn) override;
  void MnJoining(MnId mn) override;
  void MnFrozen(MnId mn) override;
  void MnUp(MnId mn) override;
  std::vector<uint64_t> TxnMark() override;
  std::optional<bool> EndedSince(const std::vector<uint64_t>& mark) override;
  // Copiers (one per worker, taking units from one queue) and the cursors' sync run as
  // coroutines on the workers; what they did is read here, on the machine's thread.
  void StartCopy(MnId mn, std::vector<recovery::CopyUnit> units) override;
  std::optional<Result<uint64_t>> CopyResult(MnId mn) override;
  void StartSync(MnId mn) override;
  std::optional<Status> SyncResult() override;
  void SetVisibleGate(bool closed) override;
  std::optional<size_t> CommitsMidVisible() override;
  bool ReleaseLocksOf(uint16_t dead, uint16_t incarnation) override;
  std::optional<size_t> LiveContacting(uint16_t dead) override;
  std::optional<uint64_t> CheckLinks(uint64_t probe, uint64_t quiet_ns,
                                     uint64_t silent_ns) override;
  const store::Catalog& catalog() const override;
  const store::Placement& placement() const override;

  // A copy under way takes no more units (the CN stops); what is left is copied again by
  // whoever copies next, as a copy is idempotent.
  void StopCopying();

 protected:
  // Runs `fn` on worker `w`'s thread, between its rounds.
  virtual void Post(WorkerContext& w, std::function<void(WorkerContext&)> fn) = 0;
  // Runs `fn` on every worker of this CN, each on its thread, and waits for them all: the sum of
  // what they answer; nullopt if the CN stopped first.
  virtual std::optional<size_t> OnWorkers(const std::function<size_t(WorkerContext&)>& fn) = 0;

  // The simulator's checks and counts (a process has none): routed calls that ended unknown
  // when their peer was declared; a new timestamp oracle; a shard about to move from `from`.
  virtual void CallsUnknown(size_t /*calls*/) {}
  virtual void OracleMade(const txn::TimestampOracle& /*oracle*/) {}
  virtual void ShardMoving(uint32_t /*s*/, uint16_t /*from*/, uint16_t /*to*/) {}
  // Called by the copiers, on the workers' threads, with the slots of each unit they copied. A
  // function the copy keeps rather than a method: copiers may outlive these controls (a process
  // stops its membership before its workers stop serving).
  virtual std::function<void(uint64_t slots)> CopyCounter(MnId /*mn*/) { return {}; }

  CnContext& Me() const;

  ClusterImpl& cl_;
  const uint16_t cn_;

 private:
  struct CopyJob;
  struct SyncJob;
  // Changes this CN's placement (and the cluster's, if it follows).
  void ChangePlacement(const std::function<void(store::Placement&)>& change);

  const bool cluster_follows_;
  // By rejoining MN: its latest copy (two MNs may rejoin at once, each copied by every CN).
  std::map<MnId, std::shared_ptr<CopyJob>> copies_;
  std::shared_ptr<SyncJob> sync_;
};

}  // namespace pond::node
