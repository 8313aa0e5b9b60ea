#include "pond/server/cluster_spec.h"

#include <nlohmann/json.hpp>

namespace pond::server {

std::string ClusterSpec::ToJson() const {
  const ClusterConfig& c = config;
  nlohmann::ordered_json j = {
      {"mns", c.mns},
      {"cns", c.cns},
      {"workers_per_cn", c.workers_per_cn},
      {"replication", c.replication},
      {"versions", c.versions},
      {"region_mib", c.region_mib},
      {"protocol", c.protocol.name},
      {"isolation", c.isolation == Isolation::kSnapshot ? "si" : "sr"},
      {"seed", c.seed},
      {"ucx_tls", c.transport.ucx_tls},
      {"ucx_net_devices", c.transport.ucx_net_devices},
      {"lease_ms", c.transport.lease_ms},
  };
  // Only when on, so that a spec without resharding reads as it always did.
  if (const ReshardConfig& r = c.reshard; r.policy != ReshardConfig::Policy::kNone) {
    j["reshard"] = ReshardPolicyName(r.policy);
    j["reshard_interval_us"] = r.interval_ns / 1000;
    j["reshard_over"] = r.over;
    j["reshard_intervals"] = r.intervals;
    j["reshard_drain_us"] = r.drain_ns / 1000;
  }
  return j.dump();
}

Result<ClusterSpec> ClusterSpec::FromJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("cluster spec is not a JSON object");
  ClusterSpec s;
  ClusterConfig& c = s.config;
  c.transport.kind = "ucx";
  std::string protocol = c.protocol.name;
  for (const auto& [key, v] : j.items()) {
    auto int_field = [&](auto* out, long long lo, long long hi) -> Status {
      if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > hi) {
        return InvalidArgument("cluster spec: \"" + key + "\" must be an integer from " +
                               std::to_string(lo) + " to " + std::to_string(hi));
      }
      *out = static_cast<std::remove_reference_t<decltype(*out)>>(v.get<long long>());
      return Status::Ok();
    };
    auto string_field = [&](std::string* out) -> Status {
      if (!v.is_string()) return InvalidArgument("cluster spec: \"" + key + "\" must be a string");
      *out = v.get<std::string>();
      return Status::Ok();
    };
    Status st;
    if (key == "mns") {
      st = int_field(&c.mns, 1, 64);
    } else if (key == "cns") {
      st = int_field(&c.cns, 1, 64);
    } else if (key == "workers_per_cn") {
      st = int_field(&c.workers_per_cn, 1, 64);
    } else if (key == "replication") {
      st = int_field(&c.replication, 1, 8);
    } else if (key == "versions") {
      st = int_field(&c.versions, 1, 16);
    } else if (key == "region_mib") {
      st = int_field(&c.region_mib, 16, 1 << 20);
    } else if (key == "seed") {
      if (!v.is_number_unsigned()) {
        st = InvalidArgument("cluster spec: \"seed\" must be a non-negative integer");
      } else {
        c.seed = v.get<uint64_t>();
      }
    } else if (key == "protocol") {
      st = string_field(&protocol);
    } else if (key == "isolation") {
      std::string iso;
      st = string_field(&iso);
      if (st.ok() && iso != "sr" && iso != "si") {
        st = InvalidArgument("cluster spec: \"isolation\" must be \"sr\" or \"si\"");
      }
      c.isolation = iso == "si" ? Isolation::kSnapshot : Isolation::kSerializable;
    } else if (key == "ucx_tls") {
      st = string_field(&c.transport.ucx_tls);
    } else if (key == "ucx_net_devices") {
      st = string_field(&c.transport.ucx_net_devices);
    } else if (key == "lease_ms") {
      st = int_field(&c.transport.lease_ms, 20, 60'000);
    } else if (key == "reshard") {
      std::string policy;
      st = string_field(&policy);
      const std::optional<ReshardConfig::Policy> p = ReshardPolicyByName(policy);
      if (st.ok() && !p.has_value()) {
        st = InvalidArgument(
            "cluster spec: \"reshard\" must be \"none\", \"load\", \"locality\" or \"both\"");
      }
      if (p.has_value()) c.reshard.policy = *p;
    } else if (key == "reshard_interval_us" || key == "reshard_drain_us") {
      uint64_t us = 0;
      st = int_field(&us, 100, 60'000'000);
      (key == "reshard_drain_us" ? c.reshard.drain_ns : c.reshard.interval_ns) = us * 1000;
    } else if (key == "reshard_intervals") {
      st = int_field(&c.reshard.intervals, 1, 1000);
    } else if (key == "reshard_over") {
      if (!v.is_number() || !(v.get<double>() > 1.0 && v.get<double>() <= 100.0)) {
        st =
            InvalidArgument("cluster spec: \"reshard_over\" must be a number above 1, at most 100");
      } else {
        c.reshard.over = v.get<double>();
      }
    } else {
      st = InvalidArgument("cluster spec: unknown field \"" + key + "\"");
    }
    if (!st.ok()) return st;
  }
  Result<ProtocolConfig> p = ProtocolByName(protocol);
  if (!p.ok()) return InvalidArgument("cluster spec: " + p.status().message());
  c.protocol = *p;
  POND_RETURN_IF_ERROR(ValidateConfig(c));
  return s;
}

}  // namespace pond::server
