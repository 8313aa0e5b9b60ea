#include "pond/sim/engine.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace pond::sim {

// The per-event path (FreeSlot, WheelPopHead, WheelFind*, Front, RunFront) is inlined into
// Step and RunUntil: at a few dozen instructions per event, calls were a large share.
#define POND_HOT __attribute__((always_inline)) inline

Engine::Engine(uint64_t seed, EngineOptions options)
    : seed_(seed),
      pending_event_count_max_(options.pending_event_count_max),
      rng_(seed),
      wheel_tail_(new uint32_t[kWheelSpanNs]),
      wheel_bits_(new uint64_t[kBitmapWords]()) {
  POND_CHECK_MSG(pending_event_count_max_ > 0 && pending_event_count_max_ < kSlotMask,
                 "pending_event_count_max must be in [1, 2^24 - 1)");
  std::fill_n(wheel_tail_.get(), kWheelSpanNs, kNoSlot);
  heap_.reserve(1024);
}

Engine::~Engine() {
  for (uint32_t i = 0; i < slot_count_; i++) {
    Slot& s = SlotAt(i);
    if (SeqOf(s) != 0) s.op(s.storage, false);
  }
}

uint32_t Engine::AllocNewSlot() {
  // Slots in use = pending events + cancelled ones still on the wheel (at most the events
  // scheduled within one wheel span) + at most one running. kInHeap is never an index.
  POND_CHECK_MSG(slot_count_ < kInHeap, "event slots exhausted");
  if ((slot_count_ & kChunkMask) == 0) chunks_.push_back(std::make_unique<Slot[]>(kChunkMask + 1));
  return slot_count_++;
}

POND_HOT void Engine::FreeSlot(uint32_t index) {
  Slot& s = SlotAt(index);
  s.link = 0;
  std::memcpy(s.storage, &free_head_, sizeof(free_head_));
  free_head_ = index;
}

void Engine::EnqueueInHeap(uint64_t t_ns, uint64_t key) {
  SlotAt(static_cast<uint32_t>(key & kSlotMask)).link = (key & ~kSlotMask) | kInHeap;
  HeapPush(Entry{t_ns, key});
}

POND_HOT uint32_t Engine::WheelPopHead(size_t b) {
  const uint32_t tail = wheel_tail_[b];
  Slot& t = SlotAt(tail);
  const uint32_t head = NextOf(t);
  if (head == tail) {
    wheel_tail_[b] = kNoSlot;
    uint64_t& word = wheel_bits_[b / 64];
    word &= ~(uint64_t{1} << (b % 64));
    if (word == 0) wheel_summary_[b / 4096] &= ~(uint64_t{1} << (b / 64 % 64));
  } else {
    SetNext(t, NextOf(SlotAt(head)));
  }
  wheel_count_--;
  return head;
}

POND_HOT size_t Engine::WheelFindFrom(size_t from) const {
  size_t w = from / 64;
  uint64_t bits = wheel_bits_[w] & (~uint64_t{0} << (from % 64));
  if (bits != 0) return w * 64 + static_cast<size_t>(std::countr_zero(bits));
  // The next non-empty bitmap word after w, from the summary.
  w++;
  if (w == kBitmapWords) return kWheelSpanNs;
  size_t v = w / 64;
  uint64_t summary = wheel_summary_[v] & (~uint64_t{0} << (w % 64));
  while (summary == 0) {
    if (++v == kSummaryWords) return kWheelSpanNs;
    summary = wheel_summary_[v];
  }
  w = v * 64 + static_cast<size_t>(std::countr_zero(summary));
  return w * 64 + static_cast<size_t>(std::countr_zero(wheel_bits_[w]));
}

// Wheel events lie in [now, now + span), so the first non-empty bucket going round from now's
// bucket holds the earliest of them.
POND_HOT size_t Engine::WheelFind(size_t from) const {
  size_t b = WheelFindFrom(from);
  return b != kWheelSpanNs ? b : WheelFindFrom(0);
}

bool Engine::IsPending(EventId id) const {
  if (!id.valid()) return false;
  uint32_t index = static_cast<uint32_t>(id.bits_ & kSlotMask);
  return index < slot_count_ && SeqOf(SlotAt(index)) == id.bits_ >> kSlotBits;
}

bool Engine::Cancel(EventId id) {
  if (!IsPending(id)) return false;
  uint32_t index = static_cast<uint32_t>(id.bits_ & kSlotMask);
  Slot& s = SlotAt(index);
  s.op(s.storage, false);
  pending_count_--;
  stats_.events_cancelled++;
  if (NextOf(s) != kInHeap) {
    // Still linked in its bucket: only its seq goes, and the slot is freed when the bucket's
    // turn comes (a singly linked list cannot unlink in O(1)).
    s.link &= kSlotMask;
    return true;
  }
  FreeSlot(index);
  // The heap entry stays until it surfaces or a compaction removes it. Compacting only when
  // stale entries outnumber live ones keeps the cost O(1) amortised per cancel.
  if (++stale_count_ >= kCompactStaleCountMin && stale_count_ > heap_.size() - stale_count_) {
    Compact();
  }
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
    return SeqOf(SlotAt(static_cast<uint32_t>(e.key & kSlotMask))) != e.key >> kSlotBits;
  };
  heap_.erase(std::remove_if(heap_.begin(), heap_.end(), stale), heap_.end());
  for (size_t i = heap_.size() / 4 + 1; i-- > 0;) {
    if (i < heap_.size()) SiftDown(i, heap_[i]);
  }
  stale_count_ = 0;
  stats_.heap_compactions++;
}

POND_HOT void Engine::AdvanceTo(uint64_t t_ns) {
  clock_.AdvanceTo(t_ns);
  // Heap entries are all >= the old now + span > the new now, so the difference cannot wrap.
  if (!heap_.empty() && heap_[0].time_ns - t_ns < kWheelSpanNs) MoveDueHeapEntries(t_ns);
}

// Heap entries leave in (time, key) order, so each bucket they join stays in seq order; and
// nothing was scheduled directly into those buckets yet, since they were beyond the span until
// the clock reached t_ns.
void Engine::MoveDueHeapEntries(uint64_t t_ns) {
  while (!heap_.empty() && heap_[0].time_ns - t_ns < kWheelSpanNs) {
    Entry e = HeapPop();
    uint32_t index = static_cast<uint32_t>(e.key & kSlotMask);
    if (SeqOf(SlotAt(index)) != e.key >> kSlotBits) {
      stale_count_--;
      continue;
    }
    WheelAppend(index, e.time_ns);
  }
}

POND_HOT uint64_t Engine::Front() {
  for (;;) {
    if (wheel_count_ > 0) {
      const size_t from = now() & kWheelMask;
      const size_t b = WheelFind(from);
      const uint32_t head = NextOf(SlotAt(wheel_tail_[b]));
      if (SeqOf(SlotAt(head)) == 0) {  // cancelled: reclaim the slot
        WheelPopHead(b);
        FreeSlot(head);
        continue;
      }
      return now() + ((b - from) & kWheelMask);
    }
    if (heap_.empty()) return UINT64_MAX;
    const Entry& top = heap_[0];
    if (SeqOf(SlotAt(static_cast<uint32_t>(top.key & kSlotMask))) == top.key >> kSlotBits) {
      return top.time_ns;
    }
    HeapPop();
    stale_count_--;
  }
}

POND_HOT void Engine::RunFront(uint64_t t_ns) {
  // An event found in the heap reaches its bucket (at the front: it is the earliest) here.
  if (t_ns != now()) AdvanceTo(t_ns);
  const uint32_t index = WheelPopHead(t_ns & kWheelMask);
  Slot& s = SlotAt(index);
  POND_ASSERT(SeqOf(s) != 0);
  // link 0 while running: Cancel of the running event is a no-op, and the slot cannot be
  // handed to an event the callable schedules, since it is not on the free list yet.
  s.link = 0;
  pending_count_--;
  stats_.events_run++;
  s.op(s.storage, true);
  FreeSlot(index);
}

uint64_t Engine::NextEventNs() { return Front(); }

bool Engine::Step() {
  const uint64_t t = Front();
  if (t == UINT64_MAX) return false;
  RunFront(t);
  return true;
}

void Engine::RunUntil(uint64_t t_ns) {
  POND_CHECK_MSG(t_ns >= now(), "RunUntil into the past");
  for (uint64_t t = Front(); t <= t_ns; t = Front()) RunFront(t);
  if (t_ns != now()) AdvanceTo(t_ns);
}

#undef POND_HOT

}  // namespace pond::sim
