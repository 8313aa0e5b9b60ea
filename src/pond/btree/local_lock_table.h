// LocalLockTable: the CN-side half of Sherman's hierarchical lock (HOCL), for one worker.
//
// Before a coroutine takes a node's global lock word on the MN (by CAS), it queues here, keyed
// by that word's address: so the coroutines of one worker that want the same node never race one
// another with remote CASes, and they are served first come, first served. When the holder is
// done and a local waiter is queued, the holder may hand the global lock straight over (no
// release, no CAS: one round trip less for the waiter) — at most `handover_max` times in a row,
// after which the lock is released on the MN so that other CNs get their turn.
//
// Protocol for a holder: Acquire (true: the global lock came handed over; false: take it by CAS),
// then, when done, WillHandOver (true: do not release the global word; false: post its release),
// then — after the release or write-back has completed — Release, which wakes the next waiter.
// A holder that failed to take the global word calls Abandon instead.
//
// Per worker because a worker's coroutines run one at a time: no atomics, no thread handoff.
// Sharing one table among a CN's threads would need a lock-free queue per word; Pond keeps the
// per-worker table and lets workers of one CN meet at the global word.
//
// Thread rules: one table per worker scheduler, used only from that worker's coroutines.
#pragma once

#include <coroutine>
#include <cstdint>
#include <deque>
#include <unordered_map>

#include "pond/base/assert.h"
#include "pond/runtime/scheduler.h"

namespace pond::btree {

class LocalLockTable {
 public:
  LocalLockTable(Scheduler& sched, int handover_max) : sched_(sched), handover_max_(handover_max) {}

  struct Waiter {
    std::coroutine_handle<> h;
    uint64_t what = 0;
    bool handed = false;
  };

  // co_await Acquire(word, what) -> bool: the caller holds the local lock of `word`, for `what`
  // (the node it locks: words are shared by nodes that hash alike); true if the global word came
  // with it (handed over), false if the caller must take it on the MN.
  auto Acquire(uint64_t word, uint64_t what = 0) {
    struct Awaiter {
      LocalLockTable* t;
      uint64_t word;
      Waiter w;
      bool await_ready() {
        Entry& e = t->entries_[word];
        if (e.held) return false;
        e.held = true;
        return true;
      }
      void await_suspend(std::coroutine_handle<> h) {
        w.h = h;
        t->entries_[word].queue.push_back(&w);
        t->queued_++;
      }
      bool await_resume() const { return w.handed; }
    };
    return Awaiter{this, word, {{}, what, false}};
  }

  // The local lock of `word` if no coroutine holds it: true (the caller takes the global word
  // by CAS, as after an Acquire that returned false), else false at once. For an operation that
  // already holds a line (a merge): waiting there could close a cycle, as words are shared.
  bool TryAcquire(uint64_t word) {
    Entry& e = entries_[word];
    if (e.held) return false;
    e.held = true;
    return true;
  }

  // The holder is about to let go: decides whether the next local waiter gets the global lock
  // handed over (true; the caller must not release it) or the lock goes back to the MN (false).
  // Only a waiter for the same `what` is handed it: the global word names what its holder writes
  // (a B+Tree lock word names its node, for whoever takes it from a holder that died).
  bool WillHandOver(uint64_t word, uint64_t what = 0) {
    Entry& e = Held(word);
    POND_ASSERT(!e.deciding);
    e.deciding = true;
    if (!e.queue.empty() && e.queue.front()->what == what && e.handovers < handover_max_) {
      e.handovers++;
      e.handing = true;
      handovers_++;
      return true;
    }
    e.handovers = 0;
    e.handing = false;
    return false;
  }

  // After WillHandOver and the completion of what the holder posted with it: the next waiter
  // runs (as the new holder), or the entry goes away.
  void Release(uint64_t word) {
    Entry& e = Held(word);
    POND_ASSERT(e.deciding);
    e.deciding = false;
    PassOn(word, e, e.handing);
  }

  // The holder never got the global word (its CAS retries ran out): the next waiter must try.
  void Abandon(uint64_t word) {
    Entry& e = Held(word);
    e.handovers = 0;
    PassOn(word, e, false);
  }

  uint64_t handovers() const { return handovers_; }
  uint64_t queued() const { return queued_; }  // acquisitions that had to wait
  size_t entries() const { return entries_.size(); }

 private:
  struct Entry {
    bool held = false;
    bool deciding = false;  // between WillHandOver and Release
    bool handing = false;   // WillHandOver said yes
    int handovers = 0;      // in a row without a release to the MN
    std::deque<Waiter*> queue;
  };

  Entry& Held(uint64_t word) {
    auto it = entries_.find(word);
    POND_ASSERT_MSG(it != entries_.end() && it->second.held, "releasing a lock not held");
    return it->second;
  }
  void PassOn(uint64_t word, Entry& e, bool handed) {
    if (e.queue.empty()) {
      POND_ASSERT(!handed);
      entries_.erase(word);
      return;
    }
    Waiter* next = e.queue.front();
    e.queue.pop_front();
    next->handed = handed;
    sched_.Ready(next->h);
  }

  Scheduler& sched_;
  int handover_max_;
  std::unordered_map<uint64_t, Entry> entries_;  // only words held or waited for
  uint64_t handovers_ = 0;
  uint64_t queued_ = 0;
};

}  // namespace pond::btree
