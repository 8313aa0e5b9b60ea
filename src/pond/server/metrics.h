// What `pond mn` and `pond cn` serve at GET /metrics on their --metrics address: Prometheus's
// text exposition format, through prometheus-cpp's exposer (an HTTP server on threads of its
// own). docs/deploy.md "Metrics" lists the metrics and what each means.
//
// Nothing is counted here: each scrape reads what the daemon's parts count anyway — a CN's
// Cluster::Stats and GetCnStats, which are safe to read from any thread while it serves, and an
// MN's beats — so the transaction path pays nothing for a scrape it does not know of.
//
// A daemon starts its MetricsServer first (a bad address ends it before it joins anything), then
// hands it a CN's cluster once it serves (AttachCluster) and takes it back before the cluster
// goes (DetachCluster): from then on no scrape reads it.
//
// Thread rules: any thread may call every method; scrapes run on the server's threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pond/cluster.h"
#include "pond/server/certs.h"
#include "pond/server/tls_front.h"
#include "pond/status.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace pond::server {

// A CN's client front end: what it answered, and whom it refused (docs/clients.md "Roles").
struct ClientCounts {
  uint64_t requests = 0, rejected = 0;
  uint64_t refused_unauthenticated = 0, refused_role = 0;
};

// One scrape's worth: what the text is made of. Separate from the server so that the format is
// tested without one.
struct DaemonMetrics {
  std::string role;  // "mn" or "cn"
  int id = 0;
  std::string cluster;
  double uptime_s = 0;
  // A CN, once it serves (else none of its transaction metrics are shown).
  std::optional<ClusterStats> totals;
  std::optional<CnStats> cn;
  // Its counts when it began to serve: what making or joining the tables cost (CN 0 loads them),
  // shown apart so that operations per commit read right.
  ClusterStats before_serving;
  // A CN taking clients.
  std::optional<ClientCounts> clients;
  // An MN.
  uint64_t region_bytes = 0;
  uint64_t beats = 0;
  uint16_t incarnation = 0;
  uint64_t declared_alive = 0;
};

// The metrics in Prometheus's text exposition format (version 0.0.4).
std::string MetricsText(const DaemonMetrics& m);

// Connections served at once, and how long one may take to send its request.
inline constexpr int kMetricsThreads = 4;
inline constexpr int kMetricsRequestTimeoutMs = 2000;

// Who may scrape (docs/deploy.md "Metrics"). By default anyone who reaches the address, over
// plain HTTP: give --metrics a loopback or management address.
struct MetricsSecurity {
  // Serve HTTPS with this certificate and key (a CN's node.crt; scrapers need not show one).
  std::optional<ServerTls> tls;
  // Require HTTP Basic authentication whose password is this (any user name): what
  // Prometheus's basic_auth password_file sends. Empty: none.
  std::string token;
};

class MetricsServer {
 public:
  // Serves GET /metrics at `address` ("HOST:PORT"; port 0: any free one) for daemon `role` `id`
  // of `cluster`; InvalidArgument for a malformed address, Unavailable if it cannot be bound.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                      const std::string& role, int id,
                                                      const std::string& cluster,
                                                      const MetricsSecurity& security = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Where it serves: HOST:PORT, the port the one bound.
  const std::string& address() const { return address_; }
  // "http" or "https".
  const char* scheme() const { return front_ != nullptr ? "https" : "http"; }

  // A CN: scrapes read CN `cn` of `cluster` from now until DetachCluster returns.
  void AttachCluster(const Cluster* cluster, uint16_t cn);
  // A CN taking clients: scrapes read `counts` from now until DetachCluster returns.
  void AttachClients(std::function<ClientCounts()> counts);
  void DetachCluster();
  // An MN: its region's size, and one more beat.
  void SetRegionBytes(uint64_t bytes) { region_bytes_ = bytes; }
  void CountBeat() { beats_.fetch_add(1, std::memory_order_relaxed); }
  // An MN: the incarnation it serves as, and one more time it was declared down while it lived
  // (and so restarted blank: server/mn_daemon.cc).
  void SetIncarnation(uint16_t incarnation) { incarnation_ = incarnation; }
  void CountDeclaredAlive() { declared_alive_.fetch_add(1, std::memory_order_relaxed); }

  // What a scrape now would show.
  DaemonMetrics Snapshot() const;

 private:
  class Collector;
  MetricsServer(std::string role, int id, std::string cluster);

  const std::string role_, cluster_;
  const int id_;
  const int64_t started_ns_;  // steady clock, for the uptime
  std::string address_;
  mutable std::mutex mu_;  // held while a scrape reads the cluster, and to change it
  const Cluster* attached_ = nullptr;
  uint16_t cn_ = 0;
  ClusterStats attached_stats_;            // the cluster's counts when it was attached
  std::function<ClientCounts()> clients_;  // guarded by mu_
  std::atomic<uint64_t> region_bytes_{0};
  std::atomic<uint64_t> beats_{0};
  std::atomic<uint16_t> incarnation_{0};
  std::atomic<uint64_t> declared_alive_{0};
  std::shared_ptr<Collector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // stopped before the rest goes
  std::unique_ptr<TlsFront> front_;  // with TLS; last: stopped first, while its backend serves
};

}  // namespace pond::server
