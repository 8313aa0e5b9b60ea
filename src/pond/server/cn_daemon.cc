#include "pond/server/cn_daemon.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "pond/cluster/directory.h"
#include "pond/cluster/membership.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/server/daemon_common.h"
#include "pond/server/daemon_log.h"
#include "pond/server/metrics.h"

namespace pond::server {

namespace {

// A stop that takes this much longer than the grace is stuck — requests waiting on a peer that
// went silent, whose answers no transport deadline has ended — and the daemon exits without
// finishing it: SIGTERM always stops it. What it left undone is what a crash leaves.
constexpr double kStopStuckS = 10;

std::vector<std::byte> Text(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// Cluster::Start, obeying SIGTERM and SIGINT meanwhile. It may wait up to --wait for this id's
// earlier process to be declared failed and for the peers to publish, and only WaitForStop takes
// the stop signals; a stop asked in that wait ends the process at once. Nothing is served yet,
// so what it leaves is what a crash while starting leaves, which the cluster recovers from.
Result<std::unique_ptr<Cluster>> StartUnlessStopped(const ClusterConfig& config,
                                                    const DaemonLog& log) {
  std::atomic<bool> started{false};
  std::thread watch([&started, &log] {
    while (!started.load()) {
      if (const int sig = WaitForStop(50); sig != 0) {
        log("stopping ({}) while starting, before serving", sig == SIGINT ? "SIGINT" : "SIGTERM");
        _exit(0);
      }
    }
  });
  Result<std::unique_ptr<Cluster>> c = Cluster::Start(config);
  started = true;
  watch.join();
  return c;
}

// Waits until every MN of the configuration is up and read like any replica (neither down nor
// rejoining), for up to `wait_s`; false if a stop signal came first. A CN loads the tables'
// catalog from every MN at its start, and each MN's own catalog alone says where that MN's index
// areas lie: a restarted MN holds none until the CNs lay it out again late in its rejoin, and a
// down MN answers nothing. Started before then, the CN would exit ("catalogs of MN 0 and MN 2
// disagree"); kill_test over TCP met that when a CN restarted while an MN rejoined.
Result<bool> AwaitMnsReadable(cluster::ConfigStore& store, const std::string& name, double wait_s,
                              const DaemonLog& log) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1e3));
  std::string said;
  for (;;) {
    Result<cluster::Versioned> v = store.Get(cluster::ConfigKey(name));
    if (!v.ok()) return v.status();
    if (v->value.empty()) return true;  // the first start: no epoch yet, every MN is up
    Result<cluster::Configuration> c = cluster::Configuration::Decode(v->value);
    if (!c.ok()) return c.status();
    std::string waiting;
    for (size_t mn = 0; mn < c->mns.size(); mn++) {
      const cluster::MnStatus& m = c->mns[mn];
      if (m.alive && !m.leaving && m.rejoin == cluster::MnStatus::Rejoin::kNone) continue;
      waiting += (waiting.empty() ? "MN " : ", MN ") + std::to_string(mn) +
                 (m.alive && !m.leaving ? " (rejoining)" : " (down)");
    }
    if (waiting.empty()) return true;
    if (waiting != said) log("waiting for {} to be read like any replica", waiting);
    said = waiting;
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable(waiting + " not read like any replica after " +
                         fmt::format("{:g}", wait_s) + " s: a CN loads every MN's catalog");
    }
    if (WaitForStop(100) != 0) return false;
  }
}

// The configuration this CN runs: the cluster's, as its first CN published it, over UCX with this
// daemon's id, devices and patience.
Result<ClusterConfig> ConfigFor(const CnDaemonOptions& o, ClusterConfig config) {
  if (o.id < 0 || o.id >= config.cns) {
    return InvalidArgument(fmt::format("--id {} is not a CN of cluster {} (it has CNs 0 to {})",
                                       o.id, o.cluster, config.cns - 1));
  }
  if (!o.ucx_net_devices.empty()) config.transport.ucx_net_devices = o.ucx_net_devices;
  config.transport.kind = "ucx";
  config.transport.coord = o.coord;
  config.transport.cluster = o.cluster;
  config.transport.coord_secret = o.secret;
  config.transport.cn = o.id;
  config.transport.peers_wait_ms = static_cast<int>(o.wait_s * 1e3);
  return config;
}

// Waits for this CN's turn to start and says whether it makes the tables (true) or joins them.
// CN 0 makes them once, and every later start of any CN waits for word that they are made; every
// start then waits for every MN to be read like any replica. nullopt: a stop signal came first.
Result<std::optional<bool>> AwaitTurn(cluster::ConfigStore& store, const CnDaemonOptions& o,
                                      const DaemonLog& log) {
  const std::string ready_key = cluster::ReadyKey(o.cluster);
  Result<cluster::Versioned> ready = store.Get(ready_key);
  if (!ready.ok()) {
    return Unavailable(fmt::format("cannot read {}: {}", ready_key, ready.status().ToString()));
  }
  const bool create = ready->value.empty() && o.id == 0;
  if (!create && ready->value.empty()) {
    log("waiting for CN 0 to make the tables ({})", ready_key);
    auto awaited = AwaitKey(store, ready_key, o.wait_s, "word from CN 0 that the tables are made");
    if (!awaited.ok()) return awaited.status();
    if (!awaited->has_value()) return std::optional<bool>();
  }
  Result<bool> readable = AwaitMnsReadable(store, o.cluster, o.wait_s, log);
  if (!readable.ok()) return Unavailable("cannot start: " + readable.status().message());
  if (!*readable) return std::optional<bool>();
  return std::optional<bool>(create);
}

// Makes the tables (create) or joins them, and on making them tells the other CNs they may join.
Status SetUpTables(CnDaemonOptions& o, Cluster& c, cluster::ConfigStore& store, bool create,
                   const DaemonLog& log) {
  if (o.setup) {
    Status s = o.setup(c, create);
    if (!s.ok()) {
      return Status(s.code(),
                    fmt::format("cannot {} the tables: {}", create ? "make" : "join", s.message()));
    }
  }
  if (!create) return Status::Ok();
  const std::string ready_key = cluster::ReadyKey(o.cluster);
  Status s = cluster::PutOwned(store, ready_key, Text("tables made by CN 0"));
  if (!s.ok()) {
    return Unavailable(
        fmt::format("cannot say the tables are made at {}: {}", ready_key, s.ToString()));
  }
  log("made the tables; the other CNs may join");
  return Status::Ok();
}

// Starts the client front end and publishes its address, so that clients (and the other CNs'
// Describe) find it.
Status TakeClients(CnDaemonOptions& o, Cluster& c, cluster::ZkConfigStore& zk,
                   const DaemonLog& log) {
  const auto cn = static_cast<uint16_t>(o.id);
  Result<std::string> address = o.frontend->Start(c, cn);
  if (!address.ok()) return Unavailable("cannot take clients: " + address.status().message());
  const std::string client_key = cluster::ClientKey(o.cluster, cn);
  Status s = cluster::PutOwned(zk, client_key, Text(*address));
  if (!s.ok()) log("cannot publish the client address at {}: {}", client_key, s.ToString());
  log("serving; clients at {}", *address);
  // Describe names every CN that takes clients now, by id, read at each call (clients ask
  // rarely: when they connect and when their CN fails).
  o.frontend->SetCnAddressSource([&zk, cns = c.config().cns, name = o.cluster] {
    std::vector<std::string> by_id(static_cast<size_t>(cns));
    for (int peer = 0; peer < cns; peer++) {
      Result<cluster::Versioned> v = zk.Get(cluster::ClientKey(name, static_cast<uint16_t>(peer)));
      if (v.ok()) {
        by_id[static_cast<size_t>(peer)].assign(reinterpret_cast<const char*>(v->value.data()),
                                                v->value.size());
      }
    }
    return by_id;
  });
  return Status::Ok();
}

// Stops serving on a stop signal, within the grace; past it and kStopStuckS more, it exits as is.
void ServeUntilStopped(CnDaemonOptions& o, Cluster& c, cluster::ZkConfigStore& zk,
                       MetricsServer* metrics, const DaemonLog& log) {
  const int sig = WaitForStop(-1);
  log("stopping ({})", sig == SIGINT ? "SIGINT" : "SIGTERM");
  std::thread([log, limit_s = o.grace_s + kStopStuckS] {
    std::this_thread::sleep_for(std::chrono::duration<double>(limit_s));
    log("stopping took more than {:.0f} s (calls still wait on a silent peer); exiting as is",
        limit_s);
    _exit(1);
  }).detach();
  // A scrape from now on says it no longer serves.
  if (metrics != nullptr) metrics->DetachCluster();
  if (o.frontend != nullptr) {
    // Withdrawn first: a client looking now moves to another CN.
    (void)cluster::PutOwned(zk, cluster::ClientKey(o.cluster, static_cast<uint16_t>(o.id)), {});
    o.frontend->Stop();
  }
  c.StopServing(static_cast<uint64_t>(o.grace_s * 1e3));
  log("stopped");
}

}  // namespace

int RunCnDaemon(CnDaemonOptions& o) {
  const DaemonLog log("pond cn " + std::to_string(o.id));
  BlockStopSignals();  // before any thread starts: only WaitForStop takes them
  std::unique_ptr<MetricsServer> metrics;
  if (!o.metrics.empty()) {
    Result<std::unique_ptr<MetricsServer>> m =
        MetricsServer::Start(o.metrics, "cn", o.id, o.cluster, o.metrics_security);
    if (!m.ok()) {
      log("{}", m.status().message());
      return 1;
    }
    metrics = std::move(m).value();
    log("metrics at {}://{}/metrics", metrics->scheme(), metrics->address());
  }
  auto store = cluster::ZkConfigStore::Connect(
      o.coord, cluster::ZkGuard{cluster::ClusterRoot(o.cluster), o.secret});
  if (store.status().code() == Code::kPermissionDenied) {
    log("will not join cluster {}: {}", o.cluster, store.status().message());
    return 1;
  }
  if (!store.ok()) {
    log("cannot reach the coordination service at {}: {}", o.coord, store.status().ToString());
    return 1;
  }
  Result<std::optional<ClusterSpec>> spec = AwaitSpec(**store, o.cluster, o.wait_s);
  if (!spec.ok()) {
    log("{}", spec.status().message());
    return 1;
  }
  if (!spec->has_value()) return 0;  // stopped while waiting
  Result<ClusterConfig> config = ConfigFor(o, (*spec)->config);
  Result<std::optional<bool>> turn =
      config.ok() ? AwaitTurn(**store, o, log) : Result<std::optional<bool>>(config.status());
  if (!turn.ok()) {
    log("{}", turn.status().message());
    return 1;
  }
  if (!turn->has_value()) return 0;  // stopped while waiting
  const bool create = **turn;
  auto started = StartUnlessStopped(*config, log);
  if (!started.ok()) {
    log("cannot start: {}", started.status().message());
    return 1;
  }
  std::unique_ptr<Cluster> c = std::move(started).value();
  // Declared after the cluster, so gone before it: no scrape reads a cluster being destroyed.
  struct Detach {
    MetricsServer* m;
    ~Detach() {
      if (m != nullptr) m->DetachCluster();
    }
  } detach{metrics.get()};
  log("joined cluster {}: {} MNs, {} CNs, {} workers here, protocol {}, {}", o.cluster, config->mns,
      config->cns, config->workers_per_cn, config->protocol.name, IsolationName(config->isolation));
  if (Status s = SetUpTables(o, *c, **store, create, log); !s.ok()) {
    log("{}", s.message());
    return 1;
  }
  c->SetEventLog([&log](const std::string& line) { log.Write(line); });
  Status serving = c->StartServing();
  if (!serving.ok()) {
    log("cannot serve: {}", serving.message());
    return 1;
  }
  if (metrics != nullptr) metrics->AttachCluster(c.get(), static_cast<uint16_t>(o.id));
  if (o.frontend == nullptr) {
    log("serving the other CNs (no client front end)");
  } else if (Status s = TakeClients(o, *c, **store, log); !s.ok()) {
    log("{}", s.message());
    c->StopServing(static_cast<uint64_t>(o.grace_s * 1e3));
    return 1;
  } else if (metrics != nullptr) {
    metrics->AttachClients([f = o.frontend.get()] { return f->Counts(); });
  }
  ServeUntilStopped(o, *c, **store, metrics.get(), log);
  return 0;
}

}  // namespace pond::server
