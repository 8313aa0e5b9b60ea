#include "pond/lock/lock_client.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "pond/base/assert.h"
#include "pond/transport/packet.h"

namespace pond::lock {

static_assert(std::endian::native == std::endian::little, "wire structs are little-endian");
static_assert(sizeof(BatchHeader) + kLockBatchEntriesMax * sizeof(LockRequestEntry) <=
                  kMessageLenMax,
              "a full lock request batch must fit in one message");

namespace {
enum class ItemState : uint8_t { kNotSent, kPending, kDone };
}  // namespace

struct LockClient::AcquireState {
  struct Item {
    LockRequest req;
    ItemState state = ItemState::kNotSent;
    Code code = Code::kOk;  // outcome once kDone
    uint16_t cn = 0;        // where it was last sent (this CN for a local lock)
    uint32_t req_id = 0;    // while kPending
    int retries = 0;        // WrongShard resends so far
  };

  LockClient* client;
  LockOwner owner;
  std::vector<Item> items;
  uint32_t remaining = 0;  // items kPending
  std::coroutine_handle<> waiter;

  AcquireState(LockClient* c, const LockOwner& o) : client(c), owner(o) {}
  AcquireState(const AcquireState&) = delete;
  AcquireState& operator=(const AcquireState&) = delete;
  // A coroutine destroyed while waiting (worker shutdown) must not leave its address behind for
  // a late reply to write through.
  ~AcquireState() {
    if (client == nullptr) return;
    for (const Item& it : items) {
      if (it.state == ItemState::kPending) client->outstanding_.erase(it.req_id);
    }
  }
};

LockClient::LockClient(uint16_t cn, Endpoint& ep, LockTable& local, const ShardMap& map)
    : cn_(cn),
      ep_(ep),
      local_(local),
      map_(map),
      pending_(map.num_cns()),
      pending_mask_((map.num_cns() + 63) / 64),
      heard_ns_(map.num_cns(), 0) {
  POND_CHECK_MSG(cn < map.num_cns(), "CN id outside the shard map");
  POND_CHECK_MSG(map.num_cns() <= kNodeSetBits, "a transaction's CNs are a NodeSet");
  POND_CHECK_MSG(ep.self().cn == cn, "lock client on another CN's endpoint");
  ep_.scheduler().AddPoller(this);
  ep_.OnMessage(kMsgLockReplies, [this](const Message& m) { OnReplies(m); });
}

LockClient::~LockClient() {
  for (auto& [id, o] : outstanding_) o.st->client = nullptr;
  ep_.scheduler().CancelAlarms(this);
}

uint32_t LockClient::NewReqId() {
  // Ids wrap after 2^32 requests; skipping the ones still outstanding keeps them unique, and the
  // loop is bounded by the number outstanding. 0 is an unlock's.
  while (next_req_id_ == 0 || outstanding_.contains(next_req_id_) || ends_.contains(next_req_id_)) {
    next_req_id_++;
  }
  return next_req_id_++;
}

void LockClient::Start(const LockOwner& owner) {
  POND_ASSERT(owner.txn_id >= next_floor_);
  live_.insert(owner.txn_id);
  next_floor_ = owner.txn_id + 1;
}

void LockClient::Finish(const LockOwner& owner, std::span<const LockRequest> reqs) {
  Release(owner, reqs);
  if (live_.erase(owner.txn_id) == 0) return;
  auto c = contacted_.find(owner.txn_id);
  if (c == contacted_.end()) return;
  for (const size_t d : c->second) {
    const auto dest = static_cast<uint16_t>(d);
    if (IsFailed(dest)) continue;  // its lock table is gone, and with it what the end would end
    LockRequestEntry e{};
    e.txn_id = owner.txn_id;
    e.op = kOpEnd;
    e.req_id = NewReqId();
    const uint64_t now = ep_.scheduler().clock().NowNs();
    ends_.emplace(e.req_id, EndRequest{dest, e, now, now});
    Queue(dest, e);
    stats_.ends_sent++;
  }
  contacted_.erase(c);
  ArmAlarm();
}

void LockClient::ArmAlarm() {
  if (alarm_set_ || (outstanding_.empty() && ends_.empty())) return;
  uint64_t oldest = UINT64_MAX;
  for (const auto& [id, o] : outstanding_) oldest = std::min(oldest, o.sent_ns);
  for (const auto& [id, e] : ends_) oldest = std::min(oldest, e.sent_ns);
  ep_.scheduler().SetAlarm(oldest + kResendAfterNs, this);
  alarm_set_ = true;
}

void LockClient::OnAlarm() {
  alarm_set_ = false;
  const uint64_t now = ep_.scheduler().clock().NowNs();
  // In req_id order, so that a simulated run resends in an order fixed by its seed.
  std::vector<uint32_t> late;
  for (const auto& [id, o] : outstanding_) {
    if (o.sent_ns + kResendAfterNs <= now) late.push_back(id);
  }
  std::sort(late.begin(), late.end());
  for (uint32_t id : late) {
    Outstanding& o = outstanding_.at(id);
    const auto& item = o.st->items[o.item];
    LockRequestEntry e{};
    e.txn_id = o.st->owner.txn_id;
    e.key = item.req.key.key;
    e.table = item.req.key.table;
    e.op = kOpLock;
    e.mode = static_cast<uint8_t>(item.req.mode);
    e.req_id = id;
    o.sent_ns = now;
    Queue(item.cn, e);
    stats_.resends++;
  }
  for (auto& [id, e] : ends_) {
    if (e.sent_ns + kResendAfterNs > now) continue;
    e.sent_ns = now;
    Queue(e.dest, e.entry);
    stats_.resends++;
  }
  ArmAlarm();
}

void LockClient::Route(AcquireState& st, uint32_t index) {
  auto& item = st.items[index];
  for (;;) {
    const uint16_t dest = map_.CnOf(item.req.key);
    POND_ASSERT(dest < pending_.size());
    item.cn = dest;
    if (IsFailed(dest)) {
      // Until membership moves the failed CN's shards, nobody can grant their locks.
      item.state = ItemState::kDone;
      item.code = Code::kConflict;
      stats_.refusals++;
      return;
    }
    if (dest != cn_) {
      item.state = ItemState::kPending;
      item.req_id = NewReqId();
      const uint64_t now = ep_.scheduler().clock().NowNs();
      outstanding_.emplace(item.req_id, Outstanding{&st, index, now, now});
      contacted_[st.owner.txn_id].Add(dest);
      st.remaining++;
      LockRequestEntry e{};
      e.txn_id = st.owner.txn_id;
      e.key = item.req.key.key;
      e.table = item.req.key.table;
      e.op = kOpLock;
      e.mode = static_cast<uint8_t>(item.req.mode);
      e.req_id = item.req_id;
      Queue(dest, e);
      stats_.remote_acquires++;
      ArmAlarm();
      return;
    }
    stats_.local_acquires++;
    Status s = local_.Acquire(item.req.key, item.req.mode, st.owner);
    if (s.code() == Code::kWrongShard && item.retries < kWrongShardRetriesMax) {
      // The map says "here" but the table does not manage the shard (yet / any more): re-read.
      item.retries++;
      stats_.wrong_shard_retries++;
      continue;
    }
    item.state = ItemState::kDone;
    item.code = s.code();
    if (!s.ok()) stats_.refusals++;
    return;
  }
}

Task<Status> LockClient::Acquire(const LockOwner& owner, std::span<const LockRequest> reqs) {
  POND_ASSERT_MSG(owner.cn == cn_, "a CN takes locks only for its own transactions");
  AcquireState st(this, owner);
  st.items.reserve(reqs.size());
  for (const LockRequest& r : reqs) st.items.push_back({.req = r});

  // Local locks first, then remote ones: a local refusal aborts before anything is sent.
  std::vector<uint32_t> order;
  order.reserve(st.items.size());
  for (uint32_t i = 0; i < st.items.size(); i++) {
    if (map_.CnOf(st.items[i].req.key) == cn_) order.push_back(i);
  }
  for (uint32_t i = 0; i < st.items.size(); i++) {
    if (map_.CnOf(st.items[i].req.key) != cn_) order.push_back(i);
  }
  for (uint32_t i : order) {
    Route(st, i);
    const auto& item = st.items[i];
    if (item.state == ItemState::kDone && item.code != Code::kOk) break;
  }

  if (st.remaining > 0) {
    struct AllReplies {
      AcquireState* st;
      bool await_ready() const noexcept { return st->remaining == 0; }
      void await_suspend(std::coroutine_handle<> h) noexcept { st->waiter = h; }
      void await_resume() const noexcept {}
    };
    co_await AllReplies{&st};
  }
  POND_ASSERT(st.remaining == 0);

  Code failure = Code::kOk;
  for (const auto& item : st.items) {
    if (item.state != ItemState::kDone) {
      POND_ASSERT(item.state == ItemState::kNotSent);
      continue;
    }
    // Conflict wins over WrongShard: it is the answer the caller can act on (abort, retry).
    if (item.code == Code::kConflict) failure = Code::kConflict;
    if (item.code == Code::kWrongShard && failure == Code::kOk) failure = Code::kWrongShard;
  }
  if (failure == Code::kOk) co_return Status::Ok();

  // Undo: release exactly where each lock was granted (item.cn), not where the map points now.
  for (const auto& item : st.items) {
    if (item.state != ItemState::kDone || item.code != Code::kOk) continue;
    if (item.cn == cn_) {
      // NotFound is fine: a repeat of a lock released by an earlier entry of this same call.
      (void)local_.Release(item.req.key, item.req.mode, owner);
    } else {
      LockRequestEntry e{};
      e.txn_id = owner.txn_id;
      e.key = item.req.key.key;
      e.table = item.req.key.table;
      e.op = kOpUnlock;
      e.mode = static_cast<uint8_t>(item.req.mode);
      Queue(item.cn, e);
      stats_.unlocks_sent++;
    }
  }
  if (failure == Code::kConflict) co_return Conflict("lock refused");
  co_return WrongShard("shard map kept changing; lock request not placed");
}

void LockClient::Release(const LockOwner& owner, std::span<const LockRequest> reqs) {
  POND_ASSERT_MSG(owner.cn == cn_, "a CN releases locks only for its own transactions");
  for (const LockRequest& r : reqs) {
    const uint16_t dest = map_.CnOf(r.key);
    POND_ASSERT(dest < pending_.size());
    if (dest == cn_) {
      // NotFound (a release of something not held) changes nothing, as for remote unlocks.
      (void)local_.Release(r.key, r.mode, owner);
      continue;
    }
    LockRequestEntry e{};
    e.txn_id = owner.txn_id;
    e.key = r.key.key;
    e.table = r.key.table;
    e.op = kOpUnlock;
    e.mode = static_cast<uint8_t>(r.mode);
    Queue(dest, e);
    stats_.unlocks_sent++;
  }
}

void LockClient::Queue(uint16_t dest, const LockRequestEntry& e) {
  // A failed CN's lock table is gone: unlocks and ends for it have nothing left to release.
  if (IsFailed(dest)) return;
  pending_[dest].push_back(e);
  pending_mask_[dest / 64] |= uint64_t{1} << (dest % 64);
  queued_ = true;
}

void LockClient::EndRound() {
  if (!queued_) return;
  queued_ = false;
  for (size_t word = 0; word < pending_mask_.size(); word++) {
    for (uint64_t bits = std::exchange(pending_mask_[word], 0); bits != 0; bits &= bits - 1) {
      const auto dest =
          static_cast<uint16_t>(word * 64 + static_cast<size_t>(std::countr_zero(bits)));
      auto& entries = pending_[dest];
      for (size_t begin = 0; begin < entries.size(); begin += kLockBatchEntriesMax) {
        const uint32_t n =
            static_cast<uint32_t>(std::min<size_t>(kLockBatchEntriesMax, entries.size() - begin));
        buf_.resize(sizeof(BatchHeader) + size_t{n} * sizeof(LockRequestEntry));
        BatchHeader h{n, 0, Floor()};
        std::memcpy(buf_.data(), &h, sizeof(h));
        std::memcpy(buf_.data() + sizeof(h), entries.data() + begin,
                    size_t{n} * sizeof(LockRequestEntry));
        // Worker i talks to worker i of the managing CN (Lotus §4.1).
        ep_.Send(WorkerAddr{dest, ep_.self().worker}, kMsgLockRequests, buf_);
        stats_.request_messages++;
      }
      entries.clear();
    }
  }
}

namespace {

bool ValidReplyCode(uint8_t code) {
  const auto c = static_cast<Code>(code);
  return c == Code::kOk || c == Code::kConflict || c == Code::kWrongShard;
}

}  // namespace

void LockClient::OnReplies(const Message& m) {
  // Every entry is checked before any is taken: a malformed batch answers nothing, and the
  // requests it would have answered are sent again (OnAlarm).
  const std::optional<BatchHeader> header = ReadBatchHeader(m.payload, sizeof(LockReplyEntry));
  bool valid = header.has_value();
  for (uint32_t i = 0; valid && i < header->count; i++) {
    valid = ValidReplyCode(BatchEntry<LockReplyEntry>(m.payload, i).code);
  }
  if (!valid) {
    stats_.malformed++;
    ep_.CountMalformed();
    return;
  }
  if (m.from.cn < heard_ns_.size()) heard_ns_[m.from.cn] = ep_.scheduler().clock().NowNs();
  for (uint32_t i = 0; i < header->count; i++) {
    const auto r = BatchEntry<LockReplyEntry>(m.payload, i);
    if (auto end = ends_.find(r.req_id); end != ends_.end()) {
      if (m.from.cn == end->second.dest) ends_.erase(end);
      continue;
    }
    auto it = outstanding_.find(r.req_id);
    if (it == outstanding_.end()) {
      stats_.stale_replies++;
      continue;
    }
    AcquireState& st = *it->second.st;
    const uint32_t index = it->second.item;
    auto& item = st.items[index];
    if (item.cn != m.from.cn) {
      // A reply must come from the CN its request went to; this one stays awaited.
      stats_.malformed++;
      ep_.CountMalformed();
      continue;
    }
    outstanding_.erase(it);
    POND_ASSERT(item.state == ItemState::kPending && item.req_id == r.req_id);
    POND_ASSERT(st.remaining > 0);
    st.remaining--;
    const Code code = static_cast<Code>(r.code);
    if (code == Code::kWrongShard && item.retries < kWrongShardRetriesMax) {
      item.retries++;
      stats_.wrong_shard_retries++;
      Route(st, index);  // may go out again (remaining++) or be decided locally now
    } else {
      item.state = ItemState::kDone;
      item.code = code;
      if (code != Code::kOk) stats_.refusals++;
    }
    if (st.remaining == 0) ep_.scheduler().Ready(st.waiter);
  }
}

void LockClient::PeerFailed(uint16_t cn) {
  POND_CHECK(cn < kNodeSetBits && cn != cn_);
  failed_.Add(cn);
  // Requests it will never answer are refused now, in req_id order (a simulated run replays).
  std::vector<uint32_t> lost;
  for (const auto& [id, o] : outstanding_) {
    if (o.st->items[o.item].cn == cn) lost.push_back(id);
  }
  std::sort(lost.begin(), lost.end());
  for (uint32_t id : lost) {
    auto it = outstanding_.find(id);
    AcquireState& st = *it->second.st;
    auto& item = st.items[it->second.item];
    outstanding_.erase(it);
    item.state = ItemState::kDone;
    item.code = Code::kConflict;
    stats_.refusals++;
    POND_ASSERT(st.remaining > 0);
    if (--st.remaining == 0) ep_.scheduler().Ready(st.waiter);
  }
  std::erase_if(ends_, [cn](const auto& e) { return e.second.dest == cn; });
  pending_[cn].clear();
  pending_mask_[cn / 64] &= ~(uint64_t{1} << (cn % 64));
}

uint64_t LockClient::Silent(uint64_t for_ns) const {
  const uint64_t now = ep_.scheduler().clock().NowNs();
  uint64_t silent = 0;
  auto waited = [&](uint16_t dest, uint64_t first_ns) {
    if (first_ns + for_ns <= now && heard_ns_[dest] + for_ns <= now) {
      POND_CHECK_MSG(dest < 64, "Silent reports CNs below 64, as the lease page holds them");
      silent |= uint64_t{1} << dest;
    }
  };
  for (const auto& [id, o] : outstanding_) waited(o.st->items[o.item].cn, o.first_ns);
  for (const auto& [id, e] : ends_) waited(e.dest, e.first_ns);
  return silent;
}

void LockClient::Probe(uint16_t dest, uint64_t quiet_ns) {
  if (dest == cn_ || dest >= pending_.size() || IsFailed(dest)) return;
  const uint64_t now = ep_.scheduler().clock().NowNs();
  if (heard_ns_[dest] + quiet_ns > now) return;
  for (const auto& [id, e] : ends_) {
    if (e.dest == dest) return;
  }
  for (const auto& [id, o] : outstanding_) {
    if (o.st->items[o.item].cn == dest) return;
  }
  LockRequestEntry e{};
  e.txn_id = 0;
  e.op = kOpEnd;
  e.req_id = NewReqId();
  ends_.emplace(e.req_id, EndRequest{dest, e, now, now});
  Queue(dest, e);
  ArmAlarm();
}

size_t LockClient::LiveContacting(uint16_t cn) const {
  size_t n = 0;
  for (const auto& [txn, cns] : contacted_) n += cns.Has(cn) ? 1 : 0;
  return n;
}

}  // namespace pond::lock
