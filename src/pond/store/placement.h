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

  // MNs declared failed (an epoch of the configuration, cluster/membership.h): writes skip them
  // and reads go to the first replica that is up. Nothing changes while every MN is up.
  void SetDown(MnId mn) { down_ |= uint64_t{1} << mn; }
  bool IsDown(MnId mn) const { return (down_ >> mn) & 1; }
  uint64_t down_mask() const { return down_; }
  // The replica a reader uses: the primary while it is up; else one of the backups up, chosen
  // by the key so that the down primary's reads spread over them. Every replica up holds every
  // committed version, since a commit is acknowledged only once every replica up has it.
  int ReadReplica(uint64_t key) const {
    if (down_ == 0 || !IsDown(Primary(key))) return 0;
    int up[kReplicationMax];
    int n = 0;
    for (int i = 1; i < replication_; i++) {
      if (!IsDown(Replica(key, i))) up[n++] = i;
    }
    POND_CHECK_MSG(n > 0, "every replica of a key is down");
    return up[(HashKey(key, HashUse::kPlacement) >> 32) % static_cast<unsigned>(n)];
  }

 private:
  uint16_t num_mns_;
  int replication_;
  uint64_t down_ = 0;  // bit i: MN i is down
};

}  // namespace pond::store
