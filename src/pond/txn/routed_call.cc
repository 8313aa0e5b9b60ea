#include "pond/txn/routed_call.h"

#include <cstring>

namespace pond::txn {

RoutedCalls::RoutedCalls(Endpoint& ep, Scheduler& sched, Runner run)
    : ep_(ep), sched_(sched), run_(std::move(run)) {
  ep_.OnMessage(kMsgCall, [this](const Message& m) { OnCall(m); });
  ep_.OnMessage(kMsgCallResult, [this](const Message& m) { OnResult(m); });
}

Task<Status> RoutedCalls::Call(WorkerAddr target, ProcedureId proc,
                               std::span<const std::byte> args) {
  stats_.calls++;
  Pending p;
  const uint64_t id = next_id_++;
  pending_[id] = &p;
  std::vector<std::byte> msg(sizeof(CallHeader) + args.size());
  CallHeader h{id, pending_.begin()->first, proc, {}};
  std::memcpy(msg.data(), &h, sizeof(h));
  if (!args.empty()) std::memcpy(msg.data() + sizeof(h), args.data(), args.size());
  ep_.Send(target, kMsgCall, msg);
  struct Wait {
    Pending* p;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) { p->waiter = h; }
    void await_resume() const noexcept {}
  };
  co_await Wait{&p};
  co_return p.code == Code::kOk ? Status::Ok() : Status(p.code, "remote call failed");
}

void RoutedCalls::OnCall(const Message& m) {
  CallHeader h;
  if (m.payload.size() < sizeof(h)) {
    stats_.malformed++;  // not a call: nothing to answer
    return;
  }
  std::memcpy(&h, m.payload.data(), sizeof(h));
  CallTable::Admit a = table_.Request(m.from, h.call_id, h.floor);
  if (a.what == CallAdmission::kAnswered) Answer(m.from, h.call_id, a.code);
  if (a.what != CallAdmission::kRun) return;
  sched_.Spawn(Serve(m.from, h, std::vector<std::byte>(m.payload.begin() + sizeof(h),
                                                        m.payload.end())));
}

Task<void> RoutedCalls::Serve(WorkerAddr from, CallHeader h, std::vector<std::byte> args) {
  Status st = co_await run_(h.proc, args);
  table_.Finish(from, h.call_id, st.code());
  Answer(from, h.call_id, st.code());
}

void RoutedCalls::Answer(WorkerAddr to, uint64_t call_id, Code code) {
  CallResult r{call_id, static_cast<uint8_t>(code), {}};
  ep_.Send(to, kMsgCallResult, std::as_bytes(std::span(&r, 1)));
}

void RoutedCalls::OnResult(const Message& m) {
  CallResult r;
  if (m.payload.size() != sizeof(r)) {
    stats_.malformed++;
    return;
  }
  std::memcpy(&r, m.payload.data(), sizeof(r));
  auto it = pending_.find(r.call_id);
  if (it == pending_.end()) {
    stats_.answer_copies++;  // a copy of an answer already taken
    return;
  }
  Pending* p = it->second;
  pending_.erase(it);
  stats_.answers++;
  p->code = static_cast<Code>(r.code);
  sched_.Ready(p->waiter);
}

}  // namespace pond::txn
