#include "pond/server/mn_daemon.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <ctime>

#include "pond/cluster/directory.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/server/cluster_spec.h"
#include "pond/server/daemon_log.h"
#include "pond/store/catalog.h"
#include "pond/transport/ucx/memory_node.h"

namespace pond::server {

namespace {

constexpr uint64_t kMiB = 1 << 20;

// Waits up to `ms` for SIGTERM or SIGINT (blocked in every thread); the signal, or 0.
int WaitForStop(int ms) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  if (ms < 0) {
    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    return sig;
  }
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  const int sig = sigtimedwait(&stop, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// Puts `value` at `key` whatever its version is (the daemon owns its key).
Status PutOwned(cluster::ConfigStore& store, const std::string& key,
                std::span<const std::byte> value) {
  for (int attempt = 0; attempt < 5; attempt++) {
    Result<cluster::Versioned> now = store.Get(key);
    if (!now.ok()) return now.status();
    Result<uint64_t> put = store.PutIf(key, value, now->version);
    if (put.ok() || put.status().code() != Code::kConflict) return put.status();
  }
  return Conflict("someone else keeps writing " + key);
}

}  // namespace

int RunMnDaemon(const MnDaemonOptions& o) {
  const DaemonLog log("pond mn " + std::to_string(o.id));
  // Blocked before any thread starts (ZooKeeper's, UCX's), so that only WaitForStop takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto store = cluster::ZkConfigStore::Connect(o.coord);
  if (!store.ok()) {
    log("cannot reach the coordination service at {}: {}", o.coord, store.status().ToString());
    return 1;
  }
  const std::string spec_key = cluster::SpecKey(o.cluster);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(o.wait_s * 1e3));
  Result<cluster::Versioned> spec_bytes = cluster::Versioned{};
  for (;;) {
    spec_bytes = (*store)->Get(spec_key);
    if (!spec_bytes.ok()) {
      log("cannot read {}: {}", spec_key, spec_bytes.status().ToString());
      return 1;
    }
    if (spec_bytes->version != 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      log("no cluster spec at {} after {} s (pond up writes it; docs/deploy.md)", spec_key,
          o.wait_s);
      return 1;
    }
    if (WaitForStop(100) != 0) return 0;
  }
  const std::string text(reinterpret_cast<const char*>(spec_bytes->value.data()),
                         spec_bytes->value.size());
  Result<ClusterSpec> spec = ClusterSpec::FromJson(text);
  if (!spec.ok()) {
    log("bad spec at {}: {}", spec_key, spec.status().message());
    return 1;
  }
  const ClusterConfig& c = spec->config;
  if (o.id < 0 || o.id >= c.mns) {
    log("--id {} is not an MN of cluster {} (it has MNs 0 to {})", o.id, o.cluster, c.mns - 1);
    return 1;
  }
  const uint64_t region_bytes = c.region_mib * kMiB;
  auto layout = store::MakeLayout(static_cast<uint16_t>(c.mns), c.replication, region_bytes,
                                  store::kChunkBytes);
  if (!layout.ok()) {
    log("cannot lay out the region: {}", layout.status().ToString());
    return 1;
  }
  const ucx::UcxOptions ucx_options{c.transport.ucx_tls, c.transport.ucx_net_devices};
  auto mn = ucx::UcxMemoryNode::Start(static_cast<MnId>(o.id), region_bytes, ucx_options);
  if (!mn.ok()) {
    log("cannot serve a region of {} MiB: {}", c.region_mib, mn.status().ToString());
    return 1;
  }
  store::FormatRegion((*mn)->region(), *layout, static_cast<MnId>(o.id));
  const std::string key = cluster::MnKey(o.cluster, static_cast<uint16_t>(o.id));
  const std::vector<std::byte> descriptor = (*mn)->descriptor().Encode();
  Status published = PutOwned(**store, key, descriptor);
  if (!published.ok()) {
    log("cannot publish the descriptor at {}: {}", key, published.ToString());
    return 1;
  }
  log("serving {} MiB over UCX (tls {}) for cluster {} ({} MNs, R={}); descriptor at {}",
      c.region_mib, ucx_options.tls.empty() ? "UCX's choice" : ucx_options.tls, o.cluster, c.mns,
      c.replication, key);

  const int sig = WaitForStop(-1);
  log("stopping ({})", sig == SIGINT ? "SIGINT" : "SIGTERM");
  // Withdrawn first: a CN that starts now finds no MN rather than a region about to vanish.
  Status withdrawn = PutOwned(**store, key, {});
  if (!withdrawn.ok()) log("could not withdraw the descriptor: {}", withdrawn.ToString());
  mn->reset();
  log("stopped");
  return 0;
}

}  // namespace pond::server
