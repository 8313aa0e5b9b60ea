#include "pond/deploy/cn_process.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "pond/cluster/directory.h"
#include "pond/deploy/process_membership.h"
#include "pond/lock/shard_map.h"
#include "pond/node/worker_context.h"
#include "pond/recovery/cn_start.h"
#include "pond/transport/ucx/ucx_fabric.h"

namespace pond::deploy {

using node::ClusterImpl;

namespace {

// How often a CN looks again for peers that have not published yet.
constexpr auto kPeerPoll = std::chrono::milliseconds(20);
// How often a restarted CN looks whether it was let back in.
constexpr auto kAlivePoll = std::chrono::milliseconds(5);

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
  auto store = cluster::ZkConfigStore::Connect(
      t.coord, cluster::ZkGuard{cluster::ClusterRoot(t.cluster), t.coord_secret});
  if (store.status().code() == Code::kPermissionDenied) return store.status();
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

Result<recovery::CnStart> ReadStart(cluster::ConfigStore& store, const ClusterConfig& c) {
  const TransportConfig& t = c.transport;
  recovery::StartOptions o{.cluster = t.cluster,
                           .cn = static_cast<uint16_t>(t.cn),
                           .cns = static_cast<uint16_t>(c.cns),
                           .mns = static_cast<uint16_t>(c.mns),
                           .shards = lock::kShards};
  lock::ShardMap home(static_cast<uint16_t>(c.cns));
  for (uint32_t s = 0; s < lock::kShards; s++) o.home.push_back(home.CnOf(s));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(t.peers_wait_ms);
  for (;;) {
    Result<std::optional<recovery::CnStart>> start = recovery::TryStart(store, o);
    if (!start.ok()) return start.status();
    if (start->has_value()) return **std::move(start);
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("CN " + std::to_string(o.cn) + "'s earlier process was not declared " +
                         "failed within " + std::to_string(t.peers_wait_ms) + " ms");
    }
    std::this_thread::sleep_for(kPeerPoll);
  }
}

UcxCnProcess::UcxCnProcess(ClusterImpl& cl, std::unique_ptr<cluster::ZkConfigStore> coord)
    : cl_(cl), config_(cl.config()), coord_(std::move(coord)) {}

UcxCnProcess::~UcxCnProcess() { StopMembership(); }

Status UcxCnProcess::Publish() {
  const auto cn = static_cast<uint16_t>(config_.transport.cn);
  const std::string& name = config_.transport.cluster;
  const recovery::CnStart& start = *cl_.process_start();
  // Where its logs are, for whoever recovers it: kept after it stops.
  cluster::LogAreas logs;
  for (const auto& w : cl_.cn_context(cn).workers) {
    logs.bytes = w->log().bytes();
    logs.areas.push_back(w->log().areas());
  }
  POND_RETURN_IF_ERROR(recovery::PublishLogs(*coord_, name, cn, start.incarnation, logs));
  Result<ucx::CnDescriptor> d = UcxOf(cl_.fabric()).Describe(cn, start.incarnation);
  if (!d.ok()) return d.status();
  POND_RETURN_IF_ERROR(cluster::PutOwned(*coord_, cluster::CnKey(name, cn), d->Encode()));
  if (!start.restarted) return Status::Ok();
  return recovery::AskToRejoin(*coord_, name, cn, start.incarnation);
}

Status UcxCnProcess::ConnectPeers() {
  const TransportConfig& t = config_.transport;
  ucx::UcxFabric& fabric = UcxOf(cl_.fabric());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(t.peers_wait_ms);
  const cluster::Configuration& view = cl_.process_start()->config;
  for (int cn = 0; cn < config_.cns; cn++) {
    // A CN the configuration holds failed is reached once it is back (ProcessMembership).
    if (cl_.Hosts(static_cast<uint16_t>(cn)) || !view.cns[cn].alive) continue;
    const std::string key = cluster::CnKey(t.cluster, static_cast<uint16_t>(cn));
    for (;;) {
      Result<cluster::Versioned> v = coord_->Get(key);
      if (!v.ok()) return v.status();
      if (!v->value.empty()) {
        Result<ucx::CnDescriptor> d = ucx::CnDescriptor::Decode(v->value);
        if (!d.ok()) return InvalidArgument(key + ": " + d.status().message());
        if (d->incarnation != view.cns[cn].incarnation) {
          // Its earlier process's: the new one has not published yet.
          if (std::chrono::steady_clock::now() > deadline) {
            return Unavailable("CN " + std::to_string(cn) + " did not publish incarnation " +
                               std::to_string(view.cns[cn].incarnation) + " within " +
                               std::to_string(t.peers_wait_ms) + " ms");
          }
          std::this_thread::sleep_for(kPeerPoll);
          continue;
        }
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

Status UcxCnProcess::StartMembership() {
  membership_ = std::make_unique<ProcessMembership>(cl_, *coord_);
  membership_->Start();
  // A restarted CN serves once it is let back in (its failure recovered everywhere).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.transport.peers_wait_ms);
  while (!membership_->alive()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("this CN was not let back into the cluster within " +
                         std::to_string(config_.transport.peers_wait_ms) + " ms");
    }
    std::this_thread::sleep_for(kAlivePoll);
  }
  return Status::Ok();
}

void UcxCnProcess::PauseCoordination() {
  if (membership_ != nullptr) membership_->PauseCoordination();
}

void UcxCnProcess::Leave() {
  if (membership_ != nullptr) membership_->Leave();
}

void UcxCnProcess::StopMembership() {
  if (membership_ == nullptr) return;
  membership_->Stop();
  membership_.reset();
}

void UcxCnProcess::Withdraw() {
  const auto cn = static_cast<uint16_t>(config_.transport.cn);
  // Best effort: a CN that cannot reach the service any more is withdrawn by its failure.
  (void)cluster::PutOwned(*coord_, cluster::CnKey(config_.transport.cluster, cn), {});
}

}  // namespace pond::deploy
