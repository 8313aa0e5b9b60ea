// The replacement global operator new and delete that put sim::AllocCache in front of malloc
// (alloc_cache.h). A program chooses them by linking this file (the object library
// pond_alloc_cache); the Pond library itself never does, so embedding Pond changes no
// allocator. Left out under AddressSanitizer and ThreadSanitizer, which must see every
// allocation.
#include <cstddef>
#include <new>

#include "pond/sim/alloc_cache.h"

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

void* operator new(size_t bytes) { return pond::sim::AllocCacheNew(bytes); }
void operator delete(void* p, size_t bytes) noexcept { pond::sim::AllocCacheDelete(p, bytes); }
void operator delete(void* p) noexcept { pond::sim::AllocCacheDelete(p); }

#endif
