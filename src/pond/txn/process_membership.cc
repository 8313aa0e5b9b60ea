#include "pond/txn/process_membership.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/cluster/directory.h"
#include "pond/cluster/log_recovery.h"
#include "pond/store/layout.h"
#include "pond/transport/ucx/ucx_fabric.h"
#include "pond/txn/cn_process.h"
#include "pond/txn/serving.h"
#include "pond/txn/worker_context.h"

namespace pond::txn {

namespace {

// The worker index of the membership thread's own endpoint: past every worker's.
constexpr uint16_t kMembershipWorker = 1000;
// A CN that fences itself exits with this status (its daemon's supervisor restarts it).
constexpr int kFencedExit = 75;
// How long a stopping membership thread waits for its work under way.
constexpr uint64_t kStopWaitNs = 10'000'000'000;
// Failure::recovery: a log's recovery by this CN, from the coordination thread's start of it to
// the beat thread's end of it and back.
constexpr int kRecoveryIdle = 0, kRecoveryRunning = 1, kRecoveryDone = 2, kRecoveryFailed = 3;

}  // namespace

ProcessMembership::ProcessMembership(ClusterImpl& cl)
    : cl_(cl), cn_(static_cast<uint16_t>(cl.config().transport.cn)), sched_(cl.clock()) {
  ep_ = cl.fabric_->CreateEndpoint(WorkerAddr{cn_, kMembershipWorker}, sched_);
  const ProcessStart& start = *cl.process_start_;
  view_ = start.config;
  beat_view_ = start.config;
  shards_ = start.shards;
  const uint64_t now = cl.clock().NowNs();
  cn_seen_.assign(cl.config().cns, Seen{0, now});
  mn_seen_.assign(cl.config().mns, Seen{0, now});
  mn_busy_.assign(cl.config().mns, MnBusy{});
  renewed_ns_ = now;
  alive_ = view_.cns[cn_].alive;
  cl.membership_counts_.epoch = view_.epoch;
}

ProcessMembership::~ProcessMembership() { Stop(); }

void ProcessMembership::Start() {
  POND_CHECK(!thread_.joinable());
  thread_ = std::thread([this] { Loop(); });
  coord_thread_ = std::thread([this] { CoordLoop(); });
}

void ProcessMembership::Stop() {
  stop_ = true;
  // The coordination thread first: it queues work for the beat thread, which then finishes it.
  if (coord_thread_.joinable()) coord_thread_.join();
  if (thread_.joinable()) thread_.join();
}

uint64_t ProcessMembership::LeaseNs() const {
  return uint64_t(cl_.config().transport.lease_ms) * 1'000'000;
}

void ProcessMembership::Loop() {
  const uint64_t period = LeaseNs() / 10;
  uint64_t next = cl_.clock().NowNs();
  while (!stop_.load()) {
    const uint64_t now = cl_.clock().NowNs();
    if (now >= next) {
      next = now + period;
      // A CN that has not renewed for its own lease can no longer know whether it was declared
      // failed: it stops before the CM, which counts a whole lease from its last beat it saw.
      const uint64_t renewed = renewed_ns_.load();
      if (now > renewed + LeaseNs() - LeaseNs() / 10) {
        std::string per_mn;
        for (size_t mn = 0; mn < mn_busy_.size(); mn++) {
          per_mn += "; MN " + std::to_string(mn) + ": last beat taken " +
                    std::to_string((now - mn_busy_[mn].renewed_ns) / 1'000'000) + " ms ago" +
                    (mn_busy_[mn].renewing ? ", one in flight" : "");
        }
        Fence("no renewal reached any MN for " + std::to_string((now - renewed) / 1'000'000) +
              " ms" + per_mn);
      }
      Renew();
      Watch();
    }
    std::vector<std::function<Task<void>()>> spawn;
    {
      std::lock_guard lock(beat_mu_);
      spawn.swap(to_spawn_);
    }
    for (auto& fn : spawn) sched_.Spawn(fn());
    if (!sched_.RunOnce()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // What is under way finishes first (a beat, a read of the lease pages, a log's recovery):
  // batches still in flight would complete into an endpoint that is gone. Recovery left undone
  // is idempotent and another CN's to finish.
  const uint64_t until = cl_.clock().NowNs() + kStopWaitNs;
  while (sched_.live() > 0 && cl_.clock().NowNs() < until) {
    if (!sched_.RunOnce()) std::this_thread::yield();
  }
  POND_CHECK_MSG(sched_.live() == 0, "the membership thread's work did not finish at its stop");
}

void ProcessMembership::CoordLoop() {
  // The coordination service's work — reading epochs, declaring, recovery steps — on a thread of
  // its own: a slow service must not hold up the beats.
  const uint64_t period = LeaseNs() / 10;
  while (!stop_.load()) {
    const uint64_t start = cl_.clock().NowNs();
    NoteCoordination(ReadConfig());
    NoteUndeclared();
    if (ActingCm()) Manage();
    for (auto& f : failures_) {
      if (!f->opened) Progress(*f);
    }
    const uint64_t spent = cl_.clock().NowNs() - start;
    if (spent < period) std::this_thread::sleep_for(std::chrono::nanoseconds(period - spent));
  }
}

void ProcessMembership::Renew() {
  beat_ = store::CnBeat(cl_.process_start_->incarnation, ++beat_count_);
  // Every MN on its own: a batch to an MN that died may take the transport's timeout to fail,
  // and must not hold up the beats the others take.
  for (int mn = 0; mn < cl_.config().mns; mn++) {
    if (mn_busy_[mn].renewing || cl_.placement().IsDown(static_cast<MnId>(mn))) continue;
    mn_busy_[mn].renewing = true;
    sched_.Spawn([](ProcessMembership* m, int mn, uint64_t beat) -> Task<void> {
      const uint64_t sent = m->cl_.clock().NowNs();
      // Its own copy: the write reads it after this coroutine suspends.
      uint64_t value = beat;
      m->ep_->Write(GAddr::Make(static_cast<MnId>(mn), store::kLeasePageOffset +
                                                           offsetof(store::LeasePage, cn_beat) +
                                                           8 * uint64_t{m->cn_}),
                    &value, 8);
      Status st = co_await m->ep_->Flush();
      // One MN that took it is enough: the CM reads every MN's page.
      if (st.ok() && m->renewed_ns_.load() < sent) m->renewed_ns_ = sent;
      if (st.ok()) m->mn_busy_[mn].renewed_ns = sent;
      m->mn_busy_[mn].renewing = false;
    }(this, mn, beat_));
  }
}

void ProcessMembership::Watch() {
  std::vector<bool> alive;
  {
    std::lock_guard lock(beat_mu_);
    for (const cluster::MnStatus& m : beat_view_.mns) alive.push_back(m.alive);
  }
  for (int mn = 0; mn < cl_.config().mns; mn++) {
    if (mn_busy_[mn].watching || !alive[mn]) continue;
    mn_busy_[mn].watching = true;
    sched_.Spawn([](ProcessMembership* m, int mn) -> Task<void> {
      store::LeasePage page;
      m->ep_->Read(GAddr::Make(static_cast<MnId>(mn), store::kLeasePageOffset), &page,
                   sizeof(page));
      const bool read = (co_await m->ep_->Flush()).ok();
      m->mn_busy_[mn].watching = false;
      if (!read) co_return;  // an MN that does not answer does not beat
      const uint64_t now = m->cl_.clock().NowNs();
      std::lock_guard lock(m->beat_mu_);
      Seen& s = m->mn_seen_[mn];
      if (page.mn_beat != s.beat) s = Seen{page.mn_beat, now};
      for (size_t cn = 0; cn < m->cn_seen_.size(); cn++) {
        const uint64_t b = page.cn_beat[cn];
        // Only the incarnation the view holds alive counts: an older one's beats are its last.
        if (store::CnBeatIncarnation(b) != m->beat_view_.cns[cn].incarnation) continue;
        Seen& c = m->cn_seen_[cn];
        if (b > c.beat) c = Seen{b, now};
      }
    }(this, mn));
  }
}

bool ProcessMembership::CnExpired(uint16_t cn) const {
  std::lock_guard lock(beat_mu_);
  return cl_.clock().NowNs() > cn_seen_[cn].moved_ns + LeaseNs();
}

bool ProcessMembership::MnExpired(uint16_t mn) const {
  std::lock_guard lock(beat_mu_);
  return cl_.clock().NowNs() > mn_seen_[mn].moved_ns + LeaseNs();
}

bool ProcessMembership::ActingCm() const {
  if (!view_.cns[cn_].alive) return false;
  for (uint16_t c = 0; c < cn_; c++) {
    if (view_.cns[c].alive && !CnExpired(c)) return false;
  }
  return true;
}

Status ProcessMembership::ReadConfig() {
  const std::string& name = cl_.config().transport.cluster;
  Result<cluster::Versioned> v = cl_.coord_->Get(cluster::ConfigKey(name));
  if (!v.ok()) return v.status();
  if (v->version == config_version_) return Status::Ok();
  Result<cluster::Configuration> next = cluster::Configuration::Decode(v->value);
  if (!next.ok()) {
    Event("unreadable configuration: " + next.status().message());
    return Status::Ok();
  }
  if (next->epoch <= view_.epoch) {
    config_version_ = v->version;  // the epoch this CN started from
    return Status::Ok();
  }
  Result<std::vector<uint16_t>> shards = ReadShardMap(*cl_.coord_, name, next->epoch);
  if (!shards.ok()) return Status::Ok();  // the CM writes the map first: read again next period
  config_version_ = v->version;
  Apply(*next, *shards);
  return Status::Ok();
}

void ProcessMembership::NoteCoordination(const Status& read) {
  const uint64_t now = cl_.clock().NowNs();
  // Only the service's absence counts; any other error is the configuration's, said elsewhere.
  const bool up = read.ok() || read.code() != Code::kUnavailable;
  if (up == coord_up_) return;
  coord_up_ = up;
  cl_.membership_counts_.coordination_up = up;
  if (!up) {
    coord_down_ns_ = now;
    Event("the coordination service is unreachable (" + read.message() +
          "): no failure can be declared or recovered until it is back");
  } else {
    Event("the coordination service is back after " +
          std::to_string((now - coord_down_ns_) / 1'000'000) + " ms");
  }
}

void ProcessMembership::NoteUndeclared() {
  // A node whose beat stopped for a lease is declared within a period or two; one still
  // undeclared after two leases is a failure the cluster cannot get past (no service to put the
  // epoch, or too many MNs down): transactions that need it wait or abort until it is.
  const uint64_t now = cl_.clock().NowNs();
  uint32_t undeclared = 0;
  auto note = [&](const std::string& what, uint64_t moved_ns, bool* logged) {
    const bool stuck = now > moved_ns + 2 * LeaseNs();
    undeclared += stuck;
    if (stuck && !*logged) {
      Event(what + " has not beaten for " + std::to_string((now - moved_ns) / 1'000'000) +
            " ms and is not declared failed" +
            (coord_up_ ? std::string() : ": the coordination service is unreachable"));
    }
    *logged = stuck;
  };
  std::vector<uint64_t> cn_moved, mn_moved;
  {
    std::lock_guard lock(beat_mu_);
    for (const Seen& c : cn_seen_) cn_moved.push_back(c.moved_ns);
    for (const Seen& m : mn_seen_) mn_moved.push_back(m.moved_ns);
  }
  undeclared_logged_.resize(cn_moved.size() + mn_moved.size());
  for (uint16_t c = 0; c < cn_moved.size(); c++) {
    bool logged = undeclared_logged_[c];
    if (c != cn_ && view_.cns[c].alive) note("CN " + std::to_string(c), cn_moved[c], &logged);
    else logged = false;
    undeclared_logged_[c] = logged;
  }
  for (uint16_t mn = 0; mn < mn_moved.size(); mn++) {
    bool logged = undeclared_logged_[cn_moved.size() + mn];
    if (view_.mns[mn].alive && !view_.mns[mn].leaving) {
      note("MN " + std::to_string(mn), mn_moved[mn], &logged);
    } else {
      logged = false;
    }
    undeclared_logged_[cn_moved.size() + mn] = logged;
  }
  cl_.membership_counts_.failures_undeclared = undeclared;
}

void ProcessMembership::Apply(const cluster::Configuration& next,
                              const std::vector<uint16_t>& shards) {
  const std::string& name = cl_.config().transport.cluster;
  CnContext& me = *cl_.cns_[cn_];
  // Declared failed itself (a CM that stopped seeing its beats): others may be recovering it.
  if (view_.cns[cn_].alive && !next.cns[cn_].alive) {
    Fence("declared failed by epoch " + std::to_string(next.epoch));
  }
  std::vector<uint16_t> dead, back;
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    const cluster::CnStatus& was = view_.cns[c];
    const cluster::CnStatus& now = next.cns[c];
    if (was.alive && !now.alive) {
      dead.push_back(c);
      auto f = std::make_unique<Failure>();
      f->epoch = next.epoch;
      f->cn = c;
      f->incarnation = was.incarnation;
      Result<LogAreas> logs = ReadLogAreas(*cl_.coord_, name, c, was.incarnation);
      if (logs.ok()) {
        f->logs = logs->areas;
        f->log_bytes = logs->bytes;
      } else {
        Event("no log areas of CN " + std::to_string(c) + ": " + logs.status().message());
      }
      for (uint32_t s = 0; s < lock::kShards; s++) {
        if (shards[s] == cn_ && shards_[s] == c) f->moved.push_back(s);
      }
      Event("CN " + std::to_string(c) + " failed (epoch " + std::to_string(next.epoch) +
            "); recovering it");
      cl_.membership_counts_.cns_failed++;
      failures_.push_back(std::move(f));
    }
    if (now.alive && c != cn_ && (!was.alive || now.incarnation != was.incarnation)) {
      back.push_back(c);
      // A restarted CN: its new process's workers.
      Result<cluster::Versioned> d = cl_.coord_->Get(cluster::CnKey(name, c));
      Result<ucx::CnDescriptor> desc =
          d.ok() ? ucx::CnDescriptor::Decode(d->value) : Result<ucx::CnDescriptor>(d.status());
      if (desc.ok() && desc->incarnation == now.incarnation) {
        auto* fabric = dynamic_cast<ucx::UcxFabric*>(cl_.fabric_.get());
        Status added = fabric->AddRemoteCn(*desc);
        if (!added.ok())
          Event("cannot reach restarted CN " + std::to_string(c) + ": " + added.message());
      } else {
        Event("restarted CN " + std::to_string(c) + " has not published incarnation " +
              std::to_string(now.incarnation));
      }
      Event("CN " + std::to_string(c) + " is back as incarnation " +
            std::to_string(now.incarnation));
      cl_.membership_counts_.cns_back++;
    }
  }
  std::vector<uint16_t> unread;  // MNs this CN must stop reading, then say so
  for (uint16_t mn = 0; mn < next.mns.size(); mn++) {
    const cluster::MnStatus& was = view_.mns[mn];
    const cluster::MnStatus& now = next.mns[mn];
    if (was.alive && now.alive && !was.leaving && now.leaving) {
      // Written still, read no more: a CN that has not heard this yet may still read it, so
      // everyone's writes must keep reaching it (over shared memory a dead MN's memory stays
      // readable, and would serve what it holds).
      cl_.placement_.SetJoining(static_cast<MnId>(mn));
      unread.push_back(mn);
      Event("MN " + std::to_string(mn) + " failed (epoch " + std::to_string(next.epoch) +
            "); this CN reads its replicas elsewhere");
    }
    // Counted once, at the first epoch that says so: it is leaving, or down at once.
    if (was.alive && !was.leaving && (now.leaving || !now.alive)) {
      cl_.membership_counts_.mns_failed++;
    }
    if (was.alive && !now.alive) {
      cl_.placement_.SetDown(static_cast<MnId>(mn));
      Event("MN " + std::to_string(mn) + " is down (epoch " + std::to_string(next.epoch) +
            "); writes skip it, its replicas serve");
    }
  }
  for (uint32_t s = 0; s < lock::kShards; s++) {
    if (shards[s] != shards_[s]) cl_.shard_map_.Assign(s, shards[s]);
  }
  const bool tso_moved = next.tso_host != view_.tso_host;
  if (tso_moved) {
    cl_.tso_cn_ = next.tso_host;
    // The new host's oracle starts from its clock once the old host's lease has expired, so
    // past the old one's last grant (docs/recovery.md "The timestamp oracle").
    if (next.tso_host == cn_ && me.oracle == nullptr) {
      me.oracle = std::make_unique<TimestampOracle>(cl_.clock_);
    }
    Event("the timestamp oracle moves to CN " + std::to_string(next.tso_host));
    cl_.membership_counts_.tso_moves++;
  }
  me.view = next;
  cl_.membership_counts_.epoch = next.epoch;
  const bool host = next.tso_host == cn_;
  bool ok = true;
  OnWorkers(
      [&](WorkerContext& w) -> size_t {
        w.SetView(next);
        size_t unknown = 0;
        for (uint16_t c : dead) {
          w.locks().PeerFailed(c);
          unknown += w.calls().PeerFailed(c);
        }
        // A restarted CN is a peer again: until told, the lock client would refuse every
        // request for a shard it manages and routed calls would not send to it — the shards it
        // takes over at the next failure would be unwritable from here.
        for (uint16_t c : back) {
          w.locks().PeerRestarted(c);
          w.calls().PeerRestarted(c);
        }
        if (tso_moved) {
          if (host) {
            w.HostTso(*w.cn().oracle);
          } else {
            w.tso().SetHost(cl_.TsoHost(w.index()), nullptr);
          }
        }
        return unknown;
      },
      &ok);
  view_ = next;
  {
    std::lock_guard lock(beat_mu_);
    beat_view_ = next;
  }
  shards_ = shards;
  if (next.cns[cn_].alive) alive_ = true;
  // Said once every worker has passed a round since the MN became unreadable here (OnWorkers
  // above): the CM then lets writes skip it.
  for (uint16_t mn : unread) {
    (void)PutMnStep(next.epoch, mn);
    leaving_since_[mn] = next.epoch;
  }
}

Status ProcessMembership::PutMnStep(uint64_t epoch, uint16_t mn) {
  const std::string key = cluster::FailureStepKey(cl_.config().transport.cluster, epoch,
                                                  "unread-mn" + std::to_string(mn), cn_);
  Result<uint64_t> put = cl_.coord_->PutIf(key, {}, 0);
  if (put.ok() || put.status().code() == Code::kConflict) return Status::Ok();
  return put.status();
}

bool ProcessMembership::MnUnreadByAll(uint16_t mn) const {
  auto it = leaving_since_.find(mn);
  if (it == leaving_since_.end()) return false;
  for (uint16_t c : view_.Alive()) {
    Result<cluster::Versioned> v = cl_.coord_->Get(cluster::FailureStepKey(
        cl_.config().transport.cluster, it->second, "unread-mn" + std::to_string(mn), c));
    if (!v.ok() || v->version == 0) return false;
  }
  return true;
}

void ProcessMembership::Progress(Failure& f) {
  const std::vector<uint16_t> alive = view_.Alive();
  if (alive.empty()) return;
  const auto workers = static_cast<uint16_t>(cl_.config().workers_per_cn);
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
      Event("recovery of CN " + std::to_string(f.cn) + "'s log " + std::to_string(worker) +
            " stopped: " + f.recovery_error);
      f.recovery = kRecoveryIdle;
    } else if (PutStep(f, "recovered", worker).ok()) {
      f.recovered.insert(worker);
      Event("recovered CN " + std::to_string(f.cn) + "'s log " + std::to_string(worker) + ": " +
            std::to_string(f.recovery_stats.records) + " records, " +
            std::to_string(f.recovery_stats.rolled_forward) + " rolled forward, " +
            std::to_string(f.recovery_stats.rolled_back) + " rolled back");
      cl_.membership_counts_.logs_recovered++;
      f.recovery = kRecoveryIdle;
    }
  }
  for (uint16_t i = 0; i < workers; i++) {
    if (f.recovered.count(i) != 0) continue;
    if (StepDone(f, "recovered", i)) {
      f.recovered.insert(i);
      continue;
    }
    if (alive[i % alive.size()] != cn_ || f.recovery.load() != kRecoveryIdle) continue;
    // The recovery's one-sided work runs on the beat thread, which owns the endpoint.
    f.recovery = kRecoveryRunning;
    f.recovering_worker = i;
    std::lock_guard lock(beat_mu_);
    to_spawn_.push_back([this, fp = &f, i]() -> Task<void> {
      return [](ProcessMembership* m, Failure* f, uint16_t worker) -> Task<void> {
        Result<cluster::LogRecoveryStats> r =
            co_await cluster::RecoverCommitLog(*m->ep_, m->cl_.catalog(), m->cl_.placement(),
                                               f->logs[worker], f->log_bytes, f->cn, worker);
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
  CnContext& me = *cl_.cns_[cn_];
  bool ok = true;
  if (!f.released) {
    // Lotus §6's order: its transactions are finished or undone, so its locks may go.
    me.locks.ReleaseAllOf(f.cn);
    OnWorkers(
        [&](WorkerContext& w) -> size_t {
          w.lock_server().ForgetCn(f.cn);
          return 0;
        },
        &ok);
    if (!ok || !PutStep(f, "released", cn_).ok()) return;
    f.released = true;
  }
  if (!f.drained) {
    const size_t live =
        OnWorkers([&](WorkerContext& w) -> size_t { return w.locks().LiveContacting(f.cn); }, &ok);
    if (!ok || live != 0 || !PutStep(f, "drained", cn_).ok()) return;
    f.drained = true;
  }
  if (!StepDoneByAll(f, "released") || !StepDoneByAll(f, "drained")) return;
  size_t opened = 0;
  for (uint32_t s : f.moved) {
    if (cl_.shard_map_.CnOf(s) != cn_) continue;  // moved on since: that failure opens it
    if (me.vt) me.vt->InvalidateShard(s);
    me.locks.SetManaged(s, true);
    opened++;
  }
  if (!PutStep(f, "opened", cn_).ok()) return;
  f.opened = true;
  Event("CN " + std::to_string(f.cn) + "'s failure (epoch " + std::to_string(f.epoch) +
        ") is recovered; this CN serves " + std::to_string(opened) + " of its shards");
  cl_.membership_counts_.recoveries++;
}

void ProcessMembership::Manage() {
  const std::string& name = cl_.config().transport.cluster;
  // A CM whose own beats are not getting through may be the one cut off: it declares nothing.
  if (cl_.clock().NowNs() > renewed_ns_.load() + LeaseNs() / 2) return;
  cluster::Configuration next = view_;
  std::vector<std::string> what;
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (c == cn_ || !next.cns[c].alive || !CnExpired(c)) continue;
    next.cns[c].alive = false;
    what.push_back("CN " + std::to_string(c) + " failed");
  }
  int mns_down = 0;
  for (const cluster::MnStatus& s : next.mns) mns_down += s.alive && !s.leaving ? 0 : 1;
  for (uint16_t mn = 0; mn < next.mns.size(); mn++) {
    cluster::MnStatus& m = next.mns[mn];
    // An MN declared fails in two epochs: first nobody reads it (leaving), then, once every CN
    // has said so, writes skip it.
    if (m.alive && m.leaving) {
      if (MnUnreadByAll(mn)) {
        m = cluster::MnStatus{false};
        what.push_back("MN " + std::to_string(mn) + " is down");
      }
      continue;
    }
    if (!m.alive || !MnExpired(mn)) continue;
    // Every group keeps a copy: more than R-1 MNs down would lose data, so the declaration
    // waits (and writes to that MN's groups wait with it).
    if (mns_down + 1 > cl_.config().replication - 1) continue;
    m.leaving = true;
    mns_down++;
    what.push_back("MN " + std::to_string(mn) + " failed");
  }
  // Restarted CNs ask to come back; one is let in once its failure is recovered everywhere.
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (next.cns[c].alive || view_.cns[c].alive) continue;
    Result<cluster::Versioned> j = cl_.coord_->Get(cluster::JoinKey(name, c));
    if (!j.ok() || j->value.empty()) continue;
    const std::string text(reinterpret_cast<const char*>(j->value.data()), j->value.size());
    if (text != std::to_string(view_.cns[c].incarnation + 1)) continue;
    bool recovered = true;
    for (const auto& f : failures_) {
      if (f->cn == c && !StepDoneByAll(*f, "opened")) recovered = false;
    }
    if (!recovered) continue;
    next.cns[c] = cluster::CnStatus{true, static_cast<uint16_t>(view_.cns[c].incarnation + 1)};
    // It comes back managing no shard, so its clock matters no more than any CN's.
    {
      std::lock_guard lock(beat_mu_);
      cn_seen_[c] = Seen{0, cl_.clock().NowNs()};
    }
    what.push_back("CN " + std::to_string(c) + " rejoins");
  }
  if (what.empty()) return;
  next.epoch++;
  const std::vector<uint16_t> alive = next.Alive();
  if (!next.cns[next.tso_host].alive) next.tso_host = alive.front();
  // The failed CNs' shards go round robin to the survivors that were alive before (a CN that
  // rejoins now gets none: its shards stay where they went).
  std::vector<uint16_t> takers;
  for (uint16_t c : alive) {
    if (view_.cns[c].alive) takers.push_back(c);
  }
  std::vector<uint16_t> shards = shards_;
  size_t k = 0;
  for (uint32_t s = 0; s < lock::kShards; s++) {
    if (!next.cns[shards[s]].alive) shards[s] = takers[k++ % takers.size()];
  }
  // The map first, then the configuration that commits it: of two CMs the first map's writer
  // goes on to the configuration, the other gives up this period.
  Status map = WriteShardMap(*cl_.coord_, name, next.epoch, shards);
  if (!map.ok()) return;
  Result<uint64_t> put =
      cl_.coord_->PutIf(cluster::ConfigKey(name), next.Encode(), config_version_);
  if (!put.ok()) return;
  std::string line = "epoch " + std::to_string(next.epoch) + ":";
  for (const std::string& w : what) line += " " + w + ";";
  Event(line + " (this CN manages the configuration)");
}

Status ProcessMembership::PutStep(const Failure& f, const std::string& step, uint16_t who) {
  const std::string key =
      cluster::FailureStepKey(cl_.config().transport.cluster, f.epoch, step, who);
  Result<uint64_t> put = cl_.coord_->PutIf(key, {}, 0);
  if (put.ok() || put.status().code() == Code::kConflict) return Status::Ok();
  return put.status();
}

bool ProcessMembership::StepDone(const Failure& f, const std::string& step, uint16_t who) const {
  Result<cluster::Versioned> v =
      cl_.coord_->Get(cluster::FailureStepKey(cl_.config().transport.cluster, f.epoch, step, who));
  return v.ok() && v->version != 0;
}

bool ProcessMembership::StepDoneByAll(const Failure& f, const std::string& step) const {
  for (uint16_t c : view_.Alive()) {
    // A CN that rejoined after this failure took no part in it.
    if (c == f.cn) continue;
    if (!StepDone(f, step, c)) return false;
  }
  return true;
}

size_t ProcessMembership::OnWorkers(const std::function<size_t(WorkerContext&)>& fn, bool* ok) {
  struct Tally {
    std::atomic<int> left{0};
    std::atomic<size_t> sum{0};
  };
  auto tally = std::make_shared<Tally>();
  CnContext& me = *cl_.cns_[cn_];
  tally->left = static_cast<int>(me.workers.size());
  for (auto& w : me.workers) {
    cl_.PostTo(*w, [tally, &fn](WorkerContext& w) {
      tally->sum += fn(w);
      tally->left--;
    });
  }
  while (tally->left.load() > 0) {
    if (stop_.load()) {
      // The workers are still serving (Stop comes before StopServing): they finish the tasks.
      while (tally->left.load() > 0) std::this_thread::yield();
      *ok = false;
      return tally->sum.load();
    }
    std::this_thread::yield();
  }
  return tally->sum.load();
}

void ProcessMembership::Event(const std::string& line) const {
  if (cl_.event_log_) cl_.event_log_(line);
}

void ProcessMembership::Fence(const std::string& why) {
  Event("lease lost (" + why + "); stopping, as the other CNs may already have declared this one");
  std::_Exit(kFencedExit);
}

}  // namespace pond::txn
