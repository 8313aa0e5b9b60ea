#include "pond/node/sim_driver.h"

#include <algorithm>

#include "pond/base/assert.h"

#include "pond/node/worker_context.h"

namespace pond::node {

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
  size_t taken = 0;
  for (size_t core = 0; core < cores_.size(); core++) {
    const WorkerAddr a = cores_[core].ep->self();
    // Cores of the CN that are no worker's (its membership's) are RestartCore's.
    if (a.cn != cn || a.worker >= workers.size()) continue;
    WorkerContext* w = workers[a.worker];
    POND_CHECK(w->ep().self() == a);
    Rebind(core, w->sched(), w->ep());
    taken++;
  }
  POND_CHECK(taken == workers.size());
}

void SimDriver::RestartCore(Scheduler& sched, Endpoint& ep) {
  auto it = core_of_.find(ep.self().Packed());
  POND_CHECK_MSG(it != core_of_.end(), "RestartCore: no core at that address");
  Rebind(it->second, sched, ep);
}

void SimDriver::Rebind(size_t core, Scheduler& sched, Endpoint& ep) {
  Core& c = cores_[core];
  POND_CHECK(c.stopped);
  c.sched->SetWakeHook(nullptr);  // the dead incarnation wakes nothing
  c.sched = &sched;
  c.ep = &ep;
  c.stopped = false;
  c.queued = false;
  c.incarnation++;
  c.busy_until_ns = engine_.now();
  c.timer_wake_ns = UINT64_MAX;
  c.resumes_seen = 0;
  sched.SetWakeHook([this, core] { Wake(core); });
  if (sched.has_ready()) Wake(core);
}

SimCpuStats SimDriver::cpu_stats() const {
  SimCpuStats total;
  for (const Core& c : cores_) {
    total.rounds += c.stats.rounds;
    total.busy_ns += c.stats.busy_ns;
  }
  return total;
}

std::vector<SimCoreStats> SimDriver::core_stats() const {
  std::vector<SimCoreStats> out;
  out.reserve(cores_.size());
  for (const Core& c : cores_) out.push_back(SimCoreStats{c.ep->self(), c.stats});
  return out;
}

}  // namespace pond::node
