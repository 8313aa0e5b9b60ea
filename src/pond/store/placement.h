// Placement: which MNs hold a key. Every CN computes it from the key alone, so no directory is
// consulted: the primary is a hash of the key, and the R-1 backups are the next MNs in id order.
// Replicas are distinct MNs, so R may not exceed the number of MNs.
#pragma once

#include <array>
#include <cstdint>

#include "pond/base/assert.h"
#include "pond/base/hash.h"
#include "pond/transport/gaddr.h"

namespace pond::store {

inline constexpr int kReplicationMax = 8;

class Placement {
 public:
  Placement(uint16_t num_mns, int replication) : num_mns_(num_mns), replication_(replication) {
    POND_CHECK(num_mns > 0 && replication >= 1 && replication <= num_mns &&
               replication <= kReplicationMax);
  }

  MnId Primary(uint64_t key) const {
    return static_cast<MnId>(HashKey(key, HashUse::kPlacement) % num_mns_);
  }
  // The i-th replica of a key; replica 0 is the primary.
  MnId Replica(uint64_t key, int i) const {
    POND_ASSERT(i >= 0 && i < replication_);
    return static_cast<MnId>((Primary(key) + static_cast<unsigned>(i)) % num_mns_);
  }

  uint16_t num_mns() const { return num_mns_; }
  int replication() const { return replication_; }

 private:
  uint16_t num_mns_;
  int replication_;
};

}  // namespace pond::store
