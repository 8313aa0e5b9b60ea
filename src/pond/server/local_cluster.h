// `pond up` and `pond down`: a whole cluster as separate processes on this host — a ZooKeeper
// server, one `pond mn` daemon per memory node and one `pond cn` daemon per compute node (CN 0
// first: it makes the tables) — started into a directory that records their
// pids, addresses and logs (DIR/cluster.json, DIR/*.log), and stopped from that directory by any
// later process. Each `up` is a new cluster: the coordination service starts empty.
#pragma once

#include <string>
#include <vector>

#include "pond/cluster.h"

namespace pond::server {

struct UpOptions {
  std::string dir;
  std::string cluster = "pond";
  // The cluster's spec: mns, cns, workers_per_cn, replication, versions, region_mib, protocol,
  // isolation, seed, transport.ucx_*.
  ClusterConfig config;
  // CN daemons to start, which the spec's cns follows; 0 for none (the MNs alone, for an
  // embedded run's CNs: `pond bench --coord`).
  int cn_daemons = 3;
  std::vector<std::string> cn_args;  // more flags for every `pond cn`
  bool cn_clients = false;           // the CNs take clients: wait for their client addresses
  double timeout_s = 60;             // for ZooKeeper and every daemon to come up
  bool metrics = true;               // each daemon serves its metrics on a free loopback port
  // Everything open: the CNs serve clients in plaintext and the cluster's znodes are anyone's.
  // By default the CNs serve TLS, and the daemons hold the cluster's secret, with what MakeCerts
  // makes in DIR/certs (a CA, the node certificate, a root client certificate, the secret;
  // server/certs.h).
  bool insecure = false;
};

// Starts the cluster and prints where it is; the exit status: 0 up, 1 it did not come up
// (nothing is left running), 2 bad options.
int Up(const UpOptions& o);
// Starts CN `cn` of the cluster in DIR again, after it stopped or was killed: the same flags, its
// log appended to; it comes back as a new incarnation once its failure is recovered
// (docs/recovery.md "Processes"). Waits until it serves, at most `timeout_s`; the exit status.
int Restart(const std::string& dir, int cn, double timeout_s);
// Starts MN `mn` of the cluster in DIR again, after it was killed: a new process, blank memory,
// the same flags; once its failure is declared it asks to rejoin, and the CNs copy its replicas
// back while transactions go on (docs/recovery.md "MN restart among daemons"). Waits until it is
// read like any replica, at most `timeout_s`; the exit status.
int RestartMn(const std::string& dir, int mn, double timeout_s);
// Starts the cluster's ZooKeeper server again after it stopped or was killed: the same port and
// data directory, so the daemons' sessions reconnect and recovery resumes by itself. Waits until
// it accepts connections, at most `timeout_s`; the exit status.
int RestartCoord(const std::string& dir, double timeout_s);
// Stops every process DIR/cluster.json names (SIGTERM, then SIGKILL after `grace_s`), then
// removes that file; the exit status.
int Down(const std::string& dir, double grace_s);

// The file `up` writes: {"cluster": NAME, "coord": "127.0.0.1:PORT", "processes": [{"role":
// "zookeeper"|"mn"|"cn", "id": N, "pid": P, "log": PATH, "args": [FLAG, ...], "metrics":
// "127.0.0.1:PORT" (daemons, unless --no-metrics)}, ...]}.
std::string ClusterFile(const std::string& dir);

}  // namespace pond::server
