// Serving: a cluster's worker threads running calls handed in from other threads — a network
// front end's, later the CN daemon's — until told to stop (Cluster::StartServing, Submit,
// StopServing; serve.cc). Each worker has an inbox; a submitted call becomes a coroutine with a
// Session of its own on that worker.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pond/cluster.h"
#include "pond/runtime/doorbell.h"

namespace pond::node {

using ServedCall = std::function<Task<void>(Session&)>;

// Calls for one worker, from any thread.
class ServingInbox {
 public:
  void Push(ServedCall call) {
    {
      std::lock_guard lock(mu_);
      calls_.push_back(std::move(call));
      nonempty_.store(true, std::memory_order_release);
    }
    doorbell_.Ring();
  }
  // Rung by a call pushed here and by a message for the worker's endpoint (Endpoint::SetDoorbell):
  // a worker with nothing to do sleeps on it rather than for a fixed time, so what arrives for an
  // idle worker starts at once, not after the sleep and the timer slack the kernel adds to it.
  Doorbell& doorbell() { return doorbell_; }
  // Polls the worker's sources (Cluster::AttachSource); true if any took anything. Under
  // source_mu_, so that DetachSource, which removes one under the same lock, returns with no poll
  // of it under way; a worker with no source pays one load.
  bool PollSources() {
    if (!has_sources_.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(source_mu_);
    bool took = false;
    for (Cluster::WorkerSource* s : sources_) took |= s->Poll();
    return took;
  }
  // Adds `s`, or removes it; false if it is there already, or not there to remove.
  bool AddSource(Cluster::WorkerSource* s) {
    std::lock_guard lock(source_mu_);
    if (std::find(sources_.begin(), sources_.end(), s) != sources_.end()) return false;
    sources_.push_back(s);
    has_sources_.store(true, std::memory_order_release);
    return true;
  }
  bool RemoveSource(Cluster::WorkerSource* s) {
    std::lock_guard lock(source_mu_);
    auto it = std::find(sources_.begin(), sources_.end(), s);
    if (it == sources_.end()) return false;
    sources_.erase(it);
    has_sources_.store(!sources_.empty(), std::memory_order_release);
    return true;
  }
  // Moves every waiting call to `out` (empty on entry); an empty inbox costs one load.
  void TakeAll(std::vector<ServedCall>* out) {
    if (!nonempty_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(mu_);
    out->swap(calls_);
    nonempty_.store(false, std::memory_order_relaxed);
  }

 private:
  std::atomic<bool> nonempty_{false};
  std::mutex mu_;
  std::vector<ServedCall> calls_;
  Doorbell doorbell_;
  std::atomic<bool> has_sources_{false};
  std::mutex source_mu_;
  std::vector<Cluster::WorkerSource*> sources_;  // guarded by source_mu_
};

struct Serving {
  std::atomic<bool> stopping{false};
  // Set before `stopping`: a worker then leaves without the answers it still awaits from other
  // processes' CNs once this has passed (they may have stopped first).
  std::chrono::steady_clock::time_point stop_by = std::chrono::steady_clock::time_point::max();
  // Calls submitted and not yet finished, and pins held (Cluster::Pin: one worker kept for the
  // steps of one transaction). A worker counts its finished calls off only after the round that
  // finished them has ended, so that their last messages are in the fabric.
  std::atomic<int64_t> calls_running{0};
  std::vector<std::unique_ptr<ServingInbox>> inboxes;  // one per worker, CN by CN
  std::vector<uint32_t> first_inbox;                   // of each CN
  std::unique_ptr<std::atomic<uint32_t>[]> next;       // per CN: round robin over its workers
  std::vector<std::thread> threads;
};

}  // namespace pond::node
