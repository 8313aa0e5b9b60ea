// CnMembership: membership, failure detection and recovery as one CN of a cluster takes part in
// them, agreeing with the other CNs through the coordination service (docs/recovery.md
// "Processes" argues it). Events in — a period of the beat half, a period of the coordination
// half, a log recovery finished — and actions out, through the store, the memory pool and the
// CN's controls (cn_controls.h). In short:
//
//   - Beats. Every MN counts a beat up in its own region; every CN writes its beat into every
//     MN's lease page (store/layout.h LeasePage) each period. A CN renews its lease only with a
//     beat it knows a CM would see: one that cluster::LeaseQuorum MNs took (a CM declares a CN
//     only after reading enough MNs to meet any such set), or one an MN took that the
//     configuration it read since has every CM read. One that has not renewed
//     for its own lease (the lease less a margin) stops itself: it can no longer know whether it
//     was declared failed (fencing).
//   - The configuration manager (CM) is the lowest CN alive that sees every lower one's beat
//     stopped. It declares a CN or MN whose beat has not moved for a lease: the next epoch
//     (cluster::Configuration) and its shard map go to the coordination service by conditional
//     puts, so of two would-be CMs one wins.
//   - Every CN reads the configuration each period and applies a newer epoch: a failed CN's
//     packets are refused, requests awaiting it fail, its shards go to the survivors closed, and
//     the timestamp oracle moves if it was there. A failed MN is read no more, then skipped.
//   - Recovery of a failed CN, step by step, each step's end a key in the coordination service
//     (cluster/directory.h FailureStepKey): its logs recovered (each by one survivor), then its
//     locks released by every survivor, every survivor drained of transactions that asked it
//     for a lock, and then its shards opened by their new owners. Every step is idempotent.
//   - A restarted CN is a new incarnation: it starts managing no shard, asks to be let back in
//     (JoinKey), and the CM names it alive once its failure is recovered everywhere. Then its
//     shards come home (shard_return.h): each holder closes the ones it holds, waits until no
//     lock in them is held in its table and says so (ReturnKey); the CM gives them back by an
//     epoch, and the restarted CN opens them as it applies it. No shard is ever served by two CNs,
//     and none is opened while a lock in it is held.
//   - A restarted MN (blank, laid out from the catalog) asks to rejoin (MnJoinKey); the CM lets it
//     in, and every CN copies its share of the MN's replicas onto it while transactions go on,
//     until it is read like any replica again (mn_rejoin.h).
//   - Partitions: with its beat, every CN writes whom it has waited on and heard nothing from for
//     a lease, and whether it reaches the coordination service. A CN that every report marks as
//     the one cut off (a strict majority of the CNs beating cannot hear it; or it hears none of
//     them) fences itself; its beat stops, and the CM declares it as any failed CN.
//   - The coordination service unreachable: logged once, counted, and every step waits for it.
//
// Thread rules: two halves, each on one thread at a time. The beat half (BeatTick, RunQueued)
// alone uses the endpoint and scheduler it was given: beats, lease pages, log recoveries. The
// coordination half (CoordTick) talks to the coordination service and to the controls. They
// share what the lease pages showed and the recoveries asked for, under a mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pond/clock.h"
#include "pond/cluster/directory.h"
#include "pond/cluster/log_recovery.h"
#include "pond/cluster/membership.h"
#include "pond/recovery/cn_controls.h"
#include "pond/recovery/load_policy.h"
#include "pond/recovery/mn_rejoin.h"
#include "pond/recovery/shard_move.h"
#include "pond/recovery/shard_return.h"
#include "pond/runtime/scheduler.h"
#include "pond/transport/endpoint.h"

namespace pond::recovery {

struct MembershipOptions {
  std::string cluster;  // its name: the prefix of its keys in the coordination service
  uint16_t cn = 0;      // this CN
  uint16_t incarnation = 0;
  uint16_t cns = 0, mns = 0;
  uint16_t workers_per_cn = 0;
  int replication = 1;
  uint64_t lease_ns = 0;
  uint32_t shards = 0;  // in the shard map
  // The protocol keeps its lock words on MNs (motor, ford): a key's words move to the next
  // replica once its MN is down, so a CN says it reads a leaving MN no more only once every
  // transaction of it from before has ended (store::Placement::LockReplica).
  bool mn_lock_words = false;
  // A shard move (shard_move.h) whose shards are not drained this long after it started is
  // given up (Lotus §4.3 waits 10 ms, then aborts the holders; a Pond CN serves them again).
  uint64_t move_drain_ns = 10'000'000;
  // Whether and how this CN hands shards away for load or locality (load_policy.h).
  LoadPolicyOptions load;
};

class CnMembership {
 public:
  // Starts from `view` (the newest epoch when the CN started) and its shard map `shards`. The
  // beat half uses `beat_sched` and `beat_ep` (an endpoint to the memory pool that sends no
  // packets) alone.
  CnMembership(MembershipOptions o, cluster::Configuration view, std::vector<uint16_t> shards,
               cluster::ConfigStore& store, Clock& clock, CnControls& controls,
               MembershipCounts& counts, Scheduler& beat_sched, Endpoint& beat_ep);
  CnMembership(const CnMembership&) = delete;
  CnMembership& operator=(const CnMembership&) = delete;

  // How often each half acts; the coordination half ten times as often while this CN holds its
  // commits for an MN's rejoin (mn_rejoin.h: gated, switched), or has shards closed to move
  // (shard_move.h), which then end sooner. The coordination half's thread.
  uint64_t period_ns() const { return o_.lease_ns / 10; }
  uint64_t lease_ns() const { return o_.lease_ns; }
  uint64_t coord_period_ns() const {
    return rejoins_.Holding() || moves_.Moving() ? period_ns() / 10 : period_ns();
  }

  // The beat half, once a period: fences if no beat reached an MN for its own lease, writes the
  // next beat to every MN up and reads every MN's lease page (coroutines on the beat scheduler).
  void BeatTick();
  // The beat half, as often as it runs: starts the log recoveries the coordination half asked
  // for.
  void RunQueued();

  // The coordination half, once a period: applies a newer epoch, declares what failed (as CM),
  // and moves every open recovery a step on.
  void CoordTick();

  // Its driver paused both halves for a while (a simulated cluster between runs, whose faults
  // are armed per run): every lease counts from now, as if the pause had not happened. Not for
  // a real process, whose peers do not pause with it.
  void Resumed();

  // Where this CN's part in the recovery of CN `cn`'s failure declared by `epoch` stands: none
  // (it does not know of it yet), under way, its locks released, or done (its shards open).
  // The coordination half's thread.
  enum class Part { kNone, kUnderWay, kReleased, kOpened };
  Part PartIn(uint16_t cn, uint64_t epoch) const;

  // This CN holds shards it closed to give back to a restarted CN, not gone yet. The
  // coordination half's thread.
  bool Returning() const { return returns_.Returning(); }

  // Hands `shards` (sorted) to CN `to` for load (shard_move.h): InvalidArgument if one is not
  // managed and open here, or `to` is not another CN alive; Conflict if a move is under way. The
  // coordination half's thread, as the two below.
  Status StartMove(std::vector<uint32_t> shards, uint16_t to);
  bool Moving() const { return moves_.Moving(); }
  const MoveCounts& move_counts() const { return moves_.counts(); }

  // A clean stop, once this CN serves no more and will write nothing more to the memory pool
  // (its workers ended, its coordination half stopped): from the next beat on, its report says
  // it left, and a CM that reads it declares this CN at once instead of waiting out its lease
  // (docs/recovery.md "A clean stop"). Any thread.
  void Leave() { leaving_ = true; }
  // MNs that took a beat saying so.
  int LeftOn() const { return left_on_.load(); }

  // This CN is alive in the newest epoch applied (a restarted one: once it was let back in).
  bool alive() const { return alive_.load(); }
  // It fenced itself: it does nothing more.
  bool fenced() const { return fenced_.load(); }

 private:
  struct Failure {
    uint64_t epoch = 0;  // that declared it
    uint16_t cn = 0;
    uint16_t incarnation = 0;
    std::vector<std::vector<GAddr>> logs;  // by worker: its log areas
    uint64_t log_bytes = 0;
    std::set<uint16_t> recovered;  // logs (by worker) known recovered
    // One of its logs being recovered here: started by the coordination half, run and ended by
    // the beat half (its result is written before the state says so).
    std::atomic<int> recovery{0};
    uint16_t recovering_worker = 0;
    cluster::LogRecoveryStats recovery_stats;
    std::string recovery_error;
    bool released = false, drained = false, opened = false;
    std::vector<uint32_t> moved;  // shards it managed that the epoch gave to this CN
  };

  // What the lease pages showed: per CN and MN, the last beat seen and when it last moved.
  struct Seen {
    uint64_t beat = 0;
    uint64_t moved_ns = 0;
    // A CN's report with that beat (store::LeasePage::CnReport): whom it cannot hear, and
    // whether it cannot reach the coordination service.
    uint64_t silent = 0;
    bool coord_down = false;
    // A newer incarnation than the view's, let in by an epoch this CN has not read yet.
    bool let_in = false;
    // It left: a clean stop, after which it writes nothing (Leave).
    bool left = false;
    // The MNs its beats have not reached for a lease (bit m for MN m), as of `epoch`.
    uint64_t mn_silent = 0;
    uint64_t epoch = 0;
  };

  // Writes this CN's next beat to every MN up, and reads every MN's lease page: a coroutine per
  // MN, one at a time each, so that an MN that hangs holds up only its own.
  void Renew();
  // The send time of the newest beat this CN knows any CM would see (docs/recovery.md
  // "Fencing"): the newest that R MNs took, or the newest that an MN the configuration as last
  // read has every CM read took, counted from that read at the latest. The beat half's thread.
  uint64_t LeaseFrom() const;
  // Whether the CM may declare CN `cn` now: its beat has not moved for a lease, and every MN
  // the CM must read was read since it could have carried a beat of a lease still running.
  bool Declarable(uint16_t cn) const;
  void Watch();
  bool CnExpired(uint16_t cn) const;
  // Whether MN `mn`'s beat has not moved for a lease, counted from when this CN last renewed
  // after a gap: one cut off for less than the lease (a host cut: only its own MN answered) did
  // not read the others' beats meanwhile, and would declare them on what it saw before the cut.
  bool MnExpired(uint16_t mn) const;
  // renewed_ns_ = `from` if that is newer; resumed_ns_ if the gap since the last was long.
  void NoteRenewed(uint64_t from);
  // Once an interval, with the load or locality policy on: measures (and for load, publishes)
  // this CN's load, and starts a move if a policy says so.
  void Balance();
  // The CM's work: declare what failed, let restarted CNs in.
  void Manage();
  // Applies a newer epoch if there is one; the service's error if it could not be read.
  Status ReadConfig();
  // Logs the coordination service's loss and return, once each, and counts it.
  void NoteCoordination(const Status& read);
  // Counts (and logs once each) the nodes whose beat stopped two leases ago and that no epoch
  // has declared failed.
  void NoteUndeclared();
  // Says whom this CN cannot hear (with its next beats), and fences it if the reports of every
  // CN show that it is the one cut off (docs/recovery.md "Partitions and fencing").
  void Links();
  // The same for MNs (docs/recovery.md "An MN one CN cannot reach"): fences this CN if it cannot
  // reach an MN that most CNs reach, while a CN that reaches every MN serves on; and marks the
  // MNs that most CNs cannot reach, for the CM to declare (MnCutOff).
  void MnLinks();
  // Whether the reports have said for three periods that a strict majority of the CNs beating
  // cannot reach MN `mn`. The coordination half's thread.
  bool MnCutOff(uint16_t mn) const;
  void Apply(const cluster::Configuration& next, const std::vector<uint16_t>& shards);
  void Progress(Failure& f);
  // Whether this CN acts as CM: it is alive, and every lower CN alive has stopped beating.
  bool ActingCm() const;
  Status PutStep(const Failure& f, const std::string& step, uint16_t who);
  // Says, for each MN the view holds leaving, that this CN reads it no more (MnUnreadKey); and
  // whether every CN alive has said so of MN `mn`.
  void SayUnread();
  bool MnUnreadByAll(uint16_t mn) const;
  // Whether every CN `next` holds failed has its logs recovered (one declared in `next` has not).
  bool CnFailuresRecovered(const cluster::Configuration& next) const;
  // Whether every CN alive has said so of every MN the view holds leaving.
  bool LeavingMnsDrained() const;
  bool StepDone(const Failure& f, const std::string& step, uint16_t who) const;
  // Shard `s` came here by a failure not opened here yet.
  bool Recovering(uint32_t s) const;
  bool StepDoneByAll(const Failure& f, const std::string& step) const;
  bool StepDoneByAll(uint64_t epoch, uint16_t dead, const std::string& step) const;
  // Takes up every failure the view names that this CN holds no record of.
  void Adopt();
  void Fence(const std::string& why);

  const MembershipOptions o_;
  cluster::ConfigStore& store_;
  Clock& clock_;
  CnControls& controls_;
  MembershipCounts& counts_;
  Scheduler& beat_sched_;
  Endpoint& beat_ep_;

  cluster::Configuration view_;   // the newest epoch applied here
  uint64_t config_version_ = 0;   // of view_ in the coordination service
  std::vector<uint16_t> shards_;  // view_'s shard map
  std::atomic<bool> alive_{false};
  std::atomic<bool> fenced_{false};
  uint64_t beat_count_ = 0;
  // Per MN: a beat being written to it, its lease page being read.
  struct MnBusy {
    bool renewing = false, watching = false;
    bool left = false;        // it took a beat that says this CN left
    uint64_t renewed_ns = 0;  // when the last beat it took was sent
    // When the first beat sent to it since the last it took was sent; 0 while none is owed.
    uint64_t tried_ns = 0;
  };
  std::vector<MnBusy> mn_busy_;
  std::atomic<uint64_t> renewed_ns_{0};  // LeaseFrom, the newest yet
  // When BeatTick last ran (its thread's alone): a fence says how long its own thread was not
  // run, which tells a stalled host or process from MNs that answered late.
  uint64_t ticked_ns_ = 0;
  // When this CN renewed after a gap of more than a quarter lease (NoteRenewed): from then on, not
  // before, an MN's beat unmoved counts (MnExpired).
  std::atomic<uint64_t> resumed_ns_{0};
  // When the newest configuration read that left view_ current was sent (the coordination half
  // writes it after beat_view_; the beat half reads it before).
  std::atomic<uint64_t> coord_fresh_ns_{0};
  // When this CN applied the last epoch that took an MN out of those every CM reads (the
  // coordination half's).
  uint64_t dropped_ns_ = 0;
  // This CN's report, written with each beat: the coordination half's finding.
  std::atomic<uint64_t> report_silent_{0};
  std::atomic<bool> report_coord_down_{false};
  std::atomic<bool> report_in_{false};  // alive in the configuration this CN applied
  std::atomic<bool> leaving_{false};    // Leave
  // The MNs none of this CN's beats has reached for a lease: the beat half's finding.
  std::atomic<uint64_t> report_mn_silent_{0};
  std::atomic<uint64_t> report_epoch_{0};  // view_'s, for the reports' readers to match theirs
  std::atomic<int> left_on_{0};
  // What the beat half shares with the coordination half.
  mutable std::mutex beat_mu_;
  cluster::Configuration beat_view_;  // view_, as of the last epoch applied
  std::vector<Seen> cn_seen_, mn_seen_;
  std::vector<uint64_t> mn_read_ns_;  // per MN: when its page was last asked for, and came
  std::vector<std::function<Task<void>()>> to_spawn_;  // for the beat scheduler
  std::vector<std::unique_ptr<Failure>> failures_;
  std::set<std::pair<uint16_t, uint16_t>> unread_said_;  // (MN, incarnation) said unread
  // With MN lock words: each worker's next transaction when this CN stopped reading an MN (by
  // MN and incarnation); "unread" is said once every one before it has ended (TxnMark).
  std::map<std::pair<uint16_t, uint16_t>, std::vector<uint64_t>> unread_mark_;
  ShardReturns returns_;  // the coordination half's
  ShardMoves moves_;      // the coordination half's
  // The load policy (the coordination half's): when its next interval ends, and how many it has
  // measured. What it published last, for the beats to write; what the lease pages showed of
  // each CN's (under beat_mu_), and when that last changed.
  LoadPolicy load_policy_;
  uint64_t load_next_ns_ = 0;
  uint64_t load_intervals_ = 0;
  std::atomic<uint64_t> report_load_interval_{0}, report_load_latency_{0};
  struct PeerLoad {
    uint64_t interval = 0, latency_ns = 0, changed_ns = 0;
  };
  std::vector<PeerLoad> loads_;
  MnRejoins rejoins_;  // the coordination half's
  // The coordination half's: whether the service answered its last read, since when not, and
  // which nodes (CNs, then MNs) it has said are stuck undeclared.
  bool coord_up_ = true;
  uint64_t singled_since_ns_ = 0;          // since when the reports single this CN out (Links)
  uint64_t mn_singled_since_ns_ = 0;       // the same for an MN it alone cannot reach (MnLinks)
  std::vector<uint64_t> mn_cut_since_ns_;  // by MN: since when most CNs cannot reach it
  uint64_t coord_down_ns_ = 0;
  std::vector<bool> undeclared_logged_;
};

}  // namespace pond::recovery
