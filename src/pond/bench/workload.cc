#include "pond/bench/workload.h"

#include <fmt/core.h>

#include <algorithm>
#include <sstream>

#include "pond/check/checker.h"
#include "pond/check/history.h"
#include "pond/runtime/clocks.h"

namespace pond::bench {

HistoryVerdict JudgeHistory(std::string text, Isolation isolation) {
  HistoryVerdict v;
  const check::Model model = isolation == Isolation::kSnapshot ? check::Model::kSnapshotIsolation
                                                               : check::Model::kStrictSerializable;
  v.model = std::string(check::ModelName(model));
  std::istringstream in(text);
  Result<check::History> history = check::ParseHistory(in, "the recorded history");
  v.text = std::move(text);
  if (!history.ok()) {
    v.detail = "unreadable history: " + history.status().ToString();
    return v;
  }
  v.txns = history->txns().size();
  check::CheckerOptions co;
  co.model = model;
  check::CheckResult result = check::Check(*history, co);
  v.infos = result.info_count;
  v.report = check::FormatText(*history, result);
  v.ok = result.valid;
  for (size_t i = 0; i < check::kAnomalyCount && !v.ok; i++) {
    const check::AnomalyReport& rep = result.anomalies[i];
    auto a = static_cast<check::Anomaly>(i);
    if (rep.count == 0 || !check::Forbids(model, a)) continue;
    v.detail +=
        fmt::format("{}{} x{}", v.detail.empty() ? "" : ", ", check::AnomalyName(a), rep.count);
    if (!rep.examples.empty()) v.detail += " (" + rep.examples[0].summary + ")";
  }
  return v;
}

Status ValidateRunOptions(const RunOptions& o) {
  if (o.coros < 1 || o.coros > 256) return InvalidArgument("--coros must be 1 to 256");
  if (!(o.seconds > 0) || o.seconds > 86400)
    return InvalidArgument("--seconds must be in (0, 86400]");
  if (o.calls_max > kRecordedCallsMax) {
    return InvalidArgument("a run takes at most " + std::to_string(kRecordedCallsMax) +
                           " calls when they are capped");
  }
  return Status::Ok();
}

size_t DrawFromMix(Rng& rng, std::span<const int> mix_pct) {
  int x = static_cast<int>(rng.Uniform(100));
  for (size_t i = 0; i < mix_pct.size(); i++) {
    if (x < mix_pct[i]) return i;
    x -= mix_pct[i];
  }
  return mix_pct.size() - 1;
}

Status ValidateRun(const Workload& w, const RunOptions& o) {
  POND_RETURN_IF_ERROR(ValidateConfig(o.cluster));
  POND_RETURN_IF_ERROR(ValidateRunOptions(o));
  return w.Validate(o);
}

Status Workload::Set(std::string_view key, double) {
  return InvalidArgument(fmt::format("{} has no setting '{}' to sweep", title(), key));
}

Status Workload::Serve(Cluster&, server::ServiceDirectory*) {
  return InvalidArgument(fmt::format("{} cannot be served", title()));
}

std::vector<TableNeed> Workload::ServedTables() const { return {}; }

Result<std::unique_ptr<RemoteDriver>> Workload::Remote(const std::vector<RemoteTable>&) const {
  return InvalidArgument(fmt::format("{} cannot be driven over the network", title()));
}

RunContext& Workload::ServingContext(const Cluster& cluster) {
  serving_options_ = std::make_unique<RunOptions>();
  serving_options_->cluster = cluster.config();
  serving_options_->coros = 1;
  serving_ctx_ = std::make_unique<RunContext>(*serving_options_, nullptr);
  return *serving_ctx_;
}

Result<RemoteTable> FindRemoteTable(const std::vector<RemoteTable>& tables, std::string_view name,
                                    uint32_t value_bytes) {
  for (const RemoteTable& t : tables) {
    if (t.name != name) continue;
    if (value_bytes != 0 && t.value_bytes != value_bytes) {
      return InvalidArgument(fmt::format("the server's table \"{}\" has {}-byte values, not {}",
                                         name, t.value_bytes, value_bytes));
    }
    return t;
  }
  return InvalidArgument(
      fmt::format("the server has no table \"{}\" (is it serving this workload?)", name));
}

bool RunContext::NextCall(Session& s) {
  if (!run_->Running(s)) return false;
  return o_.calls_max == 0 || issued_.fetch_add(1, std::memory_order_relaxed) < o_.calls_max;
}

size_t RunContext::workers() const {
  return static_cast<size_t>(o_.cluster.cns) * static_cast<size_t>(o_.cluster.workers_per_cn);
}

uint64_t RunContext::clients() const {
  return static_cast<uint64_t>(workers()) * static_cast<uint64_t>(o_.coros);
}

size_t RunContext::Worker(const Session& s) const {
  return static_cast<size_t>(s.cn()) * static_cast<size_t>(o_.cluster.workers_per_cn) + s.worker();
}

uint64_t RunContext::Client(const Session& s) const {
  return static_cast<uint64_t>(Worker(s)) * static_cast<uint64_t>(o_.coros) +
         static_cast<uint64_t>(s.client());
}

std::optional<double> RecoveryMs(const RunResult& r, double fraction) {
  if (!r.failover || (r.failover->failures.empty() && r.failover->mn_failures.empty() &&
                      r.failover->partitions.empty())) {
    return std::nullopt;
  }
  // From the first fault that costs throughput: a crash, or a cut (not its fence, later).
  uint64_t crash_ns = UINT64_MAX;
  for (const auto& f : r.failover->failures) crash_ns = std::min(crash_ns, f.crash_ns);
  for (const auto& f : r.failover->mn_failures) crash_ns = std::min(crash_ns, f.crash_ns);
  for (const auto& p : r.failover->partitions) crash_ns = std::min(crash_ns, p.cut_ns);
  const std::vector<uint64_t>& per_ms = r.committed_per_ms;
  const size_t crash_ms = static_cast<size_t>(crash_ns / 1'000'000);
  // Whole milliseconds before the crash, the first left out (clients are starting).
  if (crash_ms < 3 || per_ms.size() < crash_ms + 2) return std::nullopt;
  double before = 0;
  for (size_t i = 1; i < crash_ms; i++) before += static_cast<double>(per_ms[i]);
  before /= static_cast<double>(crash_ms - 1);
  const size_t last = per_ms.size() - 1;  // partial
  size_t from = last;
  while (from > crash_ms && static_cast<double>(per_ms[from - 1]) >= fraction * before) from--;
  if (from >= last) return std::nullopt;
  return std::max(0.0, static_cast<double>(from) - static_cast<double>(crash_ns) / 1e6);
}

Result<RunResult> RunWorkload(Workload& w, const RunOptions& o,
                              const std::function<void(const KvsProgress&)>& progress) {
  auto started = o.sim ? Cluster::StartSimulated(o.cluster, *o.sim) : Cluster::Start(o.cluster);
  if (!started.ok()) return started.status();
  Cluster& cluster = **started;
  std::ostringstream history;
  std::unique_ptr<check::Recorder> recorder;
  if (o.record) recorder = std::make_unique<check::Recorder>(&history);
  RunContext ctx(o, recorder.get());

  RunResult result;
  result.workload = w.name();
  // The wall clock measures what setting up cost (MeasuredRun measures the run).
  Clock& wall = SystemClock::Get();
  const uint64_t load_start = wall.NowNs();
  POND_RETURN_IF_ERROR(w.Setup(cluster, ctx));
  result.load_s = static_cast<double>(wall.NowNs() - load_start) / 1e9;
  if (!o.faults.empty()) POND_RETURN_IF_ERROR(cluster.ScheduleFaults(o.node_faults));
  const uint64_t run_start_ns = cluster.clock().NowNs();
  {
    MeasuredRun run(cluster, o.cluster, o.seconds, progress);
    ctx.run_ = &run;
    cluster.Run(o.coros, [&w, &ctx](Session& s) { return w.RunClient(s, ctx); });
    Status st = run.Finish(&result);
    ctx.run_ = nullptr;
    if (!st.ok()) {
      return Internal(
          fmt::format("a {} transaction failed unexpectedly: {}", w.title(), st.ToString()));
    }
  }
  POND_RETURN_IF_ERROR(w.Finish(cluster, ctx, &result));
  // Receivers drop a message they cannot read rather than abort the CN (it came from another
  // process); Pond's own senders never make one, so a run that met any has found a bug.
  if (const uint64_t bad = cluster.Stats().messages_malformed; bad > 0) {
    return Internal(fmt::format("{} CN-to-CN messages were dropped as malformed", bad));
  }
  if (!o.faults.empty()) result.failover = cluster.GetFailoverStats();
  if (o.cluster.reshard.policy != ReshardConfig::Policy::kNone) {
    const FailoverStats f = cluster.GetFailoverStats();
    result.moves = RunResult::Moves{ReshardPolicyName(o.cluster.reshard.policy),
                                    f.shard_moves,
                                    f.moves_given_up,
                                    f.moves_called_off,
                                    f.shards_moved,
                                    f.move_closed_ns_total,
                                    f.move_closed_ns_max};
    for (uint64_t t : f.move_made_ns) {
      if (t >= run_start_ns) result.moves->made_ns.push_back(t - run_start_ns);
    }
  }
  // Every run, faults or not: a commit that let a backup fall behind its primary (or left a
  // cell INVISIBLE or a lock word held) shows in no answer until an MN fails, so it is looked for
  // after every run rather than only after runs that crash nodes (docs/checker.md). The MNs of
  // `pond mn` daemons (transport.coord) are not this process's memory: they are not read here.
  if (o.cluster.transport.coord.empty()) result.replicas = cluster.CheckReplicas();
  if (recorder != nullptr) {
    Status closed = recorder->Close();
    if (!closed.ok()) return Internal("recording the history failed: " + closed.ToString());
    result.history = JudgeHistory(history.str(), o.cluster.isolation);
  }
  return result;
}

}  // namespace pond::bench
