// How a CN joins the membership when it starts, the same for a `pond cn` daemon and a simulated
// CN: what it starts from (the newest epoch, its shard map, its incarnation) and what it tells
// the others (where its logs are; that it asks to be let back in). docs/recovery.md "Processes"
// argues the order: a restarted CN's logs must be findable before anyone may let it in, and it
// may start only once its earlier incarnation is declared failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pond/cluster/directory.h"
#include "pond/cluster/membership.h"
#include "pond/status.h"

namespace pond::recovery {

struct CnStart {
  cluster::Configuration config;  // the newest epoch then
  std::vector<uint16_t> shards;   // that epoch's shard map: the owner of each shard
  uint16_t incarnation = 0;       // this start's: one more than the CN's last
  bool restarted = false;         // an earlier incarnation of this CN ran
};

struct StartOptions {
  std::string cluster;  // its name in the coordination service
  uint16_t cn = 0;
  uint16_t cns = 0, mns = 0;
  uint32_t shards = 0;  // in the shard map
  // The shard map of the cluster's first start (CN 0 writes it): the owner of each shard.
  std::vector<uint16_t> home;
};

// One look at the coordination service: where CN `o.cn` starts from, or nullopt if an earlier
// incarnation of it is still counted alive (it must be declared failed first: look again
// later). CN 0 writes the first configuration, every node alive, if there is none; another CN
// finding none is Unavailable. Errors of the service as they come.
Result<std::optional<CnStart>> TryStart(cluster::ConfigStore& store, const StartOptions& o);

// Where this incarnation's commit logs are, for whoever recovers it: put before it acts.
Status PublishLogs(cluster::ConfigStore& store, const std::string& cluster, uint16_t cn,
                   uint16_t incarnation, const cluster::LogAreas& logs);
// A restarted CN asks to be let back in as `incarnation` (the CM does, once its failure is
// recovered everywhere): put once everything others need to reach it is published.
Status AskToRejoin(cluster::ConfigStore& store, const std::string& cluster, uint16_t cn,
                   uint16_t incarnation);

}  // namespace pond::recovery
