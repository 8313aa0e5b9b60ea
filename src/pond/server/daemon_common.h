// What `pond mn` and `pond cn` do alike: stop on SIGTERM or SIGINT (taken by sigwait, never by a
// handler, so any thread may be running), and wait for a key of the coordination service to be
// set — the cluster's spec, or CN 0's word that the tables are made — giving up on a stop signal
// or a deadline.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pond/cluster/membership.h"
#include "pond/server/cluster_spec.h"
#include "pond/server/daemon_log.h"
#include "pond/status.h"

namespace pond::server {

// Blocks SIGTERM and SIGINT in this thread and every thread it starts later: call it first.
void BlockStopSignals();
// Waits up to `ms` (< 0: for ever) for SIGTERM or SIGINT; the signal, or 0.
int WaitForStop(int ms);

// The value at `key` once it is non-empty, looking every 100 ms for up to `wait_s`; nullopt if a
// stop signal came first (the daemon then exits 0). An error — logged as `what` was awaited —
// if the service fails or the deadline passes.
Result<std::optional<std::vector<std::byte>>> AwaitKey(cluster::ConfigStore& store,
                                                       const std::string& key, double wait_s,
                                                       const std::string& what);

// The cluster's spec, awaited as above.
Result<std::optional<ClusterSpec>> AwaitSpec(cluster::ConfigStore& store,
                                             const std::string& cluster, double wait_s);

}  // namespace pond::server
