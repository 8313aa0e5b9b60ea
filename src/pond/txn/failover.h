// Failover: surviving CN crashes in a simulated cluster (Lotus §6 and beyond; docs/recovery.md).
//
// The pieces, each on its own simulated node or CN:
//   - Leases. Every live CN renews its lease with the configuration manager (CM) every
//     kRenewEveryNs; the CM declares a CN failed once kLeaseNs have passed without a renewal.
//   - The CM decides the next epoch (the CN dead; its shards handed to survivors, closed) and
//     writes it to the coordination service by a conditional put — the reconfiguration's commit
//     point — then tells every survivor.
//   - Each survivor, on the new epoch: refuses the dead incarnation's packets, refuses its
//     requests awaiting the dead CN (lock requests: Conflict; routed calls: Unknown), and reports
//     "drained" once none of its transactions that asked the dead CN for a lock is live.
//   - Transaction recovery: each of the dead CN's commit logs is recovered by a survivor worker
//     (cluster/log_recovery.h). When all are, every survivor releases the locks the dead CN's
//     transactions held in its lock table (Lotus §6 step 1's order: recover, then release).
//   - Once recovered, released everywhere and drained everywhere, the new owners start serving
//     the dead CN's shards from empty lock tables (step 2): nobody still relies on a lock the
//     dead table held, and no cell it guarded is left INVISIBLE.
//   - Restart (restart-cn): once its failure is recovered and its shards open elsewhere, the CN
//     comes back as a new incarnation — empty lock table and caches, its old logs (zeroed by
//     recovery) — by an epoch that names it alive again. Every CN hears it, and its clients
//     start. Then its shards come home one holder at a time: the holder closes them, waits until
//     its table holds no lock in them, and the map gives them back; the restarted CN opens them.
//     No shard is ever managed by two CNs, and none is opened while a lock in it is held.
//   - MNs (failover_mn.cc): an MN's crash is declared by its lease; every CN then reads the
//     replicas left. A restarted MN comes back blank, takes writes, gets its replicas copied
//     under the keys' locks, its lane cursors set in step, and is read again (Rejoin).
//
//   - Partitions (partition-cn): a CN cut off from the CM and the other CNs keeps running until
//     its own count of its lease ends, then stops itself (fences) as a crash; the CM declares it
//     only later (docs/recovery.md "Partitions and fencing" says why the timings make that so,
//     and Declare checks it). Healed before, it goes on; healed after, it restarts.
//
// Timing (why a crashed CN cannot still act when others take over): in the simulator a crashed
// CN stops at once; its packets still in flight are dropped on arrival, and its packets are
// refused by incarnation, a restarted CN's new incarnation's accepted. A live but cut-off CN has
// stopped itself before the CM declares it (the fencing rule above).
//
// Thread rules: the simulator's thread only; everything runs in engine events and in coroutines
// on the workers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "pond/cluster.h"
#include "pond/cluster/membership.h"
#include "pond/sim/engine.h"
#include "pond/transport/gaddr.h"
#include "pond/txn/sim_faults.h"

namespace pond::txn {

class ClusterImpl;
class CnContext;
class TimestampOracle;
class WorkerContext;

inline constexpr uint64_t kLeaseNs = 2'000'000;     // FaRM uses 5-10 ms on its network
inline constexpr uint64_t kRenewEveryNs = 500'000;  // four renewals per lease
// A CN's own count of its lease: from when it sent the renewal the CM acknowledged, shortened by
// a bound on how much faster its clock may run than the CM's (1%). The CM counts kLeaseNs from
// when it received that renewal, so the CN's lease always ends first (docs/recovery.md
// "Partitions and fencing"). Simulated clocks agree; the margin is there for real ones.
inline constexpr uint64_t kCnLeaseNs = kLeaseNs - kLeaseNs / 100;
inline constexpr uint64_t kConfigPutNs = 100'000;  // a conditional put to the service
// How often the CM (or a CN) looks again at what it waits for: transactions to end, a
// declaration, a recovery.
inline constexpr uint64_t kDrainPollNs = 10'000;

class Failover final : public SimFaults {
 public:
  explicit Failover(ClusterImpl& cl);
  ~Failover() override;

  Status Validate(const std::vector<NodeFault>& faults) const override;
  // Also arms the leases; Disarm stops them.
  void Arm(const std::vector<NodeFault>& faults) override;
  void Disarm() override;
  bool Idle() const override;
  bool IsCrashed(uint16_t cn) const override { return crashed_[cn]; }
  bool IsMnCrashed(MnId mn) const { return mn_crashed_[mn]; }
  FailoverStats Stats() const override;

 private:
  struct Failure;
  struct Return;
  // A CN's crashes, restarts, cuts and heals happen in their order: one that comes while a
  // restart waits for the recovery before it waits too. `first`: ahead of those waiting (a
  // rejoin the CN itself starts).
  void Enqueue(uint16_t cn, NodeFaultKind kind, bool first = false);
  void RunQueue(uint16_t cn);
  // A crash-cn aimed at `step` (NodeFault::step) is due: it waits in the CN's queue until one of
  // the CN's transactions reaches the step (OnStep), at most kStepCrashWaitNsMax.
  void AimCrash(uint16_t cn, CommitStep step);
  // A transaction of `cn` reached `step` (WorkerContext::Reached).
  void OnStep(uint16_t cn, CommitStep step);
  void Crash(uint16_t cn);
  // partition-cn: `cn` is cut off from the CM and the other CNs (not from the memory pool).
  // False if it must wait: it would leave no CN serving.
  bool Cut(uint16_t cn);
  // CNs other than `cn` neither crashed nor cut off.
  int ServingBesides(uint16_t cn) const;
  // heal-cn: its links come back. If it had not fenced itself, it goes on; if it had, it comes
  // back as a new incarnation, as restart-cn brings a crashed CN (false: that must wait).
  bool Heal(uint16_t cn);
  // `cn`'s own count of its lease ended with no renewal acknowledged: it stops serving — its
  // transactions, committing ones included, end as at a crash (recovery decides from the logs).
  void Fence(uint16_t cn);
  // The CM's acknowledgement of a renewal `cn` sent at `sent_ns` reaches it.
  void CnLeaseRenewed(uint16_t cn, uint16_t inc, uint64_t sent_ns);
  void ArmFence(uint16_t cn);
  // A control message between the CM and `cn`, either way, arrives: `fn` runs now — or, while
  // `cn` is cut off, once it heals (both ends send again until acknowledged) or fences itself
  // (then it finds `cn` crashed, as a message on the wire at a crash does).
  void Arrive(uint16_t cn, std::function<void()> fn);
  // Restarts the CN if its last failure is recovered; false if it must wait.
  bool Restart(uint16_t cn);
  // The restarted CN `cn` (incarnation `inc`) takes back the shards it managed before.
  void StartReturn(uint16_t cn, uint16_t inc);
  // The holder closes the shards it gives back, and reports once no lock in them is held.
  void CloseForReturn(Return& r, uint64_t one_way);
  void OnReturnDrained(Return& r);
  // The restarted CN opens the shards it got back.
  void OpenReturned(Return& r);
  // MN crashes and restarts (failover_mn.cc; docs/recovery.md "MN crash", "MN restart").
  // A crash that would leave a group with no full copy (more than R-1 MNs down or rejoining)
  // waits until a rejoining MN is up.
  void CrashMn(MnId mn);
  // Restarts a crashed MN once its failure is declared: blank memory laid out as before, named
  // rejoining by an epoch; then its replicas are copied to it and its cursors brought into step
  // (struct Rejoin's phases), and a last epoch makes it readable.
  void RestartMn(MnId mn);
  // A crash or restart that must wait is tried again a poll later.
  void RetryMnFaultLater(NodeFaultKind kind, MnId mn);
  struct Rejoin;
  // Each step of a rejoin waits until every transaction that began before the epoch that
  // started it has ended: then none acts on the view before it.
  void CaptureFloors(Rejoin& r);
  bool FloorsPassed(const Rejoin& r) const;
  void PollRejoin(Rejoin& r);
  void StartCopy(Rejoin& r);
  void SpawnCopier(Rejoin& r, uint16_t cn, uint16_t worker);
  void CopyDone(Rejoin& r);
  void StartSync(Rejoin& r);
  void RejoinEpoch(Rejoin& r, cluster::MnStatus::Rejoin state);
  void OpenWhenNoCommitIsMidVisible(Rejoin& r, uint64_t epoch);
  // A CN declared failed gives back the rejoin work it held.
  void RejoinCnFailed(uint16_t dead);
  int MnsNotReadable() const;
  void LeaseTick();
  void Declare(uint16_t cn);
  // An MN's lease expired: a new epoch without it; every CN then reads the replicas left, and
  // writes skip it (docs/recovery.md "MN crash").
  void DeclareMn(MnId mn);
  void StartLogRecovery(uint16_t dead, uint16_t worker, uint16_t survivor);
  // `cn` hears the newest epoch: its view changes, and if the oracle moved, its workers ask the
  // new host — or, on the new host, serve from a new oracle.
  void Hear(CnContext& cn);
  // `cn` hears `epoch` (an MN's) if it has not heard a newer one, once the message arrives.
  void HearLater(uint16_t cn, uint64_t epoch);
  void OnEpoch(uint16_t survivor, uint16_t dead, uint64_t epoch);
  void OnRecovered(uint16_t dead, uint16_t worker, uint16_t by, uint64_t rolled_forward,
                   uint64_t rolled_back, uint64_t records);
  void OnReleased(uint16_t dead, uint16_t by);
  void OnDrained(uint16_t dead, uint16_t by);
  // Notes a failure recovered once every log is and every survivor released its locks, and
  // opens the moved shards once every failure is recovered and drained.
  void MaybeFinish(Failure& f);
  Failure& FailureOf(uint16_t cn);

  ClusterImpl& cl_;
  sim::Engine& engine_;
  cluster::InMemoryConfigStore store_;
  cluster::Configuration config_;
  uint64_t config_version_ = 0;
  std::vector<bool> crashed_;           // by CN: stopped (the truth, which the CM learns late)
  std::vector<uint64_t> renewed_ns_;    // by CN: when the CM last heard a renewal
  std::vector<uint64_t> lease_end_ns_;  // by CN: when its own count of its lease ends
  std::vector<bool> partitioned_;       // by CN: cut off (the truth, which the CM never learns)
  std::vector<std::vector<std::function<void()>>> parked_;  // by CN: control messages held by a cut
  std::vector<FailoverStats::Partition> partitions_;
  std::vector<std::unique_ptr<Failure>> failures_;
  std::vector<bool> mn_crashed_;         // by MN: the truth
  std::vector<uint64_t> mn_renewed_ns_;  // by MN: when the CM last heard its renewal
  std::vector<FailoverStats::MnFailure> mn_failures_;
  std::vector<std::unique_ptr<Rejoin>> rejoins_;
  int mn_faults_waiting_ = 0;  // restarts waiting for their declaration, crashes for a rejoin
  uint64_t base_ns_ = 0;       // the start of the run the schedule counts from
  bool leases_armed_ = false;
  uint64_t generation_ = 0;  // events of an earlier Arm that find it changed do nothing
  uint64_t faults_not_reached_ = 0;
  uint64_t unknown_calls_ = 0;
  uint64_t handed_on_ = 0;
  uint64_t tso_moves_ = 0;
  const TimestampOracle* oracle_;  // the one granting now (the old one lives as long as we do)
  std::vector<std::vector<NodeFaultKind>> queued_;  // by CN: reached, not done yet, in order
  struct StepAim {
    CommitStep step = CommitStep::kNone;  // the step a due crash of the CN waits for
    uint64_t token = 0;                   // tells the deadline of this aim from older ones
  };
  std::vector<StepAim> step_aims_;  // by CN
  uint64_t step_crashes_[kCommitSteps] = {};
  uint64_t step_crashes_unaimed_ = 0;
  size_t queued_count_ = 0;
  int booting_ = 0;          // restarted, clients not started yet
  int returns_pending_ = 0;  // shard returns under way
  std::vector<std::unique_ptr<Return>> returns_;
};

}  // namespace pond::txn
