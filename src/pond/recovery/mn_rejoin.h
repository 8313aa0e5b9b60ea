// MnRejoins: a restarted MN brought back by the membership machine (cn_membership.h), as one CN
// takes part — and, on the configuration manager (CM), the epochs that move each rejoin on
// (docs/recovery.md "MN restart"). The MN comes back blank, laid out from the catalog, and asks
// to rejoin as its next incarnation (cluster/directory.h MnJoinKey). Then each rejoin is a run of
// epochs (cluster::MnStatus::Rejoin); in each, every CN alive does its part and says so by a key
// (MnRejoinStepKey), and the CM moves on once every CN alive has:
//
//   kCopying   written by every commit, read by none, its cursors skipped by carves. Each CN waits
//              until the transactions it ran before the epoch have ended ("joined"): from then on
//              every write to a key reaches the MN. Once every CN has, each copies its share of
//              the MN's buckets under the keys' locks (node/rereplication.h says why that is
//              exact); the shares are dealt over the CNs alive, and dealt again, and copied again,
//              when that set changes ("copied.<the CNs alive>").
//   kFrozen    carves for its groups are refused as well; each CN waits until its transactions
//              from before have ended ("frozen"); then the CM sets the MN's lane cursors
//              ("synced").
//   kGated     each CN holds its commits before their write-visible rounds and says so once none
//              is between them ("gated").
//   kSwitched  each CN reads the MN like any replica, its commits still held ("switched"). CNs
//              hear an epoch at different times, and a commit between its two rounds while they
//              disagree on which replica is read could show a reader a timestamp that another
//              replica lacks (MvccTxn::Commit): these two epochs leave no such commit anywhere.
//   kNone      commits go on; the MN is up.
//
// Every step is idempotent, and a CN that starts (or is let in) mid-rejoin has no transaction
// from before: its steps are done at once. An MN that fails again mid-rejoin is declared as any
// MN is (the rejoin is abandoned; its gates open).
//
// Thread rules: the coordination half's thread (cn_membership.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pond/cluster/membership.h"
#include "pond/recovery/cn_controls.h"

namespace pond::recovery {

class MnRejoins {
 public:
  MnRejoins(std::string cluster, uint16_t cn, cluster::ConfigStore& store, CnControls& controls)
      : cluster_(std::move(cluster)), cn_(cn), store_(store), controls_(controls) {}

  // This CN starts from (or is let in at) `view`: its part in each rejoin `view` names, with no
  // transaction from before.
  void Start(const cluster::Configuration& view);
  // Epoch `next` follows `view` here: what each MN's new rejoin state asks of this CN (its
  // placement and gate) before the workers take the epoch.
  void Apply(const cluster::Configuration& view, const cluster::Configuration& next);
  // Once a period, on the newest epoch applied: this CN's part in each rejoin.
  void Progress(const cluster::Configuration& view);
  // The CM's part: a rejoin whose step every CN alive in `view` has done moves on in `next`; a
  // restarted MN that asked is let in (returned, so that its lease counts from now).
  std::vector<uint16_t> Pick(const cluster::Configuration& view, cluster::Configuration* next,
                             std::vector<std::string>* what);

  // This CN holds its commits for a rejoin now (gated or switched): its driver may poll the
  // service more often meanwhile, to hold them for less.
  bool Holding() const;

  // Buckets per copy unit: small enough to spread over the CNs, large enough that dealing them
  // costs nothing.
  static constexpr uint64_t kCopyUnitBuckets = 32;
  // B+Tree lines (nodes) per copy unit of an ordered table's tree.
  static constexpr uint64_t kCopyUnitLines = 256;

 private:
  using State = cluster::MnStatus::Rejoin;
  struct Part {
    uint16_t incarnation = 0;
    State state = State::kNone;
    std::vector<uint64_t> mark;  // the transactions from before the state's epoch
    bool done = false;           // this CN's step of the state is put
    std::string copy_step;       // the "copied" step being copied for, or copied ("": none)
    bool copy_put = false;
    bool syncing = false;  // the CM's sync of the cursors, started here
  };

  void Enter(uint16_t mn, const cluster::MnStatus& m, bool fresh);
  // Closes this CN's visible gate while some rejoin is gated or switched, else opens it.
  void Gate();
  // The "copied" step of the CNs alive in `view`: the share it copies is dealt over them.
  static std::string CopyStep(const cluster::Configuration& view);
  std::vector<CopyUnit> Share(const cluster::Configuration& view) const;
  std::string Key(uint16_t mn, uint16_t incarnation, const std::string& step, uint16_t who) const;
  Status Put(uint16_t mn, const Part& p, const std::string& step);
  bool DoneByAll(const cluster::Configuration& view, uint16_t mn, uint16_t incarnation,
                 const std::string& step) const;

  const std::string cluster_;
  const uint16_t cn_;
  cluster::ConfigStore& store_;
  CnControls& controls_;
  std::map<uint16_t, Part> parts_;  // by MN: rejoins under way as this CN sees them
};

}  // namespace pond::recovery
