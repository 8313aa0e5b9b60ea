// LockClient: one worker's way to take and drop locks, wherever they live (Lotus §4.1, §5.1).
//
// Locks of shards this CN manages are taken directly on the local LockTable. Requests for other
// CNs are queued per destination and, at the end of the scheduling round (EndRound), leave as one
// request-batch message per destination — holding the requests of every transaction of this
// worker that asked during the round (a batch longer than kLockBatchEntriesMax is split). An
// Acquire resumes when every one of its answers is in. Requests go from worker i of this CN to
// worker i of the managing CN (Lotus §4.1).
//
// Acquire takes the local locks first; if one is refused it sends nothing (early abort, Lotus
// §5.1). If any lock is refused, Acquire waits for the answers still outstanding, releases every
// lock of the call that was granted (local at once, remote by queued unlocks) and returns
// Conflict, so a failed Acquire holds none of the locks it named — including ones the owner held
// before the call (the transaction aborts anyway). A WrongShard answer (the map changed) makes the
// client re-read the ShardMap and resend that request, at most kWrongShardRetriesMax times per
// request; after that Acquire fails with WrongShard (and holds nothing).
//
// Release is asynchronous for remote locks: it queues the unlocks and returns at once; the
// managing CN applies them when the batch arrives. Release routes by the current ShardMap, which
// is right because a shard moves only after every lock of it has been released (resharding
// drains first, Lotus §4.3).
//
// Lost messages (lock_messages.h): a lock request unanswered for kResendAfterNs is sent again
// with its req_id, until answered. A transaction is Started when it is made and Finished when it
// will take no more locks: Finish releases its locks as Release does and, at every CN it sent a
// lock request to, ends it with an end request, sent again until answered; that end releases
// there whatever the unlocks, lost or late, did not, and makes the CN refuse late copies of the
// transaction's lock requests. Every batch carries this worker's floor, its oldest transaction
// Started and not Finished.
//
// Arguments of Acquire are copied into the coroutine when it starts; `owner` and `reqs` must stay
// valid until the task is first awaited (as they are in `co_await client.Acquire(o, reqs)`).
// `owner.cn` must be this CN: the managing CN takes the owner's CN from the message sender.
//
// Thread rules: one LockClient per worker, used from that worker's thread only. It registers
// itself as a Poller of the worker's scheduler (after the endpoint, so its EndRound runs first
// and its batches leave in the same round) and as the handler of kMsgLockReplies. It must live as
// long as the scheduler runs rounds; Acquires still waiting when it is destroyed never resume.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "pond/base/node_set.h"
#include "pond/lock/lock_key.h"
#include "pond/lock/lock_messages.h"
#include "pond/lock/lock_table.h"
#include "pond/lock/shard_map.h"
#include "pond/runtime/scheduler.h"
#include "pond/status.h"
#include "pond/task.h"
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
  uint64_t refusals = 0;       // lock requests refused (Conflict, or WrongShard after retries)
  uint64_t unlocks_sent = 0;   // remote unlock entries queued
  uint64_t stale_replies = 0;  // replies whose Acquire is gone
  // Reply batches dropped unread (ReadBatchHeader, an unknown code), and replies from a CN their
  // request did not go to.
  uint64_t malformed = 0;
  uint64_t ends_sent = 0;  // end requests queued (first copies)
  uint64_t resends = 0;    // lock and end requests sent again, unanswered for kResendAfterNs
};

class LockClient : public Poller, public Alarm {
 public:
  // `cn` is this CN; `local` its lock table. Registers with the endpoint's scheduler.
  LockClient(uint16_t cn, Endpoint& ep, LockTable& local, const ShardMap& map);
  ~LockClient() override;
  LockClient(const LockClient&) = delete;
  LockClient& operator=(const LockClient&) = delete;

  // A transaction of this worker begins; its txn id is larger than every earlier one's.
  void Start(const LockOwner& owner);
  Task<Status> Acquire(const LockOwner& owner, std::span<const LockRequest> reqs);
  void Release(const LockOwner& owner, std::span<const LockRequest> reqs);
  // Releases `reqs` and ends the transaction (see above); a second Finish only releases.
  void Finish(const LockOwner& owner, std::span<const LockRequest> reqs);

  // Poller.
  bool Poll() override { return false; }
  void EndRound() override;
  // Alarm: sends again the lock and end requests unanswered for kResendAfterNs.
  void OnAlarm() override;

  const LockClientStats& stats() const { return stats_; }
  // This worker's floor (its oldest transaction Started and not Finished), and the floor it
  // will have once every transaction Started so far has Finished: a caller that notes
  // next_floor() knows those have all ended once floor() reaches it.
  uint64_t floor() const { return Floor(); }
  uint64_t next_floor() const { return next_floor_; }
  // Lock and end requests sent and not answered yet.
  size_t awaiting() const { return outstanding_.size() + ends_.size(); }

  // Membership: CN `cn` failed (its lock table is gone). Requests awaiting its answer are
  // refused (Conflict) at once, its end requests forgotten, and nothing more is sent to it: a
  // lock of its shards is refused until the shard map names another CN, and unlocks and ends
  // for it are dropped.
  void PeerFailed(uint16_t cn);
  // CN `cn` came back as a new incarnation (empty lock table): it may be asked again, once the
  // shard map names it for a shard.
  void PeerRestarted(uint16_t cn) { failed_.Remove(cn); }
  // Live transactions of this worker that asked CN `cn` for a lock and may still hold one there.
  // After `cn` failed, its shards may be served again only once this is 0 on every worker.
  size_t LiveContacting(uint16_t cn) const;
  // The CNs this worker has heard nothing from for `for_ns` while a lock or end request to them
  // has waited at least that long (bit c for CN c): a peer it cannot reach, cut off or dead
  // (docs/recovery.md "Partitions and fencing"). Requests resend every kResendAfterNs, so a lost
  // message or two does not make a peer silent for a lease. A 64-bit mask, as the lease page's
  // report holds it: only the membership machine asks, which runs on at most
  // kMembershipNodesMax CNs (include/pond/cluster.h).
  uint64_t Silent(uint64_t for_ns) const;
  // Asks CN `dest` for an answer, so that Silent says within a lease whether it can be heard
  // even when nothing else waits on it: an end request of no transaction (txn 0, never a real
  // id), answered by any lock server and sent again until it is. Nothing if something already
  // waits on `dest`, or a reply came from it within `quiet_ns`.
  void Probe(uint16_t dest, uint64_t quiet_ns);

  // The handler of kMsgLockReplies (public so that tests can feed it, or drop what it gets).
  void OnReplies(const Message& m);

 private:
  struct AcquireState;  // one per running Acquire, on its coroutine frame; see lock_client.cc
  struct Outstanding {
    AcquireState* st;
    uint32_t item;      // index of the request in st
    uint64_t sent_ns;   // when it last left
    uint64_t first_ns;  // when it first left
  };
  struct EndRequest {
    uint16_t dest;
    LockRequestEntry entry;
    uint64_t sent_ns;
    uint64_t first_ns;
  };
  void ArmAlarm();
  // This worker's floor: its oldest transaction Started and not Finished.
  uint64_t Floor() const { return live_.empty() ? next_floor_ : *live_.begin(); }

  // Sends request `item` of `st` where the map says: takes it locally, or queues it for its CN
  // and counts it outstanding. Local WrongShard answers are retried here.
  void Route(AcquireState& st, uint32_t item);
  uint32_t NewReqId();

  uint16_t cn_;
  Endpoint& ep_;
  LockTable& local_;
  const ShardMap& map_;
  LockClientStats stats_;
  // Queues `e` for destination CN `dest`, to leave at the end of this round.
  void Queue(uint16_t dest, const LockRequestEntry& e);

  std::vector<std::vector<LockRequestEntry>> pending_;  // this round's entries, by destination CN
  // Bit d set iff pending_[d] is non-empty: most rounds queue nothing, and EndRound runs every
  // round, so it visits only these (in increasing order, which fixes the order batches leave).
  std::vector<uint64_t> pending_mask_;
  bool queued_ = false;                                    // any bit set in pending_mask_
  std::unordered_map<uint32_t, Outstanding> outstanding_;  // remote lock requests by req_id
  std::map<uint32_t, EndRequest> ends_;                    // end requests not answered yet
  std::set<uint64_t> live_;                                // txns Started, not Finished
  std::unordered_map<uint64_t, NodeSet> contacted_;        // live txn -> the CNs it asked
  uint64_t next_floor_ = 0;                                // one above every txn Started
  bool alarm_set_ = false;
  bool IsFailed(uint16_t dest) const { return failed_.Has(dest); }
  NodeSet failed_;                  // CNs declared failed
  std::vector<uint64_t> heard_ns_;  // by CN: when a reply from it last came
  uint32_t next_req_id_ = 1;
  std::vector<std::byte> buf_;  // reused message buffer
};

}  // namespace pond::lock
