// ProcessMembership: membership, failure detection and recovery for one CN of a cluster of
// processes (`pond cn` daemons) — what Failover (failover.h) does for the simulated cluster,
// done by every CN process for itself, agreeing through the coordination service.
// docs/recovery.md "Processes" argues it; in short:
//
//   - Beats. Every MN daemon counts a beat up in its own region; every CN writes its beat into
//     every MN's lease page (store/layout.h LeasePage) each renew period. A CN that has not
//     written a beat for its own lease (the lease less a margin) stops itself: it can no longer
//     know whether it was declared failed (fencing).
//   - The configuration manager (CM) is the lowest CN alive that sees every lower one's beat
//     stopped. It reads every lease page each period and declares a CN or MN whose beat has not
//     moved for a lease: the next epoch (cluster::Configuration) and its shard map go to the
//     coordination service by conditional puts, so of two would-be CMs one wins.
//   - Every CN reads the configuration each period and applies a newer epoch: a failed CN's
//     packets are refused, requests awaiting it fail (locks: Conflict; routed calls: Unknown),
//     its shards go to the survivors closed, and the timestamp oracle moves if it was there. A
//     failed MN is skipped by writes and reads from then on.
//   - Recovery of a failed CN, step by step, each step's end a key in the coordination service
//     (cluster/directory.h FailureStepKey): its logs recovered (each by one survivor), then its
//     locks released by every survivor, every survivor drained of transactions that asked it
//     for a lock, and then its shards opened by their new owners.
//   - A restarted CN is a new incarnation: it starts managing no shard, asks to be let back in
//     (JoinKey), and the CM names it alive once its failure is recovered everywhere.
//
// Thread rules: two threads of its own (Start to Stop): the beat thread, which alone uses the
// endpoint (beats, lease pages, log recoveries), and the coordination thread, which talks to the
// coordination service and reaches the workers' own state (their views, lock clients, routed
// calls) through tasks it posts to their inboxes while the cluster serves. A slow coordination
// service then delays declarations, never beats.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pond/cluster/log_recovery.h"
#include "pond/cluster/membership.h"
#include "pond/runtime/scheduler.h"
#include "pond/transport/endpoint.h"

namespace pond::txn {

class ClusterImpl;
class WorkerContext;

// What a CN process learned of the membership as it started (ReadStart, cn_process.cc).
struct ProcessStart {
  cluster::Configuration config;  // the newest epoch then
  std::vector<uint16_t> shards;   // that epoch's shard map: the owner of each shard
  uint16_t incarnation = 0;       // this process's: one more than the CN's last
  bool restarted = false;         // an earlier incarnation of this CN ran
};

class ProcessMembership {
 public:
  explicit ProcessMembership(ClusterImpl& cl);
  ~ProcessMembership();
  ProcessMembership(const ProcessMembership&) = delete;
  ProcessMembership& operator=(const ProcessMembership&) = delete;

  // Starts the thread; the cluster serves by now (tasks go to the workers' inboxes).
  void Start();
  // Stops the thread; its recovery work left undone is another CN's to finish.
  void Stop();
  // This CN is alive in the newest epoch applied (a restarted one: once it was let back in).
  bool alive() const { return alive_.load(); }

 private:
  struct Failure {
    uint64_t epoch = 0;  // that declared it
    uint16_t cn = 0;
    uint16_t incarnation = 0;
    std::vector<std::vector<GAddr>> logs;  // by worker: its log areas
    uint64_t log_bytes = 0;
    std::set<uint16_t> recovered;  // logs (by worker) known recovered
    // One of its logs being recovered here: started by the coordination thread, run and ended
    // by the beat thread (its result is written before the state says so).
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
  };

  // The beat thread: beats, lease pages, and the one-sided work of recoveries.
  void Loop();
  // The coordination thread: epochs, declarations, recovery steps.
  void CoordLoop();
  uint64_t LeaseNs() const;
  // Writes this CN's next beat to every MN up, and reads every MN's lease page: a coroutine
  // per MN, one at a time each, so that an MN that hangs holds up only its own.
  void Renew();
  void Watch();
  bool CnExpired(uint16_t cn) const;
  bool MnExpired(uint16_t mn) const;
  // The CM's work: declare what failed, let restarted CNs in.
  void Manage();
  // Applies a newer epoch if there is one; the service's error if it could not be read.
  Status ReadConfig();
  // Logs the coordination service's loss and return, once each, and exports it.
  void NoteCoordination(const Status& read);
  // Counts (and logs once each) the nodes whose beat stopped two leases ago and that no epoch
  // has declared failed.
  void NoteUndeclared();
  void Apply(const cluster::Configuration& next, const std::vector<uint16_t>& shards);
  void Progress(Failure& f);
  // Whether this CN acts as CM: it is alive, and every lower CN alive has stopped beating.
  bool ActingCm() const;
  Status PutStep(const Failure& f, const std::string& step, uint16_t who);
  // An MN declared failed by `epoch`: this CN reads it no more; all alive CNs have said so.
  Status PutMnStep(uint64_t epoch, uint16_t mn);
  bool MnUnreadByAll(uint16_t mn) const;
  bool StepDone(const Failure& f, const std::string& step, uint16_t who) const;
  bool StepDoneByAll(const Failure& f, const std::string& step) const;
  // Runs `fn` on every worker of this CN, on its thread, and waits for them all; the sum of
  // what they answer. False in *ok if the cluster stopped first.
  size_t OnWorkers(const std::function<size_t(WorkerContext&)>& fn, bool* ok);
  void Event(const std::string& line) const;
  [[noreturn]] void Fence(const std::string& why);

  ClusterImpl& cl_;
  const uint16_t cn_;
  Scheduler sched_;
  std::unique_ptr<Endpoint> ep_;  // to the memory pool; it sends no packets
  std::thread thread_, coord_thread_;
  std::atomic<bool> stop_{false};

  cluster::Configuration view_;   // the newest epoch applied here
  uint64_t config_version_ = 0;   // of view_ in the coordination service
  std::vector<uint16_t> shards_;  // view_'s shard map
  std::atomic<bool> alive_{false};
  uint64_t beat_count_ = 0;
  uint64_t beat_ = 0;  // the newest beat
  // Per MN: a beat being written to it, its lease page being read.
  struct MnBusy {
    bool renewing = false, watching = false;
    uint64_t renewed_ns = 0;  // when the last beat it took was sent
  };
  std::vector<MnBusy> mn_busy_;
  std::atomic<uint64_t> renewed_ns_{0};  // when the last renewal some MN took was sent
  // What the beat thread shares with the coordination thread.
  mutable std::mutex beat_mu_;
  cluster::Configuration beat_view_;  // view_, as of the last epoch applied
  std::vector<Seen> cn_seen_, mn_seen_;
  std::vector<std::function<Task<void>()>> to_spawn_;  // for the beat thread's scheduler
  std::vector<std::unique_ptr<Failure>> failures_;
  std::map<uint16_t, uint64_t> leaving_since_;  // MN -> the epoch that made it leaving
  // The coordination thread's: whether the service answered its last read, since when not, and
  // which nodes (CNs, then MNs) it has said are stuck undeclared.
  bool coord_up_ = true;
  uint64_t coord_down_ns_ = 0;
  std::vector<bool> undeclared_logged_;
};

}  // namespace pond::txn
