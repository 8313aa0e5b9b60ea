// Re-replication: a restarted MN gets back the replicas it held, while transactions go on
// (docs/recovery.md "MN restart"). The membership machine orders the steps (recovery/mn_rejoin.h);
// these are the parts that run on CN workers.
//
// Why a copy under the key's lock is exact: under lotus every write to a key's slot on any
// replica — a commit's cells and records, write-visible, an insert's key and meta, recovery's
// roll-forward and roll-back — is made by a transaction holding that key's write lock (recovery
// acts while the dead transaction's locks are still held, or its shard closed). Once every
// transaction that chose its replicas before the MN was named rejoining has ended, every later
// write goes to the rejoining MN too. A copier holding the key's write lock therefore reads a
// slot that nobody is changing, and after it lets go every change reaches both the source and
// the copy: the copy stays equal to the source.
#pragma once

#include <atomic>
#include <cstdint>

#include "pond/recovery/cn_controls.h"
#include "pond/status.h"
#include "pond/task.h"
#include "pond/transport/gaddr.h"

namespace pond::node {

class WorkerContext;

using recovery::CopyUnit;

// Copies the unit onto `mn` from a readable replica of its group: every live slot (header, cells,
// the records of valid cells, each record offset moved to `mn`'s lane), one bucket at a time,
// under the write locks of the bucket's keys. A bucket whose locks are refused is tried again.
// Returns the slots copied, or Unavailable once `mn` is not rejoining any more (it crashed
// again: the copy is abandoned), or Aborted once `*stop` holds (its CN stops: a bucket refused
// because the other CNs are gone would be tried for ever).
Task<Result<uint64_t>> CopyToRejoining(WorkerContext& w, MnId mn, CopyUnit unit,
                                       const std::atomic<bool>* stop = nullptr);

// Writes a restarted MN's superblock and catalog as this CN's catalog says (store::RestoreRegion:
// index areas where they were, the general heap closed), over the transport: a replacement's
// memory holds only what its daemon formatted, which knows no table.
Task<Status> LayOutRestarted(WorkerContext& w, MnId mn);

// Sets each lane cursor of `mn` (its own group's, and its mirror of every group it is a backup
// of) in step with the group's readable replicas, keeping a cursor never behind a lower
// replica's and never behind a range handed out (docs/formats.md "Superblock"): to the cursor of
// the nearest readable replica above it, else of the nearest below. Call only while no carve for
// these groups can be in flight.
Task<Status> SyncLaneCursors(WorkerContext& w, MnId mn);

}  // namespace pond::node
