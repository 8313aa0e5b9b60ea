// The Failover's memory-node half: an MN crash (a new epoch without it) and an MN restart
// (re-replication onto it while transactions go on). docs/recovery.md "MN crash", "MN restart".
#include <algorithm>
#include <string>

#include "pond/base/assert.h"
#include "pond/store/catalog.h"
#include "pond/transport/sim/sim_fabric.h"
#include "pond/txn/failover.h"
#include "pond/txn/failover_rejoin.h"
#include "pond/txn/rereplication.h"
#include "pond/txn/txn_state.h"
#include "pond/txn/worker_context.h"

namespace pond::txn {

// Buckets per unit of copy work: small enough that the work spreads over every worker and a
// CN's failure loses little, large enough that handing units out costs nothing.
constexpr uint64_t kCopyUnitBuckets = 32;
constexpr int kCopiersPerWorker = 1;

int Failover::MnsNotReadable() const {
  int n = 0;
  for (size_t mn = 0; mn < mn_crashed_.size(); mn++) {
    if (mn_crashed_[mn]) n++;
  }
  for (const auto& r : rejoins_) {
    if (!r->finished && !mn_crashed_[r->mn]) n++;
  }
  return n;
}

void Failover::RetryMnFaultLater(NodeFaultKind kind, MnId mn) {
  // Counted, so that the run does not end while a fault it reached still waits (Idle).
  mn_faults_waiting_++;
  engine_.At(engine_.now() + kDrainPollNs, [this, kind, mn, gen = generation_] {
    mn_faults_waiting_--;
    if (gen != generation_) return;
    if (kind == NodeFaultKind::kCrashMn) {
      CrashMn(mn);
    } else {
      RestartMn(mn);
    }
  });
}

void Failover::CrashMn(MnId mn) {
  POND_CHECK(!mn_crashed_[mn]);
  // Every group keeps one full copy: a crash that would leave more than R-1 MNs without one
  // waits for a rejoin to finish (ValidateNodeFaults bounds the schedule's own count).
  if (MnsNotReadable() + 1 > cl_.config().replication - 1) {
    bool rejoining = false;
    for (const auto& r : rejoins_) rejoining |= !r->finished && r->mn == mn;
    if (!rejoining) {
      RetryMnFaultLater(NodeFaultKind::kCrashMn, mn);
      return;
    }
  }
  mn_crashed_[mn] = true;
  cl_.sim_fabric_->CrashMn(mn);
  for (auto& r : rejoins_) {
    if (!r->finished && r->mn == mn) {
      r->finished = true;  // abandoned: its copiers find it down and stop
      r->phase = Rejoin::Phase::kDone;
    }
  }
  mn_failures_.push_back(FailoverStats::MnFailure{mn, engine_.now() - base_ns_});
}

void Failover::DeclareMn(MnId mn) {
  POND_CHECK_MSG(mn_crashed_[mn], "a lease expired on a running MN");
  config_.epoch++;
  config_.mns[mn] = cluster::MnStatus{false};
  Result<uint64_t> v = store_.PutIf(cluster::kConfigKey, config_.Encode(), config_version_);
  POND_CHECK_MSG(v.ok(), "the configuration manager lost its conditional put");
  config_version_ = *v;
  size_t f = mn_failures_.size();
  for (size_t i = 0; i < mn_failures_.size(); i++) {
    if (mn_failures_[i].mn == mn) f = i;  // its latest
  }
  POND_CHECK(f < mn_failures_.size());
  mn_failures_[f].detected_ns = engine_.now() - base_ns_;
  // Every CN hears the epoch at once here, and the simulated CNs share one Placement. Until
  // they hear it, their batches to the MN fail after the transport's timeout: readers abort
  // and retry, committing writers wait (MvccTxn::CommitFlush); nobody acts on the old epoch's
  // view of the MN once it has heard the new one.
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  const uint64_t epoch = config_.epoch;
  engine_.At(engine_.now() + kConfigPutNs + one_way, [this, mn, epoch, f] {
    cl_.ChangePlacementEverywhere([&](store::Placement& p) { p.SetDown(mn); });
    for (uint16_t s : config_.Alive()) HearLater(s, epoch);
    mn_failures_[f].down_ns = engine_.now() - base_ns_;
  });
}

void Failover::HearLater(uint16_t cn, uint64_t epoch) {
  Arrive(cn, [this, cn, epoch] {
    if (cl_.cns_[cn]->view.epoch < epoch) Hear(*cl_.cns_[cn]);
  });
}

void Failover::RestartMn(MnId mn) {
  // Not before its failure is declared and every CN has stopped using it.
  bool down = false;
  for (const auto& m : mn_failures_) {
    if (m.mn == mn) down = m.down_ns != 0;  // its latest failure decides
  }
  if (!down) {
    RetryMnFaultLater(NodeFaultKind::kRestartMn, mn);
    return;
  }
  POND_CHECK(mn_crashed_[mn]);
  const uint64_t now = engine_.now();
  mn_crashed_[mn] = false;
  mn_renewed_ns_[mn] = now;
  cl_.sim_fabric_->RestartMn(mn);
  // A replacement machine's blank memory, laid out as before from the catalog every CN holds.
  store::RestoreRegion(cl_.fabric_->region(mn), cl_.catalog_, mn);
  auto r = std::make_unique<Rejoin>();
  r->mn = mn;
  r->failure = mn_failures_.size() - 1;
  for (size_t i = 0; i < mn_failures_.size(); i++) {
    if (mn_failures_[i].mn == mn) r->failure = i;
  }
  mn_failures_[r->failure].restart_ns = now - base_ns_;
  rejoins_.push_back(std::move(r));
  RejoinEpoch(*rejoins_.back(), cluster::MnStatus::Rejoin::kCopying);
}

void Failover::RejoinEpoch(Rejoin& r, cluster::MnStatus::Rejoin state) {
  config_.epoch++;
  config_.mns[r.mn] = cluster::MnStatus{true, state};
  Result<uint64_t> v = store_.PutIf(cluster::kConfigKey, config_.Encode(), config_version_);
  POND_CHECK_MSG(v.ok(), "the configuration manager lost its conditional put");
  config_version_ = *v;
  const uint64_t one_way = cl_.sim_fabric_->testbed().one_way_ns;
  engine_.At(engine_.now() + kConfigPutNs + one_way, [this, rp = &r, state, epoch = config_.epoch] {
    Rejoin& r = *rp;
    if (r.finished) return;  // it crashed again meanwhile
    using S = cluster::MnStatus::Rejoin;
    if (state == S::kNone) {
      cl_.visible_gate_closed_ = true;
      OpenWhenNoCommitIsMidVisible(r, epoch);
      return;
    }
    if (state == S::kCopying) {
      cl_.ChangePlacementEverywhere([&](store::Placement& p) { p.SetJoining(r.mn); });
    } else {
      cl_.ChangePlacementEverywhere([&](store::Placement& p) { p.SetFrozen(r.mn); });
    }
    for (uint16_t s : config_.Alive()) HearLater(s, epoch);
    CaptureFloors(r);
    PollRejoin(r);
  });
}

void Failover::OpenWhenNoCommitIsMidVisible(Rejoin& r, uint64_t epoch) {
  // Readers of the MN's keys move to it at this instant: no commit may be between its two
  // write-visible rounds, or a reader could find a timestamp on it that the replica read so
  // far lacks (MvccTxn::Commit holds new commits meanwhile).
  bool mid = false;
  for (uint16_t cn : config_.Alive()) {
    if (crashed_[cn]) continue;
    for (const auto& w : cl_.cns_[cn]->workers) mid |= w->commits_mid_visible() > 0;
  }
  if (mid && !r.finished) {
    engine_.At(engine_.now() + kVisibleGatePollNs,
               [this, rp = &r, epoch] { OpenWhenNoCommitIsMidVisible(*rp, epoch); });
    return;
  }
  cl_.visible_gate_closed_ = false;
  if (r.finished) return;  // it crashed again meanwhile
  cl_.ChangePlacementEverywhere([&](store::Placement& p) { p.SetUp(r.mn); });
  for (uint16_t s : config_.Alive()) HearLater(s, epoch);
  r.finished = true;
  r.phase = Rejoin::Phase::kDone;
  FailoverStats::MnFailure& f = mn_failures_[r.failure];
  f.readable_ns = engine_.now() - base_ns_;
  f.slots_copied = r.slots;
}

void Failover::CaptureFloors(Rejoin& r) {
  r.floors.assign(cl_.cns_.size(), {});
  r.contexts.assign(cl_.cns_.size(), nullptr);
  for (uint16_t cn : config_.Alive()) {
    if (crashed_[cn]) continue;
    r.contexts[cn] = cl_.cns_[cn].get();
    for (const auto& w : cl_.cns_[cn]->workers) r.floors[cn].push_back(w->locks().next_floor());
  }
}

bool Failover::FloorsPassed(const Rejoin& r) const {
  for (size_t cn = 0; cn < r.floors.size(); cn++) {
    if (r.floors[cn].empty() || crashed_[cn] || cl_.cns_[cn].get() != r.contexts[cn]) {
      continue;
    }
    for (size_t i = 0; i < r.floors[cn].size(); i++) {
      if (cl_.cns_[cn]->workers[i]->locks().floor() < r.floors[cn][i]) return false;
    }
  }
  return true;
}

void Failover::PollRejoin(Rejoin& r) {
  if (r.finished) return;
  if (!FloorsPassed(r)) {
    engine_.At(engine_.now() + kDrainPollNs, [this, rp = &r, gen = generation_] {
      if (gen == generation_) PollRejoin(*rp);
    });
    return;
  }
  if (r.phase == Rejoin::Phase::kDraining) {
    StartCopy(r);
  } else if (r.phase == Rejoin::Phase::kFreezing) {
    StartSync(r);
  }
}

void Failover::StartCopy(Rejoin& r) {
  r.phase = Rejoin::Phase::kCopying;
  mn_failures_[r.failure].copy_start_ns = engine_.now() - base_ns_;
  const int reps = cl_.placement_.replication();
  for (const store::TableInfo& t : cl_.catalog_.tables()) {
    for (int i = 0; i < reps; i++) {
      for (uint64_t b = 0; b < t.bucket_count; b += kCopyUnitBuckets) {
        r.todo.push_back(CopyUnit{t.id, static_cast<uint8_t>(i), b,
                                  std::min(t.bucket_count, b + kCopyUnitBuckets)});
      }
    }
  }
  r.running.assign(cl_.cns_.size(), {});
  for (uint16_t cn : config_.Alive()) {
    if (crashed_[cn]) continue;
    for (size_t w = 0; w < cl_.cns_[cn]->workers.size(); w++) {
      for (int k = 0; k < kCopiersPerWorker; k++) SpawnCopier(r, cn, static_cast<uint16_t>(w));
    }
  }
  CopyDone(r);  // a pool with no tables has nothing to copy
}

void Failover::SpawnCopier(Rejoin& r, uint16_t cn, uint16_t worker) {
  WorkerContext& w = *cl_.cns_[cn]->workers[worker];
  // Units are handed out by direct calls here; the CM of separate daemons sends them as messages.
  w.sched().Spawn([](Failover* fo, Rejoin* r, WorkerContext* w, uint16_t cn) -> Task<void> {
    while (r->phase == Rejoin::Phase::kCopying && !r->todo.empty()) {
      const CopyUnit u = r->todo.front();
      r->todo.pop_front();
      r->running[cn].push_back(u);
      Result<uint64_t> copied = co_await CopyToRejoining(*w, r->mn, u);
      if (!copied.ok()) {
        // The MN crashed again: the rejoin is abandoned (CrashMn).
        POND_CHECK_MSG(copied.status().code() == Code::kUnavailable,
                       copied.status().ToString().c_str());
        break;
      }
      auto& mine = r->running[cn];
      for (auto it = mine.begin(); it != mine.end(); ++it) {
        if (it->table == u.table && it->replica == u.replica && it->first == u.first) {
          mine.erase(it);
          break;
        }
      }
      r->slots += *copied;
    }
    // Its report; a cut-off CN's waits for the heal (Arrive).
    fo->Arrive(cn, [fo, r] { fo->CopyDone(*r); });
  }(this, &r, &w, cn));
}

void Failover::CopyDone(Rejoin& r) {
  if (r.phase != Rejoin::Phase::kCopying || !r.todo.empty()) return;
  for (const auto& units : r.running) {
    if (!units.empty()) return;
  }
  mn_failures_[r.failure].copied_ns = engine_.now() - base_ns_;
  r.phase = Rejoin::Phase::kFreezing;
  RejoinEpoch(r, cluster::MnStatus::Rejoin::kFrozen);
}

void Failover::StartSync(Rejoin& r) {
  r.phase = Rejoin::Phase::kSyncing;
  const std::vector<uint16_t> alive = config_.Alive();
  POND_CHECK(!alive.empty());
  r.syncer = alive[0];
  WorkerContext& w = *cl_.cns_[r.syncer]->workers[0];
  w.sched().Spawn([](Failover* fo, Rejoin* r, WorkerContext* w) -> Task<void> {
    Status s = co_await SyncLaneCursors(*w, r->mn);
    if (r->finished || r->phase != Rejoin::Phase::kSyncing) co_return;
    if (!s.ok()) {
      // An MN did not answer: once it is declared, sync again from the replicas left.
      POND_CHECK_MSG(s.code() == Code::kUnavailable, s.ToString().c_str());
      co_await w->sched().SleepFor(SimFabric::kMnUnreachableNs);
      if (!r->finished) fo->StartSync(*r);
      co_return;
    }
    // Its report; a cut-off syncer's waits for the heal, and is void if it fenced itself
    // meanwhile (its declaration starts the sync again elsewhere: RejoinCnFailed).
    const uint16_t syncer = w->cn_id();
    fo->Arrive(syncer, [fo, r, syncer] {
      if (!r->finished && r->phase == Rejoin::Phase::kSyncing && r->syncer == syncer &&
          !fo->crashed_[syncer]) {
        fo->RejoinEpoch(*r, cluster::MnStatus::Rejoin::kNone);
      }
    });
  }(this, &r, &w));
}

void Failover::RejoinCnFailed(uint16_t dead) {
  for (auto& rp : rejoins_) {
    Rejoin& r = *rp;
    if (r.finished) continue;
    if (r.phase == Rejoin::Phase::kCopying && dead < r.running.size() && !r.running[dead].empty()) {
      // Its units go back to be copied again (a copy is idempotent under the keys' locks), by
      // a copier on the lowest survivor.
      for (const CopyUnit& u : r.running[dead]) r.todo.push_back(u);
      r.running[dead].clear();
      const std::vector<uint16_t> alive = config_.Alive();
      if (!alive.empty()) SpawnCopier(r, alive[0], 0);
    }
    if (r.phase == Rejoin::Phase::kSyncing && r.syncer == dead) StartSync(r);
  }
}

}  // namespace pond::txn
