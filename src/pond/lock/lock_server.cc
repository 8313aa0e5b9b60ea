#include "pond/lock/lock_server.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/lock/lock_messages.h"
#include "pond/status.h"

namespace pond::lock {

static_assert(std::endian::native == std::endian::little, "wire structs are little-endian");
// LockReplyEntry.code carries pond::Code values; docs/locks.md pins these three.
static_assert(static_cast<uint8_t>(Code::kOk) == 0 && static_cast<uint8_t>(Code::kConflict) == 5 &&
              static_cast<uint8_t>(Code::kWrongShard) == 8);

LockServer::LockServer(Endpoint& ep, LockTable& table) : ep_(ep), table_(table) {
  ep_.OnMessage(kMsgLockRequests, [this](const Message& m) { OnRequests(m); });
}

namespace {

bool ValidRequest(const LockRequestEntry& e) {
  return (e.op == kOpLock || e.op == kOpUnlock || e.op == kOpEnd) &&
         e.mode <= static_cast<uint8_t>(LockMode::kWrite);
}

}  // namespace

void LockServer::OnRequests(const Message& m) {
  // Every entry is checked before any acts: a malformed batch takes and drops nothing.
  const std::optional<BatchHeader> header = ReadBatchHeader(m.payload, sizeof(LockRequestEntry));
  bool valid = m.kind == kMsgLockRequests && header.has_value();
  for (uint32_t i = 0; valid && i < header->count; i++) {
    valid = ValidRequest(BatchEntry<LockRequestEntry>(m.payload, i));
  }
  if (!valid) {
    stats_.malformed++;
    ep_.CountMalformed();
    return;
  }
  const BatchHeader& bh = *header;
  stats_.request_batches++;
  Sender& sender = SenderOf(m.from);
  Advance(sender, bh.floor);

  const bool remote = m.from.cn != ep_.self().cn;
  reply_.resize(sizeof(BatchHeader));
  uint32_t replies = 0;
  for (uint32_t i = 0; i < bh.count; i++) {
    const auto e = BatchEntry<LockRequestEntry>(m.payload, i);
    const LockKey key{e.table, e.key};
    const LockMode mode = static_cast<LockMode>(e.mode);
    // The owner's CN is the sender's: a CN can only take or drop locks for its own transactions.
    const LockOwner owner{m.from.cn, e.txn_id};

    Status s;
    if (e.op == kOpUnlock) {
      if (table_.Release(key, mode, owner).ok()) {
        stats_.unlocks++;
        auto h = sender.held.find(e.txn_id);
        if (h != sender.held.end()) {
          auto& v = h->second;
          auto at = std::find(v.begin(), v.end(), std::make_pair(key, mode));
          if (at != v.end()) v.erase(at);
        }
      } else {
        stats_.stray_unlocks++;  // duplicate, stale or reordered: nothing to undo, no answer
      }
      continue;
    }
    if (e.op == kOpEnd) {
      End(sender, m.from.cn, e.txn_id);
      stats_.ends++;
    } else if (Ended(sender, e.txn_id)) {
      // A late copy: its transaction is over here, so whatever it would take would stay held.
      s = Conflict("transaction already ended");
      stats_.late_locks++;
    } else {
      stats_.locks++;
      s = table_.Acquire(key, mode, owner);
      if (s.code() == Code::kWrongShard) stats_.wrong_shard++;
      if (s.ok() && remote && mode == LockMode::kWrite && hook_) hook_(key);
      if (s.ok()) {
        // What End must release; a repeat is listed once (an upgrade lists both modes, and
        // releasing the read one then finds nothing, as Release of a mode not held should).
        auto& v = sender.held[e.txn_id];
        if (std::find(v.begin(), v.end(), std::make_pair(key, mode)) == v.end()) {
          v.emplace_back(key, mode);
        }
      }
      POND_ASSERT(s.ok() || s.code() == Code::kConflict || s.code() == Code::kWrongShard);
    }
    LockReplyEntry r{};
    r.req_id = e.req_id;
    r.code = static_cast<uint8_t>(s.code());
    size_t at = reply_.size();
    reply_.resize(at + sizeof(r));
    std::memcpy(reply_.data() + at, &r, sizeof(r));
    replies++;
  }
  if (replies == 0) return;
  BatchHeader out{replies, 0, 0};
  std::memcpy(reply_.data(), &out, sizeof(out));
  ep_.Send(m.from, kMsgLockReplies, reply_);
}

LockServer::Sender& LockServer::SenderOf(WorkerAddr from) { return senders_[from.Packed()]; }

void LockServer::ForgetCn(uint16_t cn) {
  std::erase_if(senders_, [cn](const auto& s) { return (s.first >> 16) == cn; });
}

void LockServer::Advance(Sender& s, uint64_t floor) {
  if (floor <= s.floor) return;  // an older batch, reordered
  s.floor = floor;
  s.ended.erase(s.ended.begin(), s.ended.lower_bound(floor));
}

void LockServer::End(Sender& s, uint16_t cn, uint64_t txn) {
  auto h = s.held.find(txn);
  if (h != s.held.end()) {
    for (const auto& [key, mode] : h->second) {
      if (table_.Release(key, mode, LockOwner{cn, txn}).ok()) stats_.unlocks++;
    }
    s.held.erase(h);
  }
  if (txn >= s.floor) s.ended.insert(txn);
}

}  // namespace pond::lock
