#include "pond/store/sv_slot.h"

#include <cstring>
#include <vector>

#include "pond/base/assert.h"
#include "pond/store/record.h"

namespace pond::store {

void EncodeSvSlot(const TableInfo& t, const SvHeader& h, std::span<const std::byte> value,
                  std::span<std::byte> out) {
  POND_ASSERT(out.size() == t.cvt_bytes && value.size() == t.value_bytes);
  std::memcpy(out.data(), &h, sizeof(h));
  EncodeRecord(value, static_cast<uint8_t>(h.version), out.subspan(sizeof(SvHeader)));
}

Status DecodeSvSlot(const TableInfo& t, std::span<const std::byte> slot, SvHeader* h,
                    std::span<std::byte> value) {
  POND_ASSERT(slot.size() >= t.cvt_bytes);
  std::memcpy(h, slot.data(), sizeof(*h));
  return DecodeRecord(slot.subspan(sizeof(SvHeader), t.record_stride),
                      static_cast<uint8_t>(h->version), value);
}

Task<Result<SlotRef>> SvLocate(Endpoint& ep, const TableInfo& t, MnId mn, int replica,
                               uint64_t key) {
  std::vector<std::byte> buf(t.bucket_bytes());
  uint64_t bucket = HomeBucket(t, key);
  for (int probe = 0; probe < kProbeBucketsMax; probe++) {
    ep.Read(t.BucketAddr(mn, replica, bucket), buf.data(), t.bucket_bytes());
    Status st = co_await ep.Flush();
    if (!st.ok()) co_return st;
    BucketScan s = ScanBucket(t, buf, key);
    if (s.match >= 0) co_return SlotRef{bucket, s.match};
    if (s.first_empty >= 0) break;
    bucket = (bucket + 1) % t.bucket_count;
  }
  co_return NotFound("key " + std::to_string(key) + " not in table " + t.name);
}

Task<Result<SlotRef>> SvInsert(Endpoint& ep, const TableInfo& t, const Placement& placement,
                               uint64_t key, std::span<const std::byte> value) {
  POND_CHECK(t.single_version);
  if (value.size() != t.value_bytes) {
    co_return InvalidArgument("value of " + std::to_string(value.size()) + " bytes for table " +
                              t.name + " of " + std::to_string(t.value_bytes) + "-byte values");
  }
  Result<SlotRef> claimed = co_await ClaimSlot(ep, t, placement, key);
  if (!claimed.ok()) co_return claimed.status();
  // The slot with meta still "claimed", then meta=live: a scan that sees it live finds it whole.
  SvHeader h{};
  h.key = key;
  h.meta = PackMeta(kSlotClaimed, t.id, 1, t.value_bytes);
  h.version = 1;
  std::vector<std::byte> image(t.cvt_bytes);
  EncodeSvSlot(t, h, value, image);
  const uint64_t live = PackMeta(kSlotLive, t.id, 1, t.value_bytes);
  for (int r = 0; r < placement.replication(); r++) {
    GAddr slot = claimed->Addr(t, placement.Replica(key, r), r);
    ep.Write(slot, image.data(), t.cvt_bytes);
    ep.Write(slot + offsetof(SvHeader, meta), &live, sizeof(live));
  }
  Status st = co_await ep.Flush();
  if (!st.ok()) co_return st;
  co_return *claimed;
}

}  // namespace pond::store
