// The cluster as a server: worker threads that run calls submitted from other threads until
// StopServing (serving.h), and pins that keep a run of calls on one worker. Cluster::Run is the
// other way to run a cluster; the two never overlap.
#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "pond/base/assert.h"
#include "pond/base/thread_name.h"
#include "pond/node/serving.h"
#include "pond/node/worker_context.h"

namespace pond {
namespace node {

namespace {

// Idle rounds a serving worker spins (yielding) before it sleeps between rounds, and how long
// it then sleeps: growing from the least to the most. Few: a worker that spins while it awaits a
// peer keeps that peer (or its clients) off the core it needs to answer. Measured on 2 cores:
// pond serve, 2 clients x 64 pipelined, SmallBank: 37.1 K txn/s at 66 us of CPU each against
// 32.7 K at 77 us spinning 256; pond up (3 CN daemons, UCX shm, whose packets do not ring the
// doorbell): 6.1 and 7.0 K txn/s at 8 rounds, 5.0-5.5 K at 0, 5.7-6.0 K at 32, 2.5-2.8 K at 256.
constexpr int64_t kSpinRounds = 8;
constexpr auto kIdleSleepMin = std::chrono::microseconds(5);
constexpr auto kIdleSleepMax = std::chrono::microseconds(100);

}  // namespace

// One worker's thread while serving: take calls from its inbox, run rounds, and leave once
// stopping was asked and nothing is left anywhere — no call running on any worker, no request
// awaited, no packet in flight (the same end as Cluster::Run's).
void ClusterImpl::ServeWorker(WorkerContext& w, ServingInbox& inbox) {
  Serving& sv = *serving_;
  std::vector<ServedCall> arrived;
  int64_t finished = 0;  // calls finished in this round, not yet counted off
  int64_t awaiting = 0;  // this worker's share of awaiting_
  int session_id = 0;
  int64_t idle_rounds = 0;
  bool gave_up = false;  // on the other CNs, once the stop's grace is over
  for (;;) {
    // A front end's source first, so that what it takes (submitted to this worker) starts in
    // this round.
    const bool took = inbox.PollSources();
    inbox.TakeAll(&arrived);
    for (ServedCall& call : arrived) {
      auto session = std::unique_ptr<Session>(new Session(&w, session_id++));
      w.sched().Spawn(
          [](ServedCall fn, std::unique_ptr<Session> s, int64_t* finished) -> Task<void> {
            co_await fn(*s);
            (*finished)++;
          }(std::move(call), std::move(session), &finished));
    }
    arrived.clear();
    // An idle round gives the core away, as in Cluster::Run; a worker with nothing at all to do
    // (no coroutine, nothing awaited) for a while sleeps briefly between rounds instead, so that
    // an idle server does not keep its cores busy. Its rounds still come every kIdleSleepMax,
    // so a peer's request waits at most that long for it.
    if (w.sched().RunOnce() || took) {
      idle_rounds = 0;
    } else if (++idle_rounds <= kSpinRounds) {
      std::this_thread::yield();
    } else if (w.sched().live() == 0 && w.Awaiting() == 0) {
      // nothing to do: sleep, longer and longer, unless a call or a message arrives
      inbox.doorbell().Wait(std::min(kIdleSleepMax, kIdleSleepMin * (idle_rounds - kSpinRounds)));
    } else {
      // Coroutines wait (an answer, a timer) and nothing moves: a long wait spins no more than
      // it must, so that a busy host still schedules every process's other threads (a CN's
      // beats must not starve behind its own workers). What arrives still wakes it at once.
      inbox.doorbell().Wait(kIdleSleepMin);
    }
    const auto now = static_cast<int64_t>(w.Awaiting());
    if (now != awaiting) {
      awaiting_ += now - awaiting;
      awaiting = now;
    }
    if (finished != 0) {
      sv.calls_running -= finished;
      finished = 0;
    }
    const bool past_grace = sv.stopping.load() && std::chrono::steady_clock::now() > sv.stop_by;
    if (past_grace && !gave_up) {
      // The grace is over: what other CNs still owe this one will not be waited for. They may
      // have stopped already (`pond down` stops every CN at once), and a coroutine waiting on
      // one — a transaction's lock, a routed call, a copier onto a rejoining MN — would keep
      // this worker from ever ending. Its requests are refused as if the peers had failed: a
      // transaction aborts, a routed call ends Unknown, a copy stops (copied again later).
      for (uint16_t peer = 0; peer < cns_.size(); peer++) {
        if (peer == w.cn_id()) continue;
        w.locks().PeerFailed(peer);
        w.calls().PeerFailed(peer);
      }
      gave_up = true;
    }
    if (sv.stopping.load() && sv.calls_running.load() == 0 && w.sched().live() == 0 &&
        fabric_->packets_in_flight() == 0 && (awaiting_.load() == 0 || past_grace)) {
      return;
    }
  }
}

void ClusterImpl::PostTo(WorkerContext& w, std::function<void(WorkerContext&)> fn) {
  Serving& sv = *serving_;
  size_t inbox = sv.first_inbox[w.cn_id()] + w.index();
  sv.calls_running++;
  sv.inboxes[inbox]->Push([fn = std::move(fn)](Session& s) -> Task<void> {
    fn(*s.w_);
    co_return;
  });
}

}  // namespace node

using node::ClusterImpl;
using node::WorkerContext;

Status Cluster::StartServing() {
  ClusterImpl& cl = *impl_;
  if (cl.driver_ != nullptr) return InvalidArgument("a simulated cluster cannot serve");
  if (cl.serving_ != nullptr) return InvalidArgument("the cluster is serving already");
  auto sv = std::make_unique<node::Serving>();
  sv->next = std::make_unique<std::atomic<uint32_t>[]>(cl.cns_.size());
  std::vector<std::pair<WorkerContext*, node::ServingInbox*>> workers;
  for (auto& cn : cl.cns_) {
    sv->first_inbox.push_back(static_cast<uint32_t>(sv->inboxes.size()));
    for (auto& w : cn->workers) {
      sv->inboxes.push_back(std::make_unique<node::ServingInbox>());
      workers.emplace_back(w.get(), sv->inboxes.back().get());
    }
  }
  // A CN of a cluster of processes reaches the others' workers from now on.
  if (cl.process_ != nullptr) POND_RETURN_IF_ERROR(cl.process_->ConnectPeers());
  cl.awaiting_ = 0;
  node::Serving* s = sv.get();
  cl.serving_ = std::move(sv);
  for (auto [w, inbox] : workers) {
    w->ep().SetDoorbell(&inbox->doorbell());
    s->threads.emplace_back([&cl, w, inbox] {
      NameThisThread("pond-w" + std::to_string(w->ep().self().worker));
      cl.ServeWorker(*w, *inbox);
    });
  }
  if (cl.process_ != nullptr) {
    if (Status s = cl.process_->StartMembership(); !s.ok()) {
      StopServing(0);
      return s;
    }
  }
  return Status::Ok();
}

bool Cluster::Submit(uint16_t cn, std::function<Task<void>(Session&)> call) {
  ClusterImpl& cl = *impl_;
  node::Serving* sv = cl.serving_.get();
  const int workers = WorkersOf(cn);
  if (sv == nullptr || workers == 0) return false;
  const uint32_t pick =
      sv->next[cn].fetch_add(1, std::memory_order_relaxed) % static_cast<uint32_t>(workers);
  return SubmitToWorker(cn, static_cast<uint16_t>(pick), std::move(call));
}

uint16_t Cluster::CallCn(uint16_t cn, const RouteHint& hint) const {
  const ClusterImpl& cl = *impl_;
  if (cn >= cl.cns_.size() || cl.cns_[cn]->workers.empty()) return cn;
  // A worker's shard map is atomics, read from any thread.
  return node::CallTarget(*cl.cns_[cn]->workers[0], hint);
}

Cluster::CallShards Cluster::CallShardMap(uint16_t cn) const {
  const ClusterImpl& cl = *impl_;
  CallShards out;
  if (!cl.config().protocol.hybrid_routing || cn >= cl.cns_.size() ||
      cl.cns_[cn]->workers.empty()) {
    return out;
  }
  const lock::ShardMap& map = cl.cns_[cn]->workers[0]->shard_map();
  out.shard_bits = lock::kShardBits;
  out.version = map.version();
  out.owners.reserve(lock::kShards);
  for (uint32_t s = 0; s < lock::kShards; s++) out.owners.push_back(map.CnOf(s));
  return out;
}

std::optional<Cluster::WorkerPin> Cluster::Pin(uint16_t cn) {
  ClusterImpl& cl = *impl_;
  node::Serving* sv = cl.serving_.get();
  if (sv == nullptr || cn >= cl.cns_.size() || cl.cns_[cn]->workers.empty()) return std::nullopt;
  // A pin counts as a running call until Unpin, so the workers outlive the transaction it holds;
  // counted before the check, as in Submit.
  sv->calls_running++;
  if (sv->stopping.load()) {
    sv->calls_running--;
    return std::nullopt;
  }
  const uint32_t workers = static_cast<uint32_t>(cl.cns_[cn]->workers.size());
  const uint32_t pick = sv->next[cn].fetch_add(1, std::memory_order_relaxed) % workers;
  return WorkerPin{cn, static_cast<uint16_t>(pick)};
}

bool Cluster::SubmitTo(const WorkerPin& pin, std::function<Task<void>(Session&)> call) {
  ClusterImpl& cl = *impl_;
  node::Serving* sv = cl.serving_.get();
  if (sv == nullptr || pin.cn >= cl.cns_.size() || pin.worker >= cl.cns_[pin.cn]->workers.size()) {
    return false;
  }
  // No `stopping` check: the pin's own count keeps every worker running until Unpin.
  sv->calls_running++;
  sv->inboxes[sv->first_inbox[pin.cn] + pin.worker]->Push(std::move(call));
  return true;
}

int Cluster::WorkersOf(uint16_t cn) const {
  const ClusterImpl& cl = *impl_;
  return cn < cl.cns_.size() ? static_cast<int>(cl.cns_[cn]->workers.size()) : 0;
}

Status Cluster::AttachSource(uint16_t cn, uint16_t worker, WorkerSource* source) {
  ClusterImpl& cl = *impl_;
  node::Serving* sv = cl.serving_.get();
  if (sv == nullptr) return InvalidArgument("the cluster is not serving");
  if (worker >= WorkersOf(cn)) {
    return InvalidArgument("CN " + std::to_string(cn) + " has no worker " + std::to_string(worker) +
                           " here");
  }
  if (!sv->inboxes[sv->first_inbox[cn] + worker]->AddSource(source)) {
    return InvalidArgument("worker " + std::to_string(worker) + " of CN " + std::to_string(cn) +
                           " polls this source already");
  }
  return Status::Ok();
}

void Cluster::DetachSource(uint16_t cn, uint16_t worker, WorkerSource* source) {
  ClusterImpl& cl = *impl_;
  node::Serving* sv = cl.serving_.get();
  if (sv == nullptr || worker >= WorkersOf(cn)) return;
  sv->inboxes[sv->first_inbox[cn] + worker]->RemoveSource(source);
}

bool Cluster::SubmitToWorker(uint16_t cn, uint16_t worker,
                             std::function<Task<void>(Session&)> call) {
  ClusterImpl& cl = *impl_;
  node::Serving* sv = cl.serving_.get();
  if (sv == nullptr || worker >= WorkersOf(cn)) return false;
  // Counted before the check: a worker that has seen `stopping` then also sees this call (both
  // are sequentially consistent), so it cannot leave with the call still in an inbox.
  sv->calls_running++;
  if (sv->stopping.load()) {
    sv->calls_running--;
    return false;
  }
  sv->inboxes[sv->first_inbox[cn] + worker]->Push(std::move(call));
  return true;
}

void Cluster::Unpin(const WorkerPin& pin) {
  node::Serving* sv = impl_->serving_.get();
  POND_CHECK_MSG(sv != nullptr && pin.cn < impl_->cns_.size(), "Unpin of a pin never held");
  sv->calls_running--;
}

void Cluster::StopServing(uint64_t grace_ms) {
  ClusterImpl& cl = *impl_;
  if (cl.serving_ == nullptr) return;
  // The membership's coordination first: it posts to the workers while they serve. Its beats
  // go on until the workers ended: a CN that stopped beating first would be declared and
  // recovered a lease later, while its workers might still serve the other CNs' lock requests
  // (the grace may be longer than the lease).
  if (cl.process_ != nullptr) cl.process_->PauseCoordination();
  cl.serving_->stop_by = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  cl.serving_->stopping = true;
  for (std::thread& t : cl.serving_->threads) t.join();
  // The doorbells go with the inboxes: no packet may ring one after.
  for (auto& cn : cl.cns_) {
    for (auto& w : cn->workers) w->ep().SetDoorbell(nullptr);
  }
  cl.serving_.reset();
  if (cl.process_ != nullptr) {
    cl.process_->Leave();
    cl.process_->StopMembership();
    cl.process_->Withdraw();
  }
}

bool Cluster::serving() const { return impl_->serving_ != nullptr; }

void Cluster::SetEventLog(std::function<void(const std::string&)> log) {
  impl_->event_log_ = std::move(log);
}

}  // namespace pond
