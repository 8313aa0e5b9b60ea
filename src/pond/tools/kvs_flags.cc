#include "pond/tools/kvs_flags.h"

#include <fmt/core.h>

#include "pond/sim/fault_schedule.h"

namespace pond::tools {

void AddClusterFlags(CLI::App* cmd, ClusterConfig* c, int* coros, double* seconds,
                     std::string* isolation, std::string* model, bool simulate) {
  if (simulate) {
    // The Lotus testbed (§8.1): 3 MNs, 9 CNs of 8 cores, 6 coroutines each, N = 2 versions.
    c->cns = 9;
    c->workers_per_cn = 8;
    *coros = 6;
    c->versions = 2;
    *seconds = 0.01;
  }
  cmd->add_option("--mns", c->mns, "memory nodes")->capture_default_str();
  cmd->add_option("--cns", c->cns, "compute nodes")->capture_default_str();
  cmd->add_option("--workers", c->workers_per_cn, "worker threads (cores) per CN")
      ->capture_default_str();
  cmd->add_option("--coros", *coros, "client coroutines per worker")->capture_default_str();
  cmd->add_option(simulate ? "--virtual-seconds" : "--seconds", *seconds,
                  simulate ? "measured run time, in virtual seconds" : "measured run time")
      ->capture_default_str();
  cmd->add_option("--isolation", *isolation, "sr (serializable) or si (snapshot isolation)")
      ->check(CLI::IsMember({"sr", "si"}, CLI::ignore_case))
      ->capture_default_str();
  cmd->add_option("--replication", c->replication, "copies of each record")->capture_default_str();
  cmd->add_option("--versions", c->versions, "version cells per record")->capture_default_str();
  cmd->add_option("--region-mib", c->region_mib, "MiB of memory per MN")->capture_default_str();
  cmd->add_option("--seed", c->seed, "seed for keys, routing (and the whole simulation)")
      ->capture_default_str();
  if (simulate) {
    cmd->add_option("--model", *model,
                    "cx3, cx5 or a JSON model file (models/cx3.json shows every field)")
        ->capture_default_str();
  }
}

Status ResolveClusterFlags(ClusterConfig* c, std::optional<Testbed>* sim,
                           const std::string& isolation, const std::string& model, bool simulate) {
  c->isolation =
      (isolation == "si" || isolation == "SI") ? Isolation::kSnapshot : Isolation::kSerializable;
  if (simulate) {
    Result<Testbed> m = Testbed::FromName(model);
    if (!m.ok()) return m.status();
    *sim = *m;
  }
  return Status::Ok();
}

Status ResolveRunFlags(bench::RunOptions* o, const std::string& isolation,
                       const std::string& model, const std::string& protocol, bool simulate) {
  POND_RETURN_IF_ERROR(ResolveClusterFlags(&o->cluster, &o->sim, isolation, model, simulate));
  Result<ProtocolConfig> p = ProtocolByName(protocol);
  if (!p.ok()) return p.status();
  o->cluster.protocol = *p;
  return Status::Ok();
}

// The simulator's fault kinds and the public API's are the same list, in the same order.
static_assert(static_cast<int>(sim::FaultKind::kCrashCn) == static_cast<int>(NodeFaultKind::kCrashCn));
static_assert(static_cast<int>(sim::FaultKind::kRestartCn) ==
              static_cast<int>(NodeFaultKind::kRestartCn));
static_assert(static_cast<int>(sim::FaultKind::kCrashMn) == static_cast<int>(NodeFaultKind::kCrashMn));
static_assert(static_cast<int>(sim::FaultKind::kRestartMn) ==
              static_cast<int>(NodeFaultKind::kRestartMn));
static_assert(static_cast<int>(sim::FaultKind::kPartitionCn) ==
              static_cast<int>(NodeFaultKind::kPartitionCn));
static_assert(static_cast<int>(sim::FaultKind::kHealCn) == static_cast<int>(NodeFaultKind::kHealCn));

void AddFaultsFlag(CLI::App* cmd, std::string* spec) {
  cmd->add_option("--faults", *spec,
                  "fault schedule: KIND:NODE@TIME,... (kinds crash-cn, restart-cn, crash-mn, "
                  "restart-mn, partition-cn, heal-cn; TIME like 5ms), drop:P, duplicate:P, "
                  "delay:P@MIN-MAX, or 'random' (drawn from the seed); docs/fault_schedules.md");
}

Status ResolveFaults(bench::RunOptions* o, const std::string& spec) {
  if (spec.empty()) return Status::Ok();
  if (!o->sim) return InvalidArgument("--faults needs a simulated run (pond sim ...)");
  const ClusterConfig& c = o->cluster;
  sim::FaultLimits limits;
  limits.cns = static_cast<uint16_t>(c.cns);
  limits.mns = static_cast<uint16_t>(c.mns);
  limits.min_cns_up = 2;
  limits.max_mns_down = 0;
  limits.horizon_ns = static_cast<uint64_t>(o->seconds * 1e9);
  limits.refused = {
      {sim::FaultKind::kRestartCn, "restarting a crashed CN is not supported yet"},
      {sim::FaultKind::kCrashMn, "MN crashes are not survived yet"},
      {sim::FaultKind::kRestartMn, "MN crashes are not survived yet"},
      {sim::FaultKind::kPartitionCn, "partitions are not survived yet"},
      {sim::FaultKind::kHealCn, "partitions are not survived yet"}};
  limits.protected_cns = {{0, "CN 0 hosts the timestamp oracle, whose fail-over is not built yet"}};
  sim::FaultSchedule schedule;
  if (spec == sim::kRandomFaultSpec) {
    // Its own stream of the seed: the run's other draws stay as they were.
    Rng rng(c.seed ^ 0x6661756c74730000ULL);
    schedule = sim::RandomSchedule(rng, limits);
  } else {
    Result<sim::FaultSchedule> parsed = sim::FaultSchedule::Parse(spec);
    if (!parsed.ok()) return parsed.status();
    schedule = std::move(parsed).value();
  }
  POND_RETURN_IF_ERROR(schedule.Validate(limits));
  o->node_faults.clear();
  for (const sim::FaultEvent& e : schedule.events) {
    o->node_faults.push_back(NodeFault{static_cast<NodeFaultKind>(e.kind), e.node, e.at_ns});
  }
  POND_RETURN_IF_ERROR(ValidateNodeFaults(c, o->node_faults));
  const sim::FaultConfig& m = schedule.messages;
  if (m.enabled()) {
    MessageFaults& f = o->sim->faults;
    f.drop_probability = m.drop_probability;
    f.duplicate_probability = m.duplicate_probability;
    f.delay_probability = m.delay_probability;
    f.delay_distribution = DelayDistribution::kUniform;
    f.delay_ns_min = m.delay_ns_min;
    f.delay_ns_max = m.delay_ns_max;
  }
  o->faults = schedule.ToString();
  if (o->faults.empty()) o->faults = "none";
  return Status::Ok();
}

void AddKvsWorkloadFlags(CLI::App* cmd, KvsFlags* f, bool simulate) {
  bench::KvsParams& o = f->kvs;
  AddClusterFlags(cmd, &f->run.cluster, &f->run.coros, &f->run.seconds, &f->isolation, &f->model,
                  simulate);
  cmd->add_option("--keys", o.keys, "keys in the table")->capture_default_str();
  cmd->add_option("--rw-ratio", o.rw_ratio, "fraction of UpdateOne (read-write) transactions")
      ->capture_default_str();
  cmd->add_option("--theta", o.theta, "zipf skew of keys; 0 = uniform (the papers use 0.99)")
      ->capture_default_str();
}

Status ResolveKvsFlags(KvsFlags* f, bool simulate) {
  return ResolveClusterFlags(&f->run.cluster, &f->run.sim, f->isolation, f->model, simulate);
}

std::function<void(const bench::KvsProgress&)> KvsProgressPrinter(FILE* out, bool simulate,
                                                                  std::string label) {
  return [out, simulate, label = std::move(label),
          last = bench::KvsProgress{0, 0, 0}](const bench::KvsProgress& p) mutable {
    double dt = p.elapsed_s - last.elapsed_s;
    uint64_t dc = p.committed - last.committed, da = p.aborted - last.aborted;
    std::fprintf(
        out, "  %s%s%8.4f %ss  %10.0f committed/s  abort rate %5.2f%%\n", label.c_str(),
        label.empty() ? "" : "  ", p.elapsed_s, simulate ? "virtual " : "",
        dt > 0 ? static_cast<double>(dc) / dt : 0.0,
        dc + da > 0 ? 100.0 * static_cast<double>(da) / static_cast<double>(dc + da) : 0.0);
    std::fflush(out);
    last = p;
  };
}

std::string ProtocolChoices() {
  std::string s;
  for (const std::string& p : ProtocolNames()) s += p + ", ";
  s += "or an ablation step:";
  for (const std::string& step : AblationSteps()) {
    if (step.starts_with("+")) s += " " + step;
  }
  return s;
}

}  // namespace pond::tools
