#include "pond/store/bulk_load.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "pond/store/hash_index.h"
#include "pond/store/layout.h"
#include "pond/store/record.h"
#include "pond/store/sv_slot.h"

namespace pond::store {
namespace {

// What meta says of a live slot of table t (Insert's, SvInsert's).
uint64_t LiveMeta(const TableInfo& t) {
  return PackMeta(kSlotLive, t.id, static_cast<uint8_t>(t.single_version ? 1 : t.versions),
                  t.value_bytes);
}

// Posts the ops that move bytes [from, to) of a group's sub-index copy `image` between it and
// replica `r` on MN `mn`, a MiB at most each. READ or WRITE as `read` says.
void PostIndexRange(Endpoint& ep, const TableInfo& t, MnId mn, int r, std::vector<std::byte>& image,
                    uint64_t from, uint64_t to, bool read) {
  const GAddr base = t.BucketAddr(mn, r, 0);
  for (uint64_t at = from; at < to; at += kBulkOpBytesMax) {
    const auto len = static_cast<uint32_t>(std::min<uint64_t>(kBulkOpBytesMax, to - at));
    if (read) {
      ep.Read(base + at, image.data() + at, len);
    } else {
      ep.Write(base + at, image.data() + at, len);
    }
  }
}

// Where a key goes: its slot in the group's sub-index and its record's lane-relative offset.
struct Placed {
  size_t row = 0;
  uint64_t bucket = 0;
  int slot = 0;
  uint64_t lane = 0;
};

// Finds each row a free slot in the primary's copy by Insert's probing (ClaimSlot), marking it
// live there so that a later row sees it taken and a key given twice is refused.
Status PlaceRows(const TableInfo& t, std::span<const uint64_t> keys, std::vector<std::byte>& image,
                 std::vector<Placed>& placed) {
  const uint64_t live = LiveMeta(t);
  const uint32_t bb = t.bucket_bytes();
  for (Placed& p : placed) {
    const uint64_t key = keys[p.row];
    uint64_t bucket = HomeBucket(t, key);
    int probe = 0;
    for (;;) {
      std::span<std::byte> b(image.data() + bucket * bb, bb);
      const BucketScan s = ScanBucket(t, b, key);
      if (s.match >= 0) return AlreadyExists("key " + std::to_string(key) + " exists");
      if (s.first_empty >= 0) {
        p.bucket = bucket;
        p.slot = s.first_empty;
        std::byte* slot = b.data() + static_cast<size_t>(s.first_empty) * t.cvt_bytes;
        std::memcpy(slot + offsetof(CvtHeader, key), &key, sizeof(key));
        std::memcpy(slot + offsetof(CvtHeader, meta), &live, sizeof(live));
        break;
      }
      if (++probe >= kProbeBucketsMax) {
        return OutOfSpace("no free slot for key " + std::to_string(key) + " within " +
                          std::to_string(kProbeBucketsMax) + " buckets of table " + t.name);
      }
      bucket = (bucket + 1) % t.bucket_count;
    }
  }
  return Status::Ok();
}

// Posts the WRITEs of the group's records to replica `r` on MN `mn`: rows whose records the
// allocator handed out back to back (all of a chunk) go in one WRITE, up to a MiB.
void PostRecords(Endpoint& ep, const TableInfo& t, const PoolLayout& layout, MnId mn, int r,
                 const std::vector<Placed>& placed, const std::vector<std::byte>& records) {
  const uint64_t stride = t.record_stride;
  size_t first = 0;
  for (size_t i = 1; i <= placed.size(); i++) {
    const bool joins = i < placed.size() && placed[i].lane == placed[i - 1].lane + stride &&
                       (i - first + 1) * stride <= kBulkOpBytesMax;
    if (joins) continue;
    ep.Write(GAddr::Make(mn, layout.RecordOffset(r, placed[first].lane)),
             records.data() + first * stride, static_cast<uint32_t>((i - first) * stride));
    first = i;
  }
}

// Writes into `slot`, replica r's copy of a placed row's slot, what Insert or SvInsert leaves
// there. A CVT: key, meta live, and the first cell, pointing at the record in that replica's
// lane; the rest (lock word, later cells) as it was. A single-version slot: all of it, encoded
// as claimed, then meta live, as SvInsert's two WRITEs leave it.
void FillSlot(const TableInfo& t, const PoolLayout& layout, int r, const Placed& pl, uint64_t key,
              std::span<const std::byte> value, uint64_t commit_ts, std::span<std::byte> slot) {
  const uint64_t live = LiveMeta(t);
  if (t.single_version) {
    SvHeader h{};
    h.key = key;
    h.meta = PackMeta(kSlotClaimed, t.id, 1, t.value_bytes);
    h.version = 1;
    EncodeSvSlot(t, h, value, slot);
  } else {
    const CvtCell cell = EncodeCell(Cell{
        .cv = 1, .valid = true, .commit_ts = commit_ts, .record = layout.RecordOffset(r, pl.lane)});
    std::memcpy(slot.data() + sizeof(CvtHeader), &cell, sizeof(cell));
    std::memcpy(slot.data() + offsetof(CvtHeader, key), &key, sizeof(key));
  }
  std::memcpy(slot.data() + offsetof(CvtHeader, meta), &live, sizeof(live));
}

// Loads the rows whose primary is MN `p` (placed[].row): copies the group's sub-index from
// every replica, places the rows, writes their records, then the changed part of each copy.
Task<Status> LoadGroup(Endpoint& ep, const TableInfo& t, const PoolLayout& layout,
                       const Placement& placement, Allocator& alloc, MnId p,
                       std::span<const uint64_t> keys, std::span<const std::byte> values,
                       uint64_t commit_ts, std::vector<Placed> placed) {
  const int replicas = placement.replication();
  const uint64_t group_bytes = t.group_bytes();
  std::vector<std::vector<std::byte>> images(static_cast<size_t>(replicas));
  auto mn_of = [&](int r) {
    return static_cast<MnId>((p + static_cast<unsigned>(r)) % placement.num_mns());
  };
  for (int r = 0; r < replicas; r++) {
    images[r].resize(group_bytes);
    PostIndexRange(ep, t, mn_of(r), r, images[r], 0, group_bytes, /*read=*/true);
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  if (Status s = PlaceRows(t, keys, images[0], placed); !s.ok()) co_return s;

  // Records first: once a slot is live, its record must be there (as in Insert). A
  // single-version slot holds its value itself.
  if (!t.single_version) {
    const uint64_t stride = t.record_stride;
    std::vector<std::byte> records(placed.size() * stride);
    for (size_t i = 0; i < placed.size(); i++) {
      if (std::optional<uint64_t> lane = alloc.TakeInHand(p, t.record_stride)) {
        placed[i].lane = *lane;
      } else {
        Result<uint64_t> carved = co_await alloc.Alloc(ep, p, t.record_stride);
        if (!carved.ok()) co_return carved.status();
        placed[i].lane = *carved;
      }
      EncodeRecord(values.subspan(placed[i].row * t.value_bytes, t.value_bytes), 1,
                   std::span<std::byte>(records.data() + i * stride, stride));
    }
    for (int r = 0; r < replicas; r++) PostRecords(ep, t, layout, mn_of(r), r, placed, records);
    if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  }

  // Then every replica's slots, the changed range of buckets.
  const uint32_t bb = t.bucket_bytes();
  uint64_t lo = t.bucket_count;
  uint64_t hi = 0;
  for (const Placed& pl : placed) {
    lo = std::min(lo, pl.bucket);
    hi = std::max(hi, pl.bucket);
    for (int r = 0; r < replicas; r++) {
      std::span<std::byte> slot(
          images[r].data() + pl.bucket * bb + static_cast<size_t>(pl.slot) * t.cvt_bytes,
          t.cvt_bytes);
      FillSlot(t, layout, r, pl, keys[pl.row],
               values.subspan(pl.row * t.value_bytes, t.value_bytes), commit_ts, slot);
    }
  }
  for (int r = 0; r < replicas; r++) {
    PostIndexRange(ep, t, mn_of(r), r, images[r], lo * bb, (hi + 1) * bb, /*read=*/false);
  }
  co_return co_await ep.Flush();
}

}  // namespace

Task<Status> BulkLoad(Endpoint& ep, const TableInfo& t, const PoolLayout& layout,
                      const Placement& placement, Allocator& alloc, std::span<const uint64_t> keys,
                      std::span<const std::byte> values, uint64_t commit_ts) {
  if (t.ordered) co_return InvalidArgument("table " + t.name + " is ordered: load it key by key");
  if (values.size() != keys.size() * t.value_bytes) {
    co_return InvalidArgument(std::to_string(values.size()) + " value bytes for " +
                              std::to_string(keys.size()) + " keys of table " + t.name + " (" +
                              std::to_string(t.value_bytes) + " each)");
  }
  std::vector<std::vector<Placed>> groups(placement.num_mns());
  for (size_t i = 0; i < keys.size(); i++) groups[placement.Primary(keys[i])].push_back({.row = i});
  for (MnId p = 0; p < placement.num_mns(); p++) {
    if (groups[p].empty()) continue;
    Status s = co_await LoadGroup(ep, t, layout, placement, alloc, p, keys, values, commit_ts,
                                  std::move(groups[p]));
    if (!s.ok()) co_return s;
  }
  co_return Status::Ok();
}

}  // namespace pond::store
