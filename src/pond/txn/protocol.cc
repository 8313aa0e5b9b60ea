// The named protocol configurations: lotus, motor, ford, and the steps of the Lotus ablation.
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

}  // namespace

const std::vector<std::string>& ProtocolNames() {
  static const std::vector<std::string> names = {"lotus", "motor", "ford"};
  return names;
}

const std::vector<std::string>& AblationSteps() {
  static const std::vector<std::string> steps = {
      "motor", "+full-record", "+log-visible", "+lock-sharding", "+load-balancing", "+vt-cache"};
  return steps;
}

Result<ProtocolConfig> ProtocolByName(std::string_view name) {
  if (name == "lotus") return ProtocolConfig{};
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
                         "' (lotus, motor, ford, or an ablation step: +full-record, "
                         "+log-visible, +lock-sharding, +load-balancing, +vt-cache)");
}

}  // namespace pond
