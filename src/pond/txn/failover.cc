#include "pond/txn/failover.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "pond/base/assert.h"
#include "pond/cluster/log_recovery.h"
#include "pond/lock/lock_key.h"
#include "pond/txn/failover_rejoin.h"
#include "pond/txn/sim_driver.h"
#include "pond/txn/worker_context.h"

namespace pond::txn {

struct Failover::Failure {
  uint16_t cn = 0;
  uint64_t crash_ns = 0, detected_ns = 0, recovered_ns = 0, open_ns = 0;
  uint64_t epoch = 0;
  bool declared = false;
  bool released = false;  // every survivor released its locks (recovered_ns is set)
  bool opening = false;   // the open of its shards is on its way
  int opens_pending = 0;
  // The failed CN's workers whose logs are not recovered yet, and the survivor each was given
  // to (reassigned if that survivor fails too).
  std::map<uint16_t, uint16_t> logs_pending;
  std::set<uint16_t> release_waiting;  // survivors that have not released its locks yet
  std::set<uint16_t> drain_waiting;    // survivors that have not drained yet
  std::vector<std::pair<uint32_t, uint16_t>> moved;  // shard -> its new CN
  uint64_t rolled_forward = 0, rolled_back = 0, records = 0;
  uint64_t restart_ns = 0, returned_ns = 0;
  bool fenced = false;         // it stopped itself: a partition outlasted its lease
  int returns_left = 0;        // holders still to give its shards back after its restart
  bool return_failed = false;  // a failure kept some of them where it put them
  bool Ready() const { return declared && released && drain_waiting.empty(); }
};

// The return of a restarted CN's shards from one holder.
struct Failover::Return {
  Failure* failure = nullptr;       // the restarted CN's last failure
  uint16_t cn = 0, inc = 0;         // the restarted CN and its incarnation
  uint16_t from = 0, from_inc = 0;  // the holder
  std::vector<uint32_t> shards;
  bool done = false;  // drained (or the holder failed, whose failure then moved them)
};

Failover::Failover(ClusterImpl& cl)
    : cl_(cl),
      engine_(*cl.engine_),
      crashed_(cl.config().cns, false),
      renewed_ns_(cl.config().cns, 0),
      lease_end_ns_(cl.config().cns, 0),
      partitioned_(cl.config().cns, false),
      parked_(cl.config().cns),
      mn_crashed_(cl.config().mns, false),
      mn_renewed_ns_(cl.config().mns, 0),
      step_aims_(cl.config().cns) {
  config_.cns.resize(cl.config().cns);
  config_.mns.resize(cl.config().mns);
  Result<uint64_t> v = store_.PutIf(cluster::kConfigKey, config_.Encode(), 0);
  POND_CHECK(v.ok());
  config_version_ = *v;
  for (auto& cn : cl_.cns_) {
    cn->view = config_;
    for (auto& w : cn->workers) w->SetView(config_);
  }
  oracle_ = cl_.cns_[config_.tso_host]->oracle.get();
}

Failover::~Failover() = default;

Status Failover::Validate(const std::vector<NodeFault>& faults) const {
  return ValidateNodeFaults(cl_.config(), faults);
}

void Failover::Arm(const std::vector<NodeFault>& faults) {
  base_ns_ = engine_.now();
  const uint64_t gen = generation_;
  faults_not_reached_ += faults.size();
  // Transactions report their commit steps only to a run that aims a crash at one: the other
  // runs pay one test of an empty function per step.
  for (const NodeFault& f : faults) {
    if (f.step != CommitStep::kNone && !cl_.step_probe_) {
      cl_.step_probe_ = [this](uint16_t cn, CommitStep step) { OnStep(cn, step); };
    }
  }
  for (const NodeFault& f : faults) {
    engine_.At(base_ns_ + f.at_ns, [this, gen, kind = f.kind, node = f.node, step = f.step] {
      if (gen != generation_) return;
      faults_not_reached_--;
      if (step != CommitStep::kNone) AimCrash(node, step);
      switch (kind) {
        case NodeFaultKind::kCrashMn:
          CrashMn(node);
          break;
        case NodeFaultKind::kRestartMn:
          RestartMn(node);
          break;
        case NodeFaultKind::kCrashCn:
        case NodeFaultKind::kRestartCn:
        case NodeFaultKind::kPartitionCn:
        case NodeFaultKind::kHealCn:
          Enqueue(node, kind);
          break;
        case NodeFaultKind::kCrashCoord:
        case NodeFaultKind::kRestartCoord:
          POND_CHECK_MSG(false, "the model has no coordination service (Validate refuses it)");
      }
    });
  }
  if (!leases_armed_ && !faults.empty()) {
    leases_armed_ = true;
    for (size_t cn = 0; cn < renewed_ns_.size(); cn++) renewed_ns_[cn] = engine_.now();
    for (size_t mn = 0; mn < mn_renewed_ns_.size(); mn++) mn_renewed_ns_[mn] = engine_.now();
    for (uint16_t cn = 0; cn < lease_end_ns_.size(); cn++) {
      if (crashed_[cn]) continue;
      lease_end_ns_[cn] = engine_.now() + kCnLeaseNs;
      ArmFence(cn);
    }
    engine_.At(engine_.now() + kRenewEveryNs, [this, gen] {
      if (gen == generation_) LeaseTick();
    });
  }
}

void Failover::Disarm() {
  generation_++;
  leases_armed_ = false;
}

bool Failover::Idle() const {
  // A crashed MN is waited for until every CN has stopped using it: writers hold their locks
  // until then (MvccTxn::CommitFlush).
  for (const auto& m : mn_failures_) {
    if (m.down_ns == 0) return false;
  }
  // A rejoin under way finishes first: the checks after a run judge every MN readable.
  if (mn_faults_waiting_ > 0) return false;
  for (const auto& r : rejoins_) {
    if (!r->finished) return false;
  }
  if (queued_count_ > 0 || booting_ > 0 || returns_pending_ > 0) return false;
  // A cut-off CN is waited for until it heals or fences itself: its clients and what the others
  // ask of it cannot finish before.
  for (size_t cn = 0; cn < partitioned_.size(); cn++) {
    if ((partitioned_[cn] && !crashed_[cn]) || !parked_[cn].empty()) return false;
  }
  for (size_t cn = 0; cn < crashed_.size(); cn++) {
    if (!crashed_[cn]) continue;
    for (const auto& f : failures_) {
      if (f->cn == cn && (!f->opening || f->opens_pending > 0)) return false;
    }
  }
  return true;
}

Failover::Failure& Failover::FailureOf(uint16_t cn) {
  // The latest: a restarted CN may fail again.
  for (auto it = failures_.rbegin(); it != failures_.rend(); ++it) {
    if ((*it)->cn == cn) return **it;
  }
  POND_CHECK_MSG(false, "no failure recorded for the CN");
  __builtin_unreachable();
}

void Failover::Enqueue(uint16_t cn, NodeFaultKind kind, bool first) {
  if (queued_.size() <= cn) queued_.resize(size_t{cn} + 1);
  queued_[cn].insert(first ? queued_[cn].begin() : queued_[cn].end(), kind);
  queued_count_++;
  if (queued_[cn].size() == 1) RunQueue(cn);
}

void Failover::RunQueue(uint16_t cn) {
  std::vector<NodeFaultKind>& q = queued_[cn];
  while (!q.empty()) {
    bool done = true;
    switch (q.front()) {
      case NodeFaultKind::kCrashCn:
        // A crash aimed at a step waits for OnStep (or its deadline) to run the queue again.
        if (step_aims_[cn].step != CommitStep::kNone) return;
        // The schedule keeps CNs up beside it, but restarts wait for recoveries and so come
        // later than scheduled: a crash (or cut, below) that would leave no CN serving waits
        // until one is back — with nobody left, nobody could recover anyone.
        done = ServingBesides(cn) > 0;
        if (done) Crash(cn);
        break;
      case NodeFaultKind::kRestartCn:
        done = Restart(cn);
        break;
      case NodeFaultKind::kPartitionCn:
        done = Cut(cn);
        break;
      case NodeFaultKind::kHealCn:
        done = Heal(cn);
        break;
      default:
        POND_CHECK_MSG(false, "an MN fault in a CN's queue");
    }
    if (!done) {
      engine_.At(engine_.now() + kDrainPollNs, [this, cn, gen = generation_] {
        if (gen == generation_) RunQueue(cn);
      });
      return;
    }
    q.erase(q.begin());
    queued_count_--;
  }
}

void Failover::AimCrash(uint16_t cn, CommitStep step) {
  StepAim& a = step_aims_[cn];
  a.step = step;
  const uint64_t token = ++a.token;
  // Bounded: a CN whose transactions never reach the step (idle, or all aborting before it)
  // crashes at the deadline anyway, at no particular step, so later events keep their order.
  engine_.At(engine_.now() + kStepCrashWaitNsMax, [this, cn, token, gen = generation_] {
    StepAim& aim = step_aims_[cn];
    if (gen != generation_ || aim.token != token || aim.step == CommitStep::kNone) return;
    aim.step = CommitStep::kNone;
    step_crashes_unaimed_++;
    RunQueue(cn);
  });
}

void Failover::OnStep(uint16_t cn, CommitStep step) {
  StepAim& a = step_aims_[cn];
  if (a.step != step || crashed_[cn]) return;
  // Only once the crash is next in the CN's queue and would go ahead: then it happens right
  // after this step, not at some later point the queue reaches it.
  if (queued_[cn].empty() || queued_[cn].front() != NodeFaultKind::kCrashCn ||
      ServingBesides(cn) == 0) {
    return;
  }
  a.step = CommitStep::kNone;
  step_crashes_[static_cast<size_t>(step)]++;
  // Called from inside the transaction: the crash is the next event at this instant, after the
  // worker's round — what it posted after the step leaves or not, as at any crash.
  engine_.At(engine_.now(), [this, cn, gen = generation_] {
    if (gen == generation_) RunQueue(cn);
  });
}

void Failover::Crash(uint16_t cn) {
  POND_CHECK(!crashed_[cn]);
  crashed_[cn] = true;
  // Shards it was giving back to a restarted CN are its failure's to move now.
  for (auto& r : returns_) {
    if (r->done || r->from != cn) continue;
    r->done = true;
    returns_pending_--;
    r->failure->return_failed = true;
    r->failure->returns_left--;
  }
  cl_.sim_fabric_->CrashCn(cn);
  cl_.driver_->StopCn(cn);
  for (auto& w : cl_.cns_[cn]->workers) {
    cl_.clients_running_ -= w->clients_running();
    w->clients_running() = 0;
  }
  auto f = std::make_unique<Failure>();
  f->cn = cn;
  f->crash_ns = engine_.now() - base_ns_;
  failures_.push_back(std::move(f));
}

bool Failover::Restart(uint16_t cn) {
  Failure& f = FailureOf(cn);
  // It serves only after its recovery has finished (Lotus §6): until its failure is declared,
  // recovered and its shards open elsewhere, the new incarnation waits to be let in.
  if (!f.opening || f.opens_pending > 0) return false;
  POND_CHECK(crashed_[cn]);
  const uint64_t now = engine_.now();
  crashed_[cn] = false;
  renewed_ns_[cn] = now;
  lease_end_ns_[cn] = now + kCnLeaseNs;
  config_.epoch++;
  config_.cns[cn].alive = true;
  config_.cns[cn].failed_epoch = 0;
  const uint16_t inc = ++config_.cns[cn].incarnation;
  Result<uint64_t> v = store_.PutIf(cluster::kConfigKey, config_.Encode(), config_version_);
  POND_CHECK_MSG(v.ok(), "the configuration manager lost its conditional put");
  config_version_ = *v;
  // The new incarnation exists from the put on (a failure declared from now on counts it among
  // the survivors and may give it work); it talks to others once they hold it alive.
  cl_.RestartCn(cn, inc, config_);
  ArmFence(cn);
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  // A run does not end between the restart and its clients' start (Idle): the next run's
  // clients would be started twice.
  booting_++;
  engine_.At(now + kConfigPutNs + one_way, [this, cn, inc, f = &f] {
    if (crashed_[cn] || config_.cns[cn].incarnation != inc) {  // died again meanwhile
      booting_--;
      return;
    }
    for (uint16_t s : config_.Alive()) {
      if (s == cn) continue;
      Arrive(s, [this, s, cn, inc] {
        if (crashed_[cn] || config_.cns[cn].incarnation != inc) return;
        CnContext& peer = *cl_.cns_[s];
        Hear(peer);
        for (auto& w : peer.workers) {
          w->locks().PeerRestarted(cn);
          w->calls().PeerRestarted(cn);
        }
      });
    }
    Arrive(cn, [this, cn, inc, f] {
      booting_--;
      if (crashed_[cn] || config_.cns[cn].incarnation != inc) return;
      Hear(*cl_.cns_[cn]);
      for (auto& w : cl_.cns_[cn]->workers) cl_.StartClients(*w);
      f->restart_ns = engine_.now() - base_ns_;
      StartReturn(cn, inc);
    });
  });
  return true;
}

void Failover::StartReturn(uint16_t cn, uint16_t inc) {
  Failure& f = FailureOf(cn);
  std::map<uint16_t, std::vector<uint32_t>> by_holder;
  for (uint32_t s = 0; s < lock::kShards; s++) {
    if (cl_.shard_map_.HomeOf(s) == cn && cl_.shard_map_.CnOf(s) != cn) {
      by_holder[cl_.shard_map_.CnOf(s)].push_back(s);
    }
  }
  if (by_holder.empty()) f.returned_ns = engine_.now() - base_ns_;
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  for (auto& [holder, shards] : by_holder) {
    if (crashed_[holder]) {
      // Crashed, not declared yet: its declaration will move these on.
      f.return_failed = true;
      continue;
    }
    auto r = std::make_unique<Return>();
    r->failure = &f;
    r->cn = cn;
    r->inc = inc;
    r->from = holder;
    r->from_inc = config_.cns[holder].incarnation;
    r->shards = std::move(shards);
    f.returns_left++;
    returns_pending_++;
    Return* ret = r.get();
    returns_.push_back(std::move(r));
    // The holder closes them: from now on a request for them is refused (WrongShard) and its
    // transaction aborts and retries. It reports once no lock in them is held in its table.
    engine_.At(engine_.now() + one_way, [this, ret, one_way] {
      Arrive(ret->from, [this, ret, one_way] { CloseForReturn(*ret, one_way); });
    });
  }
}

void Failover::CloseForReturn(Return& r, uint64_t one_way) {
  Return* ret = &r;
  if (ret->done) return;  // the holder failed on the way (Crash gave up the return)
  CnContext& holder = *cl_.cns_[ret->from];
  for (uint32_t s : ret->shards) holder.locks.SetManaged(s, false);
  holder.workers[0]->sched().Spawn([](Failover* fo, CnContext* holder, Return* ret,
                                      uint64_t one_way) -> Task<void> {
    while (holder->locks.HeldIn(ret->shards) != 0) {
      co_await holder->workers[0]->sched().SleepFor(kDrainPollNs);
    }
    const uint64_t now = holder->workers[0]->clock().NowNs();
    fo->engine_.At(now + one_way,
                   [fo, ret] { fo->Arrive(ret->from, [fo, ret] { fo->OnReturnDrained(*ret); }); });
  }(this, &holder, ret, one_way));
}

void Failover::OnReturnDrained(Return& r) {
  if (r.done) return;  // the holder failed; its failure moved the shards
  r.done = true;
  CnContext& holder = *cl_.cns_[r.from];
  Failure& f = *r.failure;
  if (crashed_[r.cn] || config_.cns[r.cn].incarnation != r.inc) {
    // The restarted CN died again: the shards stay where they are, open again. Their VT-cache
    // entries go first, as at every opening: a transaction that held a lock when the shard
    // closed committed while it was closed, and did not update a cache the CN no longer used.
    for (uint32_t s : r.shards) {
      if (cl_.shard_map_.CnOf(s) != r.from) continue;
      if (holder.vt) holder.vt->InvalidateShard(s);
      holder.locks.SetManaged(s, true);
    }
    f.return_failed = true;
    f.returns_left--;
    returns_pending_--;
    return;
  }
  for (uint32_t s : r.shards) {
    POND_CHECK(cl_.shard_map_.CnOf(s) == r.from);
    cl_.AssignShardEverywhere(s, r.cn);
  }
  // The restarted CN opens them when it hears; were it to die first, its declaration moves them
  // on (the map names it), closed, as any of its shards.
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  engine_.At(engine_.now() + one_way,
             [this, ret = &r] { Arrive(ret->cn, [this, ret] { OpenReturned(*ret); }); });
}

void Failover::OpenReturned(Return& r) {
  Return* ret = &r;
  Failure& f = *ret->failure;
  returns_pending_--;
  f.returns_left--;
  if (crashed_[ret->cn] || config_.cns[ret->cn].incarnation != ret->inc) {
    f.return_failed = true;
    return;
  }
  CnContext& cn = *cl_.cns_[ret->cn];
  for (uint32_t s : ret->shards) {
    if (cl_.shard_map_.CnOf(s) != ret->cn) continue;
    if (cn.vt) cn.vt->InvalidateShard(s);
    cn.locks.SetManaged(s, true);
  }
  if (f.returns_left == 0 && !f.return_failed) f.returned_ns = engine_.now() - base_ns_;
}

bool Failover::Cut(uint16_t cn) {
  POND_CHECK(!crashed_[cn] && !partitioned_[cn]);
  if (ServingBesides(cn) == 0) return false;  // as a crash waits (RunQueue)
  partitioned_[cn] = true;
  cl_.sim_fabric_->PartitionCn(cn);
  partitions_.push_back(FailoverStats::Partition{cn, engine_.now() - base_ns_});
  return true;
}

int Failover::ServingBesides(uint16_t cn) const {
  int serving = 0;
  for (uint16_t other = 0; other < crashed_.size(); other++) {
    serving += other != cn && !crashed_[other] && !partitioned_[other];
  }
  return serving;
}

bool Failover::Heal(uint16_t cn) {
  if (partitioned_[cn]) {
    partitioned_[cn] = false;
    cl_.sim_fabric_->HealCn(cn);
    for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
      if (it->cn != cn) continue;
      it->healed_ns = engine_.now() - base_ns_;
      break;
    }
    if (!crashed_[cn]) {
      // Back before its lease ended: what waited on either side goes through (sent again), and
      // so does a renewal, at once — should its lease end before the acknowledgement comes, it
      // fences itself all the same, and rejoins (Fence).
      const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
      const uint64_t now = engine_.now();
      engine_.At(now + one_way,
                 [this, cn, inc = config_.cns[cn].incarnation, now, one_way, gen = generation_] {
                   if (gen != generation_ || crashed_[cn] || partitioned_[cn] ||
                       config_.cns[cn].incarnation != inc) {
                     return;
                   }
                   renewed_ns_[cn] = std::max(renewed_ns_[cn], now + one_way);
                   engine_.At(now + 2 * one_way, [this, cn, inc, now, gen] {
                     if (gen == generation_) CnLeaseRenewed(cn, inc, now);
                   });
                 });
      for (auto& fn : std::exchange(parked_[cn], {})) {
        engine_.At(engine_.now() + one_way,
                   [this, cn, fn = std::move(fn)]() mutable { Arrive(cn, std::move(fn)); });
      }
      return true;
    }
  }
  if (!crashed_[cn]) return true;
  // It fenced itself: it comes back as a new incarnation once its failure is recovered.
  return Restart(cn);
}

void Failover::Fence(uint16_t cn) {
  Crash(cn);
  failures_.back()->fenced = true;
  for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
    if (it->cn != cn) continue;
    it->fenced_ns = engine_.now() - base_ns_;
    break;
  }
  for (auto& fn : std::exchange(parked_[cn], {})) fn();
  // Healed, but too late for its lease: it hears the configuration at once and rejoins as a new
  // incarnation, as a CN healed after fencing itself does — before any fault scheduled later.
  if (!partitioned_[cn]) Enqueue(cn, NodeFaultKind::kRestartCn, /*first=*/true);
}

void Failover::CnLeaseRenewed(uint16_t cn, uint16_t inc, uint64_t sent_ns) {
  if (crashed_[cn] || partitioned_[cn] || config_.cns[cn].incarnation != inc) return;
  if (sent_ns + kCnLeaseNs <= lease_end_ns_[cn]) return;
  lease_end_ns_[cn] = sent_ns + kCnLeaseNs;
  ArmFence(cn);
}

void Failover::ArmFence(uint16_t cn) {
  engine_.At(lease_end_ns_[cn], [this, cn, inc = config_.cns[cn].incarnation, gen = generation_] {
    if (gen != generation_ || crashed_[cn] || config_.cns[cn].incarnation != inc) return;
    if (engine_.now() >= lease_end_ns_[cn]) Fence(cn);
  });
}

void Failover::Arrive(uint16_t cn, std::function<void()> fn) {
  if (partitioned_[cn] && !crashed_[cn]) {
    parked_[cn].push_back(std::move(fn));
    return;
  }
  fn();
}

void Failover::LeaseTick() {
  const uint64_t now = engine_.now();
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  // Renewals sent now by every CN and MN still running reach the CM one way later. (An MN
  // renews its lease as a CN does: memory nodes have a CPU for that much, as in FaRM.)
  for (uint16_t cn = 0; cn < crashed_.size(); cn++) {
    // A cut-off CN's renewal is lost; so is the CM's acknowledgement that comes back to a CN cut
    // off meanwhile, and the CN's own count of its lease runs on from its last one.
    if (crashed_[cn] || partitioned_[cn]) continue;
    renewed_ns_[cn] = now + one_way;
    engine_.At(now + 2 * one_way,
               [this, cn, inc = config_.cns[cn].incarnation, now, gen = generation_] {
                 if (gen == generation_) CnLeaseRenewed(cn, inc, now);
               });
  }
  for (size_t mn = 0; mn < mn_crashed_.size(); mn++) {
    if (!mn_crashed_[mn]) mn_renewed_ns_[mn] = now + one_way;
  }
  for (uint16_t cn = 0; cn < config_.cns.size(); cn++) {
    if (config_.cns[cn].alive && now > renewed_ns_[cn] + kLeaseNs) Declare(cn);
  }
  for (uint16_t mn = 0; mn < config_.mns.size(); mn++) {
    if (config_.mns[mn].alive && now > mn_renewed_ns_[mn] + kLeaseNs) DeclareMn(mn);
  }
  engine_.At(now + kRenewEveryNs, [this, gen = generation_] {
    if (gen == generation_) LeaseTick();
  });
}

void Failover::Declare(uint16_t dead) {
  Failure& f = FailureOf(dead);
  // The fencing rule, checked: a CN's own count of its lease ends before the CM's, so a CN the
  // CM gives up has stopped serving, cut off or not (docs/recovery.md).
  POND_CHECK_MSG(crashed_[dead], "a lease expired at the CM on a CN still serving");
  const uint64_t now = engine_.now();
  config_.epoch++;
  config_.cns[dead].alive = false;
  config_.cns[dead].failed_epoch = config_.epoch;
  f.declared = true;
  f.detected_ns = now - base_ns_;
  f.epoch = config_.epoch;
  const std::vector<uint16_t> alive = config_.Alive();
  POND_CHECK(!alive.empty());
  // The timestamp oracle moves with the epoch to the lowest survivor, which starts a new one
  // from its clock when it hears (Hear; timestamp_oracle.h says why its grants exceed the old).
  if (config_.tso_host == dead) {
    config_.tso_host = alive[0];
    cl_.tso_cn_ = alive[0];
    tso_moves_++;
  }
  // The dead CN's shards (those it was given by an earlier failure included) go round-robin to
  // the survivors, closed (LockTable::SetManaged false until MaybeFinish opens them): from now on
  // lock requests for them find the new owner, which refuses them.
  size_t k = 0;
  for (uint32_t s = 0; s < lock::kShards; s++) {
    if (cl_.shard_map_.CnOf(s) != dead) continue;
    const uint16_t to = alive[k++ % alive.size()];
    cl_.AssignShardEverywhere(s, to);
    f.moved.emplace_back(s, to);
  }
  // The reconfiguration commits when the coordination service takes the new configuration.
  Result<uint64_t> v = store_.PutIf(cluster::kConfigKey, config_.Encode(), config_version_);
  POND_CHECK_MSG(v.ok(), "the configuration manager lost its conditional put");
  config_version_ = *v;
  // Recovery work: the dead CN's worker i's log goes to the i-th survivor, round robin.
  const int workers = cl_.config().workers_per_cn;
  for (int i = 0; i < workers; i++) {
    f.logs_pending[static_cast<uint16_t>(i)] = alive[static_cast<size_t>(i) % alive.size()];
  }
  f.release_waiting = std::set<uint16_t>(alive.begin(), alive.end());
  f.drain_waiting = f.release_waiting;
  // A CN that dies while it owes another failure work: its logs to recover go to someone else,
  // and it is waited for no more (its lock table and its transactions died with it).
  for (auto& other : failures_) {
    if (other.get() == &f || !other->declared || other->opening) continue;
    other->release_waiting.erase(dead);
    other->drain_waiting.erase(dead);
    size_t n = 0;
    for (auto& [worker, cn] : other->logs_pending) {
      if (cn != dead) continue;
      cn = alive[n++ % alive.size()];
      handed_on_++;
      StartLogRecovery(other->cn, worker, cn);
    }
  }
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  const uint64_t epoch = config_.epoch;
  engine_.At(now + kConfigPutNs + one_way, [this, dead, epoch] {
    for (uint16_t s : config_.Alive()) {
      Arrive(s, [this, s, dead, epoch] { OnEpoch(s, dead, epoch); });
    }
  });
  RejoinCnFailed(dead);
  for (auto& other : failures_) MaybeFinish(*other);
}

void Failover::StartLogRecovery(uint16_t dead, uint16_t worker, uint16_t survivor) {
  if (crashed_[survivor]) return;  // its own declaration will hand this on
  CnContext& cn = *cl_.cns_[survivor];
  WorkerContext& w = *cn.workers[worker % cn.workers.size()];
  WorkerContext& victim = *cl_.cns_[dead]->workers[worker];
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  w.sched().Spawn([](Failover* fo, WorkerContext* w, std::vector<GAddr> areas, uint64_t bytes,
                     uint16_t dead, uint16_t worker, uint64_t one_way) -> Task<void> {
    Result<cluster::LogRecoveryStats> r = co_await cluster::RecoverCommitLog(
        w->ep(), w->cluster().catalog(), w->placement(), areas, bytes, dead, worker);
    // An MN that crashes under a recovery does not answer it: once every CN has stopped using
    // that MN, the recovery starts over (it is idempotent), leaving the MN out.
    while (!r.ok() && r.status().code() == Code::kUnavailable) {
      co_await w->sched().SleepFor(kDrainPollNs);
      r = co_await cluster::RecoverCommitLog(w->ep(), w->cluster().catalog(), w->placement(), areas,
                                             bytes, dead, worker);
    }
    POND_CHECK_MSG(r.ok(), r.status().ToString().c_str());
    const uint64_t now = w->clock().NowNs();
    const uint16_t by = w->cn_id();
    fo->engine_.At(now + one_way, [fo, dead, worker, by, fwd = r->rolled_forward,
                                   back = r->rolled_back, records = r->records] {
      fo->Arrive(by, [=] { fo->OnRecovered(dead, worker, by, fwd, back, records); });
    });
  }(this, &w, victim.log().areas(), victim.log().bytes(), dead, worker, one_way));
}

void Failover::Hear(CnContext& cn) {
  if (cn.view.epoch >= config_.epoch) return;
  const uint16_t tso_before = cn.view.tso_host;
  cn.view = config_;
  for (auto& w : cn.workers) w->SetView(config_);
  if (config_.tso_host == tso_before) return;
  if (cn.id == config_.tso_host) {
    if (cn.oracle == nullptr) {
      cn.oracle = std::make_unique<TimestampOracle>(cl_.clock_);
      // What docs/recovery.md argues, checked: the new oracle starts past the old one.
      POND_CHECK_MSG(cn.oracle->NextAtLeast() > oracle_->last(),
                     "a new timestamp oracle would grant below the old one");
      oracle_ = cn.oracle.get();
    }
    for (auto& w : cn.workers) w->HostTso(*cn.oracle);
  } else {
    for (auto& w : cn.workers) w->tso().SetHost(cl_.TsoHost(w->index()), nullptr);
  }
}

void Failover::OnEpoch(uint16_t survivor, uint16_t dead, uint64_t epoch) {
  if (crashed_[survivor]) return;  // it died meanwhile; nobody hears this
  CnContext& cn = *cl_.cns_[survivor];
  (void)epoch;  // a later epoch may have come first: the view jumps to the newest
  Hear(cn);
  for (auto& w : cn.workers) {
    w->locks().PeerFailed(dead);
    unknown_calls_ += w->calls().PeerFailed(dead);
  }
  Failure& f = FailureOf(dead);
  for (const auto& [worker, to] : f.logs_pending) {
    if (to == survivor) StartLogRecovery(dead, worker, survivor);
  }
  // Drain: this CN's live transactions that asked the dead CN for a lock finish (those in their
  // commit phase) or abort (the rest: their next lock request finds the CN failed).
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  cn.workers[0]->sched().Spawn(
      [](Failover* fo, CnContext* cn, uint16_t dead, uint64_t one_way) -> Task<void> {
        for (;;) {
          size_t live = 0;
          for (auto& w : cn->workers) live += w->locks().LiveContacting(dead);
          if (live == 0) break;
          co_await cn->workers[0]->sched().SleepFor(kDrainPollNs);
        }
        const uint64_t now = cn->workers[0]->clock().NowNs();
        fo->engine_.At(now + one_way, [fo, dead, by = cn->id] {
          fo->Arrive(by, [fo, dead, by] { fo->OnDrained(dead, by); });
        });
      }(this, &cn, dead, one_way));
}

void Failover::OnRecovered(uint16_t dead, uint16_t worker, uint16_t by, uint64_t rolled_forward,
                           uint64_t rolled_back, uint64_t records) {
  Failure& f = FailureOf(dead);
  auto it = f.logs_pending.find(worker);
  // A report from a recoverer that has died since, for a log handed on meanwhile: the new
  // recoverer's report counts (the rule is idempotent, so both did the same).
  if (it == f.logs_pending.end() || it->second != by || crashed_[by]) return;
  f.logs_pending.erase(it);
  f.rolled_forward += rolled_forward;
  f.rolled_back += rolled_back;
  f.records += records;
  if (!f.logs_pending.empty()) return;
  // Every transaction of the dead CN is finished or undone: its locks may go (Lotus §6).
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  for (uint16_t s : std::set<uint16_t>(f.release_waiting)) {
    engine_.At(engine_.now() + one_way, [this, s, dead, one_way] {
      Arrive(s, [this, s, dead, one_way] {
        if (crashed_[s]) return;
        CnContext& cn = *cl_.cns_[s];
        cn.locks.ReleaseAllOf(dead);
        for (auto& w : cn.workers) w->lock_server().ForgetCn(dead);
        engine_.At(engine_.now() + one_way,
                   [this, s, dead] { Arrive(s, [this, s, dead] { OnReleased(dead, s); }); });
      });
    });
  }
}

void Failover::OnReleased(uint16_t dead, uint16_t by) {
  Failure& f = FailureOf(dead);
  f.release_waiting.erase(by);
  MaybeFinish(f);
}

void Failover::OnDrained(uint16_t dead, uint16_t by) {
  Failure& f = FailureOf(dead);
  f.drain_waiting.erase(by);
  MaybeFinish(f);
}

void Failover::MaybeFinish(Failure& f) {
  if (f.declared && !f.released && f.logs_pending.empty() && f.release_waiting.empty()) {
    f.released = true;
    f.recovered_ns = engine_.now() - base_ns_;
  }
  // Shards open together: one that moved twice (its CN failed, then the CN it went to) must
  // wait for both failures' recoveries, and failures are rare enough not to mind the coupling.
  for (const auto& other : failures_) {
    if (crashed_[other->cn] && !other->opening && !other->Ready()) return;
  }
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  for (auto& g : failures_) {
    if (g->opening || !g->Ready()) continue;
    g->opening = true;
    g->opens_pending = 0;
    for (auto [shard, to] : g->moved) {
      // A shard whose new owner failed too has moved on; that failure opens it.
      if (cl_.shard_map_.CnOf(shard) != to) continue;
      g->opens_pending++;
      engine_.At(engine_.now() + one_way, [this, g = g.get(), shard, to] {
        Arrive(to, [this, g, shard, to] {
          CnContext& cn = *cl_.cns_[to];
          // It may have managed the shard before (a restarted CN took it back since): what its
          // VT cache kept from then is stale.
          if (cn.vt) cn.vt->InvalidateShard(shard);
          cn.locks.SetManaged(shard, true);
          if (--g->opens_pending == 0) g->open_ns = engine_.now() - base_ns_;
        });
      });
    }
    if (g->opens_pending == 0) g->open_ns = engine_.now() - base_ns_;
  }
}

FailoverStats Failover::Stats() const {
  FailoverStats s;
  for (const auto& f : failures_) {
    s.failures.push_back(FailoverStats::Failure{f->cn, f->crash_ns, f->detected_ns, f->recovered_ns,
                                                f->open_ns, f->rolled_forward, f->rolled_back,
                                                f->records, f->restart_ns,
                                                f->return_failed ? 0 : f->returned_ns, f->fenced});
  }
  s.partitions = partitions_;
  s.mn_failures = mn_failures_;
  s.epoch = config_.epoch;
  s.faults_not_reached = faults_not_reached_;
  for (int i = 0; i < kCommitSteps; i++) s.step_crashes[i] = step_crashes_[i];
  s.step_crashes_unaimed = step_crashes_unaimed_;
  s.config_puts = store_.puts();
  s.unknown_calls = unknown_calls_;
  s.handed_on = handed_on_;
  s.tso_host = config_.tso_host;
  s.tso_moves = tso_moves_;
  SimFabric::CrashStats c = cl_.sim_fabric_->crash_stats();
  s.lost_packets = c.dropped_packets;
  s.landed_batches = c.landed_batches;
  s.lost_batches = c.lost_batches;
  s.cut_packets = c.cut_packets;
  return s;
}

}  // namespace pond::txn
