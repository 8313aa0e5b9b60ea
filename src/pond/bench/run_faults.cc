#include "pond/bench/run_faults.h"

#include <fmt/core.h>

#include <algorithm>

#include "pond/cluster/membership.h"
#include "pond/node/sim_membership.h"
#include "pond/rng.h"
#include "pond/sim/fault_schedule.h"

namespace pond::bench {

// The simulator's fault kinds and the public API's are the same list, in the same order.
static_assert(static_cast<int>(sim::FaultKind::kCrashCn) ==
              static_cast<int>(NodeFaultKind::kCrashCn));
static_assert(static_cast<int>(sim::FaultKind::kRestartCn) ==
              static_cast<int>(NodeFaultKind::kRestartCn));
static_assert(static_cast<int>(sim::FaultKind::kCrashMn) ==
              static_cast<int>(NodeFaultKind::kCrashMn));
static_assert(static_cast<int>(sim::FaultKind::kRestartMn) ==
              static_cast<int>(NodeFaultKind::kRestartMn));
static_assert(static_cast<int>(sim::FaultKind::kPartitionCn) ==
              static_cast<int>(NodeFaultKind::kPartitionCn));
static_assert(static_cast<int>(sim::FaultKind::kHealCn) ==
              static_cast<int>(NodeFaultKind::kHealCn));
static_assert(static_cast<int>(sim::FaultKind::kCrashCoord) ==
              static_cast<int>(NodeFaultKind::kCrashCoord));
static_assert(static_cast<int>(sim::FaultKind::kRestartCoord) ==
              static_cast<int>(NodeFaultKind::kRestartCoord));
static_assert(static_cast<int>(sim::FaultKind::kPartitionHost) ==
              static_cast<int>(NodeFaultKind::kPartitionHost));
static_assert(static_cast<int>(sim::FaultKind::kHealHost) ==
              static_cast<int>(NodeFaultKind::kHealHost));
static_assert(static_cast<int>(sim::FaultKind::kCutHosts) ==
              static_cast<int>(NodeFaultKind::kCutHosts));
static_assert(static_cast<int>(sim::FaultKind::kHealHosts) ==
              static_cast<int>(NodeFaultKind::kHealHosts));
static_assert(sim::kFaultKindCount == 12, "a kind added to one list is added to both");

namespace {

// What the cluster of `o` can run (sim::FaultLimits): the counts, the kinds it refuses and why.
sim::FaultLimits LimitsOf(const RunOptions& o) {
  const ClusterConfig& c = o.cluster;
  sim::FaultLimits limits;
  limits.cns = static_cast<uint16_t>(c.cns);
  limits.mns = static_cast<uint16_t>(c.mns);
  limits.min_cns_up = 2;
  limits.max_mns_down = static_cast<uint16_t>(c.replication - 1);
  limits.max_mns_down_quorum =
      static_cast<uint16_t>(std::max(0, c.mns - cluster::LeaseQuorum(c.mns, c.replication)));
  limits.horizon_ns = static_cast<uint64_t>(o.seconds * 1e9);
  // A protocol (or config) that cannot survive one crash of a kind: say why, and draw none. (A
  // cluster too small for any crash is left to the counts, which say that.)
  auto refuse_if_fatal = [&](NodeFaultKind kind, uint16_t node, const std::string& prefix) {
    Status s = ValidateNodeFaults(c, {NodeFault{kind, node, 0}});
    if (s.ok()) return;
    const std::string& m = s.message();
    const size_t at = m.find(prefix);
    limits.refused.emplace_back(static_cast<sim::FaultKind>(kind),
                                at == std::string::npos ? m : m.substr(at + prefix.size()));
  };
  if (c.cns > 2) refuse_if_fatal(NodeFaultKind::kCrashCn, 1, "crash-cn: ");
  if (c.replication > 1) refuse_if_fatal(NodeFaultKind::kCrashMn, 0, "crash-mn: ");
  // A host cut loses its MN as a crash does, and cuts its CN as a partition does: refused where
  // either is, with the first reason. (Too small a cluster is left to the counts again.)
  if (c.cns > 2 && c.replication > 1 && limits.max_mns_down_quorum >= 1) {
    refuse_if_fatal(NodeFaultKind::kPartitionHost, 0, "partition-host: ");
  }
  if (c.cns > 2) {
    refuse_if_fatal(NodeFaultKind::kPartitionCn, 1, "partition-cn: ");
  }
  // A host's CN is cut as partition-cn cuts one; and a heal needs its partition: each refused
  // with it, for the same reason.
  auto refused = [&](sim::FaultKind k) {
    return std::any_of(limits.refused.begin(), limits.refused.end(),
                       [k](const auto& x) { return x.first == k; });
  };
  for (const auto& [kind, why] : std::vector(limits.refused)) {
    if (kind == sim::FaultKind::kPartitionCn && !refused(sim::FaultKind::kPartitionHost)) {
      limits.refused.emplace_back(sim::FaultKind::kPartitionHost, why);
    }
  }
  // Two hosts cut apart lose an MN's place as a host cut does, and cut two CNs: refused with it.
  for (const auto& [kind, why] : std::vector(limits.refused)) {
    if (kind == sim::FaultKind::kPartitionHost && !refused(sim::FaultKind::kCutHosts)) {
      limits.refused.emplace_back(sim::FaultKind::kCutHosts, why);
    }
  }
  for (const auto& [kind, why] : std::vector(limits.refused)) {
    if (kind == sim::FaultKind::kPartitionCn) {
      limits.refused.emplace_back(sim::FaultKind::kHealCn, why);
    }
    if (kind == sim::FaultKind::kPartitionHost) {
      limits.refused.emplace_back(sim::FaultKind::kHealHost, why);
    }
    if (kind == sim::FaultKind::kCutHosts) {
      limits.refused.emplace_back(sim::FaultKind::kHealHosts, why);
    }
  }
  return limits;
}

// `into` also holds to `other`: every kind either refuses (with the first reason given), the
// stricter counts.
void Tighten(sim::FaultLimits* into, const sim::FaultLimits& other) {
  into->min_cns_up = std::max(into->min_cns_up, other.min_cns_up);
  into->max_mns_down = std::min(into->max_mns_down, other.max_mns_down);
  for (const auto& r : other.refused) {
    auto same = [&](const auto& x) { return x.first == r.first; };
    if (std::none_of(into->refused.begin(), into->refused.end(), same)) into->refused.push_back(r);
  }
}

// Puts a validated schedule into *o.
Status Apply(const sim::FaultSchedule& schedule, RunOptions* o) {
  o->node_faults.clear();
  for (const sim::FaultEvent& e : schedule.events) {
    static_assert(static_cast<int>(sim::FaultStep::kUnlocked) ==
                  static_cast<int>(CommitStep::kUnlocked));
    o->node_faults.push_back(NodeFault{static_cast<NodeFaultKind>(e.kind), e.node, e.at_ns,
                                       static_cast<CommitStep>(e.step), e.peer});
  }
  POND_RETURN_IF_ERROR(ValidateNodeFaults(o->cluster, o->node_faults));
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
  if (schedule.jitter_ns != 0) o->sim->jitter_ns = schedule.jitter_ns;
  o->faults = schedule.ToString();
  if (o->faults.empty()) o->faults = "none";
  return Status::Ok();
}

// Resolves `spec` for every run; a random schedule is drawn before `horizon_ns` if that is not 0
// (else before the runs' own end).
Status ResolveWithin(const std::vector<RunOptions*>& runs, const std::string& spec,
                     uint64_t horizon_ns) {
  if (spec.empty() || runs.empty()) return Status::Ok();
  for (const RunOptions* o : runs) {
    if (!o->sim) return InvalidArgument("--faults needs a simulated run (pond sim ...)");
  }
  sim::FaultLimits limits = LimitsOf(*runs[0]);
  for (size_t i = 1; i < runs.size(); i++) Tighten(&limits, LimitsOf(*runs[i]));
  if (horizon_ns != 0) limits.horizon_ns = horizon_ns;
  sim::FaultSchedule schedule;
  if (spec == sim::kRandomFaultSpec) {
    // Its own stream of the seed: the run's other draws stay as they were.
    Rng rng(runs[0]->cluster.seed ^ 0x6661756c74730000ULL);
    schedule = sim::RandomSchedule(rng, limits);
  } else {
    Result<sim::FaultSchedule> parsed = sim::FaultSchedule::Parse(spec);
    if (!parsed.ok()) return parsed.status();
    schedule = std::move(parsed).value();
  }
  POND_RETURN_IF_ERROR(schedule.Validate(limits));
  for (RunOptions* o : runs) POND_RETURN_IF_ERROR(Apply(schedule, o));
  return Status::Ok();
}

}  // namespace

Status ResolveFaults(RunOptions* o, const std::string& spec) {
  return ResolveFaultsForAll({o}, spec);
}

Status ResolveFaultsForAll(const std::vector<RunOptions*>& runs, const std::string& spec) {
  return ResolveWithin(runs, spec, 0);
}

Status ResolveFaultsFor(Workload& w, RunOptions* o, const std::string& spec) {
  if (spec != sim::kRandomFaultSpec || o->calls_max == 0 || !o->sim) {
    return ResolveFaults(o, spec);
  }
  RunOptions dry = *o;
  dry.record = false;
  dry.faults.clear();
  dry.node_faults.clear();
  Result<RunResult> r = RunWorkload(w, dry, nullptr);
  if (!r.ok()) return r.status();
  const double end_s = std::min(r->elapsed_s, o->seconds);
  const auto horizon = static_cast<uint64_t>(end_s * kCappedHorizonShare * 1e9);
  POND_RETURN_IF_ERROR(ResolveWithin({o}, spec, std::max<uint64_t>(horizon, 1)));
  o->faults_horizon =
      fmt::format("drawn within {:.3f} ms: without faults this run's {} calls end at {:.3f} ms",
                  static_cast<double>(horizon) / 1e6, o->calls_max, end_s * 1e3);
  return Status::Ok();
}

}  // namespace pond::bench
