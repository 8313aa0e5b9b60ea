#include "pond/store/catalog.h"

#include <cstring>

#include "pond/base/assert.h"
#include "pond/transport/remote_copy.h"

namespace pond::store {

namespace {

constexpr uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
constexpr double kIndexLoadFactor = 0.7;

GAddr CatalogSlot(MnId mn, uint16_t id) {
  return GAddr::Make(mn, kCatalogOffset + uint64_t{id} * sizeof(TableDesc));
}

uint64_t BucketCount(const TableSpec& spec) {
  double slots = static_cast<double>(spec.capacity) / kIndexLoadFactor;
  uint64_t buckets = static_cast<uint64_t>(slots / spec.slots_per_bucket) + 1;
  return buckets < 2 ? 2 : buckets;
}

}  // namespace

Status FormatRegion(std::byte* base, uint64_t region_bytes, MnId mn, uint16_t num_mns,
                    uint64_t chunk_bytes) {
  uint64_t heap_begin = AlignUp(kCatalogOffset + uint64_t{kTablesMax} * sizeof(TableDesc), 4096);
  if (region_bytes < heap_begin + chunk_bytes) {
    return InvalidArgument("MN region of " + std::to_string(region_bytes) +
                           " bytes cannot hold the catalog and one chunk");
  }
  if (chunk_bytes == 0 || chunk_bytes % kHeapAlign != 0) {
    return InvalidArgument("chunk size must be a positive multiple of 64");
  }
  Superblock sb{};
  sb.magic = kSuperblockMagic;
  sb.format_version = kFormatVersion;
  sb.mn_id = mn;
  sb.num_mns = num_mns;
  sb.region_bytes = region_bytes;
  sb.chunk_bytes = chunk_bytes;
  sb.heap_begin = heap_begin;
  sb.heap_cursor = heap_begin;
  sb.catalog_offset = kCatalogOffset;
  sb.tables_max = kTablesMax;
  // The MN formats before any CN connects, but tests reuse a fabric across threads, so the
  // store goes through the same race-free path as remote writes.
  std::vector<std::byte> zero(heap_begin - sizeof(sb));
  RemoteStore(base + sizeof(sb), zero.data(), zero.size());
  RemoteStore(base, &sb, sizeof(sb));
  return Status::Ok();
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
  return Status::Ok();
}

Task<Result<uint64_t>> CarveHeap(Endpoint& ep, MnId mn, uint64_t bytes, uint64_t region_bytes) {
  bytes = AlignUp(bytes, kHeapAlign);
  uint64_t old = 0;
  ep.Faa(GAddr::Make(mn, offsetof(Superblock, heap_cursor)), bytes, &old);
  Status s = co_await ep.Flush();
  if (!s.ok()) co_return s;
  if (old + bytes > region_bytes || old + bytes < old) {
    co_return OutOfSpace("MN " + std::to_string(mn) + " heap exhausted (asked " +
                         std::to_string(bytes) + " bytes)");
  }
  co_return old;
}

Task<Status> CreateTable(Endpoint& ep, uint16_t num_mns, const TableSpec& spec) {
  Status s = ValidateTableSpec(spec);
  if (!s.ok()) co_return s;
  Superblock sb{};
  ep.Read(GAddr::Make(0, 0), &sb, sizeof(sb));
  TableDesc existing{};
  ep.Read(CatalogSlot(0, spec.id), &existing, sizeof(existing));
  s = co_await ep.Flush();
  if (!s.ok()) co_return s;
  if (sb.magic != kSuperblockMagic) co_return Corruption("MN 0 is not formatted");
  if (existing.flags & kTablePresent) {
    co_return AlreadyExists("table id " + std::to_string(spec.id) + " exists");
  }

  TableDesc d{};
  d.table_id = spec.id;
  d.versions = static_cast<uint8_t>(spec.versions);
  d.flags = kTablePresent | (spec.critical_field ? kTableCriticalField : 0);
  d.value_bytes = spec.value_bytes;
  d.record_stride = RecordStride(spec.value_bytes);
  d.cvt_bytes = CvtBytes(spec.versions);
  d.slots_per_bucket = static_cast<uint16_t>(spec.slots_per_bucket);
  d.bucket_count = BucketCount(spec);
  std::memcpy(d.name, spec.name.data(), spec.name.size());
  uint64_t index_bytes = d.bucket_count * d.cvt_bytes * d.slots_per_bucket;

  // One descriptor per MN: they differ only in where that MN's index area starts.
  std::vector<TableDesc> descs(num_mns, d);
  for (MnId mn = 0; mn < num_mns; mn++) {
    Result<uint64_t> area = co_await CarveHeap(ep, mn, index_bytes, sb.region_bytes);
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
  cat.region_ = RegionInfo{sb0.num_mns, sb0.region_bytes, sb0.chunk_bytes};
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
    t.value_bytes = d.value_bytes;
    t.record_stride = d.record_stride;
    t.cvt_bytes = d.cvt_bytes;
    t.slots_per_bucket = d.slots_per_bucket;
    t.bucket_count = d.bucket_count;
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
