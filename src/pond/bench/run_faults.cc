#include "pond/bench/run_faults.h"

#include "pond/rng.h"
#include "pond/sim/fault_schedule.h"

namespace pond::bench {

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

Status ResolveFaults(RunOptions* o, const std::string& spec) {
  if (spec.empty()) return Status::Ok();
  if (!o->sim) return InvalidArgument("--faults needs a simulated run (pond sim ...)");
  const ClusterConfig& c = o->cluster;
  sim::FaultLimits limits;
  limits.cns = static_cast<uint16_t>(c.cns);
  limits.mns = static_cast<uint16_t>(c.mns);
  limits.min_cns_up = 2;
  limits.max_mns_down = static_cast<uint16_t>(c.replication - 1);
  limits.horizon_ns = static_cast<uint64_t>(o->seconds * 1e9);
  limits.refused = {
      {sim::FaultKind::kRestartCn, "restarting a crashed CN is not supported yet"},
      {sim::FaultKind::kRestartMn, "re-replication onto a restarted MN is not built yet"},
      {sim::FaultKind::kPartitionCn, "partitions are not survived yet"},
      {sim::FaultKind::kHealCn, "partitions are not survived yet"}};
  if (Status crash = ValidateNodeFaults(c, {NodeFault{NodeFaultKind::kCrashCn, 1, 0}});
      !crash.ok() && c.cns > 2) {
    // The protocol (or the config) cannot recover a crashed CN: say why, and draw none.
    const std::string& m = crash.message();
    const size_t at = m.find("crash-cn: ");
    limits.refused.emplace_back(sim::FaultKind::kCrashCn,
                                at == std::string::npos ? m : m.substr(at + 10));
  }
  if (Status crash = ValidateNodeFaults(c, {NodeFault{NodeFaultKind::kCrashMn, 0, 0}});
      !crash.ok() && c.replication > 1) {
    const std::string& m = crash.message();
    const size_t at = m.find("crash-mn: ");
    limits.refused.emplace_back(sim::FaultKind::kCrashMn,
                                at == std::string::npos ? m : m.substr(at + 10));
  }
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

}  // namespace pond::bench
