// The catalog: which tables exist and where their index lives on every MN.
//
// MN side: FormatRegion writes a fresh superblock and empty catalog when an MN starts — the only
// work an MN's CPU does. CN side: CreateTable carves each MN's index area from the heap (FAA on
// the superblock's heap cursor) and writes the table's descriptor to every MN's catalog;
// LoadCatalog reads all of it once at start and keeps it as TableInfo, the "few KB of metadata"
// CNs cache (Lotus §3). Table creation is a setup step: one CN creates each table, before any
// transaction uses it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pond/runtime/task.h"
#include "pond/status.h"
#include "pond/store/layout.h"
#include "pond/transport/endpoint.h"

namespace pond::store {

// What a user asks for.
struct TableSpec {
  uint16_t id = 0;
  std::string name;
  uint32_t value_bytes = 40;
  int versions = 4;                 // N version cells per key
  bool critical_field = false;      // keys carry the shard number in bits 0..11 (Lotus §4.2)
  uint64_t capacity = 1 << 16;      // keys the index must hold
  int slots_per_bucket = 4;
};

// What a CN knows about a table after loading the catalog.
struct TableInfo {
  uint16_t id = 0;
  std::string name;
  int versions = 0;
  bool critical_field = false;
  uint32_t value_bytes = 0;
  uint32_t record_stride = 0;
  uint32_t cvt_bytes = 0;
  int slots_per_bucket = 0;
  uint64_t bucket_count = 0;
  std::vector<uint64_t> index_offset;  // per MN

  uint32_t bucket_bytes() const { return cvt_bytes * static_cast<uint32_t>(slots_per_bucket); }
  GAddr BucketAddr(MnId mn, uint64_t bucket) const {
    return GAddr::Make(mn, index_offset[mn] + bucket * bucket_bytes());
  }
  GAddr SlotAddr(MnId mn, uint64_t bucket, int slot) const {
    return BucketAddr(mn, bucket) + static_cast<uint64_t>(slot) * cvt_bytes;
  }
};

struct RegionInfo {
  uint16_t num_mns = 0;
  uint64_t region_bytes = 0;
  uint64_t chunk_bytes = 0;
};

class Catalog {
 public:
  const TableInfo* Find(uint16_t id) const;
  const TableInfo* FindByName(const std::string& name) const;
  const std::vector<TableInfo>& tables() const { return tables_; }
  const RegionInfo& region() const { return region_; }

 private:
  friend Task<Result<Catalog>> LoadCatalog(Endpoint& ep);
  RegionInfo region_;
  std::vector<TableInfo> tables_;
};

// MN side, at start: lay out an empty region. `base` is the region's memory.
Status FormatRegion(std::byte* base, uint64_t region_bytes, MnId mn, uint16_t num_mns,
                    uint64_t chunk_bytes);

// Validates a spec (sizes, limits) without touching memory.
Status ValidateTableSpec(const TableSpec& spec);

Task<Status> CreateTable(Endpoint& ep, uint16_t num_mns, const TableSpec& spec);
Task<Result<Catalog>> LoadCatalog(Endpoint& ep);

// FAA on an MN's heap cursor: `bytes` (rounded up to kHeapAlign) of never-used, zeroed heap.
Task<Result<uint64_t>> CarveHeap(Endpoint& ep, MnId mn, uint64_t bytes, uint64_t region_bytes);

}  // namespace pond::store
