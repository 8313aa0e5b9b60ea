// The pieces of a cluster whose nodes are processes: its MNs `pond mn` daemons (reached by the
// descriptors they publish in the coordination service) and maybe its CNs `pond cn` daemons, one
// CN per process (TransportConfig.cn), which find each other's workers there too
// (docs/deploy.md). UcxCnProcess is what such a CN adds to the runtime (node/cn_process.h).
#pragma once

#include <memory>

#include "pond/cluster.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/node/cn_process.h"
#include "pond/recovery/cn_start.h"
#include "pond/transport/fabric.h"
#include "pond/transport/ucx/peer_token.h"

namespace pond::node {
class ClusterImpl;
}  // namespace pond::node

namespace pond::deploy {

class ProcessMembership;

inline ucx::UcxOptions UcxOptionsOf(const ClusterConfig& c) {
  ucx::UcxOptions o{c.transport.ucx_tls, c.transport.ucx_net_devices};
  o.peer_token = ucx::DerivePeerToken(c.transport.coord_secret, c.transport.cluster);
  return o;
}

// The MNs of a cluster of `pond mn` daemons, by the descriptors they published; the session
// with the coordination service goes to *coord, for the CN's own keys.
Result<std::unique_ptr<Fabric>> ConnectToMnDaemons(const ClusterConfig& c, uint64_t region_bytes,
                                                   std::unique_ptr<cluster::ZkConfigStore>* coord);

// What CN `c.transport.cn` starts from: the newest configuration (CN 0's first start writes the
// first one), its shard map, and this process's incarnation — one past the last if the CN ran
// before, after waiting (up to peers_wait_ms) for an earlier process still counted alive to be
// declared failed.
Result<recovery::CnStart> ReadStart(cluster::ConfigStore& store, const ClusterConfig& c);

// One CN of a cluster of processes, over UCX, agreeing with the others through ZooKeeper: it
// publishes its workers' addresses, learns the other CNs' (waiting up to peers_wait_ms for them
// all), runs its membership while it serves (ProcessMembership), and withdraws when it stops.
class UcxCnProcess final : public node::CnProcess {
 public:
  UcxCnProcess(node::ClusterImpl& cl, std::unique_ptr<cluster::ZkConfigStore> coord);
  ~UcxCnProcess() override;

  Status Publish() override;
  Status ConnectPeers() override;
  Status StartMembership() override;
  void PauseCoordination() override;
  void Leave() override;
  void StopMembership() override;
  void Withdraw() override;

 private:
  node::ClusterImpl& cl_;
  const ClusterConfig& config_;
  std::unique_ptr<cluster::ZkConfigStore> coord_;
  std::unique_ptr<ProcessMembership> membership_;  // while serving
};

}  // namespace pond::deploy
