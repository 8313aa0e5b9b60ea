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
  // and reads go to a replica that is up. Nothing changes while every MN is up.
  void SetDown(MnId mn) {
    down_ |= Bit(mn);
    joining_ &= ~Bit(mn);
    frozen_ &= ~Bit(mn);
  }
  bool IsDown(MnId mn) const { return (down_ >> mn) & 1; }
  uint64_t down_mask() const { return down_; }

  // A restarted MN (docs/recovery.md "MN restart"): while it joins, writes go to it as to any
  // replica up, but nobody reads it (it holds only what was written or copied since it came
  // back) and carves leave its cursors out (they are not yet in step). Frozen: carves for
  // every group it belongs to are refused, while its cursors are brought into step.
  void SetJoining(MnId mn) {
    down_ &= ~Bit(mn);
    joining_ |= Bit(mn);
  }
  void SetFrozen(MnId mn) { frozen_ |= Bit(mn); }
  void SetUp(MnId mn) {
    down_ &= ~Bit(mn);
    joining_ &= ~Bit(mn);
    frozen_ &= ~Bit(mn);
  }
  bool IsJoining(MnId mn) const { return (joining_ >> mn) & 1; }
  bool Readable(MnId mn) const { return ((down_ | joining_) >> mn) & 1 ? false : true; }
  uint64_t joining_mask() const { return joining_; }
  // The cursors a carve uses: those of MNs up and not joining.
  uint64_t carve_skip_mask() const { return down_ | joining_; }
  // Whether carves for the group whose primary is `primary` are refused now.
  bool CarveFrozen(MnId primary) const {
    if (frozen_ == 0) return false;
    for (int i = 0; i < replication_; i++) {
      if ((frozen_ >> ((primary + static_cast<unsigned>(i)) % num_mns_)) & 1) return true;
    }
    return false;
  }

  // The replica a reader uses: the primary while it is readable; else one of the backups that
  // is, chosen by the key so that the down primary's reads spread over them. Every readable
  // replica holds every committed version, since a commit is acknowledged only once every
  // replica up has it, and a joining MN becomes readable only once it holds a copy of all.
  int ReadReplica(uint64_t key) const {
    const uint64_t unreadable = down_ | joining_;
    if (unreadable == 0 || ((unreadable >> Primary(key)) & 1) == 0) return 0;
    int up[kReplicationMax];
    int n = 0;
    for (int i = 1; i < replication_; i++) {
      if (((unreadable >> Replica(key, i)) & 1) == 0) up[n++] = i;
    }
    POND_CHECK_MSG(n > 0, "no replica of a key is readable");
    return up[(HashKey(key, HashUse::kPlacement) >> 32) % static_cast<unsigned>(n)];
  }

 private:
  uint16_t num_mns_;
  int replication_;
  static uint64_t Bit(MnId mn) { return uint64_t{1} << mn; }
  uint64_t down_ = 0;     // bit i: MN i is down
  uint64_t joining_ = 0;  // bit i: MN i is restarted and not yet readable
  uint64_t frozen_ = 0;   // bit i: carves for MN i's groups are refused
};

}  // namespace pond::store
