// `pond up` and `pond down`: a whole cluster as separate processes on this host — a ZooKeeper
// server and one `pond mn` daemon per memory node — started into a directory that records their
// pids, addresses and logs (DIR/cluster.json, DIR/*.log), and stopped from that directory by any
// later process. Each `up` is a new cluster: the coordination service starts empty.
#pragma once

#include <string>

#include "pond/cluster.h"

namespace pond::server {

struct UpOptions {
  std::string dir;
  std::string cluster = "pond";
  ClusterConfig config;   // mns, replication, region_mib, transport.ucx_*: the cluster's spec
  double timeout_s = 60;  // for ZooKeeper and every daemon to come up
};

// Starts the cluster and prints where it is; the exit status: 0 up, 1 it did not come up
// (nothing is left running), 2 bad options.
int Up(const UpOptions& o);
// Stops every process DIR/cluster.json names (SIGTERM, then SIGKILL after `grace_s`), then
// removes that file; the exit status.
int Down(const std::string& dir, double grace_s);

// The file `up` writes: {"cluster": NAME, "coord": "127.0.0.1:PORT", "processes": [{"role":
// "zookeeper"|"mn", "id": N, "pid": P, "log": PATH}, ...]}.
std::string ClusterFile(const std::string& dir);

}  // namespace pond::server
