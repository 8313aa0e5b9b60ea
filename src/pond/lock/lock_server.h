// LockServer: a worker's handler for lock requests from other CNs (Lotus §4.1).
//
// For each request batch it applies every entry to the CN's LockTable in order and answers all
// lock entries of the batch in one reply batch to the sender (none if the batch held only
// unlocks). The owner of an entry is (sender's CN, entry.txn_id): a CN cannot lock for another.
// Before it answers Ok to a write lock of a remote transaction (one from another CN) it calls the
// remote-write hook, with which the CN invalidates its cached CVT of that key (the VT cache stays
// exact with no other traffic, Lotus §4.4). The hook runs after the table granted the lock and
// before the reply is queued: from then on no local transaction can lock the key and so refill
// the cache entry, and the remote writer cannot write before it has the reply. (Calling it before
// the CAS, as Algorithm 1 line 15 does, would leave a window in which a local reader that still
// holds its read lock refills the cache just before releasing.) Handlers must be idempotent: a
// repeated request by the same owner is answered Ok and changes nothing; an unlock of a lock not
// held (duplicate, stale or reordered) changes nothing and is counted as stray.
//
// Late copies (lock_messages.h): for every sender worker the server keeps the highest floor it
// has seen, the holds it granted to that worker's live transactions, and the transactions that
// ended above the floor. An end request releases what its transaction still holds here, however
// its unlocks fared, and is answered Ok (again, for a copy); a lock request of an ended
// transaction or one below the floor is refused with Conflict and takes nothing. The ended set
// is pruned as the floor passes it, so it holds only transactions that ended while an older one
// of the same worker was still live.
//
// Thread rules: one LockServer per worker; it registers as the handler of kMsgLockRequests on
// that worker's endpoint.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pond/lock/lock_key.h"
#include "pond/lock/lock_table.h"
#include "pond/transport/endpoint.h"

namespace pond::lock {

struct LockServerStats {
  uint64_t request_batches = 0;
  uint64_t locks = 0;          // lock entries answered (any outcome)
  uint64_t unlocks = 0;        // unlocks that released a hold
  uint64_t stray_unlocks = 0;  // unlocks of locks not held
  uint64_t wrong_shard = 0;
  uint64_t ends = 0;        // end requests answered (copies included)
  uint64_t late_locks = 0;  // lock requests of ended transactions: refused
  uint64_t malformed = 0;   // batches dropped unread (ReadBatchHeader, a bad op or mode)
};

class LockServer {
 public:
  LockServer(Endpoint& ep, LockTable& table);

  void SetRemoteWriteHook(std::function<void(const LockKey&)> hook) { hook_ = std::move(hook); }
  const LockServerStats& stats() const { return stats_; }

  // Recovery: CN `cn` failed and its locks in this CN's table were released (LockTable::
  // ReleaseAllOf); forgets what it knew of that CN's workers. Their packets are refused by
  // incarnation from then on, so nothing of the dead incarnation can take a lock again.
  void ForgetCn(uint16_t cn);

  // Exposed for message-by-message tests; normally called by the endpoint. A malformed batch
  // (sizes that do not add up, more than kLockBatchEntriesMax entries, an unknown op or mode) is
  // dropped whole and counted (stats().malformed, Endpoint::CountMalformed).
  void OnRequests(const Message& m);

 private:
  // What the server knows of one sender worker's transactions.
  struct Sender {
    uint64_t floor = 0;
    std::set<uint64_t> ended;  // at or above floor
    // Holds granted to transactions that have not ended, by txn id.
    std::map<uint64_t, std::vector<std::pair<LockKey, LockMode>>> held;
  };
  Sender& SenderOf(WorkerAddr from);
  void Advance(Sender& s, uint64_t floor);
  // Ends `txn` of CN `cn`: releases its holds here and remembers it.
  void End(Sender& s, uint16_t cn, uint64_t txn);
  bool Ended(const Sender& s, uint64_t txn) const { return txn < s.floor || s.ended.contains(txn); }

  Endpoint& ep_;
  LockTable& table_;
  std::unordered_map<uint32_t, Sender> senders_;  // by WorkerAddr::Packed()
  std::function<void(const LockKey&)> hook_;
  LockServerStats stats_;
  std::vector<std::byte> reply_;  // reused reply buffer
};

}  // namespace pond::lock
