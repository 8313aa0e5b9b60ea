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
  uint64_t ts = first;
  for (const Waiter& w : batch) {
    if (w.h) {
      *w.out = ts;
      ep_.scheduler().Ready(w.h);
      stats_.timestamps++;
    } else {
      TsoReply reply{ts, w.count, w.seq};
      ep_.Send(w.from, kMsgTsoReply, std::as_bytes(std::span(&reply, 1)));
      stats_.relayed++;
    }
    ts += w.count;
  }
}

void TsoClient::Relay(WorkerAddr from, uint32_t seq, uint32_t count) {
  waiting_.push_back(Waiter{nullptr, nullptr, from, seq, count});
  waiting_count_ += count;
}

void TsoClient::EndRound() {
  if (waiting_.empty()) return;
  if (one_in_flight_ && !sent_.empty()) return;
  std::vector<Waiter> all;
  all.swap(waiting_);
  const uint64_t total = waiting_count_;
  waiting_count_ = 0;
  if (total <= kTsoBlockMax) {
    // The usual round: one block, its waiters moved, not copied.
    Ask(std::move(all), static_cast<uint32_t>(total));
  } else {
    // Blocks of at most kTsoBlockMax timestamps, in the order asked (a relayed request is
    // never split: it asked for at most that many).
    std::vector<Waiter> block;
    uint32_t count = 0;
    for (const Waiter& w : all) {
      if (count + w.count > kTsoBlockMax) {
        Ask(std::move(block), count);
        block.clear();
        count = 0;
      }
      block.push_back(w);
      count += w.count;
    }
    Ask(std::move(block), count);
  }
  ArmAlarm();
}

void TsoClient::Ask(std::vector<Waiter> block, uint32_t count) {
  stats_.requests++;
  if (local_ != nullptr) {
    Hand(std::move(block), local_->Grant(count));
    return;
  }
  uint32_t seq = next_seq_++;
  auto [it, added] = sent_.emplace(seq, Sent{std::move(block), count, sched_.clock().NowNs()});
  POND_ASSERT(added);
  SendRequest(seq, it->second);
}

void TsoClient::SetHost(WorkerAddr host, TimestampOracle* local) {
  if (host == host_ && local == local_) return;
  host_ = host;
  local_ = local;
  if (local_ != nullptr) {
    for (auto& [seq, s] : sent_) Hand(std::move(s.waiters), local_->Grant(s.count));
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
  TsoRequest req{s.count, seq};
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
  if (it->second.count != r.count || r.first == 0 || r.first > UINT64_MAX - r.count) {
    // Not a grant of the block asked for: the request stays unanswered, and is sent again.
    ep_.CountMalformed();
    return;
  }
  std::vector<Waiter> batch = std::move(it->second.waiters);
  sent_.erase(it);
  Hand(std::move(batch), r.first);
}

TsoServer::TsoServer(Endpoint& ep, TimestampOracle* oracle, TsoClient* relay)
    : ep_(ep), oracle_(oracle), relay_(relay) {
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
      if (relay_ != nullptr && m.from.cn == ep_.self().cn && !(m.from == ep_.self())) {
        relay_->Relay(m.from, req.seq, req.count);
      } else {
        dropped_++;
      }
      return;
    }
    TsoReply reply{oracle_->Grant(req.count), req.count, req.seq};
    ep_.Send(m.from, kMsgTsoReply, std::as_bytes(std::span(&reply, 1)));
  });
}

}  // namespace pond::txn
