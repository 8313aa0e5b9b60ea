#include "pond/store/bulk_load.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "pond/base/assert.h"
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

// The part of a group's sub-index one pass works on: `count` buckets from bucket `first`, taken
// modulo the table's buckets (a probe path runs on from the last bucket to the first). `image` is
// each replica's copy of them.
struct Window {
  uint64_t first = 0;
  uint64_t count = 0;
  // Bucket `bucket`'s place in the window (it must be in it).
  uint64_t Rel(const TableInfo& t, uint64_t bucket) const {
    return (bucket + t.bucket_count - first) % t.bucket_count;
  }
};

// Posts the ops that move the window's buckets [from, to) (window-relative) between `image` and
// replica `r` on MN `mn`, a MiB at most each, split where they run past the table's last bucket.
// READ or WRITE as `read` says.
void PostBuckets(Endpoint& ep, const TableInfo& t, MnId mn, int r, const Window& w,
                 std::vector<std::byte>& image, uint64_t from, uint64_t to, bool read) {
  const uint32_t bb = t.bucket_bytes();
  while (from < to) {
    const uint64_t bucket = (w.first + from) % t.bucket_count;
    const uint64_t run = std::min(to - from, t.bucket_count - bucket);  // up to the wrap
    const GAddr base = t.BucketAddr(mn, r, bucket);
    for (uint64_t at = 0; at < run * bb; at += kBulkOpBytesMax) {
      const auto len = static_cast<uint32_t>(std::min<uint64_t>(kBulkOpBytesMax, run * bb - at));
      std::byte* local = image.data() + from * bb + at;
      if (read) {
        ep.Read(base + at, local, len);
      } else {
        ep.Write(base + at, local, len);
      }
    }
    from += run;
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
Status PlaceRows(const TableInfo& t, std::span<const uint64_t> keys, const Window& w,
                 std::vector<std::byte>& image, std::span<Placed> placed) {
  const uint64_t live = LiveMeta(t);
  const uint32_t bb = t.bucket_bytes();
  for (Placed& p : placed) {
    const uint64_t key = keys[p.row];
    uint64_t bucket = HomeBucket(t, key);
    int probe = 0;
    for (;;) {
      POND_ASSERT(w.Rel(t, bucket) < w.count);
      std::span<std::byte> b(image.data() + w.Rel(t, bucket) * bb, bb);
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
                 std::span<const Placed> placed, const std::vector<std::byte>& records) {
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

// Loads `placed`, rows whose primary is MN `p` and whose home buckets are in window `w`: copies
// the window from every replica, places the rows, writes their records, then the changed part of
// each copy.
Task<Status> LoadWindow(Endpoint& ep, const TableInfo& t, const PoolLayout& layout,
                        const Placement& placement, Allocator& alloc, MnId p, Window w,
                        std::span<const uint64_t> keys, std::span<const std::byte> values,
                        uint64_t commit_ts, std::span<Placed> placed) {
  const int replicas = placement.replication();
  const uint32_t bb = t.bucket_bytes();
  std::vector<std::vector<std::byte>> images(static_cast<size_t>(replicas));
  auto mn_of = [&](int r) {
    return static_cast<MnId>((p + static_cast<unsigned>(r)) % placement.num_mns());
  };
  for (int r = 0; r < replicas; r++) {
    images[r].resize(w.count * bb);
    PostBuckets(ep, t, mn_of(r), r, w, images[r], 0, w.count, /*read=*/true);
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  if (Status s = PlaceRows(t, keys, w, images[0], placed); !s.ok()) co_return s;

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

  // Then every replica's slots, the changed range of the window's buckets.
  uint64_t lo = w.count;
  uint64_t hi = 0;
  for (const Placed& pl : placed) {
    const uint64_t rel = w.Rel(t, pl.bucket);
    lo = std::min(lo, rel);
    hi = std::max(hi, rel);
    for (int r = 0; r < replicas; r++) {
      std::span<std::byte> slot(
          images[r].data() + rel * bb + static_cast<size_t>(pl.slot) * t.cvt_bytes, t.cvt_bytes);
      FillSlot(t, layout, r, pl, keys[pl.row],
               values.subspan(pl.row * t.value_bytes, t.value_bytes), commit_ts, slot);
    }
  }
  for (int r = 0; r < replicas; r++) {
    PostBuckets(ep, t, mn_of(r), r, w, images[r], lo, hi + 1, /*read=*/false);
  }
  co_return co_await ep.Flush();
}

// Loads the rows whose primary is MN `p` (placed[].row), a window of the group's buckets at a
// time: the rows whose home buckets are in it, with the kProbeBucketsMax - 1 buckets after it that
// their probe paths may reach. A window read after the one before it was written sees that one's
// rows in the buckets they share. A group that fits in one window is read whole, once.
Task<Status> LoadGroup(Endpoint& ep, const TableInfo& t, const PoolLayout& layout,
                       const Placement& placement, Allocator& alloc, MnId p,
                       std::span<const uint64_t> keys, std::span<const std::byte> values,
                       uint64_t commit_ts, std::vector<Placed> placed, uint64_t window_bytes) {
  const uint64_t n = t.bucket_count;
  const uint64_t window = std::max<uint64_t>(1, window_bytes / t.bucket_bytes());
  if (window >= n) {
    co_return co_await LoadWindow(ep, t, layout, placement, alloc, p, Window{0, n}, keys, values,
                                  commit_ts, placed);
  }
  // Rows by window, each window's in the order given.
  for (Placed& pl : placed) pl.bucket = HomeBucket(t, keys[pl.row]) / window;
  std::stable_sort(placed.begin(), placed.end(),
                   [](const Placed& a, const Placed& b) { return a.bucket < b.bucket; });
  size_t begin = 0;
  while (begin < placed.size()) {
    const uint64_t index = placed[begin].bucket;
    size_t end = begin;
    while (end < placed.size() && placed[end].bucket == index) end++;
    const uint64_t first = index * window;
    const uint64_t span = std::min(n, std::min(window, n - first) + kProbeBucketsMax - 1);
    Status s =
        co_await LoadWindow(ep, t, layout, placement, alloc, p, Window{first, span}, keys, values,
                            commit_ts, std::span<Placed>(placed.data() + begin, end - begin));
    if (!s.ok()) co_return s;
    begin = end;
  }
  co_return Status::Ok();
}

}  // namespace

Task<Status> BulkLoad(Endpoint& ep, const TableInfo& t, const PoolLayout& layout,
                      const Placement& placement, Allocator& alloc, std::span<const uint64_t> keys,
                      std::span<const std::byte> values, uint64_t commit_ts,
                      BulkLoadOptions options) {
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
                                  std::move(groups[p]), options.window_bytes);
    if (!s.ok()) co_return s;
  }
  co_return Status::Ok();
}

}  // namespace pond::store
