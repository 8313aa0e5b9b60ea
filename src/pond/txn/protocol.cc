// The named protocol configurations: lotus, motor, ford, pond, and the steps of the Lotus
// ablation and of Pond's past it.
#include <string>
#include <string_view>
#include <vector>

#include "pond/cluster.h"

namespace pond {

namespace {

// Motor as the ablation starts from it: CAS locks on MNs, value + delta layout, writes
// committed in place behind a record of them (Motor keeps that log in battery-backed memory;
// Pond in the pool), no routing, no VT cache.
ProtocolConfig Motor() {
  ProtocolConfig p;
  p.name = "motor";
  p.full_record_store = false;
  p.log_and_visible = false;
  p.cn_locks = false;
  p.hybrid_routing = false;
  p.vt_cache = false;
  return p;
}

// Turns on Pond's step `step` (PondSteps) in `p`; false if there is none by that name.
bool SetPondStep(std::string_view step, ProtocolConfig* p) {
  if (step == "latest-reads") {
    p->latest_reads = true;
  } else if (step == "early-ack") {
    p->early_ack = true;
  } else if (step == "value-cache") {
    p->value_cache = true;
  } else if (step == "tso-combine") {
    p->tso_combine = true;
  } else {
    return false;
  }
  return true;
}

}  // namespace

const std::vector<std::string>& ProtocolNames() {
  static const std::vector<std::string> names = {"lotus", "motor", "ford", "pond"};
  return names;
}

const std::vector<std::string>& SnapshotProtocolNames() {
  static const std::vector<std::string> names = {"lotus", "motor", "pond"};
  return names;
}

const std::vector<std::string>& PondSteps() {
  static const std::vector<std::string> steps = {"latest-reads", "early-ack", "value-cache",
                                                 "tso-combine"};
  return steps;
}

const std::vector<std::string>& AblationSteps() {
  static const std::vector<std::string> steps = {
      "motor", "+full-record", "+log-visible", "+lock-sharding", "+load-balancing", "+vt-cache"};
  return steps;
}

Result<ProtocolConfig> ProtocolByName(std::string_view name) {
  if (name == "lotus") return ProtocolConfig{};
  if (name == "pond") {
    ProtocolConfig p;
    p.name = "pond";
    for (const std::string& step : PondSteps()) SetPondStep(step, &p);
    return p;
  }
  if (name.starts_with("pond-")) {
    // Pond without one of its steps, to see what that step is worth where the others are on.
    ProtocolConfig p;
    p.name = std::string(name);
    bool left_out = false;
    for (const std::string& step : PondSteps()) {
      if (step == name.substr(5)) {
        left_out = true;
      } else {
        SetPondStep(step, &p);
      }
    }
    if (left_out) return p;
  }
  if (name.starts_with("lotus+")) {
    ProtocolConfig p;
    p.name = std::string(name);
    if (SetPondStep(name.substr(6), &p)) return p;
  }
  if (name == "ford") {
    ProtocolConfig p = Motor();
    p.name = "ford";
    p.single_version = true;
    p.full_record_store = true;  // a record holds its whole value, in place
    return p;
  }
  // Each ablation step is Motor plus that step and every step before it.
  ProtocolConfig p = Motor();
  const auto& steps = AblationSteps();
  for (size_t i = 0; i < steps.size(); i++) {
    switch (i) {
      case 1:
        p.full_record_store = true;
        break;
      case 2:
        p.log_and_visible = true;
        break;
      case 3:
        p.cn_locks = true;
        break;
      case 4:
        p.hybrid_routing = true;
        break;
      case 5:
        p.vt_cache = true;
        break;
      default:
        break;
    }
    if (name == steps[i]) {
      p.name = steps[i];
      return p;
    }
  }
  return InvalidArgument("unknown protocol '" + std::string(name) +
                         "' (lotus, motor, ford, pond, lotus+latest-reads, lotus+early-ack, "
                         "lotus+value-cache, or "
                         "an ablation step: +full-record, +log-visible, +lock-sharding, "
                         "+load-balancing, +vt-cache)");
}

}  // namespace pond
