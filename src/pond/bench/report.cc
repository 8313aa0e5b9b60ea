#include "pond/bench/report.h"

#include <fmt/format.h>

#include <algorithm>

#include "pond/bench/build_info.h"
#include "pond/transport/endpoint.h"

namespace pond::bench {

std::string AbortBreakdown(const AbortCounts& a) {
  std::string s;
  for (const AbortCounts::Reason& r : AbortCounts::Reasons()) {
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", r.words, a.*r.count);
  }
  return s;
}

nlohmann::json AbortsJson(const AbortCounts& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const AbortCounts::Reason& r : AbortCounts::Reasons()) j[r.key] = a.*r.count;
  return j;
}

std::string NicLine(const SimStats::Nic& n, double window_ns) {
  uint64_t busy = 0;
  for (uint64_t b : n.busy_ns) busy += b;
  std::string s = fmt::format("{:5.1f}% (", 100.0 * static_cast<double>(busy) / window_ns);
  for (int k = 0; k < kNumVerbs; k++) {
    s += fmt::format("{}{} {:.1f}%", k ? ", " : "", VerbName(static_cast<Verb>(k)),
                     100.0 * static_cast<double>(n.busy_ns[k]) / window_ns);
  }
  return s + ")";
}

nlohmann::json NicsJson(const SimStats& s, double window_ns) {
  nlohmann::json nics = nlohmann::json::array();
  for (const SimStats::Nic& n : s.mn_nics) {
    nlohmann::json nic;
    for (int k = 0; k < kNumVerbs; k++) {
      nic[VerbName(static_cast<Verb>(k))] = {
          {"ops", n.ops[k]}, {"busy_share", static_cast<double>(n.busy_ns[k]) / window_ns}};
    }
    nics.push_back(nic);
  }
  return nics;
}

CoreLoad CoreLoadOf(const RunMeasures& r) {
  CoreLoad l;
  const double window = r.elapsed_s * 1e9;
  if (r.sim_cores.empty() || window <= 0) return l;
  uint64_t total = 0;
  const SimStats::Core* busiest = &r.sim_cores[0];
  for (const SimStats::Core& c : r.sim_cores) {
    total += c.busy_ns;
    if (c.busy_ns > busiest->busy_ns) busiest = &c;
  }
  l.mean_share = static_cast<double>(total) / static_cast<double>(r.sim_cores.size()) / window;
  l.busiest_cn = busiest->cn;
  l.busiest_worker = busiest->worker;
  l.busiest_share = static_cast<double>(busiest->busy_ns) / window;
  uint64_t cn_total = 0, cn_cores = 0;
  for (const SimStats::Core& c : r.sim_cores) {
    if (c.cn != busiest->cn) continue;
    cn_total += c.busy_ns;
    cn_cores++;
  }
  l.busiest_cn_share = static_cast<double>(cn_total) / static_cast<double>(cn_cores) / window;
  return l;
}

std::string CoreLoadLine(const CoreLoad& l) {
  return fmt::format(
      "mean core {:.1f}% busy; busiest CN {} worker {}, {:.1f}% (CN {}'s cores {:.1f}%)",
      100 * l.mean_share, l.busiest_cn, l.busiest_worker, 100 * l.busiest_share, l.busiest_cn,
      100 * l.busiest_cn_share);
}

double Throughput(const RunMeasures& r) {
  return r.elapsed_s > 0 ? static_cast<double>(r.committed) / r.elapsed_s : 0;
}

double HeadlineThroughput(const RunResult& r) {
  return r.headline && r.elapsed_s > 0 ? static_cast<double>(r.headline->committed) / r.elapsed_s
                                       : 0;
}

double AbortRate(const RunMeasures& r) {
  uint64_t attempts = r.committed + r.aborted;
  return attempts > 0 ? static_cast<double>(r.aborted) / static_cast<double>(attempts) : 0;
}

double AtomicsPerTxn(const RunMeasures& r) {
  return r.committed > 0
             ? static_cast<double>(r.stats.cas + r.stats.faa) / static_cast<double>(r.committed)
             : 0;
}

double NicShare(const RunMeasures& r, int verb) {
  if (!r.sim || r.sim->mn_nics.empty()) return 0;
  double busy = 0;
  for (const auto& n : r.sim->mn_nics) busy += static_cast<double>(n.busy_ns[verb]);
  return busy / static_cast<double>(r.sim->mn_nics.size()) / (r.elapsed_s * 1e9);
}

double MaxNicShare(const RunMeasures& r) {
  double m = 0;
  if (!r.sim) return m;
  for (const auto& n : r.sim->mn_nics) {
    uint64_t busy = 0;
    for (uint64_t b : n.busy_ns) busy += b;
    m = std::max(m, static_cast<double>(busy) / (r.elapsed_s * 1e9));
  }
  return m;
}

std::string TransportLabel(const RunOptions& o) {
  if (o.sim) return "sim";
  const TransportConfig& t = o.cluster.transport;
  return t.ucx_tls.empty() || t.kind != "ucx" ? t.kind : t.kind + " (" + t.ucx_tls + ")";
}

nlohmann::json MeasuresJson(const RunResult& r) {
  nlohmann::json result = {{"elapsed_s", r.elapsed_s},
                           {"committed", r.committed},
                           {"committed_rw", r.committed_rw},
                           {"aborted", r.aborted},
                           {"txn_per_sec", Throughput(r)},
                           {"abort_rate", AbortRate(r)},
                           {"aborts", AbortsJson(r.stats.aborts)},
                           {"latency_ns",
                            {{"p50", r.latency_ns.Percentile(0.50)},
                             {"p99", r.latency_ns.Percentile(0.99)},
                             {"p999", r.latency_ns.Percentile(0.999)},
                             {"mean", r.latency_ns.Mean()}}}};
  if (!r.committed_by_txn.empty()) {
    nlohmann::json by_txn;
    for (const auto& [name, count] : r.committed_by_txn) by_txn[name] = count;
    result["committed_by_txn"] = by_txn;
  }
  if (r.declined) result["declined"] = *r.declined;
  if (r.headline) {
    result[r.headline->json_key + "_committed"] = r.headline->committed;
    result[r.headline->json_key + "_per_sec"] = HeadlineThroughput(r);
  }
  if (r.check) result[r.check->json_key] = r.check->json;
  if (r.history) {
    result["history_check"] = {{"ok", r.history->ok},
                               {"infos", r.history->infos},
                               {"model", r.history->model},
                               {"txns", r.history->txns},
                               {"detail", r.history->detail}};
  }
  return result;
}

nlohmann::json RunResultJson(const RunOptions& o, const Workload& w, const RunResult& r) {
  nlohmann::json j;
  const ClusterStats& s = r.stats;
  const double per_txn = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
  j["bench"] = r.workload;
  j["build_type"] = kBuildType;
  j["transport"] = o.sim ? "sim" : o.cluster.transport.kind;
  if (!o.sim && o.cluster.transport.kind == "ucx") j["ucx_tls"] = o.cluster.transport.ucx_tls;
  j["protocol"] = o.cluster.protocol.name;
  nlohmann::json settings = {{"mns", o.cluster.mns},
                             {"cns", o.cluster.cns},
                             {"workers_per_cn", o.cluster.workers_per_cn},
                             {"coros", o.coros},
                             {"replication", o.cluster.replication},
                             {"versions", o.cluster.versions},
                             {"isolation", IsolationName(o.cluster.isolation)},
                             {"seconds", o.seconds},
                             {"seed", o.cluster.seed}};
  settings.update(w.SettingsJson());
  j["settings"] = settings;
  nlohmann::json result = MeasuresJson(r);
  result["per_committed_txn"] = {{"read", static_cast<double>(s.reads) * per_txn},
                                 {"write", static_cast<double>(s.writes) * per_txn},
                                 {"cas", static_cast<double>(s.cas) * per_txn},
                                 {"faa", static_cast<double>(s.faa) * per_txn},
                                 {"doorbell_batches", static_cast<double>(s.batches) * per_txn},
                                 {"messages", static_cast<double>(s.messages) * per_txn}};
  result["remote_calls"] = s.remote_calls;
  result["vt_cache"] = {
      {"hits", s.vt_hits}, {"misses", s.vt_misses}, {"invalidations", s.vt_invalidations}};
  result["timestamp_requests"] = {{"sent", s.tso_requests}, {"relayed", s.tso_relayed}};
  result["load_s"] = r.load_s;
  result["wall_s"] = r.wall_s;
  // Throughput over time: a shard move's dip and a crash's recovery show here.
  if (!r.committed_per_ms.empty()) result["committed_per_ms"] = r.committed_per_ms;
  if (r.moves) {
    result["resharding"] = {{"policy", r.moves->policy},
                            {"moves", r.moves->made},
                            {"shards", r.moves->shards},
                            {"given_up", r.moves->given_up},
                            {"called_off", r.moves->called_off},
                            {"closed_ns_total", r.moves->closed_ns_total},
                            {"closed_ns_max", r.moves->closed_ns_max}};
    nlohmann::json made = nlohmann::json::array();
    for (uint64_t ns : r.moves->made_ns) made.push_back(static_cast<double>(ns) / 1e6);
    result["resharding"]["made_ms"] = std::move(made);
  }
  if (r.failover) {
    nlohmann::json failures = nlohmann::json::array();
    for (const auto& f : r.failover->failures) {
      failures.push_back({{"cn", f.cn},
                          {"crash_ms", static_cast<double>(f.crash_ns) / 1e6},
                          {"detected_ms", static_cast<double>(f.detected_ns) / 1e6},
                          {"recovered_ms", static_cast<double>(f.recovered_ns) / 1e6},
                          {"open_ms", static_cast<double>(f.open_ns) / 1e6},
                          {"log_records", f.log_records},
                          {"rolled_forward", f.rolled_forward},
                          {"rolled_back", f.rolled_back},
                          {"restart_ms", static_cast<double>(f.restart_ns) / 1e6},
                          {"returned_ms", static_cast<double>(f.returned_ns) / 1e6},
                          {"fenced", f.fenced}});
    }
    nlohmann::json partitions = nlohmann::json::array();
    for (const auto& p : r.failover->partitions) {
      partitions.push_back({{"cn", p.cn},
                            {"cut_ms", static_cast<double>(p.cut_ns) / 1e6},
                            {"fenced_ms", static_cast<double>(p.fenced_ns) / 1e6},
                            {"healed_ms", static_cast<double>(p.healed_ns) / 1e6},
                            {"host", p.host},
                            {"apart_from", p.apart_from}});
    }
    nlohmann::json mn_failures = nlohmann::json::array();
    for (const auto& f : r.failover->mn_failures) {
      mn_failures.push_back({{"mn", f.mn},
                             {"crash_ms", static_cast<double>(f.crash_ns) / 1e6},
                             {"detected_ms", static_cast<double>(f.detected_ns) / 1e6},
                             {"down_ms", static_cast<double>(f.down_ns) / 1e6},
                             {"restart_ms", static_cast<double>(f.restart_ns) / 1e6},
                             {"copy_start_ms", static_cast<double>(f.copy_start_ns) / 1e6},
                             {"copied_ms", static_cast<double>(f.copied_ns) / 1e6},
                             {"readable_ms", static_cast<double>(f.readable_ns) / 1e6},
                             {"slots_copied", f.slots_copied},
                             {"cut", f.cut}});
    }
    nlohmann::json coord_outages = nlohmann::json::array();
    for (const auto& c : r.failover->coord_outages) {
      coord_outages.push_back({{"down_ms", static_cast<double>(c.down_ns) / 1e6},
                               {"up_ms", static_cast<double>(c.up_ns) / 1e6}});
    }
    std::optional<double> rec = RecoveryMs(r);
    result["faults"] = {{"spec", o.faults},
                        {"failures", failures},
                        {"mn_failures", mn_failures},
                        {"partitions", partitions},
                        {"coord_outages", coord_outages},
                        {"cut_packets", r.failover->cut_packets},
                        {"epoch", r.failover->epoch},
                        {"tso_host", r.failover->tso_host},
                        {"tso_moves", r.failover->tso_moves},
                        {"config_puts", r.failover->config_puts},
                        {"unknown_calls", r.failover->unknown_calls},
                        {"unknown_booked", r.unknown},
                        {"faults_not_reached", r.failover->faults_not_reached},
                        {"faults_given_up", r.failover->faults_given_up},
                        {"unplayed_faults_allowed", o.allow_unplayed_faults},
                        {"horizon", o.faults_horizon},
                        {"exercised", CountExercised(*r.failover).ToJson()},
                        {"committed_per_ms", r.committed_per_ms},
                        {"recovery_ms", rec ? nlohmann::json(*rec) : nlohmann::json(nullptr)}};
  }
  if (r.replicas) {
    result["replica_check"] = {{"ok", r.replicas->ok()},
                               {"slots", r.replicas->slots},
                               {"versions", r.replicas->versions},
                               {"acked", r.replicas->acked},
                               {"disagreements", r.replicas->disagreements},
                               {"invisible", r.replicas->invisible},
                               {"locked", r.replicas->locked},
                               {"lost_commits", r.replicas->lost_commits},
                               {"lost_groups", r.replicas->lost_groups},
                               {"tree_nodes", r.replicas->tree_nodes},
                               {"problems", r.replicas->problems}};
  }
  j["result"] = result;
  if (r.sim) {
    j["simulation"] = {{"model", nlohmann::json::parse(o.sim->ToJson())},
                       {"virtual_s", r.elapsed_s},
                       {"events", r.sim->events},
                       {"mn_nics", NicsJson(*r.sim, r.elapsed_s * 1e9)}};
    if (!r.sim_cores.empty()) {
      const CoreLoad l = CoreLoadOf(r);
      j["simulation"]["cores"] = {{"count", r.sim_cores.size()},
                                  {"mean_busy_share", l.mean_share},
                                  {"busiest",
                                   {{"cn", l.busiest_cn},
                                    {"worker", l.busiest_worker},
                                    {"busy_share", l.busiest_share},
                                    {"cn_busy_share", l.busiest_cn_share}}}};
    }
  }
  return j;
}

FaultsExercised CountExercised(const FailoverStats& f) {
  FaultsExercised e;
  for (const FailoverStats::Failure& x : f.failures) {
    (x.fenced ? e.fenced : e.cn_crashes)++;
    e.cn_restarts += x.restart_ns != 0;
    e.recoveries += x.open_ns != 0;
    e.mid_commit += x.rolled_forward + x.rolled_back;
    e.log_records += x.log_records;
    e.rolled_forward += x.rolled_forward;
    e.rolled_back += x.rolled_back;
  }
  for (const FailoverStats::MnFailure& m : f.mn_failures) {
    (m.cut ? e.mns_cut_lost : e.mn_crashes)++;
    e.mn_restarts += m.restart_ns != 0;
    e.mn_readable += m.readable_ns != 0;
  }
  for (const FailoverStats::Partition& p : f.partitions) {
    if (p.apart_from >= 0) {
      e.hosts_apart += p.cn < p.apart_from;  // two entries, one per CN
    } else {
      (p.host ? e.host_cuts : e.partitions)++;
    }
  }
  e.coord_outages = f.coord_outages.size();
  for (uint64_t n : f.step_crashes) e.at_step += n;
  e.not_reached = f.faults_not_reached;
  return e;
}

std::string FaultsExercised::ToString() const {
  auto n = [](uint64_t k, const char* one, const char* many) {
    return fmt::format("{} {}", k, k == 1 ? one : many);
  };
  std::string s = n(cn_crashes, "CN crash", "CN crashes");
  if (fenced > 0) s += fmt::format(" (and {} fenced)", fenced);
  s += ", " + n(cn_restarts, "CN restart", "CN restarts") + ", " +
       n(recoveries, "CN recovery", "CN recoveries") + ", " +
       n(mn_crashes, "MN crash", "MN crashes") + ", " +
       n(mn_restarts, "MN restart", "MN restarts") +
       fmt::format(" ({} readable again)", mn_readable) + ", " +
       n(partitions, "partition", "partitions") +
       fmt::format(
           "; {} caught mid-commit ({} rolled forward, {} back, of {} log records); {} at "
           "their aimed step",
           n(mid_commit, "transaction", "transactions"), rolled_forward, rolled_back, log_records,
           at_step);
  if (host_cuts > 0) {
    s += "; " + n(host_cuts, "host cut", "host cuts") +
         fmt::format(" ({} of their MNs declared, back as restarts)", mns_cut_lost);
  }
  if (hosts_apart > 0) {
    s += "; " + n(hosts_apart, "cut between two hosts", "cuts between two hosts");
  }
  if (coord_outages > 0) {
    s += "; " + n(coord_outages, "coordination-service outage", "coordination-service outages");
  }
  if (not_reached > 0) s += fmt::format("; {} NEVER HAPPENED (after the run's end)", not_reached);
  return s;
}

nlohmann::json FaultsExercised::ToJson() const {
  return {{"cn_crashes", cn_crashes},         {"fenced", fenced},
          {"cn_restarts", cn_restarts},       {"recoveries", recoveries},
          {"mn_crashes", mn_crashes},         {"mn_restarts", mn_restarts},
          {"mn_readable", mn_readable},       {"partitions", partitions},
          {"host_cuts", host_cuts},           {"mns_cut_lost", mns_cut_lost},
          {"hosts_apart", hosts_apart},       {"mid_commit", mid_commit},
          {"rolled_forward", rolled_forward}, {"rolled_back", rolled_back},
          {"log_records", log_records},       {"at_step", at_step},
          {"coord_outages", coord_outages},   {"not_reached", not_reached}};
}

}  // namespace pond::bench
