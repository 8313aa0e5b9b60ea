// ClusterSpec: what every daemon of one cluster must agree on — how many MNs and CNs, the
// region size and replication the MNs are formatted for, the protocol, the UCX transports — kept
// as JSON at cluster::SpecKey(name) in the coordination service. `pond up` writes it; a daemon
// reads it at start (docs/deploy.md "The spec" shows one).
#pragma once

#include <string>
#include <string_view>

#include "pond/cluster.h"
#include "pond/status.h"

namespace pond::server {

struct ClusterSpec {
  // mns, cns, workers_per_cn, replication, versions, region_mib, protocol (by name), isolation,
  // seed and transport.ucx_tls / ucx_net_devices / lease_ms; the rest keeps ClusterConfig's
  // defaults.
  ClusterConfig config;

  std::string ToJson() const;
  // InvalidArgument with one line: not JSON, an unknown field, a wrong type, or a config
  // ValidateConfig refuses.
  static Result<ClusterSpec> FromJson(std::string_view text);
};

}  // namespace pond::server
