// Failover::Rejoin: the state of one MN restart, shared by the Failover's two halves
// (failover.cc asks whether one is under way; failover_mn.cc runs it). Internal to txn/.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "pond/txn/failover.h"
#include "pond/txn/rereplication.h"

namespace pond::txn {

// One restarted MN on its way back to a readable replica of every group it belongs to.
//   kDraining:  named rejoining (writes go to it); waiting for every transaction that chose its
//               replicas before that to end.
//   kCopying:   its slots copied from readable replicas, unit by unit, under the keys' locks.
//   kFreezing:  carves for its groups refused; waiting for every transaction (and carve) that
//               began before that to end.
//   kSyncing:   its lane cursors set in step with the others'.
//   then an epoch makes it readable (finished), or it crashed again (finished, abandoned).
struct Failover::Rejoin {
  enum class Phase { kDraining, kCopying, kFreezing, kSyncing, kDone } phase = Phase::kDraining;
  MnId mn = 0;
  size_t failure = 0;  // index in mn_failures_
  bool finished = false;
  // Floors of every worker when the current step's epoch was heard, by CN; a CN that has
  // failed or restarted since is not waited for (its transactions are gone).
  std::vector<std::vector<uint64_t>> floors;
  std::vector<const CnContext*> contexts;  // a restart makes a new one
  std::deque<CopyUnit> todo;
  std::vector<std::vector<CopyUnit>> running;  // by CN: handed out, not done
  uint16_t syncer = 0;                         // the CN running SyncLaneCursors
  uint64_t slots = 0;
};

}  // namespace pond::txn
