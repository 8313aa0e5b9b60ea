// The CN-to-CN packet: every message one worker sends to one other worker in one scheduling
// round, packed together (Dandelion's batching). Grammar in docs/formats.md "CN packet".
// All integers little-endian; every message starts 8-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace pond {

struct PacketHeader {
  uint32_t magic;  // kPacketMagic
  uint16_t src_cn;
  uint16_t src_worker;
  uint16_t dst_cn;
  uint16_t dst_worker;
  uint16_t count;        // messages that follow
  uint16_t incarnation;  // of the sender's CN: a receiver refuses a dead incarnation's packets
};
static_assert(sizeof(PacketHeader) == 16);
static_assert(offsetof(PacketHeader, incarnation) == 14);
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

// An allocator whose resize() leaves new elements uninitialised: packet bytes are always
// written right after the buffer grows, and zero-filling them first cost a memset per message.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }
};

// The bytes of one CN packet.
using PacketBuffer = std::vector<std::byte, UninitializedAllocator<std::byte>>;

// Spare packet buffers: a receiver gives each delivered packet's buffer back, a sender takes one
// for its next packet, so steady-state messaging allocates nothing. Who shares a pool must share
// a thread: each endpoint of the `local` transport has its own, while all endpoints of the
// simulator share one (a worker that sends more packets than it receives — a client of a
// server that batches its replies — would otherwise keep allocating).
class PacketBufferPool {
 public:
  static constexpr size_t kBufferBytesInitial = 256;  // most packets fit

  explicit PacketBufferPool(size_t buffers_max) : buffers_max_(buffers_max) {}

  PacketBuffer Take() {
    if (spares_.empty()) {
      PacketBuffer b;
      b.reserve(kBufferBytesInitial);
      return b;
    }
    PacketBuffer b = std::move(spares_.back());
    spares_.pop_back();
    return b;
  }
  // Keeps at most buffers_max spares; beyond that the memory goes back to malloc.
  void Give(PacketBuffer&& b) {
    if (spares_.size() < buffers_max_ && b.capacity() > 0) {
      b.clear();
      spares_.push_back(std::move(b));
    }
  }

 private:
  size_t buffers_max_;
  std::vector<PacketBuffer> spares_;
};

}  // namespace pond
