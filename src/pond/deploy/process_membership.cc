#include "pond/deploy/process_membership.h"

#include <bit>

#include <algorithm>
#include <cstdlib>

#include "pond/base/assert.h"
#include "pond/base/thread_name.h"
#include "pond/cluster/directory.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/lock/lock_key.h"
#include "pond/node/serving.h"
#include "pond/node/worker_context.h"
#include "pond/transport/ucx/ucx_fabric.h"

namespace pond::deploy {

using node::ClusterImpl;
using node::CnContext;
using node::WorkerContext;

namespace {

// The worker index of the membership thread's own endpoint: past every worker's.
constexpr uint16_t kMembershipWorker = 1000;
// A CN that fences itself exits with this status (its daemon's supervisor restarts it).
constexpr int kFencedExit = 75;
// How long a stopping membership thread waits for its work under way.
constexpr uint64_t kStopWaitNs = 10'000'000'000;
// The beat thread polls its endpoint this often while it has operations in flight (a beat's
// WRITEs, a read of the lease pages)...
constexpr uint64_t kBusyPollNs = 200'000;
// ...and with none, sleeps until its next beat but no longer than this, which bounds how long
// work the coordination thread queues for it waits. Polling when idle cost each CN daemon ~2.5%
// of a core and ~3,000 wake-ups a second, each a chance to preempt a worker on a small host.
constexpr uint64_t kIdleNapMaxNs = 2'000'000;

}  // namespace

ProcessMembership::ProcessMembership(ClusterImpl& cl, cluster::ZkConfigStore& coord)
    : NodeControls(cl, static_cast<uint16_t>(cl.config().transport.cn),
                   /*cluster_follows=*/true),
      coord_(coord),
      sched_(cl.clock()) {
  ep_ = cl.fabric().CreateEndpoint(WorkerAddr{cn_, kMembershipWorker}, sched_);
  const recovery::CnStart& start = *cl.process_start();
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
      .mn_lock_words = !c.protocol.cn_locks,
  };
  node::SetReshardOptions(c, &o);
  machine_ = std::make_unique<recovery::CnMembership>(std::move(o), start.config, start.shards,
                                                      coord_, cl.clock(), *this,
                                                      cl.membership_counts(), sched_, *ep_);
}

ProcessMembership::~ProcessMembership() { Stop(); }

void ProcessMembership::Start() {
  POND_CHECK(!thread_.joinable());
  // The watch only shortens the wait: a change it misses (a session lost and found) is read at
  // the next period all the same.
  coord_.Watch(cluster::ConfigKey(cl_.config().transport.cluster),
               [wake = wake_](const cluster::Versioned&) {
                 {
                   std::lock_guard lock(wake->mu);
                   wake->woken = true;
                 }
                 wake->cv.notify_all();
               });
  thread_ = std::thread([this] {
    NameThisThread("pond-beat");
    Loop();
  });
  coord_thread_ = std::thread([this] {
    NameThisThread("pond-coord");
    CoordLoop();
  });
}

void ProcessMembership::PauseCoordination() {
  coord_stop_ = true;
  {
    std::lock_guard lock(wake_->mu);  // the coordination thread waits under it: no lost wakeup
  }
  wake_->cv.notify_all();
  if (coord_thread_.joinable()) coord_thread_.join();
  // A copy under way stops after the unit each copier holds: the workers stop serving only once
  // their coroutines end, and a copier still taking units would take locks from peers that
  // stopped before it (`pond down` stops every CN at once). What is left is copied again by
  // whoever copies next: a copy is idempotent.
  StopCopying();
}

void ProcessMembership::Leave() {
  POND_CHECK_MSG(!coord_thread_.joinable(), "Leave while the coordination thread runs");
  machine_->Leave();
  int up = 0;
  for (MnId mn = 0; mn < cl_.config().mns; mn++) up += placement().IsDown(mn) ? 0 : 1;
  const uint64_t until = cl_.clock().NowNs() + machine_->lease_ns() / 2;
  while (machine_->LeftOn() < up && cl_.clock().NowNs() < until && !machine_->fenced()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Event("left the cluster: " + std::to_string(machine_->LeftOn()) + " of " + std::to_string(up) +
        " MNs up took a beat that says so, and the others declare this CN without waiting out " +
        "its lease");
}

void ProcessMembership::Stop() {
  stop_ = true;
  // The coordination thread first: it queues work for the beat thread, which then finishes it.
  PauseCoordination();
  if (thread_.joinable()) thread_.join();
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
    if (sched_.RunOnce()) continue;
    const uint64_t after = cl_.clock().NowNs();
    const uint64_t to_beat = next > after ? next - after : 0;
    const uint64_t nap = sched_.live() > 0 ? kBusyPollNs : std::min(to_beat, kIdleNapMaxNs);
    std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
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
  while (!coord_stop_.load()) {
    const uint64_t start = cl_.clock().NowNs();
    // A session that expired reads nothing more, so this CN could never learn that it was
    // declared, nor apply any epoch after it: it stops, and comes back as a new incarnation.
    if (coord_.expired() && !machine_->fenced()) {
      Fence(
          "its ZooKeeper session expired: the service was out of reach for longer than the "
          "session");
    }
    machine_->CoordTick();
    const uint64_t period = machine_->coord_period_ns();
    const uint64_t spent = cl_.clock().NowNs() - start;
    std::unique_lock lock(wake_->mu);
    if (spent < period) {
      wake_->cv.wait_for(lock, std::chrono::nanoseconds(period - spent),
                         [this] { return wake_->woken || coord_stop_.load(); });
    }
    wake_->woken = false;
  }
}

Status ProcessMembership::ReachRestarted(uint16_t cn, uint16_t incarnation) {
  // Its new process published its workers' addresses before asking to come back.
  Result<cluster::Versioned> d = coord_.Get(cluster::CnKey(cl_.config().transport.cluster, cn));
  if (!d.ok()) return d.status();
  Result<ucx::CnDescriptor> desc = ucx::CnDescriptor::Decode(d->value);
  if (!desc.ok()) return desc.status();
  if (desc->incarnation != incarnation) {
    return NotFound("it has not published incarnation " + std::to_string(incarnation));
  }
  auto* fabric = dynamic_cast<ucx::UcxFabric*>(&cl_.fabric());
  POND_CHECK_MSG(fabric != nullptr, "a CN process runs over UCX");
  return fabric->AddRemoteCn(*desc);
}

Status ProcessMembership::ReachRestartedMn(MnId mn, uint16_t incarnation) {
  // Its new process published where it serves before it asked to rejoin.
  Result<cluster::Versioned> d = coord_.Get(cluster::MnKey(cl_.config().transport.cluster, mn));
  if (!d.ok()) return d.status();
  Result<ucx::MnDescriptor> desc = ucx::MnDescriptor::Decode(d->value);
  if (!desc.ok()) return desc.status();
  if (desc->mn != mn) return Corruption("MN " + std::to_string(mn) + "'s key names another MN");
  auto* fabric = dynamic_cast<ucx::UcxFabric*>(&cl_.fabric());
  POND_CHECK_MSG(fabric != nullptr, "a CN process runs over UCX");
  Status replaced = fabric->ReplaceMn(*desc);
  if (replaced.ok()) {
    Event("reaching MN " + std::to_string(mn) + " as incarnation " + std::to_string(incarnation));
  }
  return replaced;
}

void ProcessMembership::Post(WorkerContext& w, std::function<void(WorkerContext&)> fn) {
  cl_.PostTo(w, std::move(fn));
}

std::optional<size_t> ProcessMembership::OnWorkers(
    const std::function<size_t(WorkerContext&)>& fn) {
  struct Tally {
    std::atomic<int> left{0};
    std::atomic<size_t> sum{0};
  };
  auto tally = std::make_shared<Tally>();
  CnContext& me = Me();
  tally->left = static_cast<int>(me.workers.size());
  for (auto& w : me.workers) {
    cl_.PostTo(*w, [tally, &fn](WorkerContext& w) {
      tally->sum += fn(w);
      tally->left--;
    });
  }
  bool stopped = false;
  while (tally->left.load() > 0) {
    // The workers are still serving when the membership stops (Stop comes before
    // StopServing): they finish the tasks, which use `fn`, so this waits for them even then.
    stopped = stopped || coord_stop_.load();
    std::this_thread::yield();
  }
  if (stopped) return std::nullopt;
  return tally->sum.load();
}

void ProcessMembership::Event(const std::string& line) { cl_.Log(line); }

void ProcessMembership::Fence(const std::string& why) {
  Event("lease lost (" + why + "); stopping, as the other CNs may already have declared this one");
  std::_Exit(kFencedExit);
}

}  // namespace pond::deploy
