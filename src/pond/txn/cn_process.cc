#include "pond/txn/cn_process.h"

#include <chrono>
#include <thread>

#include "pond/cluster/directory.h"
#include "pond/transport/ucx/ucx_fabric.h"
#include "pond/txn/serving.h"
#include "pond/txn/worker_context.h"

namespace pond::txn {

namespace {

// How often a CN looks again for peers that have not published yet.
constexpr auto kPeerPoll = std::chrono::milliseconds(20);

ucx::UcxFabric& UcxOf(Fabric& f) {
  auto* u = dynamic_cast<ucx::UcxFabric*>(&f);
  POND_CHECK_MSG(u != nullptr, "a CN of a cluster of processes runs on the ucx transport");
  return *u;
}

}  // namespace

Result<std::unique_ptr<Fabric>> ConnectToMnDaemons(const ClusterConfig& c, uint64_t region_bytes,
                                                   std::unique_ptr<cluster::ZkConfigStore>* coord) {
  const TransportConfig& t = c.transport;
  POND_RETURN_IF_ERROR(cluster::CheckClusterName(t.cluster));
  auto store = cluster::ZkConfigStore::Connect(t.coord);
  if (!store.ok()) {
    return Unavailable("cannot reach the coordination service at " + t.coord + ": " +
                       store.status().message());
  }
  std::vector<ucx::MnDescriptor> mns;
  for (int mn = 0; mn <= c.mns; mn++) {
    const std::string key = cluster::MnKey(t.cluster, static_cast<uint16_t>(mn));
    Result<cluster::Versioned> v = (*store)->Get(key);
    if (!v.ok()) return v.status();
    if (mn == c.mns) {
      if (!v->value.empty()) {
        return InvalidArgument("cluster " + t.cluster + " has more than the " +
                               std::to_string(c.mns) + " MNs this cluster is configured for");
      }
      break;
    }
    if (v->value.empty()) {
      return Unavailable("MN " + std::to_string(mn) + " of cluster " + t.cluster +
                         " is not serving (nothing at " + key + ")");
    }
    Result<ucx::MnDescriptor> d = ucx::MnDescriptor::Decode(v->value);
    if (!d.ok()) return InvalidArgument(key + ": " + d.status().message());
    if (d->bytes != region_bytes) {
      return InvalidArgument("MN " + std::to_string(mn) + " serves " +
                             std::to_string(d->bytes >> 20) + " MiB; this cluster wants " +
                             std::to_string(region_bytes >> 20) + " MiB");
    }
    mns.push_back(*std::move(d));
  }
  auto f = ucx::UcxFabric::Connect(std::move(mns), UcxOptionsOf(c));
  if (!f.ok()) return f.status();
  *coord = std::move(store).value();
  return std::unique_ptr<Fabric>(std::move(f).value());
}

Status ClusterImpl::PublishCn() {
  const auto cn = static_cast<uint16_t>(config_.transport.cn);
  Result<ucx::CnDescriptor> d = UcxOf(*fabric_).Describe(cn, /*incarnation=*/0);
  if (!d.ok()) return d.status();
  return cluster::PutOwned(*coord_, cluster::CnKey(config_.transport.cluster, cn), d->Encode());
}

Status ClusterImpl::ConnectPeerCns() {
  const TransportConfig& t = config_.transport;
  ucx::UcxFabric& fabric = UcxOf(*fabric_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(t.peers_wait_ms);
  for (int cn = 0; cn < config_.cns; cn++) {
    if (Hosts(static_cast<uint16_t>(cn))) continue;
    const std::string key = cluster::CnKey(t.cluster, static_cast<uint16_t>(cn));
    for (;;) {
      Result<cluster::Versioned> v = coord_->Get(key);
      if (!v.ok()) return v.status();
      if (!v->value.empty()) {
        Result<ucx::CnDescriptor> d = ucx::CnDescriptor::Decode(v->value);
        if (!d.ok()) return InvalidArgument(key + ": " + d.status().message());
        if (d->cn != cn || d->workers.size() != static_cast<size_t>(config_.workers_per_cn)) {
          return InvalidArgument(key + " describes CN " + std::to_string(d->cn) + " with " +
                                 std::to_string(d->workers.size()) + " workers; the spec says CN " +
                                 std::to_string(cn) + " with " +
                                 std::to_string(config_.workers_per_cn));
        }
        POND_RETURN_IF_ERROR(fabric.AddRemoteCn(*d));
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return Unavailable("CN " + std::to_string(cn) + " did not publish its workers at " + key +
                           " within " + std::to_string(t.peers_wait_ms) + " ms");
      }
      std::this_thread::sleep_for(kPeerPoll);
    }
  }
  return Status::Ok();
}

void ClusterImpl::WithdrawCn() {
  if (coord_ == nullptr || config_.transport.cn < 0) return;
  const auto cn = static_cast<uint16_t>(config_.transport.cn);
  // Best effort: a CN that cannot reach the service any more is withdrawn by its failure.
  (void)cluster::PutOwned(*coord_, cluster::CnKey(config_.transport.cluster, cn), {});
}

}  // namespace pond::txn
