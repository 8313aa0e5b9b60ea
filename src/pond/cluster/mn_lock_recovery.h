// Transaction recovery of a failed CN under the protocols whose locks are words on the MNs
// (motor, ford and the ablation steps before +lock-sharding): the records of cluster/
// log_recovery.h that those protocols write — motor's (store::kMotorLogMagic) and ford's undo
// records (store::kUndoLogMagic) — finished or undone, so that the lock words the dead CN holds
// may go free (docs/recovery.md "Lock words on MNs").
//
// Such a commit locks every key it writes on the key's primary MN (the key's lock word, or for a
// new key its home bucket's), writes its record, then every backup replica completely, and only
// then each primary, in the batch that frees that primary's lock words. A word still holding the
// transaction's owner word (store::LockOwnerWord) is therefore the transaction's alone. For one
// record:
//   - no word holds it: it finished (or aborted) — nothing to do;
//   - some word was freed, or a primary shows its write where a reader may have used it (a new
//     key's slot, which no word of the key guards; or under motor any primary cell with its tag):
//     its writes reached every backup, a reader may have seen them — roll forward, copying each
//     key it still holds from a backup to the primary;
//   - otherwise no reader can have used its writes (they lie behind its words) and no client heard
//     of a commit: roll back — ford writes the undo record's old images on every replica, motor
//     empties the cell it wrote on every replica, as lotus's rollback does.
// Then every word it still holds is freed (CAS owner -> 0). Each step can be run again: a
// recovery cut short is redone by another CN, and finds the same answer or one already reached.
//
// "Primary" above is wherever a key's words are (store::Placement::LockReplica): a backup while
// the primary is down. So the words are looked for on every replica in reach. While an MN is
// leaving (crashed, perhaps, and not yet declared down) the words of its keys are unknown: held
// or freed, nobody can tell. The membership machine runs this only once no live transaction can
// hold or take them (the leaving MN's drain) and puts the MN down only after it, so nothing else
// writes those keys meanwhile. A key of a record with unknown words that a later writer wrote
// (motor: a named cell with another writer's later commit timestamp; ford: a replica at neither
// the old version nor the next — an aborting ford transaction voids its undo record first) had
// its word freed, which the commit does only once all its writes landed: the record is an old
// one, left alone, or, with a word still held, a finished one, rolled forward. Otherwise it rolls
// forward if every backup in reach has its writes, back if not (docs/recovery.md "Lock words on
// MNs").
// The words of transactions that died before writing a record guard nothing (they wrote
// nothing); they are freed by whoever meets them once the failure is recovered
// (store::GoneHolders).
//
// Rolling forward needs a backup: the machine refuses CN failures for these protocols at R = 1.
//
// Thread rules: a coroutine on one worker's endpoint, as RecoverCommitLog.
#pragma once

#include <cstdint>
#include <vector>

#include "pond/cluster/log_recovery.h"
#include "pond/status.h"
#include "pond/store/catalog.h"
#include "pond/store/commit_log.h"
#include "pond/store/placement.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::cluster {

// Finishes or undoes the transactions of `records` (motor and undo records of worker `worker` of
// CN `cn`, one per transaction) and frees their lock words, counting into *stats. Corruption if
// a record names a table or cell that does not exist, or must be rolled forward with no backup;
// Unavailable if the pool cannot be reached.
Task<Status> RecoverMnLockRecords(Endpoint& ep, const store::Catalog& catalog,
                                  const store::Placement& placement,
                                  const std::vector<store::ParsedLogRecord>& records, uint16_t cn,
                                  uint16_t worker, LogRecoveryStats* stats);

}  // namespace pond::cluster
