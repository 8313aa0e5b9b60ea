#include "pond/store/allocator.h"

#include "pond/base/assert.h"

namespace pond::store {

Task<Result<uint64_t>> Allocator::Alloc(Endpoint& ep, MnId mn, uint32_t bytes, uint64_t down_mns,
                                        bool carve_frozen) {
  POND_ASSERT(mn < cursors_.size());
  bytes = Rounded(bytes);
  if (bytes == 0 || bytes > layout_.chunk_bytes) {
    co_return InvalidArgument("allocation of " + std::to_string(bytes) +
                              " bytes does not fit in one chunk");
  }
  if (std::optional<uint64_t> off = TakeInHand(mn, bytes)) co_return *off;
  stats_.allocations++;
  Cursor& c = cursors_[mn];
  // At most one chunk FAA per group is in flight: coroutines that find the cursor empty while
  // one is wait for it, instead of each carving (and wasting) a chunk of their own.
  while (c.end - c.next < bytes && carving_[mn]) {
    struct Wait {
      std::vector<std::coroutine_handle<>>* q;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { q->push_back(h); }
      void await_resume() const noexcept {}
    };
    co_await Wait{&carve_waiters_[mn]};
  }
  if (c.end - c.next < bytes) {
    if (carve_frozen) {
      co_return Unavailable("record space: MN " + std::to_string(mn) +
                            "'s group is bringing a rejoining replica's cursors into step");
    }
    Unanswered& u = unanswered_[mn];
    const uint64_t now = ep.scheduler().clock().NowNs();
    if (u.set && u.down_mns == down_mns && now < u.at_ns + kCarveRetryNs) {
      co_return Unavailable("record space: an MN of MN " + std::to_string(mn) +
                            "'s group did not answer the last carve");
    }
    carving_[mn] = true;
    Result<uint64_t> chunk = co_await CarveLane(ep, layout_, mn, layout_.chunk_bytes, down_mns);
    carving_[mn] = false;
    for (auto h : carve_waiters_[mn]) ep.scheduler().Ready(h);
    carve_waiters_[mn].clear();
    if (!chunk.ok() && chunk.status().code() == Code::kUnavailable) {
      u = Unanswered{true, ep.scheduler().clock().NowNs(), down_mns};
    }
    if (!chunk.ok()) co_return chunk.status();
    u.set = false;
    stats_.chunks++;
    stats_.wasted_bytes += c.end - c.next;
    c.next = *chunk;
    c.end = *chunk + layout_.chunk_bytes;
  }
  uint64_t off = c.next;
  c.next += bytes;
  co_return off;
}

std::optional<uint64_t> Allocator::TakeInHand(MnId mn, uint32_t bytes) {
  POND_ASSERT(mn < cursors_.size());
  bytes = Rounded(bytes);
  if (bytes == 0) return std::nullopt;
  auto it = free_.find(FreeKey(mn, bytes));
  if (it != free_.end() && !it->second.empty()) {
    uint64_t off = it->second.back();
    it->second.pop_back();
    stats_.allocations++;
    stats_.reused++;
    return off;
  }
  Cursor& c = cursors_[mn];
  if (c.end - c.next < bytes) return std::nullopt;
  stats_.allocations++;
  uint64_t off = c.next;
  c.next += bytes;
  return off;
}

void Allocator::Free(MnId mn, uint64_t offset, uint32_t bytes) {
  bytes = Rounded(bytes);
  free_[FreeKey(mn, bytes)].push_back(offset);
}

}  // namespace pond::store
