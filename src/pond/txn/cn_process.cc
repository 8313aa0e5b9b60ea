#include "pond/txn/cn_process.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "pond/cluster/directory.h"
#include "pond/transport/ucx/ucx_fabric.h"
#include "pond/txn/process_membership.h"
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

Result<ProcessStart> ReadStart(cluster::ConfigStore& store, const ClusterConfig& c) {
  const TransportConfig& t = c.transport;
  const auto me = static_cast<uint16_t>(t.cn);
  const std::string key = cluster::ConfigKey(t.cluster);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(t.peers_wait_ms);
  for (;;) {
    Result<cluster::Versioned> v = store.Get(key);
    if (!v.ok()) return v.status();
    ProcessStart start;
    if (v->version == 0) {
      if (me != 0) return Unavailable("no configuration at " + key + " (CN 0 writes it first)");
      // The cluster's first start: every node alive, the shards in their home ranges.
      start.config.epoch = 1;
      start.config.cns.resize(static_cast<size_t>(c.cns));
      start.config.mns.resize(static_cast<size_t>(c.mns));
      lock::ShardMap home(static_cast<uint16_t>(c.cns));
      for (uint32_t s = 0; s < lock::kShards; s++) start.shards.push_back(home.CnOf(s));
      POND_RETURN_IF_ERROR(cluster::WriteShardMap(store, t.cluster, 1, start.shards));
      Result<uint64_t> put = store.PutIf(key, start.config.Encode(), 0);
      if (!put.ok() && put.status().code() != Code::kConflict) return put.status();
      if (put.ok()) return start;
      continue;  // someone else wrote it meanwhile: start from theirs
    }
    Result<cluster::Configuration> config = cluster::Configuration::Decode(v->value);
    if (!config.ok()) return Corruption(key + ": " + config.status().message());
    if (config->cns.size() != static_cast<size_t>(c.cns) ||
        config->mns.size() != static_cast<size_t>(c.mns)) {
      return InvalidArgument(key + " is for another shape of cluster");
    }
    const cluster::CnStatus status = config->cns[me];
    Result<cluster::Versioned> ran = store.Get(cluster::LogsKey(t.cluster, me, status.incarnation));
    if (!ran.ok()) return ran.status();
    if (status.alive && ran->version != 0) {
      // An earlier process of this CN is still counted alive: it must be declared failed (its
      // beat stopped) and recovered before this one may act.
      if (std::chrono::steady_clock::now() > deadline) {
        return Unavailable("CN " + std::to_string(me) + "'s earlier process was not declared " +
                           "failed within " + std::to_string(t.peers_wait_ms) + " ms");
      }
      std::this_thread::sleep_for(kPeerPoll);
      continue;
    }
    Result<std::vector<uint16_t>> shards = cluster::ReadShardMap(store, t.cluster, config->epoch, lock::kShards);
    if (!shards.ok()) return shards.status();
    start.config = *std::move(config);
    start.shards = *std::move(shards);
    start.restarted = !status.alive;
    start.incarnation =
        status.alive ? status.incarnation : static_cast<uint16_t>(status.incarnation + 1);
    return start;
  }
}

Status ClusterImpl::PublishCn() {
  const auto cn = static_cast<uint16_t>(config_.transport.cn);
  const std::string& name = config_.transport.cluster;
  const ProcessStart& start = *process_start_;
  // Where its logs are, for whoever recovers it: kept after it stops.
  cluster::LogAreas logs;
  for (const auto& w : cns_[cn]->workers) {
    logs.bytes = w->log().bytes();
    logs.areas.push_back(w->log().areas());
  }
  POND_RETURN_IF_ERROR(
      cluster::PutOwned(*coord_, cluster::LogsKey(name, cn, start.incarnation), logs.Encode()));
  Result<ucx::CnDescriptor> d = UcxOf(*fabric_).Describe(cn, start.incarnation);
  if (!d.ok()) return d.status();
  POND_RETURN_IF_ERROR(cluster::PutOwned(*coord_, cluster::CnKey(name, cn), d->Encode()));
  if (!start.restarted) return Status::Ok();
  const std::string inc = std::to_string(start.incarnation);
  const auto* p = reinterpret_cast<const std::byte*>(inc.data());
  return cluster::PutOwned(*coord_, cluster::JoinKey(name, cn), {p, p + inc.size()});
}

Status ClusterImpl::ConnectPeerCns() {
  const TransportConfig& t = config_.transport;
  ucx::UcxFabric& fabric = UcxOf(*fabric_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(t.peers_wait_ms);
  const cluster::Configuration& view = process_start_->config;
  for (int cn = 0; cn < config_.cns; cn++) {
    // A CN the configuration holds failed is reached once it is back (ProcessMembership).
    if (Hosts(static_cast<uint16_t>(cn)) || !view.cns[cn].alive) continue;
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

void ClusterImpl::WithdrawCn() {
  if (coord_ == nullptr || config_.transport.cn < 0) return;
  const auto cn = static_cast<uint16_t>(config_.transport.cn);
  // Best effort: a CN that cannot reach the service any more is withdrawn by its failure.
  (void)cluster::PutOwned(*coord_, cluster::CnKey(config_.transport.cluster, cn), {});
}

}  // namespace pond::txn
