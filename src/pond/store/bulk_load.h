// BulkLoad: puts many new keys into a hash table before transactions run, with a few large
// READs and WRITEs per replica group instead of a dozen small ops per key.
//
// Insert (hash_index.h) costs a key four round trips and 5R+1 one-sided ops (SvInsert, for
// FORD's single-version slots, 3R+1). Over RDMA or shared memory that is cheap; over TCP every op
// is a message an MN daemon's thread answers, and a 100,000-account SmallBank took over a minute
// to load. BulkLoad instead copies each group's sub-index from every replica (one READ per MiB),
// places the keys in the copies by the same linear probing Insert's CAS follows, carves their
// records with the same Allocator, and writes records and then the changed slots back in runs of
// up to a MiB. A group larger than BulkLoadOptions::window_bytes goes a window of its buckets at a
// time, so that a load's memory stays bounded whatever the table's size. Every MN then holds byte
// for byte what inserting the same keys one by one leaves, in the order a load takes them: by
// window of their home buckets, each window's in the order given — with one window, the order
// given (bulk_load_test.cc checks both).
//
// It relies on nothing else writing the table meanwhile (a load runs before serving, on one
// worker): a concurrent Insert's slot could be overwritten by the copy written back.
#pragma once

#include <cstdint>
#include <span>

#include "pond/status.h"
#include "pond/store/allocator.h"
#include "pond/store/catalog.h"
#include "pond/store/placement.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::store {

// The most bytes one READ or WRITE of a bulk load moves.
inline constexpr uint32_t kBulkOpBytesMax = 1 << 20;

struct BulkLoadOptions {
  // How much of a group's sub-index one pass holds, per replica: a load's memory is about
  // R x (this + kProbeBucketsMax buckets) plus the pass's records. A group this size or smaller
  // is read whole, once.
  uint64_t window_bytes = uint64_t{32} << 20;
};

// Inserts keys[i] with value values[i * t.value_bytes, +t.value_bytes), committed at
// `commit_ts` (a single-version table: at version 1), on every replica. Not an ordered table
// (InvalidArgument: its B+Tree takes its keys one by one). Goes group by group (the keys of one
// primary MN) and window by window, and checks a window's keys before it writes any of them:
// AlreadyExists if one is live already or given twice, OutOfSpace if one finds no free slot
// within kProbeBucketsMax buckets. The windows and groups before it stay loaded, as keys
// inserted one by one before a failed Insert do.
Task<Status> BulkLoad(Endpoint& ep, const TableInfo& t, const PoolLayout& layout,
                      const Placement& placement, Allocator& alloc, std::span<const uint64_t> keys,
                      std::span<const std::byte> values, uint64_t commit_ts,
                      BulkLoadOptions options = {});

}  // namespace pond::store
