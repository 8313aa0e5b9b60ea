#include "pond/node/node_controls.h"

#include <atomic>
#include <bit>
#include <deque>
#include <mutex>

#include "pond/node/rereplication.h"
#include "pond/node/worker_context.h"

namespace pond::node {

// A copy onto a rejoining MN, running on the workers: they take units under `mu` and count down
// `running`; the machine's thread reads the outcome.
struct NodeControls::CopyJob {
  std::mutex mu;
  std::deque<recovery::CopyUnit> todo;
  Status error;
  std::atomic<int> running{0};
  std::atomic<uint64_t> slots{0};
  std::atomic<bool> stop{false};  // the CN stops: take no more units
  std::function<void(uint64_t)> copied;
};

struct NodeControls::SyncJob {
  std::atomic<bool> done{false};
  Status status;  // written before done
};

NodeControls::NodeControls(ClusterImpl& cl, uint16_t cn, bool cluster_follows)
    : cl_(cl), cn_(cn), cluster_follows_(cluster_follows) {}

NodeControls::~NodeControls() = default;

CnContext& NodeControls::Me() const { return *cl_.cns_[cn_]; }

bool NodeControls::ApplyOnWorkers(const cluster::Configuration& next,
                                  const std::vector<uint16_t>& failed,
                                  const std::vector<uint16_t>& restarted, bool oracle_moved) {
  CnContext& me = Me();
  me.view = next;
  me.GoneBelowView();
  std::optional<size_t> unknown = OnWorkers([&](WorkerContext& w) -> size_t {
    w.SetView(next);
    size_t calls = 0;
    for (uint16_t c : failed) {
      w.locks().PeerFailed(c);
      calls += w.calls().PeerFailed(c);
    }
    for (uint16_t c : restarted) {
      w.locks().PeerRestarted(c);
      w.calls().PeerRestarted(c);
    }
    if (oracle_moved) {
      if (next.tso_host == cn_) {
        w.HostTso(*w.cn().oracle);
      } else {
        w.tso().SetHost(cl_.TsoAsk(cn_, w.index(), next.tso_host), nullptr);
      }
    }
    return calls;
  });
  if (!unknown.has_value()) return false;
  CallsUnknown(*unknown);
  return true;
}

void NodeControls::MoveOracle(uint16_t host) {
  cl_.tso_cn_ = host;
  CnContext& me = Me();
  if (host != cn_ || me.oracle != nullptr) return;
  me.oracle = std::make_unique<txn::TimestampOracle>(cl_.clock_);
  OracleMade(*me.oracle);
}

void NodeControls::AssignShard(uint32_t s, uint16_t cn) {
  ShardMoving(s, Me().shard_map.CnOf(s), cn);
  if (cluster_follows_) {
    cl_.AssignShardEverywhere(s, cn);
  } else {
    Me().shard_map.Assign(s, cn);
  }
}

uint16_t NodeControls::ShardOwner(uint32_t s) const { return Me().shard_map.CnOf(s); }

void NodeControls::OpenShard(uint32_t s) {
  CnContext& me = Me();
  // It may have managed the shard before: what its VT cache kept from then is stale.
  if (me.vt) me.vt->InvalidateShard(s);
  me.locks.SetManaged(s, true);
}

void NodeControls::CloseShard(uint32_t s) { Me().locks.SetManaged(s, false); }

std::optional<recovery::CnLoad> NodeControls::Load() {
  CnContext& me = Me();
  me.locks.CountShards(true);
  recovery::CnLoad load;
  // Each worker's counts are its own and relaxed: the sum is as of about now, which is all an
  // interval's mean needs.
  for (const auto& w : me.workers) {
    load.txns += w->stats().committed.load();
    load.latency_ns += w->stats().commit_latency_sum_ns.load();
  }
  load.shard_requests = me.locks.ShardRequests();
  const std::vector<lock::LockTable::Majority> votes = me.locks.TakeShardMajorities();
  load.majority.reserve(votes.size());
  for (const auto& v : votes) load.majority.push_back({v.cn, v.count});
  return load;
}

std::optional<size_t> NodeControls::LocksHeldIn(const std::vector<uint32_t>& shards) {
  return Me().locks.HeldIn(shards);
}

uint16_t NodeControls::ShardHome(uint32_t s) const { return cl_.shard_map_.HomeOf(s); }

void NodeControls::ChangePlacement(const std::function<void(store::Placement&)>& change) {
  if (cluster_follows_) {
    cl_.ChangePlacementEverywhere(change);
  } else {
    change(Me().placement);
  }
}

void NodeControls::StopReading(MnId mn) {
  ChangePlacement([mn](store::Placement& p) { p.SetJoining(mn); });
}
void NodeControls::MarkDown(MnId mn) {
  ChangePlacement([mn](store::Placement& p) { p.SetDown(mn); });
  // After the placement: a commit whose writes to it fail now finds it down and goes on
  // (MvccTxn::CommitFlush) instead of waiting for an epoch it already has.
  cl_.fabric().SetMnDown(mn, true);
}
void NodeControls::MnJoining(MnId mn) {
  cl_.fabric().SetMnDown(mn, false);
  ChangePlacement([mn](store::Placement& p) { p.SetRejoining(mn); });
}
void NodeControls::MnFrozen(MnId mn) {
  ChangePlacement([mn](store::Placement& p) { p.SetFrozen(mn); });
}
void NodeControls::MnUp(MnId mn) {
  cl_.fabric().SetMnDown(mn, false);
  ChangePlacement([mn](store::Placement& p) { p.SetUp(mn); });
}

std::vector<uint64_t> NodeControls::TxnMark() {
  std::vector<uint64_t> mark(Me().workers.size());
  // Each worker writes its own slot on its own thread; OnWorkers returns once all have.
  OnWorkers([&mark](WorkerContext& w) -> size_t {
    mark[w.index()] = w.locks().next_floor();
    return 0;
  });
  return mark;
}

std::optional<bool> NodeControls::EndedSince(const std::vector<uint64_t>& mark) {
  std::optional<size_t> behind = OnWorkers([&mark](WorkerContext& w) -> size_t {
    return w.index() < mark.size() && w.locks().floor() < mark[w.index()] ? 1 : 0;
  });
  if (!behind.has_value()) return std::nullopt;
  return *behind == 0;
}

void NodeControls::StartCopy(MnId mn, std::vector<recovery::CopyUnit> units) {
  auto job = std::make_shared<CopyJob>();
  job->todo.assign(units.begin(), units.end());
  job->copied = CopyCounter(mn);
  CnContext& me = Me();
  job->running = static_cast<int>(me.workers.size());
  // The one before for this MN, if any, stops at its next unit (its result is forgotten).
  if (auto it = copies_.find(mn); it != copies_.end()) it->second->stop = true;
  copies_[mn] = job;
  for (auto& w : me.workers) {
    Post(*w, [job, mn](WorkerContext& w) {
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
          if (job->copied) job->copied(*r);
        }
        job->running--;
      }(job, &w, mn));
    });
  }
}

std::optional<Result<uint64_t>> NodeControls::CopyResult(MnId mn) {
  auto it = copies_.find(mn);
  if (it == copies_.end() || it->second->running.load() > 0) return std::nullopt;
  CopyJob& job = *it->second;
  std::lock_guard lock(job.mu);
  if (!job.error.ok()) return Result<uint64_t>(job.error);
  return Result<uint64_t>(job.slots.load());
}

void NodeControls::StopCopying() {
  for (auto& [mn, job] : copies_) job->stop = true;
}

void NodeControls::StartSync(MnId mn) {
  auto job = std::make_shared<SyncJob>();
  sync_ = job;
  Post(*Me().workers.front(), [job, mn](WorkerContext& w) {
    w.sched().Spawn([](std::shared_ptr<SyncJob> job, WorkerContext* w, MnId mn) -> Task<void> {
      Status s = co_await LayOutRestarted(*w, mn);
      if (s.ok()) s = co_await SyncLaneCursors(*w, mn);
      job->status = s;
      job->done.store(true, std::memory_order_release);
    }(job, &w, mn));
  });
}

std::optional<Status> NodeControls::SyncResult() {
  if (sync_ == nullptr || !sync_->done.load(std::memory_order_acquire)) return std::nullopt;
  return sync_->status;
}

void NodeControls::SetVisibleGate(bool closed) {
  Me().visible_gate_closed.store(closed, std::memory_order_release);
}

std::optional<size_t> NodeControls::CommitsMidVisible() {
  return OnWorkers(
      [](WorkerContext& w) -> size_t { return static_cast<size_t>(w.commits_mid_visible()); });
}

bool NodeControls::ReleaseLocksOf(uint16_t dead, uint16_t incarnation) {
  Me().locks.ReleaseAllOf(dead);
  Me().gone.GoneBelow(dead, static_cast<uint16_t>(incarnation + 1));
  return OnWorkers([dead](WorkerContext& w) -> size_t {
           w.lock_server().ForgetCn(dead);
           return 0;
         })
      .has_value();
}

std::optional<size_t> NodeControls::LiveContacting(uint16_t dead) {
  return OnWorkers([dead](WorkerContext& w) -> size_t { return w.locks().LiveContacting(dead); });
}

std::optional<uint64_t> NodeControls::CheckLinks(uint64_t probe, uint64_t quiet_ns,
                                                 uint64_t silent_ns) {
  std::atomic<uint64_t> silent{0};
  if (!OnWorkers([&](WorkerContext& w) -> size_t {
        silent.fetch_or(w.locks().Silent(silent_ns));
        return 0;
      })) {
    return std::nullopt;
  }
  // One answer per peer is enough: the first worker asks, from a coroutine of its own, so that
  // the end of its round sends the probes.
  Post(*Me().workers.front(), [probe, quiet_ns](WorkerContext& w) {
    w.sched().Spawn([](WorkerContext* w, uint64_t cns, uint64_t quiet_ns) -> Task<void> {
      for (uint64_t bits = cns; bits != 0; bits &= bits - 1) {
        w->locks().Probe(static_cast<uint16_t>(std::countr_zero(bits)), quiet_ns);
      }
      co_return;
    }(&w, probe, quiet_ns));
  });
  return silent.load();
}

const store::Catalog& NodeControls::catalog() const { return cl_.catalog(); }

const store::Placement& NodeControls::placement() const { return Me().placement; }

}  // namespace pond::node
