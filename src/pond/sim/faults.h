// FaultModel: seeded decisions about what goes wrong with one message between two nodes —
// lost, delivered twice, or delivered late. Reordering is not a separate knob: two messages on
// one link that draw different extra delays overtake each other.
//
// A transport asks Decide() once per message it sends and acts on the answer; the model holds
// no queue and schedules nothing, so it knows nothing of verbs or nodes. All randomness comes
// from the Rng the caller passes (one stream per link or per node, so a fault schedule replays
// from the seed). Every knob is off by default, and a knob that is off draws nothing from the
// Rng: turning faults off gives exactly no faults and leaves the caller's stream as if the
// model were not there.
//
// Thread rules: single-threaded (the simulator's thread). Counters show that a test reached
// each fault (STYLE.md item 7).
// Invariant: a FaultModel is only built from a config that passed Validate(); every extra
// delay lies in [delay_ns_min, delay_ns_max] and delay_ns_max <= kFaultDelayNsLimit.
#pragma once

#include <cstdint>

#include "pond/rng.h"
#include "pond/status.h"

namespace pond::sim {

// The largest extra delay a config may ask for (10 virtual seconds): far beyond any timeout a
// protocol uses, and small enough that now + delay cannot overflow.
inline constexpr uint64_t kFaultDelayNsLimit = 10'000'000'000ULL;

enum class DelayDistribution : unsigned char {
  kUniform,      // uniform in [delay_ns_min, delay_ns_max]
  kExponential,  // delay_ns_min + Exp(mean delay_ns_mean), capped at delay_ns_max
};

struct FaultConfig {
  double drop_probability = 0;       // the message is lost
  double duplicate_probability = 0;  // it is delivered twice; the copy draws its own delay
  double delay_probability = 0;      // it gets an extra delay drawn from the distribution
  DelayDistribution delay_distribution = DelayDistribution::kUniform;
  uint64_t delay_ns_min = 0;
  uint64_t delay_ns_max = 0;
  uint64_t delay_ns_mean = 0;  // kExponential only

  // InvalidArgument naming the first bad field: probabilities must lie in [0, 1];
  // delay_ns_min <= delay_ns_max <= kFaultDelayNsLimit; with delay_probability > 0,
  // delay_ns_max > 0, and for kExponential 0 < delay_ns_mean <= kFaultDelayNsLimit.
  Status Validate() const;
  bool enabled() const {
    return drop_probability > 0 || duplicate_probability > 0 || delay_probability > 0;
  }
};

struct FaultDecision {
  bool drop = false;
  bool duplicate = false;
  uint64_t delay_ns = 0;            // extra delay of the message (0 if dropped)
  uint64_t duplicate_delay_ns = 0;  // extra delay of the copy, if duplicate
};

struct FaultStats {
  uint64_t decided_count = 0;  // messages decided while some knob was on
  uint64_t drop_count = 0;
  uint64_t duplicate_count = 0;
  uint64_t delay_count = 0;  // delays drawn, copies included
  uint64_t delay_ns_total = 0;
};

class FaultModel {
 public:
  // The model for a config, or InvalidArgument if the config does not validate.
  static Result<FaultModel> Create(const FaultConfig& config);
  // No faults at all.
  FaultModel() = default;

  // Draws the fate of one message. Draw order is fixed (drop, duplicate, delay, copy's delay),
  // and a dropped message draws nothing further.
  FaultDecision Decide(Rng& rng);

  const FaultConfig& config() const { return config_; }
  const FaultStats& stats() const { return stats_; }

 private:
  explicit FaultModel(const FaultConfig& config) : config_(config) {}
  uint64_t DrawDelayNs(Rng& rng);

  FaultConfig config_;
  FaultStats stats_;
};

}  // namespace pond::sim
