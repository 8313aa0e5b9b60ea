// LockServer: a worker's handler for lock requests from other CNs (Lotus §4.1).
//
// For each request batch it applies every entry to the CN's LockTable in order and answers all
// lock entries of the batch in one reply batch to the sender. Before granting a write lock to a
// remote transaction it calls the remote-write hook, with which the CN invalidates its cached CVT
// of that key (the VT cache stays exact with no other traffic, Lotus §4.4). Handlers must be
// idempotent: a repeated request by the same owner is answered Ok and changes nothing; an unlock
// of a lock not held changes nothing.
//
// Thread rules: one LockServer per worker; it registers as the handler of kMsgLockRequests on
// that worker's endpoint.
#pragma once

#include <functional>

#include "pond/lock/lock_key.h"
#include "pond/lock/lock_table.h"
#include "pond/transport/endpoint.h"

namespace pond::lock {

struct LockServerStats {
  uint64_t request_batches = 0;
  uint64_t locks = 0;
  uint64_t unlocks = 0;
  uint64_t stray_unlocks = 0;  // unlocks of locks not held
  uint64_t wrong_shard = 0;
};

class LockServer {
 public:
  LockServer(Endpoint& ep, LockTable& table);

  void SetRemoteWriteHook(std::function<void(const LockKey&)> hook) { hook_ = std::move(hook); }
  const LockServerStats& stats() const { return stats_; }

  // Exposed for message-by-message tests; normally called by the endpoint.
  void OnRequests(const Message& m);

 private:
  Endpoint& ep_;
  LockTable& table_;
  std::function<void(const LockKey&)> hook_;
  LockServerStats stats_;
};

}  // namespace pond::lock
