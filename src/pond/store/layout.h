// The memory-node layout: every struct that lives in an MN region, pinned byte for byte.
//
// CNs find and change data only through one-sided ops, so these structs *are* the protocol
// between CNs: any two CNs must agree on every offset. Each is little-endian, 8-byte aligned,
// described as a grammar in docs/formats.md, and pinned here with static_asserts. Nothing in this
// file reads or writes memory; see catalog.h, hash_index.h and record.h for the operations.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace pond::store {

// ---- Region -------------------------------------------------------------------------------
// [0, 4096)                          Superblock
// [4096, 4096 + 64 * kTablesMax)     Catalog: one TableDesc per table id
// [heap_begin, heap_end)             General heap: carved by FAA on heap_cursor into table index
//                                    areas and log areas.
// [heap_end + i * lane_bytes, ...)   Record lane i, i = 0..R-1: records of the keys whose primary
//                                    is MN (this MN - i) mod num_mns, i.e. for which this MN is
//                                    replica i. Lane chunks are carved by FAA on the lane_cursor of
//                                    the keys' primary MN, and one carve reserves the same
//                                    lane-relative range on all R replicas, so a record's backup
//                                    addresses follow from its primary address.
inline constexpr uint64_t kSuperblockMagic = 0x31304e4d444e4f50ULL;  // "PONDMN01"
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint64_t kSuperblockBytes = 4096;
inline constexpr uint32_t kTablesMax = 256;
inline constexpr uint64_t kCatalogOffset = kSuperblockBytes;
inline constexpr uint64_t kHeapAlign = 64;

struct Superblock {
  uint64_t magic;           // kSuperblockMagic
  uint32_t format_version;  // kFormatVersion
  uint16_t mn_id;
  uint16_t num_mns;
  uint64_t region_bytes;
  uint64_t chunk_bytes;     // size of the record chunks CNs carve from lanes
  uint64_t heap_begin;      // first general-heap byte
  uint64_t heap_cursor;     // next free general-heap byte; advanced only by FAA
  uint64_t heap_end;        // end of the general heap = start of lane 0
  uint64_t lane_bytes;      // size of each record lane
  uint64_t lane_cursor;     // next free lane-relative byte for keys whose primary is this MN; FAA
  uint64_t catalog_offset;  // kCatalogOffset
  uint32_t tables_max;      // kTablesMax
  uint16_t replication;     // R: lanes per region
  uint16_t reserved;
  // lane_mirror[i-1]: a copy of the lane cursor of the group for which this MN is replica i
  // (i = 1..kLaneMirrorsMax), bumped before the primary's, so never behind it: a CN carves from
  // the mirror while the primary is down (CarveLane).
  uint64_t lane_mirror[5];
};
static_assert(sizeof(Superblock) == 128);
static_assert(offsetof(Superblock, heap_cursor) == 40, "CNs FAA this word by offset");
static_assert(offsetof(Superblock, lane_cursor) == 64, "CNs FAA this word by offset");
static_assert(offsetof(Superblock, replication) == 84);
inline constexpr int kLaneMirrorsMax = 5;
static_assert(offsetof(Superblock, lane_mirror) == 88, "CNs FAA these words by offset");

// ---- Leases -------------------------------------------------------------------------------
// A cluster of processes finds failed nodes by heartbeats in the memory pool (docs/recovery.md
// "Processes"): the MN's own CPU counts its beat up in its superblock page, and each CN writes
// its beat into every MN's; the CN acting as configuration manager READs the page of every MN
// and declares a node whose beat stopped. The page's bytes after the superblock are otherwise
// unused, and a region is formatted with them zero.
struct LeasePage {
  uint64_t mn_beat;  // +1 per renewal by the MN's daemon
  uint64_t reserved[7];
  // CN c's beat: (incarnation << 48) | count, written whole by CN c.
  uint64_t cn_beat[64];
  // What CN c says of its links, written whole by CN c with its beat (docs/recovery.md
  // "Partitions and fencing"): the CNs it has heard nothing from for a lease while it waited on
  // them (bit d for CN d), and (incarnation << 48) | kCnReportCoordDown if it cannot reach the
  // coordination service | kCnReportIn if it is alive in the configuration it applied |
  // kCnReportLeft once it stopped serving for good (a clean stop: it writes nothing more); and
  // the MNs none of its beats has reached for a lease (bit m for MN m: docs/recovery.md "An MN
  // one CN cannot reach"), as of the epoch it applied last.
  struct CnReport {
    uint64_t silent;
    uint64_t flags;
    uint64_t mn_silent;
    uint64_t epoch;
  };
  CnReport cn_report[64];
  // CN c's load (docs/resharding.md "The load policy"), written whole by CN c with its beat
  // while its load policy is on: the newest interval it measured, as (incarnation << 48) | its
  // number from 1, and the mean latency of the transactions it committed in it (0: none).
  struct CnLoad {
    uint64_t interval;
    uint64_t latency_ns;
  };
  CnLoad cn_load[64];
};
inline constexpr uint64_t kCnReportCoordDown = 1;
inline constexpr uint64_t kCnReportIn = 2;
inline constexpr uint64_t kCnReportLeft = 4;
inline constexpr uint64_t kLeasePageOffset = 256;
static_assert(kLeasePageOffset >= sizeof(Superblock));
static_assert(kLeasePageOffset + sizeof(LeasePage) <= kSuperblockBytes);
static_assert(offsetof(LeasePage, cn_beat) == 64);
static_assert(offsetof(LeasePage, cn_report) == 576 && sizeof(LeasePage::CnReport) == 32);
static_assert(offsetof(LeasePage, cn_load) == 2624 && sizeof(LeasePage::CnLoad) == 16);
static_assert(sizeof(LeasePage) == 3648);
inline constexpr uint64_t kCnBeatCountMask = (uint64_t{1} << 48) - 1;
inline constexpr uint64_t CnBeat(uint16_t incarnation, uint64_t count) {
  return uint64_t{incarnation} << 48 | (count & kCnBeatCountMask);
}
inline constexpr uint16_t CnBeatIncarnation(uint64_t beat) {
  return static_cast<uint16_t>(beat >> 48);
}
// The MN's own beat, counted up by the CPU of the process that serves region `base`.
inline void BeatMn(std::byte* base) {
  std::atomic_ref<uint64_t>(reinterpret_cast<LeasePage*>(base + kLeasePageOffset)->mn_beat)
      .fetch_add(1, std::memory_order_relaxed);
}

// ---- Catalog ------------------------------------------------------------------------------
inline constexpr uint8_t kTablePresent = 1;        // TableDesc.flags: the slot holds a table
inline constexpr uint8_t kTableCriticalField = 2;  // keys carry a shard number in bits 0..11
inline constexpr uint8_t kTableSingleVersion = 4;  // buckets hold SvSlots, not CVTs (ford)
inline constexpr uint8_t kTableOrdered = 8;        // a B+Tree indexes the keys (tree_mib > 0)
inline constexpr uint8_t kTableKeepsDeleted = 16;  // ordered: deletes leave their tree entries
inline constexpr uint8_t kTableKeepsEmpty = 32;    // ordered: emptied leaves do not merge
inline constexpr size_t kTableNameMax = 23;

struct TableDesc {
  uint16_t table_id;
  uint8_t versions;        // N: version cells per CVT, 1..kVersionsMax
  uint8_t flags;           // kTablePresent | kTableCriticalField
  uint32_t value_bytes;    // user value size
  uint32_t record_stride;  // bytes of one stored version (value + cacheline versions), 64-aligned
  uint32_t cvt_bytes;      // bytes of one bucket slot: a CVT (header + N cells), or an SvSlot
  uint64_t bucket_count;   // index buckets on each MN
  uint64_t index_offset;   // this MN's index area (differs per MN)
  uint16_t slots_per_bucket;
  uint8_t replication;  // R: sub-indexes in the index area, one per replica group
  // Ordered tables (kTableOrdered): log2 of the keys per stripe row, the companion table of the
  // stripe rows, and the MiB of B+Tree space that follows the index area on each MN (at the
  // first KiB boundary past it).
  uint8_t stripe_bits;
  uint16_t stripe_table;
  uint16_t tree_mib;
  char name[kTableNameMax + 1];  // NUL-terminated
};
static_assert(sizeof(TableDesc) == 64);
static_assert(offsetof(TableDesc, bucket_count) == 16);
static_assert(offsetof(TableDesc, index_offset) == 24);
static_assert(offsetof(TableDesc, stripe_bits) == 35);
static_assert(offsetof(TableDesc, stripe_table) == 36);
static_assert(offsetof(TableDesc, tree_mib) == 38);
static_assert(offsetof(TableDesc, name) == 40);

// ---- CVT: consecutive version table -------------------------------------------------------
// A CVT = CvtHeader + N CvtCells, stored directly in the hash index's buckets so that one READ of
// a bucket finds a key and all its versions.
inline constexpr uint8_t kSlotEmpty = 0;    // never used; probes may stop here
inline constexpr uint8_t kSlotClaimed = 1;  // an insert won the slot and is writing it
inline constexpr uint8_t kSlotLive = 2;     // key and cells are valid
inline constexpr int kVersionsMax = 16;

// CvtHeader.meta: bits 0..7 slot state, 8..23 table id, 24..31 N, 32..63 value bytes.
constexpr uint64_t PackMeta(uint8_t state, uint16_t table_id, uint8_t versions, uint32_t value) {
  return uint64_t{state} | (uint64_t{table_id} << 8) | (uint64_t{versions} << 24) |
         (uint64_t{value} << 32);
}
constexpr uint8_t MetaState(uint64_t meta) { return static_cast<uint8_t>(meta); }
constexpr uint16_t MetaTable(uint64_t meta) { return static_cast<uint16_t>(meta >> 8); }

struct CvtHeader {
  uint64_t key;
  uint64_t meta;  // PackMeta(...); CAS'd from 0 to claim an empty slot
  uint64_t lock;  // lock word for protocols that lock on MNs (motor); 0 = free; lotus ignores it
};
static_assert(sizeof(CvtHeader) == 24);
static_assert(offsetof(CvtHeader, meta) == 8 && offsetof(CvtHeader, lock) == 16);

inline constexpr uint64_t kInvisible = ~uint64_t{0};  // commit_ts of a written, uncommitted version

// One version's metadata. head_cv and tail_cv are equal in a cell at rest; a WRITE of the whole
// cell stores head first and tail last, so a reader that finds them unequal caught it mid-write.
// The same cv is stamped into every cacheline of the record the cell points to.
inline constexpr uint8_t kCellEmpty = 0;
inline constexpr uint8_t kCellVersion = 1;
inline constexpr uint8_t kCellTombstone = 2;  // a version that says "deleted"

struct CvtCell {
  uint8_t head_cv;
  uint8_t valid;       // kCellEmpty, kCellVersion or kCellTombstone
  uint8_t writer[6];   // low 48 bits of the writer tag (WriterTag)
  uint64_t commit_ts;  // kInvisible while the writer has not committed
  uint8_t record[6];   // 48-bit offset of the record, on the same MN as this CVT; 0 = none
  uint8_t writer_cn;   // bits 48..55 of the writer tag: the writer's CN
  uint8_t tail_cv;
};
static_assert(sizeof(CvtCell) == 24);
static_assert(offsetof(CvtCell, commit_ts) == 8, "write-visible stores this word alone");
static_assert(offsetof(CvtCell, record) == 16 && offsetof(CvtCell, tail_cv) == 23);

// Which transaction wrote a cell: recovery of a failed CN touches only cells that carry the tag
// of one of its transactions (cluster/log_recovery.h), so a cell written since by anyone else is
// left alone. 56 bits: CN (8) | worker (8) | the low 40 bits of the worker's transaction
// sequence, whose top 8 bits are the CN's incarnation (docs/formats.md "Cell"), so a tag is
// unique over 2^32 transactions of one worker in one incarnation and never recurs in another.
// Requires cn, worker < 256 (ValidateConfig: cns <= kCnsMax = 256, workers <= 64): CN 255 fits
// the 8 bits, so 256 CNs need no wider tag.
inline constexpr uint64_t kWriterSeqBits = 40;
inline constexpr uint64_t kSeqIncarnationShift = 32;  // seq := incarnation:8 n:32
static_assert(kSeqIncarnationShift + 8 == kWriterSeqBits);
inline constexpr uint64_t kWriterCnsMax = 256;
constexpr uint64_t WriterTag(uint16_t cn, uint16_t worker, uint64_t seq) {
  return (uint64_t{cn} & 0xff) << 48 | (uint64_t{worker} & 0xff) << kWriterSeqBits |
         (seq & ((uint64_t{1} << kWriterSeqBits) - 1));
}

// The word a transaction stores in the MN lock words it takes (protocols with locks on MNs:
// motor, ford, the first ablation steps): its CN + 1 in the top 16 bits (so it is never 0), then
// the low 8 bits of its worker, then the low 40 bits of its transaction id (incarnation:8 |
// n:32, the writer tag's seq). The CN took 8 bits until clusters passed 255 CNs (CN 255 + 1
// needs 9); the 8 it gained are the transaction sequence's bits 40..47, which only a worker's
// 2^32nd transaction in one incarnation sets — past where its writer tags already repeat, so
// the word is unique exactly as long as the tag is.
// Unique per transaction, and it names the CN incarnation that holds the word: once that
// incarnation has failed and its log has been recovered, the word is free to whoever meets it
// (docs/recovery.md "Lock words on MNs").
inline constexpr uint64_t kOwnerCnShift = 48;
constexpr uint64_t LockOwnerWord(uint16_t cn, uint64_t txn_id) {
  return (uint64_t{cn} + 1) << kOwnerCnShift | ((txn_id >> 48) & 0xff) << kWriterSeqBits |
         (txn_id & ((uint64_t{1} << kWriterSeqBits) - 1));
}
constexpr uint16_t LockOwnerCn(uint64_t word) {
  return static_cast<uint16_t>((word >> kOwnerCnShift) - 1);
}
constexpr uint16_t LockOwnerIncarnation(uint64_t word) {
  return static_cast<uint16_t>((word >> kSeqIncarnationShift) & 0xff);
}
static_assert(LockOwnerCn(LockOwnerWord(5, uint64_t{3} << 48 | uint64_t{7} << 32 | 9)) == 5);
static_assert(LockOwnerIncarnation(LockOwnerWord(5, uint64_t{3} << 48 | uint64_t{7} << 32 | 9)) ==
              7);
static_assert(LockOwnerWord(5, uint64_t{3} << 48 | uint64_t{7} << 32 | 9) ==
              (uint64_t{6} << 48 | uint64_t{3} << 40 | uint64_t{7} << 32 | 9));
static_assert(LockOwnerCn(LockOwnerWord(255, uint64_t{63} << 48 | uint64_t{255} << 32 | 9)) == 255);
static_assert(LockOwnerWord(0, 0) != 0, "never the free word");
static_assert(LockOwnerWord(254, 0) != LockOwnerWord(255, 0));

constexpr uint32_t CvtBytes(int versions) {
  return static_cast<uint32_t>(sizeof(CvtHeader) + sizeof(CvtCell) * versions);
}

// ---- Records ------------------------------------------------------------------------------
// A stored version is a sequence of 64-byte lines; byte 0 of each line is its cacheline version
// (equal to the owning cell's cv) and bytes 1..63 carry the value.
inline constexpr uint32_t kLineBytes = 64;
inline constexpr uint32_t kLinePayload = kLineBytes - 1;

constexpr uint32_t RecordStride(uint32_t value_bytes) {
  uint32_t lines = value_bytes == 0 ? 1 : (value_bytes + kLinePayload - 1) / kLinePayload;
  return lines * kLineBytes;
}

// ---- Single-version slots (the ford protocol) ---------------------------------------------
// FORD keeps one version of a record in place, inside the bucket: one READ of a slot returns
// lock, version and value together, and a CAS on the lock word plus a READ of the slot go in one
// doorbell batch. A slot = SvHeader + the record in 64-byte lines (RecordStride(value_bytes)),
// each line's byte 0 carrying the low byte of `version`. A writer stores the header first and
// the lines after it; a reader copies the lines first and the header last, so a reader whose
// header version matches every line's stamp read one whole version (docs/formats.md).
// key and meta sit where they sit in a CvtHeader, so bucket scans and slot claims are shared.
struct SvHeader {
  uint64_t key;
  uint64_t meta;     // as CvtHeader.meta (state, table, N = 1, value bytes)
  uint64_t lock;     // 0 = free; else the holder's owner word
  uint64_t version;  // bumped by every committed write; 0 = never written
  uint64_t deleted;  // 1: the key was deleted (the slot stays claimed for it)
  uint64_t reserved[3];
};
static_assert(sizeof(SvHeader) == 64);
static_assert(offsetof(SvHeader, meta) == offsetof(CvtHeader, meta));
static_assert(offsetof(SvHeader, lock) == offsetof(CvtHeader, lock));
static_assert(offsetof(SvHeader, version) == 24 && offsetof(SvHeader, deleted) == 32);

constexpr uint32_t SvSlotBytes(uint32_t value_bytes) {
  return static_cast<uint32_t>(sizeof(SvHeader)) + RecordStride(value_bytes);
}

}  // namespace pond::store
