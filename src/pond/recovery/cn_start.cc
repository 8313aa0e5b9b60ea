#include "pond/recovery/cn_start.h"

namespace pond::recovery {

Result<std::optional<CnStart>> TryStart(cluster::ConfigStore& store, const StartOptions& o) {
  const std::string key = cluster::ConfigKey(o.cluster);
  for (;;) {
    Result<cluster::Versioned> v = store.Get(key);
    if (!v.ok()) return v.status();
    CnStart start;
    if (v->version == 0) {
      if (o.cn != 0) return Unavailable("no configuration at " + key + " (CN 0 writes it first)");
      if (o.home.size() != o.shards) return InvalidArgument("the home shard map has a wrong size");
      // The cluster's first start: every node alive, the shards at home.
      start.config.epoch = 1;
      start.config.cns.resize(o.cns);
      start.config.mns.resize(o.mns);
      start.shards = o.home;
      POND_RETURN_IF_ERROR(cluster::WriteShardMap(store, o.cluster, 1, start.shards));
      Result<uint64_t> put = store.PutIf(key, start.config.Encode(), 0);
      if (!put.ok() && put.status().code() != Code::kConflict) return put.status();
      if (put.ok()) return std::optional<CnStart>(std::move(start));
      continue;  // someone else wrote it meanwhile: start from theirs
    }
    Result<cluster::Configuration> config = cluster::Configuration::Decode(v->value);
    if (!config.ok()) return Corruption(key + ": " + config.status().message());
    if (config->cns.size() != o.cns || config->mns.size() != o.mns) {
      return InvalidArgument(key + " is for another shape of cluster");
    }
    const cluster::CnStatus status = config->cns[o.cn];
    Result<cluster::Versioned> ran =
        store.Get(cluster::LogsKey(o.cluster, o.cn, status.incarnation));
    if (!ran.ok()) return ran.status();
    // An earlier incarnation still counted alive that ran: it must be declared failed (its beat
    // stopped) and recovered before this one may act.
    if (status.alive && ran->version != 0) return std::optional<CnStart>();
    Result<std::vector<uint16_t>> shards =
        cluster::ReadShardMap(store, o.cluster, config->epoch, o.shards);
    if (!shards.ok()) return shards.status();
    start.config = *std::move(config);
    start.shards = *std::move(shards);
    start.restarted = !status.alive;
    start.incarnation =
        status.alive ? status.incarnation : static_cast<uint16_t>(status.incarnation + 1);
    return std::optional<CnStart>(std::move(start));
  }
}

Status PublishLogs(cluster::ConfigStore& store, const std::string& cluster, uint16_t cn,
                   uint16_t incarnation, const cluster::LogAreas& logs) {
  return cluster::PutOwned(store, cluster::LogsKey(cluster, cn, incarnation), logs.Encode());
}

Status AskToRejoin(cluster::ConfigStore& store, const std::string& cluster, uint16_t cn,
                   uint16_t incarnation) {
  const std::string inc = std::to_string(incarnation);
  const auto* p = reinterpret_cast<const std::byte*>(inc.data());
  return cluster::PutOwned(store, cluster::JoinKey(cluster, cn), {p, p + inc.size()});
}

}  // namespace pond::recovery
