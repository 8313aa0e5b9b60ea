// Membership: which CNs are alive, in which incarnation, under which epoch; and where that
// configuration is kept — a coordination service written only by conditional puts (FaRM,
// SOSP'15 §5: the configuration lives in a coordination service and changes once per
// reconfiguration; failures are found by Pond's own short leases, not the service's).
//
// ConfigStore is the coordination service's interface (get, conditional put, watch). The
// simulator's stand-in, InMemoryConfigStore, keeps versions as ZooKeeper's znodes do (the daemons'
// store is ZooKeeper itself: zk_config_store.h):
// a put names the version it read and fails with Conflict if anyone wrote since, so of two
// would-be configuration managers exactly one wins a reconfiguration.
//
// Thread rules: plain values; an InMemoryConfigStore is single-threaded (the simulator's thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pond/status.h"
#include "pond/store/placement.h"

namespace pond::cluster {

struct CnStatus {
  bool alive = true;
  uint16_t incarnation = 0;  // one more at each restart; packets carry it
  // Not alive: the epoch that declared this incarnation failed, whose steps (directory.h
  // FailureStepKey) every CN alive takes part in, those that join later too (0: unknown, as in a
  // configuration of the simulator's model). 0 while alive.
  uint64_t failed_epoch = 0;
  // The shard moves off this incarnation that epochs have made (recovery/shard_move.h): a
  // holder's next move is number moves + 1, and the CM makes a move only if it is that one, so
  // that a move said once is made at most once (a later move back must be drained anew).
  uint32_t moves = 0;
  friend bool operator==(const CnStatus&, const CnStatus&) = default;
};

struct MnStatus {
  // A restarted MN rejoins in steps (docs/recovery.md "MN restart"): it takes writes while its
  // replicas are copied to it (kCopying), then carves for its groups stop while its lane cursors
  // are brought into step (kFrozen); then it is up (kNone) and read like any replica. Among CN
  // daemons, which hear epochs at different times, two more come between: every CN holds its
  // commits before their write-visible rounds (kGated), then every CN reads the MN, still
  // holding them (kSwitched) — no commit is between those rounds while CNs disagree on which
  // replica is read.
  enum class Rejoin : uint8_t { kNone = 0, kCopying = 1, kFrozen = 2, kGated = 3, kSwitched = 4 };
  bool alive = true;
  Rejoin rejoin = Rejoin::kNone;  // kNone unless alive
  // Declared failed in a cluster of processes, where CNs hear epochs at different times
  // (docs/recovery.md "Processes"): still written by every CN, read by none, until every CN has
  // stopped reading it; then an epoch marks it not alive and writes skip it. Only when alive
  // and not rejoining.
  bool leaving = false;
  // One more at each restart (the replacement's blank memory): a restart asks to rejoin as the
  // next one (directory.h MnJoinKey).
  uint16_t incarnation = 0;
  // Whether every CM reads its lease page and every CN its replicas: not down, not leaving, not
  // rejoining before it is read. At most R-1 MNs are otherwise (CnMembership::Manage).
  bool ReadByAll() const {
    return alive && !leaving && (rejoin == Rejoin::kNone || rejoin == Rejoin::kSwitched);
  }
  friend bool operator==(const MnStatus&, const MnStatus&) = default;
};
// One epoch of the cluster's membership. Encoded as docs/formats.md "Configuration".
// How many MNs must take a CN's beat for it to renew its lease without the coordination
// service's word (docs/recovery.md "Fencing"): R, or a strict majority of the MNs if that is
// fewer. A CM declares a CN only after reading, since the lease could have run, every MN it must
// read and at least `mns - LeaseQuorum + 1` MNs: one of them took any such beat.
inline int LeaseQuorum(int mns, int replication) {
  return replication < mns / 2 + 1 ? replication : mns / 2 + 1;
}

struct Configuration {
  uint64_t epoch = 0;
  std::vector<CnStatus> cns;
  std::vector<MnStatus> mns;
  uint16_t tso_host = 0;  // the CN whose oracle grants timestamps (moves when it fails)
  friend bool operator==(const Configuration&, const Configuration&) = default;

  std::vector<std::byte> Encode() const;
  // Corruption naming what does not parse.
  static Result<Configuration> Decode(std::span<const std::byte> bytes);
  // The CNs alive, in id order.
  std::vector<uint16_t> Alive() const;
  // Whether a worker holding this view takes a packet from CN `cn` stamped with the sender's
  // `incarnation`: only from a CN alive in the view, and from its current incarnation — a failed
  // incarnation's packets, late on the wire or sent by a process that does not know it was
  // declared dead, must act on nothing. A CN the view does not know yet (beyond its size) is
  // taken.
  bool AcceptsPacketFrom(uint16_t cn, uint16_t incarnation) const;
};

struct Versioned {
  std::vector<std::byte> value;
  uint64_t version = 0;  // 0: the key does not exist
};

class ConfigStore {
 public:
  virtual ~ConfigStore() = default;
  // The key's value and version (version 0: it does not exist), or Unavailable when the service
  // cannot be reached.
  virtual Result<Versioned> Get(const std::string& key) const = 0;
  // Writes `value` if the key's version is still `expected` (0: the key must not exist);
  // returns the new version, or Conflict if someone wrote in between. Unavailable: nothing was
  // written. Unknown: the service was lost mid-put, which may or may not have happened (Get
  // says which).
  virtual Result<uint64_t> PutIf(const std::string& key, std::span<const std::byte> value,
                                 uint64_t expected) = 0;
  // Calls `fn` with the newest value and version after puts of `key`. Versions only grow, but
  // puts in quick succession may reach `fn` as one (ZooKeeper's watches fire once and are set
  // again), so `fn` must not count on seeing every version.
  virtual void Watch(const std::string& key, std::function<void(const Versioned&)> fn) = 0;
};

class InMemoryConfigStore final : public ConfigStore {
 public:
  Result<Versioned> Get(const std::string& key) const override;
  Result<uint64_t> PutIf(const std::string& key, std::span<const std::byte> value,
                         uint64_t expected) override;
  void Watch(const std::string& key, std::function<void(const Versioned&)> fn) override;
  uint64_t puts() const { return puts_; }

 private:
  std::map<std::string, Versioned> data_;
  std::multimap<std::string, std::function<void(const Versioned&)>> watches_;
  uint64_t puts_ = 0;
};

inline constexpr const char* kConfigKey = "/pond/configuration";

// A key is an absolute path, as ZooKeeper's znodes are: "/pond/configuration". InvalidArgument
// naming it otherwise; every ConfigStore refuses other keys alike.
Status CheckConfigKey(const std::string& key);

// A CN starting from configuration `c` (or following it) marks in its placement `p` the MNs `c`
// names failed: down ones are skipped, leaving ones (declared, not yet down) written still and
// read no more, rejoining ones as their state says (recovery/mn_rejoin.h), the others up — as
// CnMembership::Apply does epoch by epoch.
inline void ApplyMnStates(const Configuration& c, store::Placement& p) {
  using R = MnStatus::Rejoin;
  for (uint16_t mn = 0; mn < c.mns.size(); mn++) {
    const MnStatus& m = c.mns[mn];
    if (!m.alive) {
      p.SetDown(mn);
    } else if (m.leaving) {
      p.SetJoining(mn);
    } else if (m.rejoin == R::kCopying) {
      p.SetRejoining(mn);
    } else if (m.rejoin == R::kFrozen || m.rejoin == R::kGated) {
      p.SetRejoining(mn);
      p.SetFrozen(mn);
    } else {
      p.SetUp(mn);  // up, or back from a rejoin (a copy that follows epochs, as the simulator's)
    }
  }
}

}  // namespace pond::cluster
