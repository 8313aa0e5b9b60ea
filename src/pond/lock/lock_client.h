// LockClient: one worker's way to take and drop locks, wherever they live (Lotus §4.1, §5.1).
//
// Locks of shards this CN manages are taken directly on the local LockTable. Requests for other
// CNs are queued per destination and, at the end of the scheduling round, leave as one
// request-batch message per destination — holding the requests of every transaction of this
// worker that asked during the round. An Acquire resumes when every one of its answers is in.
// Requests go from worker i of this CN to worker i of the managing CN (Lotus §4.1).
//
// If any lock is refused, Acquire releases those it got and returns the refusal (Conflict), so a
// failed Acquire holds nothing. A WrongShard answer (the map changed) makes the client re-read
// the ShardMap and resend that request, at most kWrongShardRetriesMax times.
//
// Release is asynchronous for remote locks: it queues the unlocks and returns at once.
//
// Thread rules: one LockClient per worker, used from that worker's thread only. It registers
// itself as a Poller of the worker's scheduler and as the handler of kMsgLockReplies.
#pragma once

#include <coroutine>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "pond/lock/lock_key.h"
#include "pond/lock/lock_messages.h"
#include "pond/lock/lock_table.h"
#include "pond/lock/shard_map.h"
#include "pond/runtime/scheduler.h"
#include "pond/runtime/task.h"
#include "pond/status.h"
#include "pond/transport/endpoint.h"

namespace pond::lock {

inline constexpr int kWrongShardRetriesMax = 4;

struct LockRequest {
  LockKey key;
  LockMode mode;
};

struct LockClientStats {
  uint64_t local_acquires = 0;
  uint64_t remote_acquires = 0;
  uint64_t request_messages = 0;  // request batches sent
  uint64_t wrong_shard_retries = 0;
  uint64_t refusals = 0;
};

class LockClient : public Poller {
 public:
  // `cn` is this CN; `local` its lock table. Registers with the endpoint's scheduler.
  LockClient(uint16_t cn, Endpoint& ep, LockTable& local, const ShardMap& map);

  Task<Status> Acquire(const LockOwner& owner, std::span<const LockRequest> reqs);
  void Release(const LockOwner& owner, std::span<const LockRequest> reqs);

  // Poller.
  bool Poll() override { return false; }
  void EndRound() override;

  const LockClientStats& stats() const { return stats_; }

 private:
  // Implementation-defined members (pending batches per destination CN, outstanding acquires
  // by req_id, ...); see lock_client.cc.
  void OnReplies(const Message& m);

  uint16_t cn_;
  Endpoint& ep_;
  LockTable& local_;
  const ShardMap& map_;
  LockClientStats stats_;
};

}  // namespace pond::lock
