#include "pond/server/mn_daemon.h"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <optional>
#include <span>
#include <string>

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

}  // namespace

int RunMnDaemon(const MnDaemonOptions& o) {
  const DaemonLog log("pond mn " + std::to_string(o.id));
  // Blocked before any thread starts (ZooKeeper's, UCX's), so that only WaitForStop takes them.
  BlockStopSignals();
  std::unique_ptr<MetricsServer> metrics;
  if (!o.metrics.empty()) {
    Result<std::unique_ptr<MetricsServer>> m =
        MetricsServer::Start(o.metrics, "mn", o.id, o.cluster);
    if (!m.ok()) {
      log("{}", m.status().message());
      return 1;
    }
    metrics = std::move(m).value();
    log("metrics at http://{}/metrics", metrics->address());
  }
  auto store = cluster::ZkConfigStore::Connect(o.coord);
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
  // A restart: the cluster runs, and its configuration names this MN. It comes back blank as
  // the next incarnation, once the last one is declared down — before that, the CNs may still
  // write to the old one's memory (docs/recovery.md "MN restart among daemons").
  std::optional<uint16_t> rejoin_as;
  for (bool said = false;;) {
    Result<cluster::Versioned> v = (*store)->Get(cluster::ConfigKey(o.cluster));
    if (!v.ok()) {
      log("cannot read the configuration: {}", v.status().ToString());
      return 1;
    }
    if (v->value.empty()) break;  // the cluster's first start
    Result<cluster::Configuration> config = cluster::Configuration::Decode(v->value);
    if (!config.ok()) {
      log("the configuration does not parse: {}", config.status().ToString());
      return 1;
    }
    if (static_cast<size_t>(o.id) >= config->mns.size()) break;
    const cluster::MnStatus& m = config->mns[o.id];
    if (!m.alive) {
      rejoin_as = static_cast<uint16_t>(m.incarnation + 1);
      break;
    }
    if (!said) {
      log("MN {} is alive in epoch {}: waiting until its last incarnation is declared down", o.id,
          config->epoch);
      said = true;
    }
    if (WaitForStop(50) != 0) return 0;
  }
  const uint64_t region_bytes = c.region_mib * kMiB;
  auto layout = store::MakeLayout(static_cast<uint16_t>(c.mns), c.replication, region_bytes,
                                  store::kChunkBytes);
  if (!layout.ok()) {
    log("cannot lay out the region: {}", layout.status().ToString());
    return 1;
  }
  const ucx::UcxOptions ucx_options{
      c.transport.ucx_tls,
      o.ucx_net_devices.empty() ? c.transport.ucx_net_devices : o.ucx_net_devices};
  auto mn = ucx::UcxMemoryNode::Start(static_cast<MnId>(o.id), region_bytes, ucx_options);
  if (!mn.ok()) {
    log("cannot serve a region of {} MiB: {}", c.region_mib, mn.status().ToString());
    return 1;
  }
  store::FormatRegion((*mn)->region(), *layout, static_cast<MnId>(o.id));
  if (metrics != nullptr) metrics->SetRegionBytes(region_bytes);
  const std::string key = cluster::MnKey(o.cluster, static_cast<uint16_t>(o.id));
  const std::vector<std::byte> descriptor = (*mn)->descriptor().Encode();
  Status published = cluster::PutOwned(**store, key, descriptor);
  if (!published.ok()) {
    log("cannot publish the descriptor at {}: {}", key, published.ToString());
    return 1;
  }
  log("serving {} MiB over UCX (tls {}) for cluster {} ({} MNs, R={}); descriptor at {}",
      c.region_mib, ucx_options.tls.empty() ? "UCX's choice" : ucx_options.tls, o.cluster, c.mns,
      c.replication, key);
  if (rejoin_as) {
    // Its descriptor is out: the CNs reach this process once the CM lets it in, lay out its
    // catalog and copy its replicas back.
    const std::string inc = std::to_string(*rejoin_as);
    Status asked =
        cluster::PutOwned(**store, cluster::MnJoinKey(o.cluster, static_cast<uint16_t>(o.id)),
                          std::span(reinterpret_cast<const std::byte*>(inc.data()), inc.size()));
    if (!asked.ok()) {
      log("cannot ask to rejoin: {}", asked.ToString());
      return 1;
    }
    log("restarted blank: asking to rejoin as incarnation {}", inc);
  }

  // The MN's beat, which the CNs' configuration manager watches (docs/recovery.md "Processes"):
  // counted up by this CPU every kBeatMs while the daemon lives; a killed daemon's stops.
  int sig = 0;
  while ((sig = WaitForStop(kBeatMs)) == 0) {
    store::BeatMn((*mn)->region());
    if (metrics != nullptr) metrics->CountBeat();
  }
  log("stopping ({})", sig == SIGINT ? "SIGINT" : "SIGTERM");
  // Withdrawn first: a CN that starts now finds no MN rather than a region about to vanish.
  Status withdrawn = cluster::PutOwned(**store, key, {});
  if (!withdrawn.ok()) log("could not withdraw the descriptor: {}", withdrawn.ToString());
  mn->reset();
  log("stopped");
  return 0;
}

}  // namespace pond::server
