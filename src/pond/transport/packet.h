// The CN-to-CN packet: every message one worker sends to one other worker in one scheduling
// round, packed together (Dandelion's batching). Grammar in docs/formats.md "CN packet".
// All integers little-endian; every message starts 8-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pond {

struct PacketHeader {
  uint32_t magic;  // kPacketMagic
  uint16_t src_cn;
  uint16_t src_worker;
  uint16_t dst_cn;
  uint16_t dst_worker;
  uint16_t count;     // messages that follow
  uint16_t reserved;  // zero
};
static_assert(sizeof(PacketHeader) == 16);
static_assert(offsetof(PacketHeader, src_cn) == 4);
static_assert(offsetof(PacketHeader, dst_cn) == 8);
static_assert(offsetof(PacketHeader, count) == 12);

struct MessageHeader {
  uint16_t kind;      // protocol-defined message type
  uint16_t reserved;  // zero
  uint32_t len;       // payload bytes, not counting padding
};
static_assert(sizeof(MessageHeader) == 8);
static_assert(offsetof(MessageHeader, len) == 4);

inline constexpr uint32_t kPacketMagic = 0x444e4f50;  // "POND"
inline constexpr uint32_t kMessageLenMax = 1u << 20;
inline constexpr uint16_t kPacketMessagesMax = 0xffff;

constexpr size_t PaddedLen(size_t n) { return (n + 7) & ~size_t{7}; }

}  // namespace pond
