// ShardReturns: a restarted CN's shards coming home (docs/recovery.md "Restart"), as one CN's
// membership machine (cn_membership.h) plays both halves of it:
//
//   - As a holder: when an epoch lets a restarted CN in, every shard of its home this CN holds
//     is closed (requests for it are refused from then on). Once no lock in them is held here —
//     and no failure this CN knows of is still unopened, which the machine checks — it says so
//     at ReturnKey, in a record (cluster::MoveRecord) that lists exactly the shards it closed and
//     carries the holder's next hand-over number, as a shard move's does (shard_move.h): a CN
//     says one hand-over at a time, a return or a move, and the configuration counts those made.
//   - As configuration manager: the listed shards go home in the next epoch only if the record's
//     number is the holder's next, and the epoch counts it; the restarted CN opens them as it
//     applies that epoch. A record read again — after its shards went home and one came back to
//     the holder by a move — is made no second time.
//   - Should the restarted CN fail again first, the holder serves what it still holds again.
//
// No shard is ever served by two CNs, and none is opened while a lock in it is held: the CM
// moves only what its holder closed and drained. A shard a later failure hands the holder is
// not listed and stays there.
//
// Thread rules: the coordination half's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pond/cluster/membership.h"
#include "pond/recovery/cn_controls.h"

namespace pond::recovery {

class ShardReturns {
 public:
  // For CN `cn` of cluster `cluster`, whose shard map has `shards` shards.
  ShardReturns(std::string cluster, uint16_t cn, uint32_t shards, cluster::ConfigStore& store,
               CnControls& controls);

  // This CN applies epoch `next` (its map `shards`): it closes the shards it holds whose home is
  // a CN of `back` (let in by `next`), and ends the returns `next` completes or cuts short. A
  // shard `moving` names is closed to move elsewhere (shard_move.h), and does not go home. A
  // shard `recovering` names came here by a failure not opened yet, and is left for that
  // failure's recovery to open.
  void Apply(const cluster::Configuration& next, const std::vector<uint16_t>& shards,
             const std::vector<uint16_t>& back, const std::function<bool(uint32_t)>& recovering,
             const std::function<bool(uint32_t)>& moving);

  // The holder's half, once a period (only while every failure this CN knows of is opened
  // here, and no hand-over of this CN is said and not yet made): says one return drained, once
  // no lock in its shards is held, as hand-over number `seq` of incarnation `incarnation`.
  void Progress(uint32_t seq, uint16_t incarnation);

  // The CM's half: in `shards` (the map of `next`, decided over `view`), the shards of each
  // record whose rules hold (above) go home, counted in next's `moves`; what it did is added to
  // `what`, for the epoch's line.
  void Pick(const cluster::Configuration& view, cluster::Configuration* next,
            std::vector<uint16_t>* shards, std::vector<std::string>* what);

  // Shard `s` is closed here to go home; any shard is.
  bool Returning(uint32_t s) const;
  bool Returning() const;
  // A return said and not yet made or ended.
  bool Said() const;

 private:
  struct Return {
    uint16_t cn = 0, incarnation = 0;  // whose home they are
    std::vector<uint32_t> shards;      // sorted
    bool drained = false;              // said at ReturnKey (or a put that may have landed)
    bool done = false;                 // given back, or kept (the CN failed again)
  };

  const std::string cluster_;
  const uint16_t cn_;
  const uint32_t shards_;
  cluster::ConfigStore& store_;
  CnControls& controls_;
  std::vector<Return> returns_;
};

}  // namespace pond::recovery
