#include "pond/lock/shard_map.h"

#include "pond/base/assert.h"

namespace pond::lock {

ShardMap::ShardMap(uint16_t num_cns) : num_cns_(num_cns) {
  POND_CHECK_MSG(num_cns > 0, "a shard map needs at least one CN");
  for (uint32_t s = 0; s < kShards; s++) {
    // Contiguous equal ranges keep neighbouring shard numbers (e.g. warehouses 1..k) on one CN.
    owner_[s].store(HomeOf(s), std::memory_order_relaxed);
  }
}

void ShardMap::CopyFrom(const ShardMap& other) {
  POND_CHECK(other.num_cns_ == num_cns_);
  std::vector<uint16_t> owners(kShards);
  for (uint32_t s = 0; s < kShards; s++) owners[s] = other.CnOf(s);
  AssignAll(owners);
}

void ShardMap::AssignAll(const std::vector<uint16_t>& owners) {
  POND_CHECK(owners.size() == kShards);
  for (uint32_t s = 0; s < kShards; s++) {
    if (CnOf(s) != owners[s]) Assign(s, owners[s]);
  }
}

void ShardMap::Assign(uint32_t shard, uint16_t cn) {
  POND_CHECK(shard < kShards);
  POND_CHECK(cn < num_cns_);
  // The owner is published before the version moves, so a reader that sees the new version
  // also sees the new owner.
  owner_[shard].store(cn, std::memory_order_release);
  version_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace pond::lock
