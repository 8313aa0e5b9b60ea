#include "pond/txn/timestamp_oracle.h"

#include <algorithm>
#include <cstring>

#include "pond/base/assert.h"

namespace pond::txn {

uint64_t TimestampOracle::Grant(uint32_t n) {
  POND_ASSERT(n >= 1);
  uint64_t floor = (clock_.NowNs() / 1000) << kLogicalBits;
  uint64_t last = last_.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t first = last + 1 > floor ? last + 1 : floor;
    if (last_.compare_exchange_weak(last, first + n - 1, std::memory_order_acq_rel)) return first;
  }
}

TsoClient::TsoClient(Endpoint& ep, WorkerAddr host, TimestampOracle* local)
    : ep_(ep), sched_(ep.scheduler()), host_(host), local_(local) {
  sched_.AddPoller(this);
  ep_.OnMessage(kMsgTsoReply, [this](const Message& m) { OnReply(m); });
}

TsoClient::~TsoClient() { sched_.CancelAlarms(this); }

void TsoClient::Hand(std::vector<Waiter> batch, uint64_t first) {
  // Within a block, earlier askers get smaller timestamps.
  for (size_t i = 0; i < batch.size(); i++) {
    *batch[i].out = first + i;
    ep_.scheduler().Ready(batch[i].h);
  }
  stats_.timestamps += batch.size();
}

void TsoClient::EndRound() {
  if (waiting_.empty()) return;
  std::vector<Waiter> all;
  all.swap(waiting_);
  if (all.size() <= kTsoBlockMax) {
    Ask(std::move(all));  // the usual round: one block, its waiters moved, not copied
  } else {
    // Blocks of at most kTsoBlockMax, in the order asked.
    for (size_t begin = 0; begin < all.size(); begin += kTsoBlockMax) {
      const size_t end = std::min(all.size(), begin + kTsoBlockMax);
      Ask(std::vector<Waiter>(all.begin() + static_cast<ptrdiff_t>(begin),
                              all.begin() + static_cast<ptrdiff_t>(end)));
    }
  }
  ArmAlarm();
}

void TsoClient::Ask(std::vector<Waiter> block) {
  stats_.requests++;
  if (local_ != nullptr) {
    const auto n = static_cast<uint32_t>(block.size());
    Hand(std::move(block), local_->Grant(n));
    return;
  }
  uint32_t seq = next_seq_++;
  auto [it, added] = sent_.emplace(seq, Sent{std::move(block), sched_.clock().NowNs()});
  POND_ASSERT(added);
  SendRequest(seq, it->second);
}

void TsoClient::SetHost(WorkerAddr host, TimestampOracle* local) {
  host_ = host;
  local_ = local;
  if (local_ != nullptr) {
    for (auto& [seq, s] : sent_) {
      Hand(std::move(s.waiters), local_->Grant(static_cast<uint32_t>(s.waiters.size())));
    }
    sent_.clear();
    return;
  }
  // Every request awaiting the old host is due at once: the alarm resends it, to the new host,
  // in this worker's next round, which the poke makes happen even if the worker is idle.
  for (auto& [seq, s] : sent_) s.sent_ns = 0;
  sched_.CancelAlarms(this);
  alarm_set_ = false;
  ArmAlarm();
  sched_.Poke();
}

void TsoClient::SendRequest(uint32_t seq, const Sent& s) {
  TsoRequest req{static_cast<uint32_t>(s.waiters.size()), seq};
  ep_.Send(host_, kMsgTsoRequest, std::as_bytes(std::span(&req, 1)));
}

void TsoClient::ArmAlarm() {
  if (alarm_set_ || sent_.empty()) return;
  uint64_t oldest = UINT64_MAX;
  for (const auto& [seq, s] : sent_) oldest = std::min(oldest, s.sent_ns);
  sched_.SetAlarm(oldest + kResendAfterNs, this);
  alarm_set_ = true;
}

void TsoClient::OnAlarm() {
  alarm_set_ = false;
  const uint64_t now = sched_.clock().NowNs();
  // A copy of a request gets a block of its own; the first reply serves the waiters and the
  // others are dropped (OnReply), so a resend wastes timestamps, never reuses one.
  for (auto& [seq, s] : sent_) {
    if (s.sent_ns + kResendAfterNs > now) continue;
    s.sent_ns = now;
    SendRequest(seq, s);
    stats_.resends++;
  }
  ArmAlarm();
}

void TsoClient::OnReply(const Message& m) {
  TsoReply r;
  if (m.payload.size() != sizeof(r)) {
    ep_.CountMalformed();
    return;
  }
  std::memcpy(&r, m.payload.data(), sizeof(r));
  auto it = sent_.find(r.seq);
  if (it == sent_.end()) return;  // a duplicate reply: its waiters were served already
  if (it->second.waiters.size() != r.count || r.first == 0 || r.first > UINT64_MAX - r.count) {
    // Not a grant of the block asked for: the request stays unanswered, and is sent again.
    ep_.CountMalformed();
    return;
  }
  std::vector<Waiter> batch = std::move(it->second.waiters);
  sent_.erase(it);
  Hand(std::move(batch), r.first);
}

TsoServer::TsoServer(Endpoint& ep, TimestampOracle* oracle) : ep_(ep), oracle_(oracle) {
  ep_.OnMessage(kMsgTsoRequest, [this](const Message& m) {
    TsoRequest req;
    if (m.payload.size() != sizeof(req)) {
      ep_.CountMalformed();
      return;
    }
    std::memcpy(&req, m.payload.data(), sizeof(req));
    if (req.count < 1 || req.count > kTsoBlockMax) {
      ep_.CountMalformed();
      return;
    }
    if (oracle_ == nullptr) {
      dropped_++;
      return;
    }
    TsoReply reply{oracle_->Grant(req.count), req.count, req.seq};
    ep_.Send(m.from, kMsgTsoReply, std::as_bytes(std::span(&reply, 1)));
  });
}

}  // namespace pond::txn
