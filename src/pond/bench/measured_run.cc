#include "pond/bench/measured_run.h"

#include "pond/runtime/clocks.h"

namespace pond::bench {

MeasuredRun::MeasuredRun(Cluster& cluster, const ClusterConfig& config, double seconds,
                         std::function<void(const KvsProgress&)> progress)
    : cluster_(cluster),
      workers_per_cn_(config.workers_per_cn),
      progress_(std::move(progress)),
      counters_(static_cast<size_t>(config.cns * config.workers_per_cn)),
      before_(cluster.Stats()),
      start_(cluster.clock().NowNs()),
      wall_start_(SystemClock::Get().NowNs()),
      deadline_(start_ + static_cast<uint64_t>(seconds * 1e9)),
      run_now_(start_),
      monitor_([this] { Tick(); }) {
  if (cluster.simulated()) {
    cluster.ResetSimStats();
    const SimStats sim = cluster.GetSimStats();
    cpu_before_ = sim.cpu_busy_ns;
    for (const SimStats::Core& c : sim.cores) cores_before_.push_back(c.busy_ns);
  }
}

void MeasuredRun::Tick() {
  KvsProgress p{static_cast<double>(run_now_.load(std::memory_order_relaxed) - start_) / 1e9, 0, 0};
  for (const Counters& c : counters_) {
    p.committed += c.committed.load(std::memory_order_relaxed);
    p.aborted += c.aborted.load(std::memory_order_relaxed);
  }
  if (progress_) progress_(p);
}

bool MeasuredRun::Book(Session& s, const Status& st, uint64_t t0, uint64_t t1, bool read_write) {
  Publish(t1);
  Counters& c = counters_[static_cast<size_t>(s.cn() * workers_per_cn_ + s.worker())];
  if (st.ok()) {
    c.latency.Record(t1 - t0);
    c.committed.fetch_add(1, std::memory_order_relaxed);
    if (read_write) c.committed_rw.fetch_add(1, std::memory_order_relaxed);
    const uint64_t ms = t1 > start_ ? (t1 - start_) / 1'000'000 : 0;
    if (ms < kPerMsBucketsMax) {
      if (c.per_ms.size() <= ms) c.per_ms.resize(ms + 1, 0);
      c.per_ms[ms]++;
    }
    return true;
  }
  if (st.code() == Code::kAborted || st.code() == Code::kUnavailable) {
    c.aborted.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (st.code() == Code::kUnknown) {
    c.unknown.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  std::lock_guard lock(failure_mu_);
  if (!failed_.exchange(true)) failure_ = st;
  return false;
}

Status MeasuredRun::Finish(RunMeasures* out) {
  uint64_t end = cluster_.clock().NowNs();
  out->wall_s = static_cast<double>(SystemClock::Get().NowNs() - wall_start_) / 1e9;
  monitor_.Stop();
  {
    std::lock_guard lock(failure_mu_);
    if (failed_) return failure_;
  }
  out->elapsed_s = static_cast<double>(end - start_) / 1e9;
  out->stats = cluster_.Stats().Since(before_);
  if (cluster_.simulated()) {
    out->sim = cluster_.GetSimStats();
    out->sim_cpu_busy_ns = out->sim->cpu_busy_ns - cpu_before_;
    // A restarted CN's incarnation takes over its cores and their counts; a core added during
    // the run (appended) counts from zero.
    out->sim_cores = out->sim->cores;
    for (size_t i = 0; i < cores_before_.size(); i++) out->sim_cores[i].busy_ns -= cores_before_[i];
  }
  for (Counters& c : counters_) {
    out->committed += c.committed.load();
    out->committed_rw += c.committed_rw.load();
    out->aborted += c.aborted.load();
    out->unknown += c.unknown.load();
    if (out->committed_per_ms.size() < c.per_ms.size()) {
      out->committed_per_ms.resize(c.per_ms.size(), 0);
    }
    for (size_t i = 0; i < c.per_ms.size(); i++) out->committed_per_ms[i] += c.per_ms[i];
    out->latency_ns.Merge(c.latency);
  }
  return Status::Ok();
}

}  // namespace pond::bench
