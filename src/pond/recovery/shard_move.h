// ShardMoves: a CN hands shards it manages to another CN for load (Lotus §4.3, pass-by-range
// resharding), through the membership machine's epochs so that the hand-over survives either
// CN or the configuration manager failing midway (Zeus §4's ideas; docs/resharding.md argues it).
// One CN's machine (cn_membership.h) plays both halves:
//
//   - As the holder (Start, Progress, Apply): it stops granting the shards' locks (closes them),
//     waits until none is held in its table, and says so at MoveKey with the move's number — its
//     incarnation's next hand-over, a return (shard_return.h) or a move, one said at a time —
//     and the receiver's incarnation. Until it has said so it may give up
//     (the drain took longer than the bound) and serve them again; once said, only an epoch ends
//     the move: one that made it, or one in which the receiver's incarnation is dead, so that no
//     later epoch can make it.
//   - As configuration manager (Pick): a move is made in the next epoch only if its holder and
//     receiver are alive in the incarnations it names, its number is the holder's next (the
//     configuration counts each CN's moves made: a record read twice is made once), and the
//     holder still manages every shard it lists. The epoch's map gives them to the receiver.
//   - As the receiver: it opens them as it applies that epoch (CnMembership::Apply: a shard from
//     a holder alive before and after was drained there before the CM moved it).
//
// No shard's locks are granted by two CNs: the holder grants none from Start on, unless it gave
// up before saying drained (then no record exists that a CM could act on) or an epoch ruled the
// move out for good; the receiver grants only from the epoch that made the move.
//
// Thread rules: the coordination half's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pond/cluster/directory.h"
#include "pond/cluster/membership.h"
#include "pond/recovery/cn_controls.h"

namespace pond::recovery {

// What this CN's moves did, as their holder.
struct MoveCounts {
  uint64_t made = 0;       // an epoch gave the shards to the receiver
  uint64_t shards = 0;     // in the moves made
  uint64_t given_up = 0;   // not drained within the bound: served here again
  uint64_t cancelled = 0;  // the receiver failed before the move was made
  // From Start to the epoch that made the move, as this CN applied it: how long the shards'
  // locks were granted by nobody.
  uint64_t closed_ns_total = 0, closed_ns_max = 0;
  // When each move was made (the clock of Apply's now_ns), the first kMoveTimesMax of them: a
  // daemon may move shards for days, and the times are for plotting a run.
  std::vector<uint64_t> made_ns;
};
inline constexpr size_t kMoveTimesMax = 4096;

class ShardMoves {
 public:
  // For CN `cn` of cluster `cluster`, whose shard map has `shards` shards; a move not drained
  // `drain_bound_ns` after it started is given up.
  ShardMoves(std::string cluster, uint16_t cn, uint32_t shards, uint64_t drain_bound_ns,
             cluster::ConfigStore& store, CnControls& controls);

  // The holder: closes `shards` (sorted; each managed and open here, which the caller checks) to
  // hand them to CN `to`, alive in `view` (this CN's newest epoch). False, and nothing done, if
  // a move is under way.
  bool Start(const cluster::Configuration& view, std::vector<uint32_t> shards, uint16_t to,
             uint64_t now_ns);
  // The holder, once a period: gives the move up if it is past the bound (at the fourth period
  // past it) and not said yet;
  // otherwise, if `may_say` and no lock in its shards is held here, says it is drained, as
  // hand-over number `seq` (this CN's next: shard_return.h numbers returns alike).
  void Progress(uint64_t now_ns, bool may_say, uint32_t seq);
  // The holder applies epoch `next` (its map `shards`): ends the move if the epoch made it or
  // ruled it out, serving again those shards still here but for any `recovering` names.
  void Apply(const cluster::Configuration& next, const std::vector<uint16_t>& shards,
             uint64_t now_ns, const std::function<bool(uint32_t)>& recovering);

  // The holder's move that epoch `next` makes (its number is within next's count): its receiver
  // and its shards; nullopt if none. Before Apply: an epoch applied after skipping others may
  // give some of them back here already (the receiver failed, or moved them on).
  std::optional<std::pair<uint16_t, std::vector<uint32_t>>> MadeIn(
      const cluster::Configuration& next) const;

  // The CM's half: in `shards` (the map of `next`, decided over `view`), makes every move said
  // whose rules hold (above), counting it in next's `moves`; adds what it did to `what`.
  void Pick(const cluster::Configuration& view, cluster::Configuration* next,
            std::vector<uint16_t>* shards, std::vector<std::string>* what);

  // Shard `s` is closed here to move; any shard is.
  bool Moving(uint32_t s) const;
  bool Moving() const { return move_.has_value(); }
  // A move said and not yet made or called off.
  bool Said() const { return move_.has_value() && move_->said; }
  const MoveCounts& counts() const { return counts_; }

 private:
  struct Move {
    cluster::MoveRecord record;
    uint64_t started_ns = 0;
    // A put of the record was tried and may have landed: the move is no longer this CN's to
    // give up.
    bool said = false;
    bool drained = false;  // the put landed
    int late_looks = 0;    // periods past the drain bound, not drained
  };
  // Serves again the move's shards still managed here, but those `recovering` names.
  void Reopen(const std::vector<uint16_t>& shards, const std::function<bool(uint32_t)>& recovering,
              const std::string& why);

  const std::string cluster_;
  const uint16_t cn_;
  const uint32_t shards_;
  const uint64_t drain_bound_ns_;
  cluster::ConfigStore& store_;
  CnControls& controls_;
  std::optional<Move> move_;
  MoveCounts counts_;
};

}  // namespace pond::recovery
