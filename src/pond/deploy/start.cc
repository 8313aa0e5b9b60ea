// Cluster::Start: where an embedded cluster's deployment is chosen, once — which fabric (this
// process's memory, UCX memory nodes of its own, or `pond mn` daemons found in ZooKeeper) and, for
// a `pond cn` daemon, the CN process around the runtime (cn_process.h). The runtime below
// (node/) knows none of them; the simulated cluster is started by Cluster::StartSimulated there.
#include <memory>
#include <utility>

#include "pond/cluster.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/deploy/cn_process.h"
#include "pond/node/worker_context.h"
#include "pond/runtime/clocks.h"
#include "pond/sim/engine.h"
#include "pond/transport/local/local_fabric.h"
#include "pond/transport/ucx/ucx_fabric.h"

namespace pond {

namespace {

constexpr uint64_t kMiB = 1 << 20;

Result<std::unique_ptr<Fabric>> StartUcxMns(const ClusterConfig& c, uint64_t region_bytes) {
  auto f = ucx::UcxFabric::CreateWithLocalMns(static_cast<uint16_t>(c.mns), region_bytes,
                                              deploy::UcxOptionsOf(c));
  if (!f.ok()) return f.status();
  return std::unique_ptr<Fabric>(std::move(f).value());
}

}  // namespace

Result<std::unique_ptr<Cluster>> Cluster::Start(const ClusterConfig& config) {
  POND_RETURN_IF_ERROR(ValidateConfig(config));
  if (config.reshard.policy != ReshardConfig::Policy::kNone && config.transport.cn < 0) {
    return InvalidArgument(
        "resharding moves shards by the membership machine's epochs, which the simulator (pond "
        "sim) and CN daemons (pond up) run; an embedded cluster does not");
  }
  uint64_t region_bytes = config.region_mib * kMiB;
  // MN daemons format their regions with the fixed chunk (store::kChunkBytes); a cluster that
  // formats its own sizes chunks and log rings for its workers (node::OwnPoolLayout).
  store::WorkerSpace space;
  auto layout = store::MakeLayout(
      static_cast<uint16_t>(config.mns), config.replication, region_bytes, store::kChunkBytes,
      store::GeneralHeapBytes(region_bytes, config.protocol.single_version));
  if (config.transport.coord.empty()) {
    auto own = node::OwnPoolLayout(config);
    if (!own.ok()) return own.status();
    layout = own->first;
    space = own->second;
  }
  if (!layout.ok()) return layout.status();
  std::unique_ptr<Fabric> fabric;
  // The coordination service, when the MNs are daemons: a CN process keeps it for its membership;
  // CNs embedded in this process needed it only to find the MNs.
  std::unique_ptr<cluster::ZkConfigStore> coord;
  if (config.transport.kind == "ucx") {
    auto f = config.transport.coord.empty()
                 ? StartUcxMns(config, region_bytes)
                 : deploy::ConnectToMnDaemons(config, region_bytes, &coord);
    if (!f.ok()) return f.status();
    fabric = std::move(f).value();
  } else {
    auto f = LocalFabric::Create(static_cast<uint16_t>(config.mns), region_bytes);
    if (!f.ok()) return f.status();
    fabric = std::move(f).value();
  }
  auto impl = std::make_unique<node::ClusterImpl>(config, nullptr, std::move(fabric),
                                                  SystemClock::Get(), *layout);
  impl->space_ = space;
  if (config.transport.cn >= 0) {
    Result<recovery::CnStart> start = deploy::ReadStart(*coord, config);
    if (!start.ok()) return start.status();
    impl->SetProcess(*std::move(start),
                     std::make_unique<deploy::UcxCnProcess>(*impl, std::move(coord)));
  }
  POND_RETURN_IF_ERROR(impl->Build());
  if (config.transport.cn >= 0) POND_RETURN_IF_ERROR(impl->process()->Publish());
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

}  // namespace pond
