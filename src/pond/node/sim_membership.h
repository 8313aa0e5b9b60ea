// SimMembership: a simulated cluster's node faults carried out, and recovered from, by the very
// membership and recovery machine each `pond cn` daemon runs (recovery/cn_membership.h) — one
// machine per simulated CN, driven from engine events instead of a daemon's threads
// (docs/recovery.md "One machine").
//
// What the simulator supplies is what a daemon's process would:
//   - the coordination service: one in-memory store every CN reaches at once (no latency), down
//     from crash-coord to restart-coord, through a wrapper that watches each configuration put —
//     the fencing rule is checked there: a CN declared failed has stopped serving;
//   - the lease pages: in the memory pool, written and read by each CN's machine over its own
//     endpoint (a core of its own, beside the workers'), and each MN's own beat, counted up by
//     the MN's CPU every period;
//   - the controls (recovery/cn_controls.h) over the simulated CN's workers, lock table and
//     caches, shard map and placement: each simulated CN keeps its own copy of the view and
//     applies an epoch when its machine reads it, as a daemon does;
//   - the faults: crash-cn (at a time, or at a commit step), restart-cn (the CN starts as a
//     daemon does: recovery/cn_start.h, as a new incarnation once its old one is declared
//     failed, let back in by the configuration manager, its shards then coming home), crash-mn,
//     restart-mn (blank memory laid out from the catalog once the MN is declared down, its beat,
//     and its request to rejoin: the machines copy its replicas back, recovery/mn_rejoin.h). A CN
//     that fences itself is crashed and restarts, as a daemon's supervisor would restart it.
//
//   - partition-cn cuts the CN off from the other CNs and from the coordination service, not
//     from the memory pool; the machines' reports in the lease pages make it fence itself, and
//     heal-cn brings it back (a restart if it fenced).
//   - partition-host cuts CN N and MN N off together (scripts/hosts.sh's host N): CN N as by
//     partition-cn and reaching MN N alone, MN N running but reached by nobody else. The CM
//     declares MN N; CN N fences by the lease rule before anyone declares it. heal-host brings
//     both back: CN N as heal-cn does, MN N — if declared meanwhile — as restart-mn does, blank.
//   - cut-hosts X-Y cuts the link between hosts X and Y alone: CN X loses CN Y and MN Y, CN Y
//     loses CN X and MN X, and both reach the rest and the service. Each CN fences once the
//     reports show the others reach the MN it cannot (docs/recovery.md "An MN one CN cannot
//     reach"); a CM on one of them declares the other's MN. heal-hosts brings back what fenced
//     and what was declared, as heal-host does.
//
// Thread rules: the simulator's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pond/cluster.h"
#include "pond/cluster/membership.h"
#include "pond/node/sim_faults.h"
#include "pond/recovery/cn_membership.h"
#include "pond/recovery/cn_start.h"
#include "pond/sim/engine.h"

namespace pond::txn {
class TimestampOracle;
}  // namespace pond::txn

namespace pond::node {

class ClusterImpl;

// The machine's lease in the simulator: 2 ms, within FaRM's 5-10 ms on a slower network, and the
// lease every recovery figure of docs/perf.md was measured with.
inline constexpr uint64_t kSimLeaseNs = 2'000'000;

class SimMembership final : public SimFaults {
 public:
  explicit SimMembership(ClusterImpl& cl);
  ~SimMembership() override;
  SimMembership(const SimMembership&) = delete;
  SimMembership& operator=(const SimMembership&) = delete;

  Status Validate(const std::vector<NodeFault>& faults) const override;
  // The first Arm with faults starts every CN's machine; from then on each runs a period of
  // both halves every lease / 10 while a run goes on (Disarm pauses them, the next Arm resumes).
  void Arm(const std::vector<NodeFault>& faults) override;
  void Disarm() override;
  bool Idle() const override;
  bool IsCrashed(uint16_t cn) const override;
  FailoverStats Stats() const override;

 private:
  class Controls;
  class Store;
  class CnStore;
  struct Node;

  // Every CN starts its machine (the cluster's first start, as `pond up` does it).
  void Start();
  // CN `cn` starts as `start` says: its machine, its own core and endpoint, its logs published.
  void StartNode(uint16_t cn, const recovery::CnStart& start);
  // A period of every MN's beat; and of CN `cn`'s machine, at that CN's own phase.
  void Tick(uint64_t generation);
  void TickCn(uint16_t cn, uint64_t generation);
  // A configuration was put: what it declared, checked against the truth, and timed.
  void OnConfig(const cluster::Configuration& next);
  // Which failures are recovered and open now, by the steps the machines put.
  void PollFailures();

  // A CN's faults happen in their order; one that must wait (a crash that would leave no CN
  // serving, a restart before the old incarnation is declared) holds up the later ones.
  void Enqueue(uint16_t cn, NodeFaultKind kind, bool first = false);
  void RunQueue(uint16_t cn);
  void AimCrash(uint16_t cn, CommitStep step);
  void OnStep(uint16_t cn, CommitStep step);
  int ServingBesides(uint16_t cn) const;
  // Whether a crash-cn of `cn` may go ahead now that the cluster would survive it, or is given up
  // after waiting kMnsOutWaitNsMax for that (then crash_given_up_[cn] is set).
  bool CrashSurvived(uint16_t cn);
  void Crash(uint16_t cn, bool fenced);
  // False if it must wait.
  bool Restart(uint16_t cn);
  // partition-cn and heal-cn, or with `host` partition-host and heal-host (MN `cn` too).
  bool Cut(uint16_t cn, bool host);
  bool Heal(uint16_t cn, bool host);
  // cut-hosts and heal-hosts of hosts `x` < `y`, in CN `x`'s turn.
  bool CutHosts(uint16_t x, uint16_t y);
  bool HealHosts(uint16_t x, uint16_t y);
  // Host `h` is cut apart from another now (cut-hosts).
  bool InHostsCut(uint16_t h) const { return h < cut_from_.size() && cut_from_[h] >= 0; }
  // MN `mn`, running but declared while its host was cut off, loses its place: its memory is
  // gone, as a crashed MN's, and it comes back as restart-mn brings one (docs/recovery.md
  // "Partitions and fencing").
  void LoseMnPlace(MnId mn);
  void CrashMn(MnId mn);
  // restart-mn: once the crash-mn it follows has happened (a crash waits, CrashMn), RebootMn.
  void RestartMn(MnId mn);
  // The MN's daemon starts again once its failure is declared: blank, asking to rejoin.
  void RebootMn(MnId mn);
  // Tries `fault` of MN `mn` again a little later (it could not happen yet).
  void RetryMnFault(MnId mn, void (SimMembership::*fault)(MnId));
  // crash-coord (true) and restart-coord (false).
  void SetCoordinationDown(bool down);
  // MNs no CN reads like any replica now: crashed, cut off with their host, declared, leaving,
  // or restarted and not read again yet.
  int MnsOut() const;
  // Whether the cluster survives `mns_out` such MNs, with (`cn_away`) or without a CN down or cut
  // off besides: the counts of sim::FaultLimits (bench/run_faults.cc's LimitsOf).
  bool Survives(int mns_out, bool cn_away) const;
  bool CnAway() const;
  // A CN failed (crashed, or fenced) and not recovered yet, declared or not.
  bool CnFailureOpen() const;
  // A fault that waits for Survives, first found waiting at *since (0: not waiting): false
  // while it may wait on, true once it has waited kMnsOutWaitNsMax (it is given up, counted).
  bool GiveUp(uint64_t* since);

  ClusterImpl& cl_;
  sim::Engine& engine_;
  cluster::InMemoryConfigStore base_;
  std::unique_ptr<Store> store_;
  cluster::Configuration config_;                 // the newest put
  std::vector<std::unique_ptr<Node>> nodes_;      // by CN: its newest incarnation (null: not yet)
  std::vector<std::unique_ptr<Node>> retired_;    // crashed incarnations; their coroutines parked
  const txn::TimestampOracle* oracle_ = nullptr;  // the one granting now
  bool started_ = false;
  uint64_t tick_generation_ = 0;  // ticks of an earlier Arm find it changed and stop
  uint64_t generation_ = 0;       // faults of an earlier Arm find it changed and do nothing
  uint64_t base_ns_ = 0;          // the start of the run the schedule counts from

  struct Failure {
    uint16_t cn = 0, incarnation = 0;
    uint64_t epoch = 0;  // that declared it (0: not yet)
    FailoverStats::Failure stats;
  };
  std::vector<Failure> failures_;
  std::vector<bool> cut_;  // by CN: partitioned now
  std::vector<FailoverStats::Partition> partitions_;
  std::vector<bool> mn_crashed_;
  std::vector<bool> host_cut_;         // by host (CN n with MN n): cut off by partition-host now
  std::vector<uint64_t> host_healed_;  // by host: engine time of its last heal-host (0: none)
  std::vector<int> cut_from_;          // by host: the host it is cut apart from now, or -1
  std::vector<uint64_t> mn_slots_copied_;  // by MN: copied onto it by its current rejoin
  // Waits for Survives (engine time first found waiting; 0: none), and the faults given up, whose
  // heal or restart-cn (by CN) or restart-mn (by MN) comes to nothing.
  std::vector<uint64_t> cut_waiting_since_, crash_waiting_since_, mn_crash_waiting_since_;
  std::vector<bool> cut_given_up_, crash_given_up_, mn_crash_given_up_;
  std::vector<bool> mn_crash_pending_;  // by MN: a crash-mn reached its time and waits
  uint64_t faults_given_up_ = 0;
  int mn_faults_waiting_ = 0;
  std::vector<FailoverStats::MnFailure> mn_failures_;
  std::vector<FailoverStats::CoordOutage> coord_outages_;

  std::vector<std::vector<NodeFaultKind>> queued_;  // by CN: reached, not done yet, in order
  // cut-hosts and heal-hosts take their turn in both CNs' queues, so that each keeps its place
  // among the faults of either host (fault seed 2059: a crash-cn of CN 2 went ahead of a cut of
  // hosts 1 and 2 that waited, and the cut then waited for ever for CN 2 to serve). The lower
  // host's entry does the fault once the other's is at the front of its queue too; the other's
  // waits until it is done.
  struct PairTurn {
    uint16_t peer = 0;
    uint64_t seq = 0;  // of this fault among every pair fault reached
  };
  std::vector<std::vector<PairTurn>> queued_peers_;  // by CN: its queued pair faults, in order
  uint64_t pair_seq_ = 0;
  std::set<uint64_t> pairs_done_;  // done by the lower host, not yet seen by the other
  size_t queued_count_ = 0;
  struct StepAim {
    CommitStep step = CommitStep::kNone;
    uint64_t token = 0;
  };
  std::vector<StepAim> step_aims_;
  uint64_t step_crashes_[kCommitSteps] = {};
  uint64_t step_crashes_unaimed_ = 0;
  uint64_t faults_not_reached_ = 0;
  uint64_t unknown_calls_ = 0;
  uint64_t tso_moves_ = 0;
};

}  // namespace pond::node
