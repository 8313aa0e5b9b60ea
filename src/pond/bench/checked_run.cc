#include "pond/bench/checked_run.h"

#include <algorithm>
#include <memory>

#include "pond/bench/list_append.h"
#include "pond/check/checker.h"

namespace pond::bench {

HistoryCheck RecordedCheck(Workload& w, RunOptions o) {
  o.record = true;
  HistoryCheck out;
  out.model = std::string(check::ModelName(o.cluster.isolation == Isolation::kSnapshot
                                               ? check::Model::kSnapshotIsolation
                                               : check::Model::kStrictSerializable));
  Result<RunResult> run = RunWorkload(w, o, nullptr);
  if (!run.ok()) {
    out.detail = std::string(w.title()) + " run failed: " + run.status().ToString();
    return out;
  }
  out.wall_s = run->wall_s;
  out.events = run->sim ? run->sim->events : 0;
  out.committed = run->committed;
  out.failed = run->aborted;
  if (run->check && !run->check->ok) {
    out.detail = run->check->name + " failed: " + run->check->detail;
    return out;
  }
  if (run->replicas && !run->replicas->ok()) {
    out.detail = "the replica check failed: " +
                 (run->replicas->problems.empty() ? std::string() : run->replicas->problems[0]);
    return out;
  }
  const HistoryVerdict& v = *run->history;
  out.model = v.model;
  out.ok = v.ok;
  if (v.ok) return out;
  out.detail = v.detail;
  out.history = v.text;
  return out;
}

HistoryCheck CheckIsolation(RunOptions o, uint32_t txns) {
  const uint64_t clients = static_cast<uint64_t>(o.cluster.cns) *
                           static_cast<uint64_t>(o.cluster.workers_per_cn) *
                           static_cast<uint64_t>(o.coros);
  ListAppendOptions lo;
  lo.seed = o.cluster.seed;
  // At least one active key per client: contended (zipf 0.99), but not so much that few of the
  // transactions on a large cluster commit and the history says little.
  lo.window =
      static_cast<uint32_t>(std::max<uint64_t>(lo.window, std::min<uint64_t>(clients, 1 << 16)));
  lo.txns_per_client = static_cast<uint32_t>(std::max<uint64_t>(1, (txns + clients - 1) / clients));
  // A key retires after max_appends elements and a transaction appends at most mops_max, so this
  // many keys hold the window for every transaction the run can make.
  uint64_t total = lo.txns_per_client * clients;
  lo.keys = 2 * uint64_t{lo.window} + total * lo.mops_max / lo.max_appends + 64;
  o.calls_max = 0;
  o.seconds = 86400;  // the transaction count ends the run
  ListAppendWorkload w(lo);
  return RecordedCheck(w, o);
}

HistoryCheck CheckWorkloadHistory(const Workload& measured, RunOptions o, uint32_t calls) {
  o.calls_max = calls;
  // Long enough for `calls` calls at any load; the call cap ends the run.
  o.seconds = std::max(o.seconds, 1.0);
  std::unique_ptr<Workload> w = measured.Clone();
  return RecordedCheck(*w, o);
}

}  // namespace pond::bench
