// CnMembership's epochs and recovery steps: applying a newer configuration (Apply), letting
// this CN's parts follow it (Adopt), each known failure's recovery step by step (Progress), and
// the configuration manager's work (Manage). Beats, leases, fencing and the partition reports
// are in cn_membership.cc.
#include <algorithm>
#include <bit>

#include "pond/base/assert.h"
#include "pond/recovery/cn_membership.h"
#include "pond/store/layout.h"

namespace pond::recovery {

namespace {

// Failure::recovery: a log's recovery by this CN, from the coordination half's start of it to
// the beat half's end of it and back.
constexpr int kRecoveryIdle = 0, kRecoveryRunning = 1, kRecoveryDone = 2, kRecoveryFailed = 3;

}  // namespace

void CnMembership::Adopt() {
  // A failure declared before this CN was alive in an epoch it applied (it started, or was let
  // back in, while the recovery went on): it takes its part all the same — it holds none of the
  // failed CN's locks and none of its shards, so its steps are quick — because the others wait
  // for every CN alive, and should they all fail, it is who finishes the recovery.
  for (uint16_t c = 0; c < view_.cns.size(); c++) {
    const cluster::CnStatus& s = view_.cns[c];
    if (s.alive || s.failed_epoch == 0 || c == o_.cn) continue;
    const bool known = std::any_of(failures_.begin(), failures_.end(), [&](const auto& f) {
      return f->cn == c && f->epoch == s.failed_epoch;
    });
    if (known) continue;
    auto f = std::make_unique<Failure>();
    f->epoch = s.failed_epoch;
    f->cn = c;
    f->incarnation = s.incarnation;
    Result<cluster::LogAreas> logs = cluster::ReadLogAreas(store_, o_.cluster, c, s.incarnation);
    if (!logs.ok()) continue;  // the service is away: adopted next period
    f->logs = logs->areas;
    f->log_bytes = logs->bytes;
    failures_.push_back(std::move(f));
  }
}

CnMembership::Part CnMembership::PartIn(uint16_t cn, uint64_t epoch) const {
  for (const auto& f : failures_) {
    if (f->cn != cn || f->epoch != epoch) continue;
    if (f->opened) return Part::kOpened;
    return f->released ? Part::kReleased : Part::kUnderWay;
  }
  return Part::kNone;
}

void CnMembership::Apply(const cluster::Configuration& next, const std::vector<uint16_t>& shards) {
  const std::string& name = o_.cluster;
  // Declared failed itself (a CM that stopped seeing its beats): others may be recovering it.
  if (view_.cns[o_.cn].alive && !next.cns[o_.cn].alive) {
    Fence("declared failed by epoch " + std::to_string(next.epoch));
    return;
  }
  std::vector<uint16_t> dead, back;
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    const cluster::CnStatus& was = view_.cns[c];
    const cluster::CnStatus& now = next.cns[c];
    if (was.alive && !now.alive) {
      dead.push_back(c);
      auto f = std::make_unique<Failure>();
      // The epoch that declared it, as the configuration names it: this CN may hear of it only
      // epochs later (it missed some while the service was down), and the steps are keyed by
      // the declaring epoch on every CN.
      f->epoch = now.failed_epoch != 0 ? now.failed_epoch : next.epoch;
      f->cn = c;
      f->incarnation = was.incarnation;
      Result<cluster::LogAreas> logs = cluster::ReadLogAreas(store_, name, c, was.incarnation);
      if (logs.ok()) {
        f->logs = logs->areas;
        f->log_bytes = logs->bytes;
      } else {
        controls_.Event("no log areas of CN " + std::to_string(c) + ": " + logs.status().message());
      }
      for (uint32_t s = 0; s < o_.shards; s++) {
        if (shards[s] == o_.cn && shards_[s] == c) f->moved.push_back(s);
      }
      controls_.Event("CN " + std::to_string(c) + " failed (epoch " + std::to_string(next.epoch) +
                      "); recovering it");
      counts_.cns_failed++;
      failures_.push_back(std::move(f));
    }
    if (now.alive && c != o_.cn && (!was.alive || now.incarnation != was.incarnation)) {
      back.push_back(c);
      // A restarted CN: its new workers.
      Status reached = controls_.ReachRestarted(c, now.incarnation);
      if (!reached.ok()) {
        controls_.Event("cannot reach restarted CN " + std::to_string(c) + ": " +
                        reached.message());
      }
      {
        // Its beats count from now: the old incarnation's last one is long past, and a CM that
        // read it so would declare the new one at once.
        std::lock_guard lock(beat_mu_);
        cn_seen_[c] = Seen{0, clock_.NowNs()};
      }
      controls_.Event("CN " + std::to_string(c) + " is back as incarnation " +
                      std::to_string(now.incarnation));
      counts_.cns_back++;
    }
  }
  for (uint16_t mn = 0; mn < next.mns.size(); mn++) {
    const cluster::MnStatus& was = view_.mns[mn];
    const cluster::MnStatus& now = next.mns[mn];
    // A CN that read the configuration before this epoch may renew on this MN's page still,
    // which a CM reads no more (LeaseFrom): no CN is declared for a lease (Declarable).
    if (was.ReadByAll() && !now.ReadByAll()) dropped_ns_ = clock_.NowNs();
    if (was.alive && now.alive && !was.leaving && now.leaving) {
      // Written still, read no more: a CN that has not heard this yet may still read it, so
      // everyone's writes must keep reaching it (over shared memory a dead MN's memory stays
      // readable, and would serve what it holds).
      controls_.StopReading(static_cast<MnId>(mn));
      // Taken after the placement changed: a transaction that starts later takes no lock word
      // on it, nor on the replica its words move to, until it is down.
      if (o_.mn_lock_words) unread_mark_[{mn, now.incarnation}] = controls_.TxnMark();
      controls_.Event("MN " + std::to_string(mn) + " failed (epoch " + std::to_string(next.epoch) +
                      "); this CN reads its replicas elsewhere");
    }
    // Counted once, at the first epoch that says so: it is leaving, or down at once.
    if (was.alive && !was.leaving && (now.leaving || !now.alive)) {
      counts_.mns_failed++;
    }
    // A new incarnation in a view that held it alive: the epochs that took the old one down and
    // let this one in were missed (this CN started, or the service was down, in between). It went
    // through down all the same (SmallBank motor fault seed 1: CN 0, let in the epoch after MN 1's
    // rejoin and CM at once, went from MN 1 leaving straight to MN 1 rejoining, and declared the
    // new MN 1 failed on the old one's silence).
    const bool reborn = was.alive && now.alive && now.incarnation != was.incarnation;
    if ((!was.alive || reborn) && now.alive) {
      // A restarted MN let in: its beats count from now, as a restarted CN's do.
      std::lock_guard lock(beat_mu_);
      mn_seen_[mn] = Seen{0, clock_.NowNs()};
    }
    if (was.alive && (!now.alive || reborn)) {
      controls_.MarkDown(static_cast<MnId>(mn));
      controls_.Event("MN " + std::to_string(mn) + " is down (epoch " + std::to_string(next.epoch) +
                      "); writes skip it, its replicas serve");
    }
  }
  // Shards that come to this CN from a holder alive before and after (the same incarnation:
  // only a return or a move takes a shard off a live CN) are opened once the workers have the
  // epoch (below): the holder drained them before the CM moved them. A failed CN's shards
  // wait for its recovery instead (Progress); one that came some other way — epochs this CN did
  // not see moved it more than once — waits for every failure this epoch declares, and stays
  // closed, said in the log, if it declares none.
  // A move of this CN's that the epoch makes, whose shards epochs this CN skipped may have given
  // back to it already (its receiver failed, or moved them on): those came from the receiver,
  // not from nowhere, and are still closed here (fault seed: one stayed closed for good).
  std::map<uint32_t, uint16_t> went;
  if (auto made = moves_.MadeIn(next)) {
    for (uint32_t s : made->second) went[s] = made->first;
  }
  std::vector<uint32_t> came_home;
  for (uint32_t s = 0; s < o_.shards; s++) {
    const auto w = went.find(s);
    const uint16_t from = shards[s] == o_.cn && w != went.end() ? w->second : shards_[s];
    if (shards[s] == from) continue;
    controls_.AssignShard(s, shards[s]);
    if (shards[s] != o_.cn) continue;
    // From a holder alive before and after, when no CN failed meanwhile: drained there. With a
    // failure in the epochs this one covers, a shard may have passed through the failed CN on
    // its way, so it waits for the failures' recovery as their own shards do.
    const bool holder_stayed = view_.cns[from].alive && next.cns[from].alive &&
                               view_.cns[from].incarnation == next.cns[from].incarnation &&
                               dead.empty();
    if (holder_stayed) {
      came_home.push_back(s);
    } else if (Recovering(s)) {
      // The failure of its last holder takes it (recorded above).
    } else if (!dead.empty()) {
      for (auto it = failures_.end() - static_cast<ptrdiff_t>(dead.size()); it != failures_.end();
           ++it) {
        (*it)->moved.push_back(s);
      }
    } else {
      controls_.Event("shard " + std::to_string(s) + " came from CN " + std::to_string(from) +
                      " by no failure this CN knows of; it stays closed");
    }
  }
  // A restarted CN let in: the shards of its home this CN holds go back (shard_return.h).
  returns_.Apply(
      next, shards, back, [this](uint32_t s) { return Recovering(s); },
      [this](uint32_t s) { return moves_.Moving(s); });
  // A move of this CN's that the epoch made, or ruled out (its receiver failed).
  moves_.Apply(next, shards, clock_.NowNs(), [this](uint32_t s) { return Recovering(s); });
  const bool tso_moved = next.tso_host != view_.tso_host;
  if (tso_moved) {
    // The new host's oracle starts from its clock once the old host's lease has expired, so
    // past the old one's last grant (docs/recovery.md "The timestamp oracle").
    controls_.MoveOracle(next.tso_host);
    controls_.Event("the timestamp oracle moves to CN " + std::to_string(next.tso_host));
    counts_.tso_moves++;
  }
  // Restarted MNs on their way back: their placement and this CN's visible gate.
  rejoins_.Apply(view_, next);
  counts_.epoch = next.epoch;
  // A restarted CN is a peer again: until told, the lock client would refuse every request for
  // a shard it manages and routed calls would not send to it — the shards it takes over at the
  // next failure would be unwritable from here.
  controls_.ApplyOnWorkers(next, dead, back, tso_moved);
  // One that came by a move and whose home is a CN this epoch lets in stays closed: the return
  // just made takes it home (fault seed: a moved shard opened here while its return, drained at
  // once, handed it home too).
  std::erase_if(came_home, [this](uint32_t s) { return returns_.Returning(s); });
  for (uint32_t s : came_home) controls_.OpenShard(s);
  if (!came_home.empty()) {
    controls_.Event(std::to_string(came_home.size()) + " of this CN's shards came home (epoch " +
                    std::to_string(next.epoch) + ")");
  }
  view_ = next;
  {
    std::lock_guard lock(beat_mu_);
    beat_view_ = next;
  }
  shards_ = shards;
  if (next.cns[o_.cn].alive) alive_ = true;
}

void CnMembership::Progress(Failure& f) {
  const std::vector<uint16_t> alive = view_.Alive();
  if (alive.empty()) return;
  const auto workers = o_.workers_per_cn;
  // Without its log areas nothing of it can be recovered, nor its locks released: the failure
  // stays open (Apply said why).
  if (f.logs.size() != workers) return;
  // Each log by one survivor: the i-th of those alive now (so a recoverer that fails too is
  // replaced), its recovery idempotent should two do it.
  // A recovery this CN ran, finished on the beat thread: its step is said here.
  const int state = f.recovery.load();
  if (state == kRecoveryDone || state == kRecoveryFailed) {
    const uint16_t worker = f.recovering_worker;
    if (state == kRecoveryFailed) {
      // An MN that failed under it: tried again next period, with the MN left out once the
      // epoch says so.
      controls_.Event("recovery of CN " + std::to_string(f.cn) + "'s log " +
                      std::to_string(worker) + " stopped: " + f.recovery_error);
      f.recovery = kRecoveryIdle;
    } else if (PutStep(f, "recovered", worker).ok()) {
      f.recovered.insert(worker);
      controls_.Event("recovered CN " + std::to_string(f.cn) + "'s log " + std::to_string(worker) +
                      ": " + std::to_string(f.recovery_stats.records) + " records, " +
                      std::to_string(f.recovery_stats.rolled_forward) + " rolled forward, " +
                      std::to_string(f.recovery_stats.rolled_back) + " rolled back");
      counts_.logs_recovered++;
      controls_.LogRecovered(f.cn, f.epoch, worker, f.recovery_stats);
      f.recovery = kRecoveryIdle;
    }
  }
  for (uint16_t i = 0; i < workers; i++) {
    if (f.recovered.count(i) != 0) continue;
    if (StepDone(f, "recovered", i)) {
      f.recovered.insert(i);
      continue;
    }
    if (alive[i % alive.size()] != o_.cn || f.recovery.load() != kRecoveryIdle) continue;
    // With lock words on MNs, a leaving MN's words are unknown to recovery, and it may act on
    // their keys only once no live transaction can hold them (item 2 of the same section).
    if (o_.mn_lock_words && !LeavingMnsDrained()) continue;
    // The recovery's one-sided work runs on the beat thread, which owns the endpoint.
    f.recovery = kRecoveryRunning;
    f.recovering_worker = i;
    std::lock_guard lock(beat_mu_);
    to_spawn_.push_back([this, fp = &f, i]() -> Task<void> {
      return [](CnMembership* m, Failure* f, uint16_t worker) -> Task<void> {
        Result<cluster::LogRecoveryStats> r = co_await cluster::RecoverCommitLog(
            m->beat_ep_, m->controls_.catalog(), m->controls_.placement(), f->logs[worker],
            f->log_bytes, f->cn, worker);
        if (r.ok()) {
          f->recovery_stats = *r;
          f->recovery = kRecoveryDone;
        } else {
          f->recovery_error = r.status().message();
          f->recovery = kRecoveryFailed;
        }
      }(this, fp, i);
    });
  }
  if (f.recovered.size() < workers) return;
  if (!f.released) {
    // Lotus §6's order: its transactions are finished or undone, so its locks may go.
    if (!controls_.ReleaseLocksOf(f.cn, f.incarnation) || !PutStep(f, "released", o_.cn).ok())
      return;
    f.released = true;
  }
  if (!f.drained) {
    const std::optional<size_t> live = controls_.LiveContacting(f.cn);
    if (!live.has_value() || *live != 0 || !PutStep(f, "drained", o_.cn).ok()) return;
    f.drained = true;
  }
  if (!StepDoneByAll(f, "released") || !StepDoneByAll(f, "drained")) return;
  // Shards open together: one moved twice (its CN failed, then the CN it went to, before the
  // first failure was recovered) must wait for both recoveries — opened after the second alone,
  // new transactions would lock keys the first failure's log recovery is still rolling back
  // over (a lost commit the simulator's seeds found). Failures are rare enough not to mind.
  for (const auto& g : failures_) {
    if (g->opened || g.get() == &f) continue;
    if (!StepDoneByAll(*g, "released") || !StepDoneByAll(*g, "drained")) return;
  }
  size_t opened = 0;
  for (uint32_t s : f.moved) {
    if (controls_.ShardOwner(s) != o_.cn) continue;  // moved on since: that failure opens it
    if (returns_.Returning(s)) continue;             // closed to go home: opened there
    controls_.OpenShard(s);
    opened++;
  }
  if (!PutStep(f, "opened", o_.cn).ok()) return;
  f.opened = true;
  controls_.Event("CN " + std::to_string(f.cn) + "'s failure (epoch " + std::to_string(f.epoch) +
                  ") is recovered; this CN serves " + std::to_string(opened) + " of its shards");
  counts_.recoveries++;
}

void CnMembership::Manage() {
  const std::string& name = o_.cluster;
  // A CM whose own beats are not getting through may be the one cut off: it declares nothing.
  if (clock_.NowNs() > renewed_ns_.load() + o_.lease_ns / 2) return;
  cluster::Configuration next = view_;
  std::vector<std::string> what;
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (c == o_.cn || !next.cns[c].alive || !Declarable(c)) continue;
    next.cns[c].alive = false;
    what.push_back("CN " + std::to_string(c) + " failed");
  }
  using Rejoin = cluster::MnStatus::Rejoin;
  // Without a full copy to read: down, leaving, or rejoining and not read yet.
  auto unread = [](const cluster::MnStatus& s) { return !s.ReadByAll(); };
  int mns_down = 0;
  for (const cluster::MnStatus& s : next.mns) mns_down += unread(s) ? 1 : 0;
  for (uint16_t mn = 0; mn < next.mns.size(); mn++) {
    cluster::MnStatus& m = next.mns[mn];
    // An MN declared fails in two epochs: first nobody reads it (leaving), then, once every CN
    // has said so, writes skip it. With lock words on MNs, also only once every CN failure
    // declared is recovered: once down, its keys' words move to a backup, free, where a dead
    // CN's commit may lie half-written (docs/recovery.md "Lock words on MNs", item 1).
    if (m.alive && m.leaving) {
      if (MnUnreadByAll(mn) && (!o_.mn_lock_words || CnFailuresRecovered(next))) {
        m = cluster::MnStatus{.alive = false, .incarnation = m.incarnation};
        what.push_back("MN " + std::to_string(mn) + " is down");
      }
      continue;
    }
    // Its beat stopped, or most CNs cannot reach it (MnLinks): either way nobody may wait on it.
    const bool expired = MnExpired(mn);
    if (!m.alive || !(expired || MnCutOff(mn))) continue;
    if (unread(m)) {
      // Failed again while rejoining, read by nobody: down at once (the rejoin is abandoned).
      m = cluster::MnStatus{.alive = false, .incarnation = m.incarnation};
      what.push_back("MN " + std::to_string(mn) + " failed while rejoining");
      continue;
    }
    // Every group keeps a copy: more than R-1 MNs down would lose data, so the declaration
    // waits (and writes to that MN's groups wait with it).
    if (mns_down + 1 > o_.replication - 1) continue;
    m.rejoin = Rejoin::kNone;  // read by some CNs already (switched): it leaves as any MN
    m.leaving = true;
    mns_down++;
    what.push_back("MN " + std::to_string(mn) +
                   (expired ? " failed" : " failed: most CNs cannot reach it"));
  }
  // Restarted MNs: let in, and moved on a step once every CN has done its part.
  for (uint16_t mn : rejoins_.Pick(view_, &next, &what)) {
    std::lock_guard lock(beat_mu_);
    mn_seen_[mn] = Seen{0, clock_.NowNs()};
  }
  // Restarted CNs ask to come back; one is let in once its failure is recovered everywhere.
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (next.cns[c].alive || view_.cns[c].alive) continue;
    Result<cluster::Versioned> j = store_.Get(cluster::JoinKey(name, c));
    if (!j.ok() || j->value.empty()) continue;
    const std::string text(reinterpret_cast<const char*>(j->value.data()), j->value.size());
    if (text != std::to_string(view_.cns[c].incarnation + 1)) continue;
    // Judged from the service, not from this CN's records: a CM let in after the failure was
    // declared knows of it only as every CN does, by the epoch the configuration names.
    const uint64_t failed = view_.cns[c].failed_epoch;
    if (failed == 0 || !StepDoneByAll(failed, c, "opened")) continue;
    next.cns[c] = cluster::CnStatus{true, static_cast<uint16_t>(view_.cns[c].incarnation + 1)};
    // It comes back managing no shard, so its clock matters no more than any CN's.
    {
      std::lock_guard lock(beat_mu_);
      cn_seen_[c] = Seen{0, clock_.NowNs()};
    }
    what.push_back("CN " + std::to_string(c) + " rejoins");
  }
  std::vector<uint16_t> shards = shards_;
  returns_.Pick(view_, &next, &shards, &what);
  moves_.Pick(view_, &next, &shards, &what);
  if (what.empty()) return;
  next.epoch++;
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (view_.cns[c].alive && !next.cns[c].alive) next.cns[c].failed_epoch = next.epoch;
  }
  const std::vector<uint16_t> alive = next.Alive();
  if (!next.cns[next.tso_host].alive) next.tso_host = alive.front();
  // The failed CNs' shards go round robin to the survivors that were alive before (a CN that
  // rejoins now gets none: its shards stay where they went).
  std::vector<uint16_t> takers;
  for (uint16_t c : alive) {
    if (view_.cns[c].alive) takers.push_back(c);
  }
  size_t k = 0;
  for (uint32_t s = 0; s < o_.shards; s++) {
    if (!next.cns[shards[s]].alive) shards[s] = takers[k++ % takers.size()];
  }
  // The map first, then the configuration that commits it: of two CMs the first map's writer
  // goes on to the configuration, the other gives up this period.
  Status map = cluster::WriteShardMap(store_, name, next.epoch, shards);
  if (!map.ok()) return;
  Result<uint64_t> put = store_.PutIf(cluster::ConfigKey(name), next.Encode(), config_version_);
  if (!put.ok()) return;
  std::string line = "epoch " + std::to_string(next.epoch) + ":";
  for (const std::string& w : what) line += " " + w + ";";
  controls_.Event(line + " (this CN manages the configuration)");
}

bool CnMembership::Recovering(uint32_t s) const {
  for (const auto& f : failures_) {
    if (!f->opened && std::find(f->moved.begin(), f->moved.end(), s) != f->moved.end()) return true;
  }
  return false;
}

Status CnMembership::PutStep(const Failure& f, const std::string& step, uint16_t who) {
  const std::string key = cluster::FailureStepKey(o_.cluster, f.epoch, f.cn, step, who);
  Result<uint64_t> put = store_.PutIf(key, {}, 0);
  if (put.ok() || put.status().code() == Code::kConflict) return Status::Ok();
  return put.status();
}

bool CnMembership::CnFailuresRecovered(const cluster::Configuration& next) const {
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (next.cns[c].alive) continue;
    if (view_.cns[c].alive) return false;  // declared in this very epoch
    const uint64_t epoch = view_.cns[c].failed_epoch;
    if (epoch == 0) continue;
    for (uint16_t w = 0; w < o_.workers_per_cn; w++) {
      Result<cluster::Versioned> v =
          store_.Get(cluster::FailureStepKey(o_.cluster, epoch, c, "recovered", w));
      if (!v.ok() || v->version == 0) return false;
    }
  }
  return true;
}

bool CnMembership::LeavingMnsDrained() const {
  for (uint16_t mn = 0; mn < view_.mns.size(); mn++) {
    if (view_.mns[mn].alive && view_.mns[mn].leaving && !MnUnreadByAll(mn)) return false;
  }
  return true;
}

bool CnMembership::StepDone(const Failure& f, const std::string& step, uint16_t who) const {
  Result<cluster::Versioned> v =
      store_.Get(cluster::FailureStepKey(o_.cluster, f.epoch, f.cn, step, who));
  return v.ok() && v->version != 0;
}

bool CnMembership::StepDoneByAll(const Failure& f, const std::string& step) const {
  return StepDoneByAll(f.epoch, f.cn, step);
}

bool CnMembership::StepDoneByAll(uint64_t epoch, uint16_t dead, const std::string& step) const {
  // Every CN alive takes part, one let in after the failure too (Adopt): only the failed CN
  // itself, back since, does not.
  for (uint16_t c : view_.Alive()) {
    if (c == dead) continue;
    Result<cluster::Versioned> v =
        store_.Get(cluster::FailureStepKey(o_.cluster, epoch, dead, step, c));
    if (!v.ok() || v->version == 0) return false;
  }
  return true;
}

}  // namespace pond::recovery
