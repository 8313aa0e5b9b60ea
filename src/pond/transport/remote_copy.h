// Copies between local buffers and memory that other threads access concurrently (the `local`
// transport's MN regions, CN lock tables).
//
// These give remote memory the semantics Pond's formats are designed for, and nothing stronger:
//  * every aligned 8-byte word is single-copy atomic (bytes outside whole words: each byte);
//  * a WRITE stores in increasing address order, each store a release;
//  * a READ loads in decreasing address order, each load an acquire.
// Together these make a 1-byte version placed at the head of a range detect a concurrent writer:
// a READ that saw any byte of a newer WRITE also sees that WRITE's (earlier-stored) head version,
// because it loads the head last (docs/formats.md "Cacheline versions"). They are also what makes
// concurrent readers and writers free of C++ data races, so ThreadSanitizer can check the rest.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pond {

inline void RemoteStore(std::byte* remote, const void* local, size_t len) {
  auto* src = static_cast<const unsigned char*>(local);
  auto* p = reinterpret_cast<unsigned char*>(remote);
  size_t i = 0;
  while (i < len && (reinterpret_cast<uintptr_t>(p + i) & 7) != 0) {
    std::atomic_ref<unsigned char>(p[i]).store(src[i], std::memory_order_release);
    i++;
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    std::memcpy(&w, src + i, 8);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p + i))
        .store(w, std::memory_order_release);
  }
  for (; i < len; i++) {
    std::atomic_ref<unsigned char>(p[i]).store(src[i], std::memory_order_release);
  }
}

inline void RemoteLoad(void* local, const std::byte* remote, size_t len) {
  auto* dst = static_cast<unsigned char*>(local);
  auto* p = const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(remote));
  // Split [0, len) into an unaligned head, whole words, and a tail, then walk it backwards.
  size_t head = 0;
  while (head < len && (reinterpret_cast<uintptr_t>(p + head) & 7) != 0) head++;
  size_t words_end = head + ((len - head) & ~size_t{7});
  for (size_t i = len; i > words_end; i--) {
    dst[i - 1] = std::atomic_ref<unsigned char>(p[i - 1]).load(std::memory_order_acquire);
  }
  for (size_t i = words_end; i > head; i -= 8) {
    uint64_t w = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p + i - 8))
                     .load(std::memory_order_acquire);
    std::memcpy(dst + i - 8, &w, 8);
  }
  for (size_t i = head; i > 0; i--) {
    dst[i - 1] = std::atomic_ref<unsigned char>(p[i - 1]).load(std::memory_order_acquire);
  }
}

// Atomic 8-byte compare-and-swap and fetch-and-add on an aligned word; return the old value.
inline uint64_t RemoteCas(std::byte* remote, uint64_t expected, uint64_t desired) {
  std::atomic_ref<uint64_t> w(*reinterpret_cast<uint64_t*>(remote));
  w.compare_exchange_strong(expected, desired, std::memory_order_acq_rel,
                            std::memory_order_acquire);
  return expected;  // on failure compare_exchange stored the observed value here
}

inline uint64_t RemoteFaa(std::byte* remote, uint64_t add) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(remote))
      .fetch_add(add, std::memory_order_acq_rel);
}

}  // namespace pond
