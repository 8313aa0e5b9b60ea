// GAddr: a global address in the memory pool, MN id and byte offset packed into 8 bytes.
//
// Format (docs/formats.md "GAddr"): bits 63..48 = MN id, bits 47..0 = offset in that MN's
// region. Offset 0 of every region is the superblock, so the all-zero GAddr never names data and
// serves as null.
#pragma once

#include <cstdint>
#include <functional>

namespace pond {

using MnId = uint16_t;

struct GAddr {
  static constexpr int kOffsetBits = 48;
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;

  uint64_t raw = 0;

  static constexpr GAddr Make(MnId mn, uint64_t offset) {
    return GAddr{(uint64_t{mn} << kOffsetBits) | (offset & kOffsetMask)};
  }
  static constexpr GAddr Null() { return GAddr{0}; }

  constexpr MnId mn() const { return static_cast<MnId>(raw >> kOffsetBits); }
  constexpr uint64_t offset() const { return raw & kOffsetMask; }
  constexpr bool null() const { return raw == 0; }
  constexpr GAddr operator+(uint64_t bytes) const { return Make(mn(), offset() + bytes); }
  friend constexpr bool operator==(GAddr a, GAddr b) { return a.raw == b.raw; }
};
static_assert(sizeof(GAddr) == 8, "GAddr is one 8-byte word on the wire and in remote memory");

}  // namespace pond

template <>
struct std::hash<pond::GAddr> {
  size_t operator()(pond::GAddr a) const noexcept { return std::hash<uint64_t>()(a.raw); }
};
