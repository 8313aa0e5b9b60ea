// Where the processes of one cluster find each other: the keys they use in the coordination
// service (ZooKeeper; membership.h's ConfigStore). Every key of a cluster lies under
// /pond/<cluster>, so that one ZooKeeper can hold several clusters. docs/deploy.md lists them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pond/cluster/membership.h"
#include "pond/status.h"
#include "pond/transport/gaddr.h"

namespace pond::cluster {

// Cluster names are path components: letters, digits, '-', '_' and '.', 1 to 64 of them.
inline Status CheckClusterName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") {
    return InvalidArgument("cluster name must be 1 to 64 characters (not . or ..)");
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) {
      return InvalidArgument("cluster name \"" + name + "\" may hold only letters, digits, - _ .");
    }
  }
  return Status::Ok();
}

// Where all of a cluster's keys are: what its secret guards (zk_config_store.h's ZkGuard).
inline std::string ClusterRoot(const std::string& cluster) { return "/pond/" + cluster; }
// The cluster's spec (server/cluster_spec.h): what every daemon agrees on, as JSON.
inline std::string SpecKey(const std::string& cluster) { return "/pond/" + cluster + "/spec"; }
// MN `mn`'s descriptor (docs/formats.md "MN descriptor") while it serves; empty once it stopped.
inline std::string MnKey(const std::string& cluster, uint16_t mn) {
  return "/pond/" + cluster + "/mns/" + std::to_string(mn);
}

// CN `cn`'s descriptor (docs/formats.md "CN descriptor": its workers' UCX addresses) while it
// serves as a `pond cn` daemon; empty once it stopped.
inline std::string CnKey(const std::string& cluster, uint16_t cn) {
  return "/pond/" + cluster + "/cns/" + std::to_string(cn);
}
// Set by CN 0 once the cluster's tables are created and loaded: the other CNs join only then.
inline std::string ReadyKey(const std::string& cluster) { return "/pond/" + cluster + "/ready"; }
// CN `cn`'s client address ("HOST:PORT", text) while it takes clients; empty once it stopped.
inline std::string ClientKey(const std::string& cluster, uint16_t cn) {
  return "/pond/" + cluster + "/clients/" + std::to_string(cn);
}

// The membership (cluster::Configuration, docs/formats.md "Configuration"): changed only by the
// configuration manager's conditional puts (docs/recovery.md "Processes").
inline std::string ConfigKey(const std::string& cluster) {
  return "/pond/" + cluster + "/configuration";
}
// The shard map of epoch `epoch` (docs/formats.md "Shard map"), written before the epoch's
// configuration, which commits it.
inline std::string ShardsKey(const std::string& cluster, uint64_t epoch) {
  return "/pond/" + cluster + "/shards/" + std::to_string(epoch);
}
// Where CN `cn`'s incarnation `incarnation` keeps its commit logs (docs/formats.md "Log areas"):
// what a survivor recovers when it fails.
inline std::string LogsKey(const std::string& cluster, uint16_t cn, uint16_t incarnation) {
  return "/pond/" + cluster + "/logs/" + std::to_string(cn) + "." + std::to_string(incarnation);
}
// A step of the recovery from CN `failed`'s failure, declared by epoch `epoch` (which may declare
// several), done by `who` (a log's worker for "recovered", a CN for "released", "drained",
// "opened"); empty value.
inline std::string FailureStepKey(const std::string& cluster, uint64_t epoch, uint16_t failed,
                                  const std::string& step, uint16_t who) {
  return "/pond/" + cluster + "/failures/" + std::to_string(epoch) + "/cn" +
         std::to_string(failed) + "/" + step + "/" + std::to_string(who);
}
// CN `who` reads MN `mn`'s incarnation `incarnation`, declared failed, no more; empty value. (By
// incarnation, not epoch: an MN fails once per incarnation, and a CN that hears the declaring
// epoch late, or starts after it, says so all the same.)
inline std::string MnUnreadKey(const std::string& cluster, uint16_t mn, uint16_t incarnation,
                               uint16_t who) {
  return "/pond/" + cluster + "/failures/mn" + std::to_string(mn) + "." +
         std::to_string(incarnation) + "/unread/" + std::to_string(who);
}
// Holder `holder` has closed the shards it held for CN `cn`, whose home they are, and no lock in
// them is held in its table: the CM may give them back to `cn`'s incarnation `incarnation`.
// The value lists them (EncodeShardList): only those go back, not every shard of `cn`'s home
// the holder holds (one moved to it by a later failure is still served there).
inline std::string ReturnKey(const std::string& cluster, uint16_t cn, uint16_t incarnation,
                             uint16_t holder) {
  return "/pond/" + cluster + "/returns/" + std::to_string(cn) + "." + std::to_string(incarnation) +
         "/" + std::to_string(holder);
}
// CN `holder`'s shard move, the one under way or the last (recovery/shard_move.h): a MoveRecord.
// One key per CN, overwritten by its next move; the record names the incarnation that wrote it.
inline std::string MoveKey(const std::string& cluster, uint16_t holder) {
  return "/pond/" + cluster + "/moves/" + std::to_string(holder);
}
// A restarted CN asks to be let back in as incarnation (the value, decimal text).
inline std::string JoinKey(const std::string& cluster, uint16_t cn) {
  return "/pond/" + cluster + "/joins/" + std::to_string(cn);
}
// A restarted MN, its memory blank and laid out, asks to rejoin as incarnation (the value,
// decimal text).
inline std::string MnJoinKey(const std::string& cluster, uint16_t mn) {
  return "/pond/" + cluster + "/mn-joins/" + std::to_string(mn);
}
// A step of MN `mn`'s rejoin as incarnation `incarnation` (recovery/mn_rejoin.h), done by CN
// `who`; empty value.
inline std::string MnRejoinStepKey(const std::string& cluster, uint16_t mn, uint16_t incarnation,
                                   const std::string& step, uint16_t who) {
  return "/pond/" + cluster + "/mn-rejoins/" + std::to_string(mn) + "." +
         std::to_string(incarnation) + "/" + step + "/" + std::to_string(who);
}

// Puts `value` at `key` whatever its version is: for a key only its writer owns (a daemon's
// descriptor).
inline Status PutOwned(ConfigStore& store, const std::string& key,
                       std::span<const std::byte> value) {
  for (int attempt = 0; attempt < 5; attempt++) {
    Result<Versioned> now = store.Get(key);
    if (!now.ok()) return now.status();
    Result<uint64_t> put = store.PutIf(key, value, now->version);
    if (put.ok() || put.status().code() != Code::kConflict) return put.status();
  }
  return Conflict("someone else keeps writing " + key);
}

// Where one CN incarnation's workers keep their commit logs (docs/formats.md "Log areas"), as
// it publishes them at LogsKey: by worker, its areas (one per MN), each `bytes` long.
struct LogAreas {
  uint64_t bytes = 0;
  std::vector<std::vector<GAddr>> areas;

  std::vector<std::byte> Encode() const;
  static Result<LogAreas> Decode(std::span<const std::byte> in);
};
Result<LogAreas> ReadLogAreas(ConfigStore& store, const std::string& cluster, uint16_t cn,
                              uint16_t incarnation);

// A set of shards, as ReturnKey's value (docs/formats.md "Shard map"): ascending ids, each
// below `shards`; Corruption for anything else.
std::vector<std::byte> EncodeShardList(const std::vector<uint32_t>& ids);
Result<std::vector<uint32_t>> DecodeShardList(std::span<const std::byte> in, uint32_t shards);

// What a holder says at MoveKey (docs/formats.md "Shard moves"): its incarnation's move number
// `seq` hands `shards` (closed and drained there) to CN `to`'s incarnation `to_incarnation`.
struct MoveRecord {
  uint32_t seq = 0;
  uint16_t incarnation = 0;
  uint16_t to = 0;
  uint16_t to_incarnation = 0;
  std::vector<uint32_t> shards;  // ascending

  std::vector<std::byte> Encode() const;
  // Corruption naming what does not parse; shards must be below `shards`.
  static Result<MoveRecord> Decode(std::span<const std::byte> in, uint32_t shards);
  friend bool operator==(const MoveRecord&, const MoveRecord&) = default;
};

// The shard map of an epoch (docs/formats.md "Shard map": the owner of each of `shards` shards,
// u16 each).
Status WriteShardMap(ConfigStore& store, const std::string& cluster, uint64_t epoch,
                     const std::vector<uint16_t>& owners);
Result<std::vector<uint16_t>> ReadShardMap(ConfigStore& store, const std::string& cluster,
                                           uint64_t epoch, size_t shards);

}  // namespace pond::cluster
