// LoadPolicy: when a CN hands a shard away for load (Lotus §4.3, pass-by-range resharding), as
// one CN's membership machine judges it at the end of each interval:
//
//   - Each CN measures the mean latency of the transactions it committed in the interval and
//     publishes it in the memory pool (its lease page entry, written with its beats), where
//     every CN reads every other's.
//   - A CN whose latency is more than `over` times the mean over the CNs alive (itself included)
//     for `intervals` intervals in a row is overloaded: it hands its hottest shards — by the
//     lock requests it took for each in the last interval — to the CN with the lowest latency
//     (shard_move.h), as one range: the hottest first, until they carry the share of its
//     requests that would even its latency and the receiver's, (own - theirs) / (2 * own).
//   - The CN hosting the timestamp oracle is never the receiver. Its own transactions take their
//     timestamps locally, so it looks the coolest; but every CN's transactions wait on its
//     CPU for theirs, and hot shards given to it slowed the whole cluster (docs/resharding.md
//     "The load policy"). Lotus's timestamp service is spread over the compute pool instead.
//
// Locality (Zeus's moves of ownership to where the transactions run), beside it or alone:
//
//   - The CN's lock table keeps, for each shard it manages, a majority vote of the CNs whose
//     transactions requested its locks in the interval (ShardMajority).
//   - A shard whose requests came at least half from one other CN X, in each of `intervals`
//     intervals in a row, goes to X; the shards going to one CN go in one move, and of several
//     such CNs the one with the most requests goes first. With both policies on, load goes
//     first, and a CN above the mean latency receives nothing for locality: else the one
//     policy would hand back what the other just moved away.
//
// The paper's numbers are the defaults: 100 ms intervals, 50% above the mean, three in a row.
// The paper hands over its hottest shard alone; a hot set that spans many shards (SmallBank's
// accounts are sharded by id) would then take as many moves, three intervals each, so Pond
// passes a range by the share it means to move, and one shard when that is what carries it.
//
// Thread rules: the coordination half's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "pond/recovery/cn_controls.h"

namespace pond::recovery {

struct LoadPolicyOptions {
  bool on = false;        // the load policy
  bool locality = false;  // the locality policy
  uint64_t interval_ns = 100'000'000;
  double over = 1.5;
  int intervals = 3;
};

class LoadPolicy {
 public:
  explicit LoadPolicy(LoadPolicyOptions o) : o_(o) {}

  // The interval that ends now, from the CN's counts since it started: its mean latency (0 if
  // no transaction committed in it). Keeps the counts for the next interval.
  uint64_t EndInterval(const CnLoad& now);

  struct Move {
    std::vector<uint32_t> shards;  // ascending
    uint16_t to = 0;
  };
  // After EndInterval: `latency` holds, by CN, the newest latency each CN alive published (this
  // one's included), or nullopt for a CN down or not heard from lately. A move if this CN (`cn`)
  // has been overloaded long enough, of the hottest shards `movable` accepts that took requests
  // (above), to a CN less loaded than this one and not `oracle` (the timestamp oracle's host, if
  // known); nullopt otherwise.
  std::optional<Move> Judge(uint16_t cn, const std::vector<std::optional<uint64_t>>& latency,
                            std::optional<uint16_t> oracle,
                            const std::function<bool(uint32_t)>& movable);

  // After EndInterval, every interval while locality is on (it counts the streaks): a move of
  // the shards `movable` accepts whose requests came at least half from one other CN that
  // `receiver` accepts, for `intervals` intervals in a row, to the CN that made the most of
  // them; nullopt if there is none.
  std::optional<Move> JudgeLocality(uint16_t cn, const std::function<bool(uint16_t)>& receiver,
                                    const std::function<bool(uint32_t)>& movable);

  const LoadPolicyOptions& options() const { return o_; }
  int streak() const { return streak_; }

 private:
  const LoadPolicyOptions o_;
  CnLoad last_;                     // the counts at the last interval's end
  std::vector<uint64_t> interval_;  // lock requests by shard in the interval just ended
  int streak_ = 0;                  // intervals in a row this CN was overloaded
  // Locality: the interval just ended's majorities, and by shard the CN that made at least half
  // of its requests and for how many intervals in a row (0: none did, the last interval).
  std::vector<ShardMajority> majority_;
  struct Run {
    uint16_t cn = 0;
    int intervals = 0;
  };
  std::vector<Run> runs_;
};

}  // namespace pond::recovery
