// `pond cn`: one compute node as a process. It reads its cluster's spec from the coordination
// service, reaches the MN daemons by their descriptors, and runs CN `id`'s workers — its share of
// the lock tables, the timestamp oracle if it is CN 0, routed calls — publishing their addresses
// so that the other CN daemons reach them (deploy/cn_process.h). CN 0 makes the cluster's tables
// the first time it starts and then says the cluster is ready (cluster/directory.h ReadyKey); every
// other CN waits for that and joins them. Once all CNs are reachable it serves — the calls its
// front end hands it and the other CNs' requests — until SIGTERM or SIGINT; then it stops its
// front end, lets what it runs finish, withdraws its addresses and exits 0. With `metrics` it
// serves its metrics from the start, its transactions' once it serves (server/metrics.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pond/cluster.h"
#include "pond/server/metrics.h"
#include "pond/status.h"

namespace pond::server {

// What the clients of a CN daemon reach it by (the gRPC service, server/client_service.h):
// started once the CN serves, stopped first when it stops.
class CnFrontend {
 public:
  virtual ~CnFrontend() = default;
  // Starts taking clients for CN `cn` of `cluster` (serving); the address they reach it at.
  virtual Result<std::string> Start(Cluster& cluster, uint16_t cn) = 0;
  // Stops taking clients and waits for the calls under way to be answered.
  virtual void Stop() = 0;
  // Where the client addresses of the CNs come from, indexed by CN id, "" for a CN that takes no
  // clients now (for Describe, which also routes by them).
  virtual void SetCnAddressSource(std::function<std::vector<std::string>()> source) = 0;
  // What it has answered and refused so far (for the metrics); from any thread once started.
  virtual ClientCounts Counts() const = 0;
};

struct CnDaemonOptions {
  std::string coord;             // ZooKeeper: "HOST:PORT[,HOST:PORT...]"
  std::string cluster = "pond";  // the cluster's name: its keys are under /pond/<cluster>
  std::string secret;            // the cluster's secret (server/certs.h); "": --insecure
  int id = -1;                   // this CN's id, 0 .. cns-1
  double wait_s = 30;            // for the spec, CN 0's tables, every MN read, the other CNs
  double grace_s = 2;            // at a stop, for answers other CNs still owe this one
  std::string metrics;           // HOST:PORT to serve GET /metrics on (server/metrics.h); "": none
  MetricsSecurity metrics_security;  // who may scrape it
  // This host's UCX_NET_DEVICES, in place of the spec's (hosts whose interfaces are named
  // differently); "": the spec's.
  std::string ucx_net_devices;
  // What the cluster serves, run on every CN before it serves, in the same order everywhere
  // (procedure ids are registration order): with `create` (CN 0, first start) it creates and
  // loads the tables; otherwise it finds them (Cluster::FindTable). Both register the
  // procedures. Empty: no tables, no procedures.
  std::function<Status(Cluster& cluster, bool create)> setup;
  // Null: the CN serves only the other CNs (no clients of its own).
  std::unique_ptr<CnFrontend> frontend;
};

// Runs the daemon; returns its exit status (0 after a clean stop, 1 on an error it logged).
int RunCnDaemon(CnDaemonOptions& o);

}  // namespace pond::server
