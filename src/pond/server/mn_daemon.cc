#include "pond/server/mn_daemon.h"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "pond/cluster/directory.h"
#include "pond/cluster/membership.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/server/cluster_spec.h"
#include "pond/server/daemon_common.h"
#include "pond/server/daemon_log.h"
#include "pond/server/metrics.h"
#include "pond/store/catalog.h"
#include "pond/store/layout.h"
#include "pond/transport/ucx/memory_node.h"

namespace pond::server {

namespace {

constexpr uint64_t kMiB = 1 << 20;
// Every CN lease is at least 20 ms (ValidateConfig): a beat every 5 ms is seen several times in
// one.
constexpr int kBeatMs = 5;

// Which incarnation this MN starts as: 0 at the cluster's first start, and after a restart the
// one after the configuration's, once that is declared down — before that, the CNs may still
// write to the old one's memory (docs/recovery.md "MN restart among daemons"). nullopt if a stop
// signal came while it waited.
Result<std::optional<uint16_t>> AwaitTurn(const MnDaemonOptions& o, cluster::ConfigStore& store,
                                          const DaemonLog& log) {
  for (bool said = false;;) {
    Result<cluster::Versioned> v = store.Get(cluster::ConfigKey(o.cluster));
    if (!v.ok()) return Unavailable("cannot read the configuration: " + v.status().ToString());
    if (v->value.empty()) return std::optional<uint16_t>(0);  // the cluster's first start
    Result<cluster::Configuration> config = cluster::Configuration::Decode(v->value);
    if (!config.ok()) {
      return Corruption("the configuration does not parse: " + config.status().ToString());
    }
    if (static_cast<size_t>(o.id) >= config->mns.size()) return std::optional<uint16_t>(0);
    const cluster::MnStatus& m = config->mns[o.id];
    if (!m.alive) return std::optional<uint16_t>(static_cast<uint16_t>(m.incarnation + 1));
    if (!said) {
      log("MN {} is alive in epoch {}: waiting until its last incarnation is declared down", o.id,
          config->epoch);
      said = true;
    }
    if (WaitForStop(50) != 0) return std::optional<uint16_t>();
  }
}

enum class Served { kStopped, kDeclared, kFailed };

cluster::ZkGuard GuardOf(const MnDaemonOptions& o) {
  return cluster::ZkGuard{cluster::ClusterRoot(o.cluster), o.secret};
}

// What the configuration says of this MN's incarnation, read off the beating thread: a read
// waits on the coordination service, and the beat must not.
class DeclaredWatch {
 public:
  DeclaredWatch(const MnDaemonOptions& o, std::unique_ptr<cluster::ZkConfigStore>& store,
                uint16_t incarnation, const DaemonLog& log)
      : o_(o), store_(store), incarnation_(incarnation), log_(log), thread_([this] { Run(); }) {}
  ~DeclaredWatch() {
    stop_ = true;
    thread_.join();
  }
  // The epoch that declared this incarnation down, once one did; 0 until then.
  uint64_t declared_epoch() const { return declared_.load(); }
  // Another process of this MN came after this one: it must stop serving.
  bool superseded() const { return superseded_.load(); }

 private:
  void Run() {
    for (; !stop_.load(); std::this_thread::sleep_for(kEvery)) {
      // An expired session reads nothing more: a new one, as a restarted daemon would open.
      if (store_->expired()) {
        auto fresh = cluster::ZkConfigStore::Connect(o_.coord, GuardOf(o_));
        if (!fresh.ok()) continue;
        store_ = std::move(fresh).value();
        log_("its ZooKeeper session expired; opened a new one");
      }
      Result<cluster::Versioned> v = store_->Get(cluster::ConfigKey(o_.cluster));
      if (!v.ok() || v->value.empty()) continue;
      Result<cluster::Configuration> config = cluster::Configuration::Decode(v->value);
      if (!config.ok() || static_cast<size_t>(o_.id) >= config->mns.size()) continue;
      const cluster::MnStatus& m = config->mns[o_.id];
      if (m.incarnation > incarnation_) {
        superseded_ = true;
      } else if (m.incarnation == incarnation_ && !m.alive) {
        declared_ = config->epoch;
      }
    }
  }
  static constexpr auto kEvery = std::chrono::milliseconds(100);
  const MnDaemonOptions& o_;
  std::unique_ptr<cluster::ZkConfigStore>& store_;  // read and replaced only here while it runs
  const uint16_t incarnation_;
  const DaemonLog& log_;
  std::atomic<bool> stop_{false}, superseded_{false};
  std::atomic<uint64_t> declared_{0};
  std::thread thread_;  // last: it runs on the members above
};

// One incarnation: maps and formats the region, publishes it (and, after a restart, asks to
// rejoin), and beats until a stop signal, or until the configuration declares it down.
Served Serve(const MnDaemonOptions& o, const ClusterConfig& c,
             std::unique_ptr<cluster::ZkConfigStore>& store, uint16_t incarnation,
             const store::PoolLayout& layout, const ucx::UcxOptions& ucx_options,
             MetricsServer* metrics, const DaemonLog& log) {
  const uint64_t region_bytes = c.region_mib * kMiB;
  auto mn = ucx::UcxMemoryNode::Start(static_cast<MnId>(o.id), region_bytes, ucx_options);
  if (!mn.ok()) {
    log("cannot serve a region of {} MiB: {}", c.region_mib, mn.status().ToString());
    return Served::kFailed;
  }
  store::FormatRegion((*mn)->region(), layout, static_cast<MnId>(o.id));
  const std::string key = cluster::MnKey(o.cluster, static_cast<uint16_t>(o.id));
  const std::vector<std::byte> descriptor = (*mn)->published_descriptor().Encode();
  Status published = cluster::PutOwned(*store, key, descriptor);
  if (!published.ok()) {
    log("cannot publish the descriptor at {}: {}", key, published.ToString());
    return Served::kFailed;
  }
  log("serving {} MiB over UCX (tls {}) for cluster {} ({} MNs, R={}); descriptor at {}",
      c.region_mib, ucx_options.tls.empty() ? "UCX's choice" : ucx_options.tls, o.cluster, c.mns,
      c.replication, key);
  if (incarnation > 0) {
    // Its descriptor is out: the CNs reach this process once the CM lets it in, lay out its
    // catalog and copy its replicas back.
    const std::string inc = std::to_string(incarnation);
    Status asked =
        cluster::PutOwned(*store, cluster::MnJoinKey(o.cluster, static_cast<uint16_t>(o.id)),
                          std::span(reinterpret_cast<const std::byte*>(inc.data()), inc.size()));
    if (!asked.ok()) {
      log("cannot ask to rejoin: {}", asked.ToString());
      return Served::kFailed;
    }
    log("restarted blank: asking to rejoin as incarnation {}", inc);
  }
  if (metrics != nullptr) metrics->SetIncarnation(incarnation);

  // The MN's beat, which the CNs' configuration manager watches (docs/recovery.md "Processes"):
  // counted up by this CPU every kBeatMs while the daemon lives; a killed daemon's stops.
  Served served = Served::kStopped;
  int sig = 0;
  {
    DeclaredWatch watch(o, store, incarnation, log);
    while ((sig = WaitForStop(kBeatMs)) == 0) {
      if (watch.superseded()) {
        log("a later incarnation of MN {} serves: this process stops", o.id);
        served = Served::kFailed;
        break;
      }
      if (const uint64_t epoch = watch.declared_epoch(); epoch != 0) {
        log("declared down in epoch {} while it lives (the configuration manager could not read "
            "its beat for a lease): "
            "no replica any more, it restarts blank as incarnation {}",
            epoch, incarnation + 1);
        if (metrics != nullptr) metrics->CountDeclaredAlive();
        served = Served::kDeclared;
        break;
      }
      store::BeatMn((*mn)->region());
      if (metrics != nullptr) metrics->CountBeat();
    }
  }
  if (served == Served::kDeclared) {
    // Its connections go with it: a CN's write the network still held lands on nothing.
    mn->reset();
    return served;
  }
  if (sig != 0) log("stopping ({})", sig == SIGINT ? "SIGINT" : "SIGTERM");
  // Withdrawn first: a CN that starts now finds no MN rather than a region about to vanish.
  Status withdrawn = cluster::PutOwned(*store, key, {});
  if (!withdrawn.ok()) log("could not withdraw the descriptor: {}", withdrawn.ToString());
  mn->reset();
  log("stopped");
  return served;
}

}  // namespace

int RunMnDaemon(const MnDaemonOptions& o) {
  const DaemonLog log("pond mn " + std::to_string(o.id));
  // Blocked before any thread starts (ZooKeeper's, UCX's), so that only WaitForStop takes them.
  BlockStopSignals();
  std::unique_ptr<MetricsServer> metrics;
  if (!o.metrics.empty()) {
    Result<std::unique_ptr<MetricsServer>> m =
        MetricsServer::Start(o.metrics, "mn", o.id, o.cluster, o.metrics_security);
    if (!m.ok()) {
      log("{}", m.status().message());
      return 1;
    }
    metrics = std::move(m).value();
    log("metrics at {}://{}/metrics", metrics->scheme(), metrics->address());
  }
  auto store = cluster::ZkConfigStore::Connect(o.coord, GuardOf(o));
  if (store.status().code() == Code::kPermissionDenied) {
    log("will not join cluster {}: {}", o.cluster, store.status().message());
    return 1;
  }
  if (!store.ok()) {
    log("cannot reach the coordination service at {}: {}", o.coord, store.status().ToString());
    return 1;
  }
  Result<std::optional<ClusterSpec>> awaited = AwaitSpec(**store, o.cluster, o.wait_s);
  if (!awaited.ok()) {
    log("{}", awaited.status().message());
    return 1;
  }
  if (!awaited->has_value()) return 0;  // stopped while waiting
  const ClusterSpec* spec = &**awaited;
  const ClusterConfig& c = spec->config;
  if (o.id < 0 || o.id >= c.mns) {
    log("--id {} is not an MN of cluster {} (it has MNs 0 to {})", o.id, o.cluster, c.mns - 1);
    return 1;
  }
  const uint64_t region_bytes = c.region_mib * kMiB;
  auto layout = store::MakeLayout(static_cast<uint16_t>(c.mns), c.replication, region_bytes,
                                  store::kChunkBytes,
                                  store::GeneralHeapBytes(region_bytes, c.protocol.single_version));
  if (!layout.ok()) {
    log("cannot lay out the region: {}", layout.status().ToString());
    return 1;
  }
  ucx::UcxOptions ucx_options{c.transport.ucx_tls, o.ucx_net_devices.empty()
                                                       ? c.transport.ucx_net_devices
                                                       : o.ucx_net_devices};
  // The region key goes only to CNs that show the cluster's token (peer_token.h).
  ucx_options.peer_token = ucx::DerivePeerToken(o.secret, o.cluster);
  if (metrics != nullptr) metrics->SetRegionBytes(region_bytes);
  std::unique_ptr<cluster::ZkConfigStore> zk = std::move(store).value();
  // One incarnation after another: a process declared down while it lives (cut off from the
  // configuration manager longer than a lease) is no replica any more, and comes back blank as
  // the next incarnation, as a restarted daemon would.
  for (;;) {
    Result<std::optional<uint16_t>> incarnation = AwaitTurn(o, *zk, log);
    if (!incarnation.ok()) {
      log("{}", incarnation.status().message());
      return 1;
    }
    if (!incarnation->has_value()) return 0;  // stopped while waiting
    const Served served = Serve(o, c, zk, **incarnation, *layout, ucx_options, metrics.get(), log);
    if (served != Served::kDeclared) return served == Served::kStopped ? 0 : 1;
  }
}

}  // namespace pond::server
