#include "pond/store/catalog.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "pond/base/assert.h"
#include "pond/base/node_set.h"
#include "pond/store/placement.h"
#include "pond/transport/remote_copy.h"

namespace pond::store {

namespace {

constexpr uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
constexpr double kIndexLoadFactor = 0.6;

GAddr CatalogSlot(MnId mn, uint16_t id) {
  return GAddr::Make(mn, kCatalogOffset + uint64_t{id} * sizeof(TableDesc));
}

// Buckets of one replica group's sub-index: the keys of one primary MN, about capacity / MNs,
// with room for the imbalance of hashing keys to MNs.
uint64_t BucketCount(const TableSpec& spec, uint16_t num_mns) {
  double keys = static_cast<double>(spec.capacity) / num_mns;
  keys = keys * 1.1 + 32;
  double slots = keys / kIndexLoadFactor;
  uint64_t buckets = static_cast<uint64_t>(slots / spec.slots_per_bucket) + 1;
  return buckets < 2 ? 2 : buckets;
}

// An ordered table's B+Tree space on each MN. Leaves split in half, so a tree grown by inserts
// in key order (the common case: order numbers) holds ~27 entries a leaf; internal nodes add a
// few percent; every worker that inserts holds one partly used chunk.
constexpr uint64_t kTreeSlackBytes = 2 << 20;
uint16_t TreeMib(const TableSpec& spec, uint16_t num_mns) {
  const double keys = static_cast<double>(spec.capacity) / num_mns * 1.1 + 64;
  const double bytes = keys / 27 * 1024 * 1.1 + double{kTreeSlackBytes};
  return static_cast<uint16_t>(std::min(bytes / (1 << 20) + 1, 65535.0));
}

}  // namespace

Result<PoolLayout> MakeLayout(uint16_t num_mns, int replication, uint64_t region_bytes,
                              uint64_t chunk_bytes, uint64_t general_heap_bytes) {
  if (num_mns == 0) return InvalidArgument("need at least one MN");
  if (replication < 1 || replication > num_mns || replication > kReplicationMax) {
    return InvalidArgument("replication must be 1 to min(MNs, 8), got " +
                           std::to_string(replication) + " with " + std::to_string(num_mns) +
                           " MNs");
  }
  if (chunk_bytes == 0 || chunk_bytes % kHeapAlign != 0) {
    return InvalidArgument("chunk size must be a positive multiple of 64");
  }
  PoolLayout l;
  l.num_mns = num_mns;
  l.replication = replication;
  l.region_bytes = region_bytes;
  l.chunk_bytes = chunk_bytes;
  l.heap_begin = AlignUp(kCatalogOffset + uint64_t{kTablesMax} * sizeof(TableDesc), 4096);
  if (general_heap_bytes == 0) general_heap_bytes = region_bytes / 4;
  l.heap_end = AlignUp(l.heap_begin + general_heap_bytes, 4096);
  if (l.heap_end >= region_bytes) {
    return InvalidArgument("MN region of " + std::to_string(region_bytes) +
                           " bytes has no room for record lanes");
  }
  l.lane_bytes =
      (region_bytes - l.heap_end) / static_cast<uint64_t>(replication) / kHeapAlign * kHeapAlign;
  if (l.lane_bytes < chunk_bytes) {
    return InvalidArgument("MN region of " + std::to_string(region_bytes) +
                           " bytes cannot hold one record chunk per lane");
  }
  return l;
}

namespace {

// The lane and general-heap bytes MakeLayout would give (0 and 0 if it would refuse).
std::pair<uint64_t, uint64_t> LaneAndHeap(uint64_t region_bytes, uint64_t general_heap_bytes,
                                          int replication) {
  Result<PoolLayout> l = MakeLayout(static_cast<uint16_t>(replication), replication, region_bytes,
                                    kHeapAlign, general_heap_bytes);
  if (!l.ok()) return {0, 0};
  return {l->lane_bytes, l->heap_end - l->heap_begin};
}

}  // namespace

WorkerSpace WorkerSpaceFor(uint64_t region_bytes, uint64_t general_heap_bytes, int replication,
                           uint64_t workers) {
  const auto [lane, heap] = LaneAndHeap(region_bytes, general_heap_bytes, replication);
  WorkerSpace s;
  while (s.chunk_bytes > kChunkBytesMin && workers * s.chunk_bytes > lane / 2) s.chunk_bytes /= 2;
  while (s.log_bytes > kLogBytesMin && workers * s.log_bytes > heap / 2) s.log_bytes /= 2;
  return s;
}

bool WorkerSpaceFits(uint64_t region_bytes, uint64_t general_heap_bytes, int replication,
                     uint64_t workers, const WorkerSpace& space) {
  const auto [lane, heap] = LaneAndHeap(region_bytes, general_heap_bytes, replication);
  return workers * space.chunk_bytes <= lane / 4 * 3 && workers * space.log_bytes <= heap / 4 * 3;
}

void FormatRegion(std::byte* base, const PoolLayout& l, MnId mn) {
  Superblock sb{};
  sb.magic = kSuperblockMagic;
  sb.format_version = kFormatVersion;
  sb.mn_id = mn;
  sb.num_mns = l.num_mns;
  sb.region_bytes = l.region_bytes;
  sb.chunk_bytes = l.chunk_bytes;
  sb.heap_begin = l.heap_begin;
  sb.heap_cursor = l.heap_begin;
  sb.heap_end = l.heap_end;
  sb.lane_bytes = l.lane_bytes;
  sb.lane_cursor = 0;
  sb.catalog_offset = kCatalogOffset;
  sb.tables_max = kTablesMax;
  sb.replication = static_cast<uint16_t>(l.replication);
  // The MN formats before any CN connects, but tests reuse a fabric across threads, so the
  // store goes through the same race-free path as remote writes.
  std::vector<std::byte> zero(l.heap_begin - sizeof(sb));
  RemoteStore(base + sizeof(sb), zero.data(), zero.size());
  RemoteStore(base, &sb, sizeof(sb));
}

void RestoreRegion(std::byte* base, const Catalog& catalog, MnId mn) {
  const PoolLayout& l = catalog.layout();
  FormatRegion(base, l, mn);
  for (const TableInfo& t : catalog.tables()) {
    TableDesc d{};
    d.table_id = t.id;
    d.versions = static_cast<uint8_t>(t.versions);
    d.flags = kTablePresent | (t.critical_field ? kTableCriticalField : 0) |
              (t.single_version ? kTableSingleVersion : 0) | (t.ordered ? kTableOrdered : 0) |
              (t.keep_deleted_entries ? kTableKeepsDeleted : 0) |
              (t.keep_empty_leaves ? kTableKeepsEmpty : 0);
    d.stripe_bits = static_cast<uint8_t>(t.stripe_bits);
    d.stripe_table = t.stripe_table;
    d.tree_mib = static_cast<uint16_t>(t.tree_bytes >> 20);
    d.value_bytes = t.value_bytes;
    d.record_stride = t.record_stride;
    d.cvt_bytes = t.cvt_bytes;
    d.bucket_count = t.bucket_count;
    d.index_offset = t.index_offset[mn];
    d.slots_per_bucket = static_cast<uint16_t>(t.slots_per_bucket);
    d.replication = static_cast<uint8_t>(t.replication);
    std::memcpy(d.name, t.name.data(), std::min(t.name.size(), kTableNameMax));
    RemoteStore(base + CatalogSlot(mn, t.id).offset(), &d, sizeof(d));
  }
  // Where its earlier life carved index and log areas is known (the catalog, the logs'
  // owners); what else it carved is not, so nothing more is carved from its general heap.
  const uint64_t closed = l.heap_end;
  RemoteStore(base + offsetof(Superblock, heap_cursor), &closed, sizeof(closed));
}

Status ValidateTableSpec(const TableSpec& spec) {
  if (spec.id >= kTablesMax) return InvalidArgument("table id must be below 256");
  if (spec.name.empty() || spec.name.size() > kTableNameMax) {
    return InvalidArgument("table name must have 1 to 23 characters");
  }
  if (spec.versions < 1 || spec.versions > kVersionsMax) {
    return InvalidArgument("versions per record must be 1 to 16");
  }
  if (spec.value_bytes == 0 || spec.value_bytes > (1u << 20)) {
    return InvalidArgument("value size must be 1 byte to 1 MiB");
  }
  if (spec.slots_per_bucket < 1 || spec.slots_per_bucket > 64) {
    return InvalidArgument("slots per bucket must be 1 to 64");
  }
  if (spec.capacity == 0) return InvalidArgument("table capacity must be positive");
  if (spec.ordered && (spec.stripe_bits < 0 || spec.stripe_bits > 52)) {
    return InvalidArgument("stripe bits of an ordered table must be 0 to 52");
  }
  return Status::Ok();
}

namespace {

Task<Result<uint64_t>> Carve(Endpoint& ep, MnId mn, uint64_t cursor_offset, uint64_t bytes,
                             uint64_t limit, const char* what) {
  bytes = AlignUp(bytes, kHeapAlign);
  uint64_t old = 0;
  ep.Faa(GAddr::Make(mn, cursor_offset), bytes, &old);
  Status s = co_await ep.Flush();
  if (!s.ok()) co_return s;
  if (old + bytes > limit || old + bytes < old) {
    co_return OutOfSpace(std::string(what) + " of MN " + std::to_string(mn) + " exhausted (asked " +
                         std::to_string(bytes) + " bytes)");
  }
  co_return old;
}

}  // namespace

Task<Result<uint64_t>> CarveHeap(Endpoint& ep, const PoolLayout& l, MnId mn, uint64_t bytes) {
  return Carve(ep, mn, offsetof(Superblock, heap_cursor), bytes, l.heap_end, "general heap");
}

Task<Result<uint64_t>> CarveLane(Endpoint& ep, const PoolLayout& l, MnId primary, uint64_t bytes,
                                 uint64_t down_mns) {
  // One awaited FAA after another, highest replica first: a cursor is never behind a lower
  // replica's, so the lowest one up hands out only ranges nobody had (docs/formats.md).
  const int mirrors = std::min(l.replication - 1, kLaneMirrorsMax);
  std::optional<Result<uint64_t>> got;
  for (int i = mirrors; i >= 0; i--) {
    const auto mn = static_cast<MnId>((primary + static_cast<unsigned>(i)) % l.num_mns);
    if (MaskHas(down_mns, mn)) continue;
    const uint64_t cursor = i == 0 ? offsetof(Superblock, lane_cursor)
                                   : offsetof(Superblock, lane_mirror) + (i - 1) * sizeof(uint64_t);
    got = co_await Carve(ep, mn, cursor, bytes, l.lane_bytes, "record lanes");
    if (!got->ok()) co_return got->status();
  }
  if (!got)
    co_return Unavailable("every lane cursor of MN " + std::to_string(primary) +
                          "'s group is down");
  co_return std::move(*got);
}

Task<Status> CreateTable(Endpoint& ep, const PoolLayout& layout, const TableSpec& spec) {
  Status s = ValidateTableSpec(spec);
  if (!s.ok()) co_return s;
  uint16_t num_mns = layout.num_mns;
  TableDesc existing{};
  ep.Read(CatalogSlot(0, spec.id), &existing, sizeof(existing));
  s = co_await ep.Flush();
  if (!s.ok()) co_return s;
  if (existing.flags & kTablePresent) {
    co_return AlreadyExists("table id " + std::to_string(spec.id) + " exists");
  }

  TableDesc d{};
  d.table_id = spec.id;
  d.versions = static_cast<uint8_t>(spec.single_version ? 1 : spec.versions);
  d.flags = kTablePresent | (spec.critical_field ? kTableCriticalField : 0) |
            (spec.single_version ? kTableSingleVersion : 0) | (spec.ordered ? kTableOrdered : 0) |
            (spec.ordered && spec.keep_deleted_entries ? kTableKeepsDeleted : 0) |
            (spec.ordered && spec.keep_empty_leaves ? kTableKeepsEmpty : 0);
  if (spec.ordered) {
    d.stripe_bits = static_cast<uint8_t>(spec.stripe_bits);
    d.stripe_table = spec.stripe_table;
    d.tree_mib = TreeMib(spec, num_mns);
  }
  d.value_bytes = spec.value_bytes;
  d.record_stride = RecordStride(spec.value_bytes);
  d.cvt_bytes = spec.single_version ? SvSlotBytes(spec.value_bytes) : CvtBytes(spec.versions);
  d.slots_per_bucket = static_cast<uint16_t>(spec.slots_per_bucket);
  d.bucket_count = BucketCount(spec, num_mns);
  d.replication = static_cast<uint8_t>(layout.replication);
  std::memcpy(d.name, spec.name.data(), spec.name.size());
  uint64_t index_bytes =
      d.bucket_count * d.cvt_bytes * d.slots_per_bucket * static_cast<uint64_t>(d.replication);

  // One descriptor per MN: they differ only in where that MN's index area starts.
  std::vector<TableDesc> descs(num_mns, d);
  for (MnId mn = 0; mn < num_mns; mn++) {
    // An ordered table's tree space follows its index area, in the same carve.
    // (TreeOffset rounds up to a KiB past the index: at most 1023 bytes more.)
    // A replicated tree's space holds R copies of a range (btree/tree_space.h).
    const uint64_t area_bytes =
        d.tree_mib == 0 ? index_bytes
                        : index_bytes + 1024 + (uint64_t{d.tree_mib} << 20) * d.replication;
    Result<uint64_t> area = co_await CarveHeap(ep, layout, mn, area_bytes);
    if (!area.ok()) co_return area.status();
    descs[mn].index_offset = *area;
  }
  for (MnId mn = 0; mn < num_mns; mn++) {
    ep.Write(CatalogSlot(mn, spec.id), &descs[mn], sizeof(TableDesc));
  }
  co_return co_await ep.Flush();
}

Task<Result<Catalog>> LoadCatalog(Endpoint& ep) {
  Superblock sb0{};
  ep.Read(GAddr::Make(0, 0), &sb0, sizeof(sb0));
  Status s = co_await ep.Flush();
  if (!s.ok()) co_return s;
  if (sb0.magic != kSuperblockMagic || sb0.format_version != kFormatVersion) {
    co_return Corruption("MN 0 superblock has wrong magic or format version");
  }
  Catalog cat;
  PoolLayout& l = cat.layout_;
  l.num_mns = sb0.num_mns;
  l.replication = sb0.replication;
  l.region_bytes = sb0.region_bytes;
  l.chunk_bytes = sb0.chunk_bytes;
  l.heap_begin = sb0.heap_begin;
  l.heap_end = sb0.heap_end;
  l.lane_bytes = sb0.lane_bytes;
  std::vector<std::vector<TableDesc>> descs(sb0.num_mns, std::vector<TableDesc>(kTablesMax));
  for (MnId mn = 0; mn < sb0.num_mns; mn++) {
    ep.Read(CatalogSlot(mn, 0), descs[mn].data(), kTablesMax * sizeof(TableDesc));
  }
  s = co_await ep.Flush();
  if (!s.ok()) co_return s;
  for (uint16_t id = 0; id < kTablesMax; id++) {
    const TableDesc& d = descs[0][id];
    if (!(d.flags & kTablePresent)) continue;
    TableInfo t;
    t.id = id;
    t.name.assign(d.name, strnlen(d.name, sizeof(d.name)));
    t.versions = d.versions;
    t.critical_field = (d.flags & kTableCriticalField) != 0;
    t.single_version = (d.flags & kTableSingleVersion) != 0;
    t.value_bytes = d.value_bytes;
    t.record_stride = d.record_stride;
    t.cvt_bytes = d.cvt_bytes;
    t.slots_per_bucket = d.slots_per_bucket;
    t.bucket_count = d.bucket_count;
    t.replication = d.replication;
    t.ordered = (d.flags & kTableOrdered) != 0;
    if (t.ordered) {
      t.keep_deleted_entries = (d.flags & kTableKeepsDeleted) != 0;
      t.keep_empty_leaves = (d.flags & kTableKeepsEmpty) != 0;
      t.stripe_bits = d.stripe_bits;
      t.stripe_table = d.stripe_table;
      t.tree_bytes = uint64_t{d.tree_mib} << 20;
    }
    for (MnId mn = 0; mn < sb0.num_mns; mn++) {
      const TableDesc& dm = descs[mn][id];
      if (!(dm.flags & kTablePresent) || dm.bucket_count != d.bucket_count ||
          dm.cvt_bytes != d.cvt_bytes) {
        co_return Corruption("catalogs of MN 0 and MN " + std::to_string(mn) +
                             " disagree on table " + std::to_string(id));
      }
      t.index_offset.push_back(dm.index_offset);
    }
    cat.tables_.push_back(std::move(t));
  }
  co_return cat;
}

const TableInfo* Catalog::Find(uint16_t id) const {
  for (const auto& t : tables_) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

const TableInfo* Catalog::FindByName(const std::string& name) const {
  for (const auto& t : tables_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace pond::store
