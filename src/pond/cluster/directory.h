// Where the processes of one cluster find each other: the keys they use in the coordination
// service (ZooKeeper; membership.h's ConfigStore). Every key of a cluster lies under
// /pond/<cluster>, so that one ZooKeeper can hold several clusters. docs/deploy.md lists them.
#pragma once

#include <cstdint>
#include <string>

#include "pond/status.h"

namespace pond::cluster {

// Cluster names are path components: letters, digits, '-', '_' and '.', 1 to 64 of them.
inline Status CheckClusterName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") {
    return InvalidArgument("cluster name must be 1 to 64 characters (not . or ..)");
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) {
      return InvalidArgument("cluster name \"" + name + "\" may hold only letters, digits, - _ .");
    }
  }
  return Status::Ok();
}

// The cluster's spec (server/cluster_spec.h): what every daemon agrees on, as JSON.
inline std::string SpecKey(const std::string& cluster) { return "/pond/" + cluster + "/spec"; }
// MN `mn`'s descriptor (docs/formats.md "MN descriptor") while it serves; empty once it stopped.
inline std::string MnKey(const std::string& cluster, uint16_t mn) {
  return "/pond/" + cluster + "/mns/" + std::to_string(mn);
}

}  // namespace pond::cluster
