#include "pond/node/routed_call.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace pond::node {

RoutedCalls::RoutedCalls(Endpoint& ep, Scheduler& sched, Runner run, uint64_t first_id)
    : ep_(ep), sched_(sched), run_(std::move(run)), next_id_(first_id) {
  ep_.OnMessage(kMsgCall, [this](const Message& m) { OnCall(m); });
  ep_.OnMessage(kMsgCallResult, [this](const Message& m) { OnResult(m); });
}

RoutedCalls::~RoutedCalls() { sched_.CancelAlarms(this); }

void RoutedCalls::ArmAlarm() {
  if (alarm_set_ || pending_.empty()) return;
  uint64_t oldest = UINT64_MAX;
  for (const auto& [id, p] : pending_) oldest = std::min(oldest, p->sent_ns);
  sched_.SetAlarm(oldest + kResendAfterNs, this);
  alarm_set_ = true;
}

void RoutedCalls::OnAlarm() {
  alarm_set_ = false;
  const uint64_t now = sched_.clock().NowNs();
  const uint64_t floor = pending_.empty() ? 0 : pending_.begin()->first;
  for (auto& [id, p] : pending_) {
    if (p->sent_ns + kResendAfterNs > now) continue;
    CallHeader h;
    std::memcpy(&h, p->request.data(), sizeof(h));
    h.floor = floor;
    std::memcpy(p->request.data(), &h, sizeof(h));
    p->sent_ns = now;
    ep_.Send(p->target, kMsgCall, p->request);
    stats_.resends++;
  }
  ArmAlarm();
}

namespace {

// Parks the caller until OnResult hands it the answer.
template <typename Pending>
struct Wait {
  Pending* p;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) { p->waiter = h; }
  void await_resume() const noexcept {}
};

}  // namespace

void RoutedCalls::Send(WorkerAddr target, ProcedureId proc, uint16_t flags,
                       std::span<const std::byte> args, Pending* p) {
  stats_.calls++;
  const uint64_t id = next_id_++;
  pending_[id] = p;
  p->target = target;
  p->request.resize(sizeof(CallHeader) + args.size());
  CallHeader h{id, pending_.begin()->first, proc, flags, {}};
  std::memcpy(p->request.data(), &h, sizeof(h));
  if (!args.empty()) std::memcpy(p->request.data() + sizeof(h), args.data(), args.size());
  p->sent_ns = sched_.clock().NowNs();
  ep_.Send(target, kMsgCall, p->request);
  ArmAlarm();
}

Task<Status> RoutedCalls::Call(WorkerAddr target, ProcedureId proc,
                               std::span<const std::byte> args) {
  if (Failed(target.cn)) co_return FailedPeer(target.cn);
  Pending p;
  Send(target, proc, 0, args, &p);
  co_await Wait<Pending>{&p};
  const Code code = p.outcome.code;
  if (code == Code::kOk) co_return Status::Ok();
  co_return Status(code, code == Code::kUnknown ? p.outcome.message : "remote call failed");
}

Task<Result<std::vector<std::byte>>> RoutedCalls::CallWithReply(WorkerAddr target, ProcedureId proc,
                                                                std::span<const std::byte> args) {
  if (Failed(target.cn)) co_return FailedPeer(target.cn);
  Pending p;
  Send(target, proc, kCallWantsReply, args, &p);
  co_await Wait<Pending>{&p};
  if (p.outcome.code != Code::kOk) {
    co_return Status(p.outcome.code, std::move(p.outcome.message));
  }
  co_return std::move(p.outcome.reply);
}

void RoutedCalls::OnCall(const Message& m) {
  CallHeader h;
  if (m.payload.size() < sizeof(h)) {
    stats_.malformed++;  // not a call: nothing to answer
    ep_.CountMalformed();
    return;
  }
  std::memcpy(&h, m.payload.data(), sizeof(h));
  CallTable::Admit a = table_.Request(m.from, h.call_id, h.floor);
  if (a.what == CallAdmission::kAnswered) Answer(m.from, h.call_id, *a.outcome);
  if (a.what != CallAdmission::kRun) return;
  sched_.Spawn(
      Serve(m.from, h, std::vector<std::byte>(m.payload.begin() + sizeof(h), m.payload.end())));
}

Task<void> RoutedCalls::Serve(WorkerAddr from, CallHeader h, std::vector<std::byte> args) {
  const bool wants_reply = (h.flags & kCallWantsReply) != 0;
  CallOutcome out;
  Status st = co_await run_(h.proc, args, wants_reply ? &out.reply : nullptr);
  if (st.ok()) st = CheckReplyBytes(out.reply.size());
  out.code = st.code();
  if (!st.ok()) {
    out.reply.clear();  // a failed call answers its Status only
    if (wants_reply) {
      out.message = st.message().substr(0, std::min(st.message().size(), kCallMessageBytesMax));
    }
  }
  Answer(from, h.call_id, out);
  table_.Finish(from, h.call_id, std::move(out));
}

void RoutedCalls::Answer(WorkerAddr to, uint64_t call_id, const CallOutcome& outcome) {
  CallResult r{call_id, static_cast<uint8_t>(outcome.code), 0,
               static_cast<uint16_t>(outcome.message.size()),
               static_cast<uint32_t>(outcome.reply.size())};
  if (r.message_bytes == 0 && r.reply_bytes == 0) {
    ep_.Send(to, kMsgCallResult, std::as_bytes(std::span(&r, 1)));
    return;
  }
  std::vector<std::byte> msg(sizeof(r) + r.message_bytes + r.reply_bytes);
  std::memcpy(msg.data(), &r, sizeof(r));
  std::memcpy(msg.data() + sizeof(r), outcome.message.data(), r.message_bytes);
  if (r.reply_bytes > 0) {
    std::memcpy(msg.data() + sizeof(r) + r.message_bytes, outcome.reply.data(), r.reply_bytes);
  }
  ep_.Send(to, kMsgCallResult, msg);
}

void RoutedCalls::OnResult(const Message& m) {
  CallResult r;
  if (m.payload.size() < sizeof(r)) {
    stats_.malformed++;
    ep_.CountMalformed();
    return;
  }
  std::memcpy(&r, m.payload.data(), sizeof(r));
  if (m.payload.size() != sizeof(r) + r.message_bytes + uint64_t{r.reply_bytes} ||
      !KnownCode(r.code) || r.message_bytes > kCallMessageBytesMax ||
      r.reply_bytes > kReplyBytesMax) {
    stats_.malformed++;
    ep_.CountMalformed();
    return;
  }
  auto it = pending_.find(r.call_id);
  if (it == pending_.end()) {
    stats_.answer_copies++;  // a copy of an answer already taken
    return;
  }
  Pending* p = it->second;
  pending_.erase(it);
  stats_.answers++;
  p->outcome.code = static_cast<Code>(r.code);
  const auto* text = reinterpret_cast<const char*>(m.payload.data() + sizeof(r));
  p->outcome.message.assign(text, r.message_bytes);
  p->outcome.reply.assign(m.payload.begin() + sizeof(r) + r.message_bytes, m.payload.end());
  sched_.Ready(p->waiter);
}

Status RoutedCalls::FailedPeer(uint16_t cn) {
  // Known not to have run: an abort, so that the caller retries (routing follows the failure).
  return Aborted("not sent: CN " + std::to_string(cn) + " has failed");
}

size_t RoutedCalls::PeerFailed(uint16_t cn) {
  size_t unknown = 0;
  if (failed_.size() <= cn) failed_.resize(size_t{cn} + 1, false);
  failed_[cn] = true;
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending* p = it->second;
    if (p->target.cn != cn) {
      ++it;
      continue;
    }
    it = pending_.erase(it);
    p->outcome.code = Code::kUnknown;
    p->outcome.message = "CN " + std::to_string(cn) + " failed while running the call";
    p->outcome.reply.clear();
    sched_.Ready(p->waiter);
    unknown++;
  }
  return unknown;
}

}  // namespace pond::node
