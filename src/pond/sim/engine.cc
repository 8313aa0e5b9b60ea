#include "pond/sim/engine.h"

#include <algorithm>
#include <cstring>

namespace pond::sim {

Engine::Engine(uint64_t seed, EngineOptions options)
    : seed_(seed), pending_event_count_max_(options.pending_event_count_max), rng_(seed) {
  POND_CHECK_MSG(pending_event_count_max_ > 0 && pending_event_count_max_ <= kSlotMask,
                 "pending_event_count_max must be in [1, 2^24)");
  heap_.reserve(1024);
}

Engine::~Engine() {
  for (uint32_t i = 0; i < slot_count_; i++) {
    Slot& s = SlotAt(i);
    if (s.seq != 0) s.op(s.storage, false);
  }
}

uint32_t Engine::AllocSlot() {
  POND_CHECK_MSG(pending_count_ < pending_event_count_max_, "too many pending events");
  if (free_head_ != kNoSlot) {
    uint32_t index = free_head_;
    std::memcpy(&free_head_, SlotAt(index).storage, sizeof(free_head_));
    return index;
  }
  // Slots in use = pending events + at most one running, so slot_count_ <= max + 1 <= 2^24 and
  // every index fits in kSlotBits.
  if ((slot_count_ & kChunkMask) == 0) chunks_.push_back(std::make_unique<Slot[]>(kChunkMask + 1));
  return slot_count_++;
}

void Engine::FreeSlot(uint32_t index) {
  Slot& s = SlotAt(index);
  s.seq = 0;
  std::memcpy(s.storage, &free_head_, sizeof(free_head_));
  free_head_ = index;
}

EventId Engine::Enqueue(uint64_t t_ns, uint32_t index) {
  POND_CHECK_MSG(next_seq_ < kSeqLimit, "event sequence numbers exhausted");
  uint64_t seq = next_seq_++;
  SlotAt(index).seq = seq;
  uint64_t key = seq << kSlotBits | index;
  HeapPush(Entry{t_ns, key});
  stats_.events_scheduled++;
  if (++pending_count_ > stats_.pending_count_peak) stats_.pending_count_peak = pending_count_;
  return EventId(key);
}

bool Engine::IsPending(EventId id) const {
  if (!id.valid()) return false;
  uint32_t index = static_cast<uint32_t>(id.bits_ & kSlotMask);
  return index < slot_count_ && SlotAt(index).seq == id.bits_ >> kSlotBits;
}

bool Engine::Cancel(EventId id) {
  if (!IsPending(id)) return false;
  uint32_t index = static_cast<uint32_t>(id.bits_ & kSlotMask);
  Slot& s = SlotAt(index);
  s.op(s.storage, false);
  FreeSlot(index);
  pending_count_--;
  stats_.events_cancelled++;
  // The heap entry stays until it surfaces or a compaction removes it. Compacting only when
  // stale entries outnumber live ones keeps the cost O(1) amortised per cancel.
  if (++stale_count_ >= kCompactStaleCountMin && stale_count_ > pending_count_) Compact();
  return true;
}

// 4-ary heap: fewer levels than a binary heap, and the four children of a node (4 x 16 bytes)
// share one cache line.
void Engine::HeapPush(Entry e) {
  size_t i = heap_.size();
  heap_.push_back(e);
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    if (!Less(e, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

// Moves e down from the hole at i to where it belongs. Which child is smallest is a coin toss
// for the branch predictor, so a full group of four is decided without branches (a tournament
// of compares feeding conditional moves); whether e goes further down is predictable, since
// the entry sifted down from the root usually belongs near the bottom.
void Engine::SiftDown(size_t i, Entry e) {
  Entry* h = heap_.data();
  const size_t n = heap_.size();
  for (;;) {
    size_t child = 4 * i + 1;
    size_t best;
    if (child + 4 <= n) {
      size_t a = child + Less(h[child + 1], h[child]);
      size_t b = child + 2 + Less(h[child + 3], h[child + 2]);
      best = Less(h[b], h[a]) ? b : a;
    } else if (child < n) {
      best = child;
      for (size_t c = child + 1; c < n; c++) {
        if (Less(h[c], h[best])) best = c;
      }
    } else {
      break;
    }
    if (!Less(h[best], e)) break;
    h[i] = h[best];
    i = best;
  }
  h[i] = e;
}

Engine::Entry Engine::HeapPop() {
  Entry top = heap_[0];
  Entry last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) SiftDown(0, last);
  return top;
}

void Engine::Compact() {
  // Keys are unique, so the pop order is fixed by (time, key) alone and rebuilding the heap in
  // a different layout cannot change which event runs next: compaction is invisible.
  auto stale = [this](const Entry& e) {
    return SlotAt(static_cast<uint32_t>(e.key & kSlotMask)).seq != e.key >> kSlotBits;
  };
  heap_.erase(std::remove_if(heap_.begin(), heap_.end(), stale), heap_.end());
  for (size_t i = heap_.size() / 4 + 1; i-- > 0;) {
    if (i < heap_.size()) SiftDown(i, heap_[i]);
  }
  stale_count_ = 0;
  stats_.heap_compactions++;
}

bool Engine::RunTop() {
  Entry e = HeapPop();
  uint32_t index = static_cast<uint32_t>(e.key & kSlotMask);
  Slot& s = SlotAt(index);
  if (s.seq != e.key >> kSlotBits) {
    stale_count_--;
    return false;
  }
  clock_.AdvanceTo(e.time_ns);
  // seq 0 while running: Cancel of the running event is a no-op, and the slot cannot be handed
  // to an event the callable schedules, since it is not on the free list yet.
  s.seq = 0;
  pending_count_--;
  stats_.events_run++;
  s.op(s.storage, true);
  FreeSlot(index);
  return true;
}

bool Engine::Step() {
  while (!heap_.empty()) {
    if (RunTop()) return true;
  }
  return false;
}

void Engine::RunUntil(uint64_t t_ns) {
  POND_CHECK_MSG(t_ns >= now(), "RunUntil into the past");
  while (!heap_.empty() && heap_[0].time_ns <= t_ns) RunTop();
  clock_.AdvanceTo(t_ns);
}

uint64_t Engine::NextEventNs() {
  while (!heap_.empty()) {
    const Entry& top = heap_[0];
    if (SlotAt(static_cast<uint32_t>(top.key & kSlotMask)).seq == top.key >> kSlotBits) {
      return top.time_ns;
    }
    HeapPop();
    stale_count_--;
  }
  return UINT64_MAX;
}

}  // namespace pond::sim
