#include "pond/sim/engine.h"

#include <malloc.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

#include "pond/sim/alloc_cache.h"

namespace pond::sim {

// The per-event path (FreeSlot, WheelPopHead, WheelFind*, Front, RunFront) is inlined into
// Step and RunUntil: at a few dozen instructions per event, calls were a large share.
#define POND_HOT __attribute__((always_inline)) inline

Engine::Engine(uint64_t seed, EngineOptions options)
    : alloc_cache_(AllocCache::Enable()),
      seed_(seed),
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
  AllocCache::Disable(alloc_cache_);
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

// ---- AllocCache (alloc_cache.h) --------------------------------------------------------------

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define POND_ALLOC_CACHE 0
#else
#define POND_ALLOC_CACHE 1
#endif

namespace {

// Class c (1 <= c < kClasses) holds blocks of c * kClassBytes bytes.
constexpr size_t kClasses = AllocCache::kCachedBytesMax / AllocCache::kClassBytes + 1;

constexpr std::array<uint32_t, kClasses> KeptMaxTable() {
  std::array<uint32_t, kClasses> t{};
  for (size_t c = 1; c < kClasses; c++) {
    size_t n = AllocCache::kKeptBytesPerClass / (c * AllocCache::kClassBytes);
    t[c] = static_cast<uint32_t>(std::max<size_t>(n, AllocCache::kKeptBlocksMin));
  }
  return t;
}
constexpr std::array<uint32_t, kClasses> kKeptMax = KeptMaxTable();

struct FreeBlock {
  FreeBlock* next;
};

// Plain data, so that reaching it costs no initialisation check on the allocation path.
struct CacheLists {
  uint32_t enabled;  // Enable calls not yet undone
  uint32_t count[kClasses];
  FreeBlock* head[kClasses];
};
constinit thread_local CacheLists t_cache{};

void Drain(CacheLists& l) {
  for (size_t c = 1; c < kClasses; c++) {
    while (FreeBlock* b = l.head[c]) {
      l.head[c] = b->next;
      std::free(b);
    }
    l.count[c] = 0;
  }
}

// Gives the blocks back when the thread exits; frees after that go straight to free().
struct ExitDrain {
  ~ExitDrain() {
    t_cache.enabled = 0;
    Drain(t_cache);
  }
};
thread_local ExitDrain t_exit_drain;

}  // namespace

const void* AllocCache::Enable() {
#if POND_ALLOC_CACHE
  ExitDrain* volatile registered = &t_exit_drain;  // constructs it: registers the exit drain
  (void)registered;
  t_cache.enabled++;
  return &t_cache;
#else
  return nullptr;
#endif
}

void AllocCache::Disable(const void* token) {
  if (token == nullptr || token != &t_cache) return;
  POND_CHECK(t_cache.enabled > 0);
  if (--t_cache.enabled == 0) Drain(t_cache);
}

size_t AllocCache::CachedBlocks() {
  size_t n = 0;
  for (size_t c = 1; c < kClasses; c++) n += t_cache.count[c];
  return n;
}

}  // namespace pond::sim

namespace pond::sim {

#if POND_ALLOC_CACHE
namespace {

size_t ClassOf(size_t bytes) {
  return bytes == 0 ? 1 : (bytes + AllocCache::kClassBytes - 1) / AllocCache::kClassBytes;
}

void* MallocOrThrow(size_t bytes) {
  for (;;) {
    if (void* p = std::malloc(bytes)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void Give(void* p, size_t c) {
  CacheLists& l = t_cache;
  if (l.enabled != 0 && l.count[c] < kKeptMax[c]) {
    auto* b = static_cast<FreeBlock*>(p);
    b->next = l.head[c];
    l.head[c] = b;
    l.count[c]++;
    return;
  }
  std::free(p);
}

}  // namespace

// Small requests are rounded up to their class size even with the cache off, so that any small
// block can later serve any request of its class.
void* AllocCacheNew(size_t bytes) {
  if (bytes > AllocCache::kCachedBytesMax) return MallocOrThrow(bytes);
  const size_t c = ClassOf(bytes);
  CacheLists& l = t_cache;
  if (l.enabled != 0) {
    if (FreeBlock* b = l.head[c]) {
      l.head[c] = b->next;
      l.count[c]--;
      return b;
    }
  }
  return MallocOrThrow(c * AllocCache::kClassBytes);
}

void AllocCacheDelete(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes > AllocCache::kCachedBytesMax) {
    std::free(p);
    return;
  }
  Give(p, ClassOf(bytes));
}

// Unsized: the class comes from the block itself. A block of class c has at least c * 16
// usable bytes and, being malloc'ed with exactly that size, fewer than (c + 1) * 16.
void AllocCacheDelete(void* p) noexcept {
  if (p == nullptr) return;
  if (t_cache.enabled != 0) {
    const size_t c = malloc_usable_size(p) / AllocCache::kClassBytes;
    if (c >= 1 && c < kClasses) {
      Give(p, c);
      return;
    }
  }
  std::free(p);
}
#endif  // POND_ALLOC_CACHE

}  // namespace pond::sim
