// The catalog: which tables exist and where their index lives on every MN.
//
// MN side: FormatRegion writes a fresh superblock and empty catalog when an MN starts — the only
// work an MN's CPU does. CN side: CreateTable carves each MN's index area from the heap (FAA on
// the superblock's general-heap cursor) and writes the table's descriptor to every MN's catalog;
// LoadCatalog reads all of it once at start and keeps it as TableInfo, the "few KB of metadata"
// CNs cache (Lotus §3). Table creation is a setup step: one CN creates each table, before any
// transaction uses it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pond/status.h"
#include "pond/store/layout.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::store {

// What a user asks for.
struct TableSpec {
  uint16_t id = 0;
  std::string name;
  uint32_t value_bytes = 40;
  int versions = 4;             // N version cells per key
  bool critical_field = false;  // keys carry the shard number in bits 0..11 (Lotus §4.2)
  uint64_t capacity = 1 << 16;  // keys the index must hold
  int slots_per_bucket = 4;
  bool single_version = false;  // SvSlots in the buckets (ford); `versions` is then 1
  // A B+Tree indexes the keys, in a space after the index area on every MN; its stripe rows are
  // in table `stripe_table` (docs/protocol.md "Ordered tables and range scans").
  bool ordered = false;
  int stripe_bits = 10;
  uint16_t stripe_table = 0;
  bool keep_deleted_entries = false;  // ordered: deletes leave their tree entries in place
  bool keep_empty_leaves = false;     // ordered: leaves emptied by deletes do not merge
};

// What a CN knows about a table after loading the catalog.
struct TableInfo {
  uint16_t id = 0;
  std::string name;
  int versions = 0;
  bool critical_field = false;
  bool single_version = false;  // buckets hold SvSlots (cvt_bytes = SvSlotBytes)
  uint32_t value_bytes = 0;
  uint32_t record_stride = 0;
  uint32_t cvt_bytes = 0;
  int slots_per_bucket = 0;
  uint64_t bucket_count = 0;           // per replica group
  int replication = 0;                 // R: replica groups in each MN's index area
  std::vector<uint64_t> index_offset;  // per MN
  bool ordered = false;
  int stripe_bits = 0;
  uint16_t stripe_table = 0;
  bool keep_deleted_entries = false;
  bool keep_empty_leaves = false;
  uint64_t tree_bytes = 0;  // per MN; 0 unless ordered

  uint32_t bucket_bytes() const { return cvt_bytes * static_cast<uint32_t>(slots_per_bucket); }
  uint64_t group_bytes() const { return bucket_count * bucket_bytes(); }
  // A bucket in MN `mn`'s sub-index for the keys of which `mn` is replica `replica`.
  GAddr BucketAddr(MnId mn, int replica, uint64_t bucket) const {
    return GAddr::Make(mn, index_offset[mn] + static_cast<uint64_t>(replica) * group_bytes() +
                               bucket * bucket_bytes());
  }
  GAddr SlotAddr(MnId mn, int replica, uint64_t bucket, int slot) const {
    return BucketAddr(mn, replica, bucket) + static_cast<uint64_t>(slot) * cvt_bytes;
  }
  // Ordered tables: where the B+Tree's space on MN `mn` begins (it is tree_bytes long).
  uint64_t TreeOffset(MnId mn) const { return TreeOffsetAfter(index_offset[mn], IndexBytes()); }
  uint64_t IndexBytes() const { return group_bytes() * static_cast<uint64_t>(replication); }
  static uint64_t TreeOffsetAfter(uint64_t index_offset, uint64_t index_bytes) {
    return (index_offset + index_bytes + 1023) & ~uint64_t{1023};
  }
};

// How every MN region of a pool is laid out (all MNs alike). Built by MakeLayout at format time
// and read back from the superblock by LoadCatalog.
struct PoolLayout {
  uint16_t num_mns = 0;
  int replication = 0;
  uint64_t region_bytes = 0;
  uint64_t chunk_bytes = 0;
  uint64_t heap_begin = 0;  // general heap
  uint64_t heap_end = 0;    // = start of lane 0
  uint64_t lane_bytes = 0;

  // Offset, on the key's replica `replica`, of the record at lane-relative offset `lane_rel`.
  uint64_t RecordOffset(int replica, uint64_t lane_rel) const {
    return heap_end + static_cast<uint64_t>(replica) * lane_bytes + lane_rel;
  }
};

// The record chunk every cluster carves (a CN's unit of lane space): an MN daemon formats its
// region with it, and the CNs that reach that region must agree.
inline constexpr uint64_t kChunkBytes = 1 << 20;

// What a pool gives every worker of the cluster beside its tables: a record chunk of each replica
// group it writes to (Allocator: so up to one per worker in every lane), and a commit log ring
// on every MN (CommitLog, carved from each MN's general heap). Both grow with the cluster's
// workers, not with its data: 504 workers' 1 MiB chunks overran the 256 MiB lanes of the default
// 1 GiB region (OutOfSpace in the middle of a run). A cluster that formats its own regions scales
// them down as it grows (WorkerSpaceFor); MN daemons format with kChunkBytes, and CNs of a cluster
// of processes keep kLogBytes.
inline constexpr uint64_t kLogBytes = 256 << 10;      // per worker and MN
inline constexpr uint64_t kChunkBytesMin = 64 << 10;  // records up to ~63 KiB of value fit
inline constexpr uint64_t kLogBytesMin = 64 << 10;    // hundreds of records of a worker's rounds
struct WorkerSpace {
  uint64_t chunk_bytes = kChunkBytes;
  uint64_t log_bytes = kLogBytes;
};
// kChunkBytes and kLogBytes, each halved while `workers` of them would take more than half a
// lane (chunks) or half the general heap (rings), down to their minimums; a cluster whose
// workers' fixed sizes take at most half (9 CNs x 8 workers in 1 GiB regions) keeps them. The
// general heap's bytes are `general_heap_bytes` (0: a quarter of the region), as for MakeLayout.
WorkerSpace WorkerSpaceFor(uint64_t region_bytes, uint64_t general_heap_bytes, int replication,
                           uint64_t workers);
// Whether `space` leaves the tables room: `workers` chunks at most 3/4 of a lane and rings at
// most 3/4 of the general heap.
bool WorkerSpaceFits(uint64_t region_bytes, uint64_t general_heap_bytes, int replication,
                     uint64_t workers, const WorkerSpace& space);

// Checks the numbers and places the general heap (`general_heap_bytes`, or a quarter of the
// region if 0) and R record lanes in the rest.
Result<PoolLayout> MakeLayout(uint16_t num_mns, int replication, uint64_t region_bytes,
                              uint64_t chunk_bytes, uint64_t general_heap_bytes = 0);

// The general heap of a cluster's regions. Multi-version tables keep their records in the lanes,
// the index a quarter of the region; single-version slots (ford) hold their values in the index
// itself and nothing is carved from a lane, so the heap takes three quarters. Every process
// that lays out or reaches a cluster's regions uses this (MN daemons, CNs, the simulator).
inline uint64_t GeneralHeapBytes(uint64_t region_bytes, bool single_version) {
  return single_version ? region_bytes / 4 * 3 : region_bytes / 4;
}

class Catalog {
 public:
  const TableInfo* Find(uint16_t id) const;
  const TableInfo* FindByName(const std::string& name) const;
  const std::vector<TableInfo>& tables() const { return tables_; }
  const PoolLayout& layout() const { return layout_; }

 private:
  friend Task<Result<Catalog>> LoadCatalog(Endpoint& ep);
  PoolLayout layout_;
  std::vector<TableInfo> tables_;
};

// MN side, at start: lay out an empty region. `base` is the region's memory.
void FormatRegion(std::byte* base, const PoolLayout& layout, MnId mn);
// A restarted MN's region, blank, laid out as before its crash (docs/recovery.md "MN restart"):
// the superblock, the catalog with this MN's index areas where they were, and its general heap
// closed (heap_cursor at heap_end). Index, log and record areas stay zero until written; the lane
// cursors are 0 until the restart brings them into step.
void RestoreRegion(std::byte* base, const Catalog& catalog, MnId mn);

// Validates a spec (sizes, limits) without touching memory.
Status ValidateTableSpec(const TableSpec& spec);

Task<Status> CreateTable(Endpoint& ep, const PoolLayout& layout, const TableSpec& spec);
Task<Result<Catalog>> LoadCatalog(Endpoint& ep);

// FAA on an MN's general-heap cursor: `bytes` (rounded up to kHeapAlign) of never-used, zeroed
// general heap, as an offset on that MN.
Task<Result<uint64_t>> CarveHeap(Endpoint& ep, const PoolLayout& layout, MnId mn, uint64_t bytes);
// `bytes` of lane space reserved on all R replicas of the keys whose primary is `primary`, as a
// lane-relative offset (see PoolLayout::RecordOffset): FAA on the group's cursor mirrors, then on
// the primary's lane cursor (docs/formats.md "Superblock"), skipping the MNs in `down_mns`.
// Unavailable if no cursor of the group is up, or an MN did not answer.
Task<Result<uint64_t>> CarveLane(Endpoint& ep, const PoolLayout& layout, MnId primary,
                                 uint64_t bytes, uint64_t down_mns = 0);

}  // namespace pond::store
