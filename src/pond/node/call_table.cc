#include "pond/node/call_table.h"

#include <utility>

namespace pond::node {

CallTable::Admit CallTable::Request(WorkerAddr caller, uint64_t id, uint64_t floor) {
  Caller& c = callers_[caller.Packed()];
  if (floor > c.floor) {
    // Requests may arrive out of order, so a floor only ever moves up.
    c.calls.erase(c.calls.begin(), c.calls.lower_bound(floor));
    c.floor = floor;
  }
  if (id < c.floor) {
    stats_.stale++;
    return {CallAdmission::kStale};
  }
  auto [it, inserted] = c.calls.try_emplace(id);
  if (inserted) {
    stats_.runs++;
    return {CallAdmission::kRun};
  }
  if (!it->second.done) {
    stats_.copies_running++;
    return {CallAdmission::kRunning};
  }
  stats_.copies_answered++;
  return {CallAdmission::kAnswered, &it->second.outcome};
}

void CallTable::Finish(WorkerAddr caller, uint64_t id, CallOutcome outcome) {
  Caller& c = callers_[caller.Packed()];
  // The caller cannot have raised its floor past a call it has no answer for.
  auto it = c.calls.find(id);
  if (it == c.calls.end()) return;
  it->second.done = true;
  it->second.outcome = std::move(outcome);
}

size_t CallTable::entries() const {
  size_t n = 0;
  for (const auto& [_, c] : callers_) n += c.calls.size();
  return n;
}

}  // namespace pond::node
