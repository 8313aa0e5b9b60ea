#include "pond/sim/faults.h"

#include <cmath>
#include <string>

namespace pond::sim {

namespace {

Status CheckProbability(const char* name, double p) {
  // The negated form also rejects NaN.
  if (!(p >= 0.0 && p <= 1.0)) {
    return InvalidArgument(std::string(name) + " must lie in [0, 1], got " + std::to_string(p));
  }
  return Status::Ok();
}

}  // namespace

Status FaultConfig::Validate() const {
  POND_RETURN_IF_ERROR(CheckProbability("drop_probability", drop_probability));
  POND_RETURN_IF_ERROR(CheckProbability("duplicate_probability", duplicate_probability));
  POND_RETURN_IF_ERROR(CheckProbability("delay_probability", delay_probability));
  if (delay_distribution != DelayDistribution::kUniform &&
      delay_distribution != DelayDistribution::kExponential) {
    return InvalidArgument("unknown delay_distribution");
  }
  if (delay_ns_min > delay_ns_max) {
    return InvalidArgument("delay_ns_min (" + std::to_string(delay_ns_min) +
                           ") exceeds delay_ns_max (" + std::to_string(delay_ns_max) + ")");
  }
  if (delay_ns_max > kFaultDelayNsLimit) {
    return InvalidArgument("delay_ns_max (" + std::to_string(delay_ns_max) + ") exceeds the " +
                           std::to_string(kFaultDelayNsLimit) + " ns limit");
  }
  if (delay_probability > 0 && delay_ns_max == 0) {
    return InvalidArgument("delay_probability > 0 but delay_ns_max is 0");
  }
  if (delay_distribution == DelayDistribution::kExponential && delay_probability > 0 &&
      (delay_ns_mean == 0 || delay_ns_mean > kFaultDelayNsLimit)) {
    return InvalidArgument(
        "exponential delay needs 0 < delay_ns_mean <= " + std::to_string(kFaultDelayNsLimit) +
        ", got " + std::to_string(delay_ns_mean));
  }
  return Status::Ok();
}

Result<FaultModel> FaultModel::Create(const FaultConfig& config) {
  POND_RETURN_IF_ERROR(config.Validate());
  return FaultModel(config);
}

FaultDecision FaultModel::Decide(Rng& rng) {
  FaultDecision d;
  if (!config_.enabled()) return d;
  stats_.decided_count++;
  // Each knob draws only when it is on, so switching one knob off leaves the draws of the
  // others (and the caller's stream) unchanged.
  if (config_.drop_probability > 0 && rng.Chance(config_.drop_probability)) {
    d.drop = true;
    stats_.drop_count++;
    return d;
  }
  if (config_.duplicate_probability > 0 && rng.Chance(config_.duplicate_probability)) {
    d.duplicate = true;
    stats_.duplicate_count++;
  }
  d.delay_ns = DrawDelayNs(rng);
  if (d.duplicate) d.duplicate_delay_ns = DrawDelayNs(rng);
  return d;
}

uint64_t FaultModel::DrawDelayNs(Rng& rng) {
  if (config_.delay_probability == 0 || !rng.Chance(config_.delay_probability)) return 0;
  const uint64_t lo = config_.delay_ns_min, hi = config_.delay_ns_max;
  uint64_t delay_ns;
  if (config_.delay_distribution == DelayDistribution::kUniform) {
    delay_ns = lo + rng.Uniform(hi - lo + 1);  // hi - lo + 1 cannot overflow: hi <= the limit
  } else {
    // Inverse transform; 1 - u lies in (0, 1], so the log is finite. std::log is the one
    // floating-point library call in the simulator: replays are bit-exact with the same binary
    // and libm, which is what seeds promise (docs/simulator.md).
    double extra =
        -static_cast<double>(config_.delay_ns_mean) * std::log(1.0 - rng.UniformDouble());
    double room = static_cast<double>(hi - lo);
    delay_ns = extra >= room ? hi : lo + static_cast<uint64_t>(extra);
  }
  stats_.delay_count++;
  stats_.delay_ns_total += delay_ns;
  return delay_ns;
}

}  // namespace pond::sim
