#include "pond/store/hash_index.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "pond/base/assert.h"
#include "pond/base/hash.h"

namespace pond::store {

Result<Cvt> DecodeCvt(std::span<const std::byte> bytes, int versions) {
  POND_ASSERT(bytes.size() >= CvtBytes(versions));
  CvtHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  Cvt cvt;
  cvt.key = h.key;
  cvt.state = MetaState(h.meta);
  cvt.lock = h.lock;
  cvt.versions = versions;
  for (int i = 0; i < versions; i++) {
    CvtCell raw;
    std::memcpy(&raw, bytes.data() + sizeof(CvtHeader) + i * sizeof(CvtCell), sizeof(raw));
    Result<Cell> c = DecodeCell(raw);
    if (!c.ok()) return c.status();
    cvt.cells[i] = *c;
  }
  return cvt;
}

uint64_t HomeBucket(const TableInfo& t, uint64_t key) {
  return HashKey(key, HashUse::kIndexBucket) % t.bucket_count;
}

BucketScan ScanBucket(const TableInfo& t, std::span<const std::byte> bucket, uint64_t key) {
  BucketScan s;
  for (int i = 0; i < t.slots_per_bucket; i++) {
    CvtHeader h;
    std::memcpy(&h, bucket.data() + static_cast<size_t>(i) * t.cvt_bytes, sizeof(h));
    uint8_t state = MetaState(h.meta);
    if (state == kSlotEmpty) {
      if (s.first_empty < 0) s.first_empty = i;
    } else if (state == kSlotLive && h.key == key && MetaTable(h.meta) == t.id) {
      s.match = i;
      return s;
    }
  }
  return s;
}

Task<Result<Found>> Lookup(Endpoint& ep, const TableInfo& t, MnId mn, int replica, uint64_t key) {
  std::vector<std::byte> buf(t.bucket_bytes());
  uint64_t bucket = HomeBucket(t, key);
  for (int probe = 0; probe < kProbeBucketsMax; probe++) {
    ep.Read(t.BucketAddr(mn, replica, bucket), buf.data(), t.bucket_bytes());
    Status st = co_await ep.Flush();
    if (!st.ok()) co_return st;
    BucketScan s = ScanBucket(t, buf, key);
    if (s.match >= 0) {
      Result<Cvt> cvt =
          DecodeCvt(std::span(buf).subspan(static_cast<size_t>(s.match) * t.cvt_bytes, t.cvt_bytes),
                    t.versions);
      if (!cvt.ok()) co_return cvt.status();
      co_return Found{SlotRef{bucket, s.match}, *cvt};
    }
    if (s.first_empty >= 0) break;  // the key would have been placed here or earlier
    bucket = (bucket + 1) % t.bucket_count;
  }
  co_return NotFound("key " + std::to_string(key) + " not in table " + t.name);
}

Task<Result<SlotRef>> Insert(Endpoint& ep, const TableInfo& t, const PoolLayout& layout,
                             const Placement& placement, Allocator& alloc, uint64_t key,
                             std::span<const std::byte> value, uint64_t commit_ts) {
  if (value.size() != t.value_bytes) {
    co_return InvalidArgument("value of " + std::to_string(value.size()) + " bytes for table " +
                              t.name + " of " + std::to_string(t.value_bytes) + "-byte values");
  }
  MnId primary = placement.Primary(key);
  Result<SlotRef> claimed = co_await ClaimSlot(ep, t, placement, key);
  if (!claimed.ok()) co_return claimed.status();
  SlotRef ref = *claimed;

  // 2. Write record, cells, key, then meta=live on every replica. Within one MN the batch is
  // applied in this order, so a reader that sees the slot live finds the rest written.
  std::vector<std::byte> record(t.record_stride);
  EncodeRecord(value, 1, record);
  uint64_t live_meta = PackMeta(kSlotLive, t.id, static_cast<uint8_t>(t.versions), t.value_bytes);
  // Allocate before posting any write: an allocation may flush the endpoint to carve a chunk.
  // One allocation covers every replica, at the same lane-relative offset.
  Result<uint64_t> lane_off = co_await alloc.Alloc(ep, primary, t.record_stride);
  if (!lane_off.ok()) co_return lane_off.status();  // the claimed slot stays claimed, never live
  std::vector<CvtCell> first(placement.replication());
  for (int r = 0; r < placement.replication(); r++) {
    MnId mn = placement.Replica(key, r);
    uint64_t rec = layout.RecordOffset(r, *lane_off);
    first[r] = EncodeCell(Cell{.cv = 1, .valid = true, .commit_ts = commit_ts, .record = rec});
    GAddr slot = ref.Addr(t, mn, r);
    ep.Write(GAddr::Make(mn, rec), record.data(), t.record_stride);
    ep.Write(slot + sizeof(CvtHeader), &first[r], sizeof(CvtCell));
    ep.Write(slot + offsetof(CvtHeader, key), &key, sizeof(key));
    ep.Write(slot + offsetof(CvtHeader, meta), &live_meta, sizeof(live_meta));
  }
  Status st = co_await ep.Flush();
  if (!st.ok()) co_return st;
  co_return ref;
}

Task<Result<SlotRef>> ClaimSlot(Endpoint& ep, const TableInfo& t, const Placement& placement,
                                uint64_t key) {
  const MnId primary = placement.Primary(key);
  const uint64_t claimed_meta =
      PackMeta(kSlotClaimed, t.id, static_cast<uint8_t>(t.versions), t.value_bytes);
  std::vector<std::byte> buf(t.bucket_bytes());
  uint64_t bucket = HomeBucket(t, key);
  int probe = 0;
  for (int attempt = 0; attempt < kInsertAttemptsMax; attempt++) {
    ep.Read(t.BucketAddr(primary, 0, bucket), buf.data(), t.bucket_bytes());
    Status st = co_await ep.Flush();
    if (!st.ok()) co_return st;
    BucketScan s = ScanBucket(t, buf, key);
    if (s.match >= 0) co_return AlreadyExists("key " + std::to_string(key) + " exists");
    if (s.first_empty < 0) {
      if (++probe >= kProbeBucketsMax) break;
      bucket = (bucket + 1) % t.bucket_count;
      continue;
    }
    uint64_t old = 0;
    SlotRef ref{bucket, s.first_empty};
    ep.Cas(ref.Addr(t, primary, 0) + offsetof(CvtHeader, meta), 0, claimed_meta, &old);
    st = co_await ep.Flush();
    if (!st.ok()) co_return st;
    if (old != 0) continue;  // lost the race: re-read this bucket for its next empty slot
    // Won: the claim on every other replica up (see the header).
    for (int r = 1; r < placement.replication(); r++) {
      const MnId mn = placement.Replica(key, r);
      if (placement.IsDown(mn)) continue;
      ep.Write(ref.Addr(t, mn, r) + offsetof(CvtHeader, meta), &claimed_meta, sizeof(claimed_meta));
    }
    st = co_await ep.Flush();
    if (!st.ok()) co_return st;
    co_return ref;
  }
  co_return OutOfSpace("no free slot for key " + std::to_string(key) + " within " +
                       std::to_string(kProbeBucketsMax) + " buckets of table " + t.name);
}

Task<Status> ReadRecord(Endpoint& ep, const TableInfo& t, MnId mn, const Cell& cell,
                        std::span<std::byte> value) {
  POND_ASSERT(value.size() == t.value_bytes);
  if (!cell.valid || cell.record == 0) co_return NotFound("cell holds no version");
  std::vector<std::byte> buf(t.record_stride);
  ep.Read(GAddr::Make(mn, cell.record), buf.data(), t.record_stride);
  Status st = co_await ep.Flush();
  if (!st.ok()) co_return st;
  co_return DecodeRecord(buf, cell.cv, value);
}

}  // namespace pond::store
