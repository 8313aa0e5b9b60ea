// `pond mn`: one memory node as a process. It reads its cluster's spec from the coordination
// service, maps and formats its region through UCX (transport/ucx/memory_node.h), publishes the
// region's descriptor where the CNs look for it (cluster/directory.h), and serves until SIGTERM
// or SIGINT; then it withdraws the descriptor and exits 0. With `metrics` it serves its metrics
// from the start (server/metrics.h).
#pragma once

#include <string>

#include "pond/server/metrics.h"

namespace pond::server {

struct MnDaemonOptions {
  std::string coord;             // ZooKeeper: "HOST:PORT[,HOST:PORT...]"
  std::string cluster = "pond";  // the cluster's name: its keys are under /pond/<cluster>
  std::string secret;            // the cluster's secret (server/certs.h); "": --insecure
  int id = -1;                   // this MN's id, 0 .. mns-1
  double wait_s = 30;            // how long to wait for the spec to appear
  std::string metrics;           // HOST:PORT to serve GET /metrics on (server/metrics.h); "": none
  MetricsSecurity metrics_security;  // who may scrape it
  // This host's UCX_NET_DEVICES, in place of the spec's (hosts whose interfaces are named
  // differently); "": the spec's.
  std::string ucx_net_devices;
};

// Runs the daemon; returns its exit status (0 after a clean stop, 1 on an error it logged).
int RunMnDaemon(const MnDaemonOptions& o);

}  // namespace pond::server
