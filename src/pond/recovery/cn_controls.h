// What the membership and recovery machine (cn_membership.h) asks of the compute node it runs
// on, and what it counts there. The node runtime implements CnControls, so the machine reaches
// workers, lock tables, caches and the fabric only through it and stays below them (DESIGN.md
// "Layers": the recovery machine defines the interface, the layer above implements it).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pond/cluster/log_recovery.h"
#include "pond/cluster/membership.h"
#include "pond/status.h"
#include "pond/store/catalog.h"
#include "pond/store/placement.h"
#include "pond/transport/gaddr.h"

namespace pond::recovery {

// What the membership of one CN did, as it saw it (CnStats, the daemons' metrics): the machine
// counts, any thread reads.
struct MembershipCounts {
  std::atomic<uint64_t> epoch{0};
  std::atomic<uint64_t> cns_failed{0}, mns_failed{0}, cns_back{0};
  std::atomic<uint64_t> recoveries{0}, logs_recovered{0}, tso_moves{0};
  std::atomic<bool> coordination_up{true};
  std::atomic<uint32_t> failures_undeclared{0};
};

// A piece of a rejoining MN's index to copy: buckets [first, end) of its sub-index `replica` of
// table `table` (the keys for which it is replica `replica`); or, `tree`, lines [first, end) of
// its copy `replica` of ordered table `table`'s B+Tree range (btree::SpaceLayout::LineAt).
struct CopyUnit {
  uint16_t table = 0;
  uint8_t replica = 0;
  uint64_t first = 0, end = 0;
  bool tree = false;
};

// The CN whose transactions made most of a shard's lock requests, by Boyer–Moore's majority
// vote: `count` is at most the requests `cn` made, so a count of half the shard's requests or
// more means `cn` made at least half; a CN that made more than half is always the one named.
// A count of 0 names no CN.
struct ShardMajority {
  uint16_t cn = 0;
  uint64_t count = 0;
};

// A CN's load since it started (load_policy.h): the transactions its workers committed and
// their summed latency, and the lock requests its table took by shard; and by shard, whose
// transactions made most of the requests since the last Load (each Load starts the vote anew).
struct CnLoad {
  uint64_t txns = 0, latency_ns = 0;
  std::vector<uint64_t> shard_requests;
  std::vector<ShardMajority> majority;
};

class CnControls {
 public:
  virtual ~CnControls() = default;

  // Every worker of this CN takes epoch `next`: its view (packets of the incarnations it holds
  // dead are refused); the requests awaiting a CN of `failed` end (locks: Conflict; routed
  // calls: Unknown); a CN of `restarted` is a peer again; and if `oracle_moved`, timestamps come
  // from the new host (this CN's own oracle if it is the host). Returns once every worker has;
  // false if the CN stopped first.
  virtual bool ApplyOnWorkers(const cluster::Configuration& next,
                              const std::vector<uint16_t>& failed,
                              const std::vector<uint16_t>& restarted, bool oracle_moved) = 0;
  // The restarted CN `cn`'s workers, as its incarnation `incarnation` published them, become
  // reachable from this CN.
  virtual Status ReachRestarted(uint16_t cn, uint16_t incarnation) = 0;
  // The timestamp oracle is on CN `host` from now on; this CN starts one if it is the host (its
  // clock is past the old host's last grant: the old host's lease has ended).
  virtual void MoveOracle(uint16_t host) = 0;

  // The shard map: shard `s` is managed by `cn` from now on (closed in its lock table until
  // opened), and who manages it now.
  virtual void AssignShard(uint32_t s, uint16_t cn) = 0;
  virtual uint16_t ShardOwner(uint32_t s) const = 0;
  // This CN starts serving shard `s` from an empty lock table (its cached versions dropped).
  virtual void OpenShard(uint32_t s) = 0;
  // This CN stops serving shard `s` (to give it back): requests for it are refused from now on.
  virtual void CloseShard(uint32_t s) = 0;
  // This CN's load so far; its lock table counts requests by shard from the first call on.
  // nullopt if the CN stopped.
  virtual std::optional<CnLoad> Load() = 0;
  // Locks held in this CN's lock table in any of `shards` (sorted); nullopt if the CN stopped.
  virtual std::optional<size_t> LocksHeldIn(const std::vector<uint32_t>& shards) = 0;
  // The CN shard `s` starts on, and goes back to when that CN restarts.
  virtual uint16_t ShardHome(uint32_t s) const = 0;

  // MN `mn` is read no more here (writes still reach it), or is down (writes skip it).
  virtual void StopReading(MnId mn) = 0;
  virtual void MarkDown(MnId mn) = 0;

  // A restarted MN rejoining (docs/recovery.md "MN restart"): written, read no more, carves
  // skip its cursors (MnJoining); carves for its groups refused as well (MnFrozen); read like any
  // replica (MnUp).
  // MN `mn` restarted as incarnation `incarnation`, a new process: this CN reaches it where it
  // now serves (what it published), before anything is written to it.
  virtual Status ReachRestartedMn(MnId mn, uint16_t incarnation) = 0;
  virtual void MnJoining(MnId mn) = 0;
  virtual void MnFrozen(MnId mn) = 0;
  virtual void MnUp(MnId mn) = 0;
  // A mark of the transactions this CN runs now; whether every one of them has ended (nullopt
  // if the CN stopped).
  virtual std::vector<uint64_t> TxnMark() = 0;
  virtual std::optional<bool> EndedSince(const std::vector<uint64_t>& mark) = 0;
  // Copies `units` onto the rejoining `mn` from its readable replicas, on this CN's workers, in
  // the background (each under its keys' locks: node/rereplication.h); CopyResult(mn) is nullopt
  // until they are all done, then the slots copied, or the first error (Unavailable: `mn` is
  // not rejoining any more). A new StartCopy for `mn` forgets the one before for `mn`; copies
  // onto other MNs rejoining at the same time go on, each with its own result.
  virtual void StartCopy(MnId mn, std::vector<CopyUnit> units) = 0;
  virtual std::optional<Result<uint64_t>> CopyResult(MnId mn) = 0;
  // Lays out `mn`'s superblock and catalog from this CN's catalog (a replacement's memory is
  // blank), then sets its lane cursors in step with its groups' readable replicas, in the
  // background (carves for them must be frozen everywhere); SyncResult is nullopt until done.
  virtual void StartSync(MnId mn) = 0;
  virtual std::optional<Status> SyncResult() = 0;
  // Commits wait before their write-visible rounds while the gate is closed; how many are
  // between those rounds now (nullopt if the CN stopped).
  virtual void SetVisibleGate(bool closed) = 0;
  virtual std::optional<size_t> CommitsMidVisible() = 0;

  // Releases every lock the dead CN's transactions hold in this CN's lock table and forgets
  // their requests (Lotus §6 step 1, after its logs are recovered); and from now on the MN lock
  // words its incarnation `incarnation` (or an older one) holds are free here (store::GoneHolders).
  // False if the CN stopped.
  virtual bool ReleaseLocksOf(uint16_t dead, uint16_t incarnation) = 0;
  // This CN's live transactions that asked `dead` for a lock; nullopt if the CN stopped.
  virtual std::optional<size_t> LiveContacting(uint16_t dead) = 0;
  // This CN's links to its peers (bit c for CN c), in one visit of its workers: asks each CN in
  // `probe` not heard from within `quiet_ns` for an answer (lock::LockClient::Probe), so that
  // nothing need wait on a peer for it to be judged; and returns the CNs some worker has heard
  // nothing from for `silent_ns` while it waited on them (lock::LockClient::Silent). nullopt if
  // the CN stopped.
  virtual std::optional<uint64_t> CheckLinks(uint64_t probe, uint64_t quiet_ns,
                                             uint64_t silent_ns) = 0;

  // What log recovery reads the memory pool by.
  virtual const store::Catalog& catalog() const = 0;
  virtual const store::Placement& placement() const = 0;

  // This CN recovered log `worker` of the failed CN `dead` (its failure declared by `epoch`).
  virtual void LogRecovered(uint16_t /*dead*/, uint64_t /*epoch*/, uint16_t /*worker*/,
                            const cluster::LogRecoveryStats& /*stats*/) {}

  // One line for the CN's log.
  virtual void Event(const std::string& line) = 0;
  // This CN can no longer know that it was not declared failed: it stops at once (a daemon
  // exits). The machine acts no more after calling it.
  virtual void Fence(const std::string& why) = 0;
};

}  // namespace pond::recovery
