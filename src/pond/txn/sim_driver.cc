#include "pond/txn/sim_driver.h"

#include <algorithm>

#include "pond/base/assert.h"

#include "pond/txn/worker_context.h"

namespace pond::txn {

void SimDriver::AddWorker(WorkerContext* w) { AddCore(w->sched(), w->ep()); }

void SimDriver::AddCore(Scheduler& sched, Endpoint& ep) {
  size_t core = cores_.size();
  cores_.push_back(Core{&sched, &ep});
  core_of_[ep.self().Packed()] = core;
  sched.SetWakeHook([this, core] { Wake(core); });
  fabric_.SetPacketHook([this](WorkerAddr a) { Wake(core_of_.at(a.Packed())); });
}

void SimDriver::Wake(size_t core) {
  Core& c = cores_[core];
  if (c.queued || c.stopped) return;
  c.queued = true;
  engine_.At(std::max(engine_.now(), c.busy_until_ns), [this, core, inc = c.incarnation] {
    if (cores_[core].incarnation == inc) Round(core);
  });
}

void SimDriver::WakeForTimer(size_t core, uint64_t at_ns) {
  Core& c = cores_[core];
  if (at_ns >= c.timer_wake_ns && c.timer_wake_ns >= engine_.now()) return;  // one is coming
  c.timer_wake_ns = at_ns;
  engine_.At(at_ns, [this, core, at_ns, inc = c.incarnation] {
    Core& c = cores_[core];
    if (c.incarnation != inc) return;
    if (c.timer_wake_ns == at_ns) c.timer_wake_ns = UINT64_MAX;
    Wake(core);
  });
}

void SimDriver::Round(size_t core) {
  Core& c = cores_[core];
  if (c.stopped) return;
  // Still "queued" while the round runs: work it makes ready waits for the round's CPU time.
  Scheduler& sched = *c.sched;
  const Testbed& m = fabric_.testbed();
  sched.RunOnce();
  uint64_t resumes = sched.resumes() - c.resumes_seen;
  c.resumes_seen = sched.resumes();
  SimActivity a = fabric_.TakeActivity(c.ep->self());
  uint64_t cost = m.cpu_round_ns + m.cpu_resume_ns * resumes + m.cpu_op_ns * a.ops +
                  m.cpu_batch_ns * a.batches + m.cpu_message_ns * a.messages;
  uint64_t end = engine_.now() + cost;
  c.busy_until_ns = end;
  c.stats.rounds++;
  c.stats.busy_ns += cost;
  fabric_.Launch(c.ep->self(), end);
  c.queued = false;
  if (sched.has_ready()) Wake(core);
  uint64_t timer = sched.NextTimerNs();
  if (timer != UINT64_MAX) WakeForTimer(core, std::max(timer, end));
}

void SimDriver::StopCn(uint16_t cn) {
  for (Core& c : cores_) {
    if (c.ep->self().cn == cn) c.stopped = true;
  }
}

void SimDriver::RestartCn(uint16_t cn, const std::vector<WorkerContext*>& workers) {
  size_t next = 0;
  for (size_t core = 0; core < cores_.size(); core++) {
    Core& c = cores_[core];
    if (c.ep->self().cn != cn) continue;
    POND_CHECK(c.stopped && next < workers.size());
    c.sched->SetWakeHook(nullptr);  // the dead incarnation wakes nothing
    WorkerContext* w = workers[next++];
    POND_CHECK(w->ep().self() == c.ep->self());
    c.sched = &w->sched();
    c.ep = &w->ep();
    c.stopped = false;
    c.queued = false;
    c.incarnation++;
    c.busy_until_ns = engine_.now();
    c.timer_wake_ns = UINT64_MAX;
    c.resumes_seen = 0;
    w->sched().SetWakeHook([this, core] { Wake(core); });
  }
  POND_CHECK(next == workers.size());
}

SimCpuStats SimDriver::cpu_stats() const {
  SimCpuStats total;
  for (const Core& c : cores_) {
    total.rounds += c.stats.rounds;
    total.busy_ns += c.stats.busy_ns;
  }
  return total;
}

}  // namespace pond::txn
