#include "pond/btree/chunk_allocator.h"

#include "pond/btree/node.h"

namespace pond::btree {

Task<Result<GAddr>> ChunkAllocator::Allocate() {
  const size_t n = layout_.num_ranges();
  while (left_bytes_ < kNodeBytes) {
    if (exhausted_ == (n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1)) {
      co_return OutOfSpace("the tree's MN ranges have no free chunk left");
    }
    size_t r = next_range_;
    next_range_ = (next_range_ + 1) % n;
    if (exhausted_ & (uint64_t{1} << r)) continue;
    const uint64_t chunk = layout_.space().chunk_bytes;
    Result<uint64_t> taken = co_await take_(r);
    if (!taken.ok()) co_return taken.status();
    const uint64_t old = *taken;
    // The cursor runs past the end once the range is full; what lies beyond is no one's.
    if (old + chunk > layout_.NodesEnd(r)) {
      exhausted_ |= uint64_t{1} << r;
      continue;
    }
    next_ = GAddr::Make(layout_.space().ranges[r].mn, old);
    left_bytes_ = chunk;
    chunks_taken_++;
  }
  GAddr a = next_;
  next_ = next_ + kNodeBytes;
  left_bytes_ -= kNodeBytes;
  co_return a;
}

}  // namespace pond::btree
