// Placement: which MNs hold a key. Every CN computes it from the key alone, so no directory is
// consulted: the primary is a hash of the key, and the R-1 backups are the next MNs in id order.
// Replicas are distinct MNs, so R may not exceed the number of MNs.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "pond/base/assert.h"
#include "pond/base/hash.h"
#include "pond/base/node_set.h"
#include "pond/transport/gaddr.h"

namespace pond::store {

inline constexpr int kReplicationMax = 8;

// How often a writer whose round an MN did not answer looks whether that MN has been declared
// down (a commit's round, a B+Tree write-back).
inline constexpr uint64_t kUnreachablePollNs = 10'000;
// How often it posts that round to the MN again meanwhile: beyond a link that was down, the MN
// answers it once the link is back, and it may never be declared. Longer than the transport
// takes to give up on an MN (SimFabric::kMnUnreachableNs), so the MNs really out are not sent a
// stream of rounds.
inline constexpr uint64_t kPostAgainEveryNs = 1'000'000;

// A mask of MNs that one thread changes while the workers of a CN of a cluster of processes read
// it (its membership thread hears an MN's failure): relaxed atomics, for a change needs no order
// with anything else — an MN is declared only once nobody may still count on it.
// 64 bits: only the membership machine declares MNs down, joining or frozen, and it runs on at
// most kMembershipNodesMax (64) MNs (include/pond/cluster.h; the lease page's masks). A larger
// cluster has every MN up for good, and its MNs at 64 and above read as up (Has).
class MnMask {
 public:
  MnMask() = default;
  MnMask(const MnMask& o) : bits_(o.get()) {}
  MnMask& operator=(const MnMask& o) {
    bits_.store(o.get(), std::memory_order_relaxed);
    return *this;
  }
  uint64_t get() const { return bits_.load(std::memory_order_relaxed); }
  operator uint64_t() const { return get(); }
  MnMask& operator|=(uint64_t b) {
    bits_.fetch_or(b, std::memory_order_relaxed);
    return *this;
  }
  MnMask& operator&=(uint64_t b) {
    bits_.fetch_and(b, std::memory_order_relaxed);
    return *this;
  }

 private:
  std::atomic<uint64_t> bits_{0};
};

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
    rejoining_ &= ~Bit(mn);
    Changed();
  }
  bool IsDown(MnId mn) const { return Has(down_.get(), mn); }
  uint64_t down_mask() const { return down_.get(); }

  // A restarted MN (docs/recovery.md "MN restart"): while it joins, writes go to it as to any
  // replica up, but nobody reads it (it holds only what was written or copied since it came
  // back) and carves leave its cursors out (they are not yet in step). Frozen: carves for
  // every group it belongs to are refused, while its cursors are brought into step.
  // Joining also stands for leaving (declared, written still and read no more): both are
  // written and not read. Rejoining is the restarted one alone, whose cells until its copy ends
  // may be anything a CN wrote into it (log recovery lets them decide nothing).
  void SetJoining(MnId mn) {
    down_ &= ~Bit(mn);
    joining_ |= Bit(mn);
    rejoining_ &= ~Bit(mn);
    Changed();
  }
  void SetRejoining(MnId mn) {
    SetJoining(mn);
    rejoining_ |= Bit(mn);
  }
  void SetFrozen(MnId mn) { frozen_ |= Bit(mn); }
  void SetUp(MnId mn) {
    down_ &= ~Bit(mn);
    joining_ &= ~Bit(mn);
    frozen_ &= ~Bit(mn);
    rejoining_ &= ~Bit(mn);
    Changed();
  }
  // Moves on after every change of who is down, joining or up (after the change, so that a reader
  // that sees the old number may have seen old or new masks, and one that sees it unchanged
  // later knows no MN went down or came back between): a B+Tree lock holder that sees it moved
  // releases its words by CAS, as one of them may be on an MN that came back blank meanwhile.
  uint64_t generation() const { return generation_.load(std::memory_order_seq_cst); }
  bool IsJoining(MnId mn) const { return Has(joining_.get(), mn); }
  bool IsRejoining(MnId mn) const { return Has(rejoining_.get(), mn); }
  bool Readable(MnId mn) const { return !Has(down_.get() | joining_.get(), mn); }
  uint64_t joining_mask() const { return joining_.get(); }
  // Declared failed, written still and read no more (joining, and not as a restarted MN).
  uint64_t leaving_mask() const { return joining_.get() & ~rejoining_.get(); }
  bool IsLeaving(MnId mn) const { return Has(leaving_mask(), mn); }
  // The cursors a carve uses: those of MNs up and not joining.
  uint64_t carve_skip_mask() const { return down_.get() | joining_.get(); }
  // Whether carves for the group whose primary is `primary` are refused now.
  bool CarveFrozen(MnId primary) const {
    const uint64_t frozen = frozen_.get();
    if (frozen == 0) return false;
    for (int i = 0; i < replication_; i++) {
      if (Has(frozen, static_cast<MnId>((primary + static_cast<unsigned>(i)) % num_mns_)))
        return true;
    }
    return false;
  }

  // The replica a reader uses: the primary while it is readable; else one of the backups that
  // is, chosen by the key so that the down primary's reads spread over them. Every readable
  // replica holds every committed version, since a commit is acknowledged only once every
  // replica up has it, and a joining MN becomes readable only once it holds a copy of all.
  int ReadReplica(uint64_t key) const {
    const uint64_t unreadable = down_.get() | joining_.get();
    if (unreadable == 0 || !Has(unreadable, Primary(key))) return 0;
    int up[kReplicationMax];
    int n = 0;
    for (int i = 1; i < replication_; i++) {
      if (!Has(unreadable, Replica(key, i))) up[n++] = i;
    }
    POND_CHECK_MSG(n > 0, "no replica of a key is readable");
    return up[(HashKey(key, HashUse::kPlacement) >> 32) % static_cast<unsigned>(n)];
  }

  // With lock words on MNs (motor, ford, the ablation steps before +lock-sharding) a key's words
  // live on one replica, and every access to the key — its readers watch the words its writers
  // take — goes to that one: the replica readers use (ReadReplica), so that a down primary's
  // words spread over its backups as its reads do. -1 while they may change hands, which a
  // transaction takes as an MN that did not answer (docs/recovery.md "Lock words on MNs, and an
  // MN crash"): the primary is not readable and a replica of the key is leaving (its keys' words
  // move once every transaction that could hold one there has ended), or is a restarted one
  // from its freeze until it is read (they move back once every transaction that could hold one
  // where they were has ended). A primary that is readable keeps its words.
  int LockReplica(uint64_t key) const {
    const uint64_t unreadable = down_.get() | joining_.get();
    if (unreadable == 0 || !Has(unreadable, Primary(key))) return 0;
    const uint64_t rejoining = rejoining_.get();
    const uint64_t handing = (joining_.get() & ~rejoining) | (rejoining & frozen_.get());
    for (int i = 0; i < replication_; i++) {
      if (Has(handing, Replica(key, i))) return -1;
    }
    return ReadReplica(key);
  }

 private:
  uint16_t num_mns_;
  int replication_;
  static uint64_t Bit(MnId mn) {
    POND_CHECK_MSG(mn < 64, "MN masks hold 64 MNs: the membership machine's limit");
    return uint64_t{1} << mn;
  }
  static bool Has(uint64_t mask, MnId mn) { return mn < 64 && ((mask >> mn) & 1) != 0; }
  void Changed() { generation_.fetch_add(1, std::memory_order_seq_cst); }
  // Copyable as the masks are (a snapshot of the count).
  struct Generation : std::atomic<uint64_t> {
    Generation() : std::atomic<uint64_t>(0) {}
    Generation(const Generation& o) : std::atomic<uint64_t>(o.load()) {}
    Generation& operator=(const Generation& o) {
      store(o.load());
      return *this;
    }
  };
  Generation generation_;
  MnMask down_;       // bit i: MN i is down
  MnMask joining_;    // bit i: MN i is restarted and not yet readable
  MnMask frozen_;     // bit i: carves for MN i's groups are refused
  MnMask rejoining_;  // bit i: MN i is joining as a restarted MN (not leaving)
};

}  // namespace pond::store
