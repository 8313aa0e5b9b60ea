#include "pond/node/process_membership.h"

#include <bit>

#include <algorithm>
#include <cstdlib>

#include "pond/base/assert.h"
#include "pond/cluster/directory.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/lock/lock_key.h"
#include "pond/node/cn_process.h"
#include "pond/node/rereplication.h"
#include "pond/node/serving.h"
#include "pond/node/worker_context.h"
#include "pond/transport/ucx/ucx_fabric.h"

namespace pond::node {

namespace {

// The worker index of the membership thread's own endpoint: past every worker's.
constexpr uint16_t kMembershipWorker = 1000;
// A CN that fences itself exits with this status (its daemon's supervisor restarts it).
constexpr int kFencedExit = 75;
// How long a stopping membership thread waits for its work under way.
constexpr uint64_t kStopWaitNs = 10'000'000'000;

}  // namespace

ProcessMembership::ProcessMembership(ClusterImpl& cl)
    : cl_(cl), cn_(static_cast<uint16_t>(cl.config().transport.cn)), sched_(cl.clock()) {
  ep_ = cl.fabric_->CreateEndpoint(WorkerAddr{cn_, kMembershipWorker}, sched_);
  const recovery::CnStart& start = *cl.process_start_;
  const ClusterConfig& c = cl.config();
  recovery::MembershipOptions o{
      .cluster = c.transport.cluster,
      .cn = cn_,
      .incarnation = start.incarnation,
      .cns = static_cast<uint16_t>(c.cns),
      .mns = static_cast<uint16_t>(c.mns),
      .workers_per_cn = static_cast<uint16_t>(c.workers_per_cn),
      .replication = c.replication,
      .lease_ns = uint64_t(c.transport.lease_ms) * 1'000'000,
      .shards = lock::kShards,
  };
  machine_ = std::make_unique<recovery::CnMembership>(std::move(o), start.config, start.shards,
                                                      *cl.coord_, cl.clock(), *this,
                                                      cl.membership_counts_, sched_, *ep_);
}

ProcessMembership::~ProcessMembership() { Stop(); }

void ProcessMembership::Start() {
  POND_CHECK(!thread_.joinable());
  // The watch only shortens the wait: a change it misses (a session lost and found) is read at
  // the next period all the same.
  cl_.coord_->Watch(cluster::ConfigKey(cl_.config().transport.cluster),
                    [wake = wake_](const cluster::Versioned&) {
                      {
                        std::lock_guard lock(wake->mu);
                        wake->woken = true;
                      }
                      wake->cv.notify_all();
                    });
  thread_ = std::thread([this] { Loop(); });
  coord_thread_ = std::thread([this] { CoordLoop(); });
}

void ProcessMembership::Stop() {
  stop_ = true;
  {
    std::lock_guard lock(wake_->mu);  // the coordination thread waits under it: no lost wakeup
  }
  wake_->cv.notify_all();
  // The coordination thread first: it queues work for the beat thread, which then finishes it.
  if (coord_thread_.joinable()) coord_thread_.join();
  if (thread_.joinable()) thread_.join();
  // A copy under way stops after the unit each copier holds: the workers stop serving only once
  // their coroutines end, and a copier still taking units would take locks from peers that
  // stopped before it (`pond down` stops every CN at once). What is left is copied again by
  // whoever copies next: a copy is idempotent.
  if (copy_ != nullptr) copy_->stop = true;
}

void ProcessMembership::Loop() {
  const uint64_t period = machine_->period_ns();
  uint64_t next = cl_.clock().NowNs();
  while (!stop_.load()) {
    const uint64_t now = cl_.clock().NowNs();
    if (now >= next) {
      next = now + period;
      machine_->BeatTick();
    }
    machine_->RunQueued();
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
  while (!stop_.load()) {
    const uint64_t start = cl_.clock().NowNs();
    machine_->CoordTick();
    const uint64_t period = machine_->coord_period_ns();
    const uint64_t spent = cl_.clock().NowNs() - start;
    std::unique_lock lock(wake_->mu);
    if (spent < period) {
      wake_->cv.wait_for(lock, std::chrono::nanoseconds(period - spent),
                         [this] { return wake_->woken || stop_.load(); });
    }
    wake_->woken = false;
  }
}

bool ProcessMembership::ApplyOnWorkers(const cluster::Configuration& next,
                                       const std::vector<uint16_t>& failed,
                                       const std::vector<uint16_t>& restarted, bool oracle_moved) {
  CnContext& me = *cl_.cns_[cn_];
  me.view = next;
  const bool host = next.tso_host == cn_;
  bool ok = true;
  OnWorkers(
      [&](WorkerContext& w) -> size_t {
        w.SetView(next);
        size_t unknown = 0;
        for (uint16_t c : failed) {
          w.locks().PeerFailed(c);
          unknown += w.calls().PeerFailed(c);
        }
        for (uint16_t c : restarted) {
          w.locks().PeerRestarted(c);
          w.calls().PeerRestarted(c);
        }
        if (oracle_moved) {
          if (host) {
            w.HostTso(*w.cn().oracle);
          } else {
            w.tso().SetHost(cl_.TsoHost(w.index()), nullptr);
          }
        }
        return unknown;
      },
      &ok);
  return ok;
}

Status ProcessMembership::ReachRestarted(uint16_t cn, uint16_t incarnation) {
  // Its new process published its workers' addresses before asking to come back.
  Result<cluster::Versioned> d =
      cl_.coord_->Get(cluster::CnKey(cl_.config().transport.cluster, cn));
  if (!d.ok()) return d.status();
  Result<ucx::CnDescriptor> desc = ucx::CnDescriptor::Decode(d->value);
  if (!desc.ok()) return desc.status();
  if (desc->incarnation != incarnation) {
    return NotFound("it has not published incarnation " + std::to_string(incarnation));
  }
  auto* fabric = dynamic_cast<ucx::UcxFabric*>(cl_.fabric_.get());
  POND_CHECK_MSG(fabric != nullptr, "a CN process runs over UCX");
  return fabric->AddRemoteCn(*desc);
}

void ProcessMembership::MoveOracle(uint16_t host) {
  cl_.tso_cn_ = host;
  CnContext& me = *cl_.cns_[cn_];
  if (host == cn_ && me.oracle == nullptr)
    me.oracle = std::make_unique<txn::TimestampOracle>(cl_.clock_);
}

// The process is one CN: its view is the cluster's, and every CnContext's copy follows it.
void ProcessMembership::AssignShard(uint32_t s, uint16_t cn) { cl_.AssignShardEverywhere(s, cn); }

uint16_t ProcessMembership::ShardOwner(uint32_t s) const { return cl_.shard_map_.CnOf(s); }

void ProcessMembership::OpenShard(uint32_t s) {
  CnContext& me = *cl_.cns_[cn_];
  if (me.vt) me.vt->InvalidateShard(s);
  me.locks.SetManaged(s, true);
}

void ProcessMembership::CloseShard(uint32_t s) { cl_.cns_[cn_]->locks.SetManaged(s, false); }

std::optional<size_t> ProcessMembership::LocksHeldIn(const std::vector<uint32_t>& shards) {
  return cl_.cns_[cn_]->locks.HeldIn(shards);
}

uint16_t ProcessMembership::ShardHome(uint32_t s) const { return cl_.shard_map_.HomeOf(s); }

void ProcessMembership::StopReading(MnId mn) {
  cl_.ChangePlacementEverywhere([mn](store::Placement& p) { p.SetJoining(mn); });
}

void ProcessMembership::MarkDown(MnId mn) {
  cl_.ChangePlacementEverywhere([mn](store::Placement& p) { p.SetDown(mn); });
}

void ProcessMembership::MnJoining(MnId mn) {
  cl_.ChangePlacementEverywhere([mn](store::Placement& p) { p.SetJoining(mn); });
}

void ProcessMembership::MnFrozen(MnId mn) {
  cl_.ChangePlacementEverywhere([mn](store::Placement& p) { p.SetFrozen(mn); });
}

void ProcessMembership::MnUp(MnId mn) {
  cl_.ChangePlacementEverywhere([mn](store::Placement& p) { p.SetUp(mn); });
}

std::vector<uint64_t> ProcessMembership::TxnMark() {
  std::vector<uint64_t> mark(cl_.cns_[cn_]->workers.size());
  bool ok = true;
  // Each worker writes its own slot on its own thread; OnWorkers returns once all have.
  OnWorkers(
      [&mark](WorkerContext& w) -> size_t {
        mark[w.index()] = w.locks().next_floor();
        return 0;
      },
      &ok);
  return mark;
}

std::optional<bool> ProcessMembership::EndedSince(const std::vector<uint64_t>& mark) {
  if (mark.empty()) return true;
  bool ok = true;
  const size_t behind = OnWorkers(
      [&mark](WorkerContext& w) -> size_t { return w.locks().floor() < mark[w.index()] ? 1 : 0; },
      &ok);
  if (!ok) return std::nullopt;
  return behind == 0;
}

Status ProcessMembership::ReachRestartedMn(MnId mn, uint16_t incarnation) {
  // Its new process published where it serves before it asked to rejoin.
  Result<cluster::Versioned> d =
      cl_.coord_->Get(cluster::MnKey(cl_.config().transport.cluster, mn));
  if (!d.ok()) return d.status();
  Result<ucx::MnDescriptor> desc = ucx::MnDescriptor::Decode(d->value);
  if (!desc.ok()) return desc.status();
  if (desc->mn != mn) return Corruption("MN " + std::to_string(mn) + "'s key names another MN");
  auto* fabric = dynamic_cast<ucx::UcxFabric*>(cl_.fabric_.get());
  POND_CHECK_MSG(fabric != nullptr, "a CN process runs over UCX");
  Status replaced = fabric->ReplaceMn(*desc);
  if (replaced.ok()) {
    Event("reaching MN " + std::to_string(mn) + " as incarnation " + std::to_string(incarnation));
  }
  return replaced;
}

void ProcessMembership::StartCopy(MnId mn, std::vector<recovery::CopyUnit> units) {
  auto job = std::make_shared<CopyJob>();
  job->todo.assign(units.begin(), units.end());
  CnContext& me = *cl_.cns_[cn_];
  job->running = static_cast<int>(me.workers.size());
  copy_ = job;
  for (auto& w : me.workers) {
    cl_.PostTo(*w, [job, mn](WorkerContext& w) {
      w.sched().Spawn([](std::shared_ptr<CopyJob> job, WorkerContext* w, MnId mn) -> Task<void> {
        for (;;) {
          recovery::CopyUnit u;
          {
            std::lock_guard lock(job->mu);
            if (job->todo.empty() || !job->error.ok() || job->stop.load()) break;
            u = job->todo.front();
            job->todo.pop_front();
          }
          Result<uint64_t> r = co_await CopyToRejoining(*w, mn, u, &job->stop);
          if (!r.ok()) {
            std::lock_guard lock(job->mu);
            if (job->error.ok()) job->error = r.status();
            break;
          }
          job->slots += *r;
        }
        job->running--;
      }(job, &w, mn));
    });
  }
}

std::optional<Result<uint64_t>> ProcessMembership::CopyResult() {
  if (copy_ == nullptr || copy_->running.load() > 0) return std::nullopt;
  std::lock_guard lock(copy_->mu);
  if (!copy_->error.ok()) return Result<uint64_t>(copy_->error);
  return Result<uint64_t>(copy_->slots.load());
}

void ProcessMembership::StartSync(MnId mn) {
  auto job = std::make_shared<SyncJob>();
  sync_ = job;
  CnContext& me = *cl_.cns_[cn_];
  cl_.PostTo(*me.workers.front(), [job, mn](WorkerContext& w) {
    w.sched().Spawn([](std::shared_ptr<SyncJob> job, WorkerContext* w, MnId mn) -> Task<void> {
      Status s = co_await LayOutRestarted(*w, mn);
      if (s.ok()) s = co_await SyncLaneCursors(*w, mn);
      job->status = s;
      job->done.store(true, std::memory_order_release);
    }(job, &w, mn));
  });
}

std::optional<Status> ProcessMembership::SyncResult() {
  if (sync_ == nullptr || !sync_->done.load(std::memory_order_acquire)) return std::nullopt;
  return sync_->status;
}

void ProcessMembership::SetVisibleGate(bool closed) {
  cl_.cns_[cn_]->visible_gate_closed.store(closed, std::memory_order_release);
}

std::optional<size_t> ProcessMembership::CommitsMidVisible() {
  bool ok = true;
  const size_t mid = OnWorkers(
      [](WorkerContext& w) -> size_t { return static_cast<size_t>(w.commits_mid_visible()); }, &ok);
  if (!ok) return std::nullopt;
  return mid;
}

bool ProcessMembership::ReleaseLocksOf(uint16_t dead) {
  cl_.cns_[cn_]->locks.ReleaseAllOf(dead);
  bool ok = true;
  OnWorkers(
      [&](WorkerContext& w) -> size_t {
        w.lock_server().ForgetCn(dead);
        return 0;
      },
      &ok);
  return ok;
}

std::optional<size_t> ProcessMembership::LiveContacting(uint16_t dead) {
  bool ok = true;
  const size_t live =
      OnWorkers([&](WorkerContext& w) -> size_t { return w.locks().LiveContacting(dead); }, &ok);
  if (!ok) return std::nullopt;
  return live;
}

std::optional<uint64_t> ProcessMembership::CheckLinks(uint64_t probe, uint64_t quiet_ns,
                                                      uint64_t silent_ns) {
  bool ok = true;
  std::atomic<uint64_t> silent{0};
  OnWorkers(
      [&](WorkerContext& w) -> size_t {
        silent.fetch_or(w.locks().Silent(silent_ns));
        if (w.index() != 0) return 0;  // one answer per peer is enough
        for (uint64_t bits = probe; bits != 0; bits &= bits - 1) {
          w.locks().Probe(static_cast<uint16_t>(std::countr_zero(bits)), quiet_ns);
        }
        return 0;
      },
      &ok);
  if (!ok) return std::nullopt;
  return silent.load();
}

const store::Catalog& ProcessMembership::catalog() const { return cl_.catalog(); }

const store::Placement& ProcessMembership::placement() const { return cl_.placement(); }

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

void ProcessMembership::Event(const std::string& line) {
  if (cl_.event_log_) cl_.event_log_(line);
}

void ProcessMembership::Fence(const std::string& why) {
  Event("lease lost (" + why + "); stopping, as the other CNs may already have declared this one");
  std::_Exit(kFencedExit);
}

}  // namespace pond::node
