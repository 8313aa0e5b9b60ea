// AllocCache: a per-thread cache of freed heap blocks in front of malloc, switched on while a
// simulation, or an embedded cluster's worker, runs on the thread.
//
// The simulator runs a whole cluster's protocol code in one thread, and that code allocates and
// frees small objects (per-transaction state, vectors, hash-map nodes) at a high rate: glibc's
// malloc and free cost about a hundred instructions a pair there, 15-20% of a simulation's
// instructions. While a thread has the cache on, operator new and delete on that thread take and
// give blocks of up to kCachedBytesMax bytes from per-size-class LIFO lists (16-byte classes),
// which also keeps recently freed, cache-warm blocks in use.
//
// Every block is an ordinary malloc block of its class size (operator new rounds small requests
// up to the class size whether the cache is on or not), so a block may be freed on any thread,
// with the cache on or off; the cache gives its blocks back to free() when it is switched off
// and when the thread exits. Nothing changes for threads that never switch it on, beyond that
// rounding.
//
// Who switches it on: sim::Engine, for the thread that constructs it, for the engine's life
// (calls nest); and an embedded cluster's worker threads while they run clients
// (Cluster::RunClients on the `local` transport), whose transactions allocate alike. It takes effect only in a program that chooses it by linking the replacement
// operator new/delete (sim/alloc_cache_new.cc, the CMake object library pond_alloc_cache): the
// `pond` binary and the simulator's benchmarks do. Linking the Pond library alone replaces
// nothing, so a program that embeds Pond keeps its own allocator (docs/api.md "Memory"). Under
// AddressSanitizer or ThreadSanitizer the replacement is left out, so that they see every
// allocation.
//
// Thread rules: everything is per thread; nothing is shared.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pond::sim {

class AllocCache {
 public:
  static constexpr size_t kClassBytes = 16;
  static constexpr size_t kCachedBytesMax = 2048;
  // Blocks kept per class: about kKeptBytesPerClass bytes' worth, at least kKeptBlocksMin.
  static constexpr size_t kKeptBytesPerClass = 512 * 1024;
  static constexpr uint32_t kKeptBlocksMin = 64;

  // Switches the cache on for this thread (calls nest). Returns a token naming the thread for
  // Disable, or nullptr if the program has no cache (sanitizers).
  static const void* Enable();
  // Undoes one Enable made on the thread `token` names; a no-op on any other thread (that
  // thread's cache then stays on until it exits) or for nullptr. The last Disable gives every
  // cached block back to free().
  static void Disable(const void* token);
  // Blocks the calling thread holds (for tests).
  static size_t CachedBlocks();
};

// What the replacement operator new and delete call (alloc_cache_new.cc); defined unless a
// sanitizer is on.
void* AllocCacheNew(size_t bytes);
void AllocCacheDelete(void* p, size_t bytes) noexcept;
void AllocCacheDelete(void* p) noexcept;

}  // namespace pond::sim
