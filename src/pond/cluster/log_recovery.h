// Transaction recovery of a failed CN (Lotus §6, "Transaction recovery"): a surviving CN reads
// each of the failed CN's commit logs from the memory pool and finishes every transaction it
// finds half-committed.
//
// A commit record names every CVT cell its transaction wrote; each such cell was written on every
// replica, INVISIBLE and stamped with the transaction's writer tag, before the commit timestamp
// was fetched. So, for one record, the cells that carry its tag tell how far it got:
//   - none INVISIBLE: it finished (every replica has its timestamp) or never wrote: nothing to do;
//   - some INVISIBLE and some with a timestamp T: the timestamp was granted and reached at least
//     one replica, so someone may have read the version (and, once every replica had it, a
//     client may have heard "committed"): roll forward, writing T into every INVISIBLE one;
//   - all INVISIBLE: no replica has a timestamp, nobody can have read the version or heard of its
//     commit: roll back, emptying the cell on every replica of each item whose write landed on
//     any (the replicas it missed hold the oldest version it was replacing; all are emptied
//     alike so that they agree again).
// Records with no INVISIBLE cell under their tag are never acted on: they are old, and their
// cells may belong to later writers. For an unfinished record no one else can have written its
// cells (the transaction still holds their locks). The rule is idempotent, so a
// recovery that is itself cut short by a crash is simply run again by another CN. When it is
// done, the area is zeroed: the next incarnation's records start from a clean log.
//
// REQUIRES: no transaction of the failed CN runs any more (its lease has expired: it stopped
// before recovery began), and the locks its transactions held are still held, so nobody else
// writes those cells meanwhile (survivors release them only after this returns).
//
// Thread rules: a coroutine on one worker's endpoint.
#pragma once

#include <cstdint>
#include <vector>

#include "pond/status.h"
#include "pond/store/catalog.h"
#include "pond/store/placement.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::cluster {

struct LogRecoveryStats {
  uint64_t records = 0;         // sealed commit records found in the area
  uint64_t rolled_forward = 0;  // transactions finished with their commit timestamp
  uint64_t rolled_back = 0;     // transactions undone
  uint64_t cells_written = 0;
  // Cells the failed CN died in the middle of writing (torn for good), rolled back whole.
  uint64_t cells_cut_short = 0;
  // Records of protocols with MN lock words (mn_lock_recovery.h), and the words freed.
  uint64_t mn_lock_records = 0;
  uint64_t lock_words_freed = 0;
  LogRecoveryStats& operator+=(const LogRecoveryStats& o);
};

// Finishes the transactions of worker `worker` of CN `cn` logged in its rings (`areas`, each
// `bytes` long: one per MN; a record has a copy on every MN its transaction wrote a cell on),
// then zeroes them. Corruption if a record names a table that does not exist or two replicas of
// its cells carry different timestamps under its tag (or a timestamp beside a cell it never
// finished writing); Unavailable if the pool cannot be reached.
Task<Result<LogRecoveryStats>> RecoverCommitLog(Endpoint& ep, const store::Catalog& catalog,
                                                const store::Placement& placement,
                                                std::vector<GAddr> areas, uint64_t bytes,
                                                uint16_t cn, uint16_t worker);

}  // namespace pond::cluster
