// The pieces of a cluster whose nodes are processes: its MNs `pond mn` daemons (reached by the
// descriptors they publish in the coordination service) and maybe its CNs `pond cn` daemons, one
// CN per process (TransportConfig.cn), which find each other's workers there too
// (docs/deploy.md). ClusterImpl's PublishCn, ConnectPeerCns and WithdrawCn live in cn_process.cc.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pond/cluster.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/recovery/cn_start.h"
#include "pond/transport/fabric.h"
#include "pond/transport/gaddr.h"
#include "pond/transport/ucx/ucx_context.h"

namespace pond::node {

inline ucx::UcxOptions UcxOptionsOf(const ClusterConfig& c) {
  return ucx::UcxOptions{c.transport.ucx_tls, c.transport.ucx_net_devices};
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

}  // namespace pond::node
