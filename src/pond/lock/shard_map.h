// ShardMap: which CN manages the locks of each of the 4096 shards (Lotus §4.2).
//
// Every CN and the routing layer consult it. In an embedded cluster all CNs share one instance;
// entries are atomics so a move of a shard (resharding, later) is seen by all readers without a
// lock, and `version` lets a requester tell that the map changed under it. A CN that receives a
// lock request for a shard it does not manage answers WrongShard; the requester re-reads the
// map and retries.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "pond/lock/lock_key.h"

namespace pond::lock {

class ShardMap {
 public:
  // Shards split into `num_cns` contiguous, equal ranges: shard s -> s * num_cns / 4096.
  explicit ShardMap(uint16_t num_cns);

  uint16_t CnOf(uint32_t shard) const { return owner_[shard].load(std::memory_order_acquire); }
  uint16_t CnOf(const LockKey& k) const { return CnOf(k.shard()); }
  // Where the shard starts, and goes back to when its CN restarts.
  uint16_t HomeOf(uint32_t shard) const {
    return static_cast<uint16_t>(uint64_t{shard} * num_cns_ / kShards);
  }
  uint16_t num_cns() const { return num_cns_; }
  uint64_t version() const { return version_.load(std::memory_order_acquire); }

  // Moves one shard to another CN (resharding); bumps the version.
  void Assign(uint32_t shard, uint16_t cn);
  // Every shard's owner as in `other` (a CN's own copy of the map, made when it starts), or as
  // `owners` lists them (an epoch's map, read from the coordination service).
  void CopyFrom(const ShardMap& other);
  void AssignAll(const std::vector<uint16_t>& owners);

 private:
  uint16_t num_cns_;
  std::array<std::atomic<uint16_t>, kShards> owner_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace pond::lock
