// Engine: the discrete-event core of the simulator. One engine runs a whole simulated cluster
// (every node's workers, coroutines, NICs and wires) in one thread on virtual time.
//
// An event is a callable run at a virtual time. Events run in (time, sequence number) order,
// where the sequence number counts At/After calls: events due at the same time run in the order
// they were scheduled (FIFO). That total order is what makes a run deterministic: the same seed
// and the same code give the same events in the same order, bit for bit.
//
// Determinism rules for code running on the engine (docs/simulator.md):
//   - time only from clock() / now(), randomness only from rng(), Fork() or StreamRng();
//   - never order anything by pointer value or by iterating an unordered container;
//   - schedule, don't loop: a model that spends time schedules a later event.
//
// Cost: an event costs no heap allocation in steady state. Its callable is built in place in a
// pooled 64-byte slot (captures up to kCaptureBytesMax bytes; larger ones fail to compile:
// capture a pointer to the state instead). Events due within kWheelSpanNs of now() go on a
// timing wheel with one bucket per nanosecond: a bucket holds the events of one exact time, and
// since sequence numbers only grow, appending keeps it in FIFO = (time, seq) order, so
// scheduling is O(1) and the next event is found with a two-level bitmap. Later events wait in
// an overflow 4-ary min-heap of 16-byte (time, key) entries and move to the wheel as the clock
// comes within the span of them — before anything can be scheduled directly into their bucket,
// so they stay ahead of later-scheduled events of the same time. Cancel is O(1): the callable
// is destroyed at once; a wheel slot is reclaimed when its bucket comes up, a heap entry is
// left behind as a stale one and the heap compacted when stale entries outnumber live ones.
//
// Thread rules: single-threaded. An engine and everything scheduled on it belong to the thread
// that drives it; events may call At/After/Cancel and read the clock and rngs, but must not
// call Step/RunUntil/RunWhile (no nested runs).
//
// Invariants (checked in every build, they cost one compare each): an event is never scheduled
// before now(); virtual time never decreases; at most pending_event_count_max events are
// pending at once; fewer than 2^40 events are scheduled in one engine's life.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "pond/base/assert.h"
#include "pond/base/hash.h"
#include "pond/clock.h"
#include "pond/rng.h"
#include "pond/sim/virtual_clock.h"

namespace pond::sim {

// Names one scheduled event so that it can be cancelled. A default-constructed id names none.
// Ids are never reused within one engine (they carry the sequence number), so cancelling an
// event that already ran or was cancelled is a harmless no-op even after its slot was reused.
class EventId {
 public:
  EventId() = default;
  bool valid() const { return bits_ != 0; }
  friend bool operator==(EventId, EventId) = default;

 private:
  friend class Engine;
  explicit EventId(uint64_t bits) : bits_(bits) {}
  uint64_t bits_ = 0;  // sequence number << kSlotBits | slot index
};

struct EngineOptions {
  // Most events pending at once. Exceeding it is a model bug (something schedules without
  // bound) and aborts. Slots are allocated 64 KiB at a time as needed, so a high limit costs
  // nothing until it is used; it must be below 2^24 - 1.
  uint32_t pending_event_count_max = 1u << 22;
};

struct EngineStats {
  uint64_t events_scheduled = 0;
  uint64_t events_run = 0;
  uint64_t events_cancelled = 0;
  uint64_t pending_count_peak = 0;
  uint64_t heap_compactions = 0;
};

class Engine {
 public:
  // Largest callable an event can hold, and its alignment.
  static constexpr size_t kCaptureBytesMax = 48;
  static constexpr size_t kCaptureAlign = 16;
  // Events due less than this far ahead of now() go straight on the timing wheel; later ones
  // wait in the overflow heap. 32 µs covers every delay of the cluster model (one-way latency,
  // NIC queueing, a busy core) but timers; a bucket costs 4 bytes, so the wheel is 128 KiB.
  static constexpr int kWheelBits = 15;
  static constexpr uint64_t kWheelSpanNs = uint64_t{1} << kWheelBits;

  explicit Engine(uint64_t seed, EngineOptions options = {});
  // Destroys the callables of events still pending without running them.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  uint64_t seed() const { return seed_; }
  // Virtual time in nanoseconds since the engine was built (it starts at 0).
  uint64_t now() const { return clock_.now_ns(); }
  Clock& clock() { return clock_; }

  // Runs fn() at virtual time t_ns (>= now()). Events due at one time run in scheduling order.
  template <typename F>
  EventId At(uint64_t t_ns, F&& fn);
  // Runs fn() delay_ns after now().
  template <typename F>
  EventId After(uint64_t delay_ns, F&& fn) {
    POND_CHECK_MSG(delay_ns <= UINT64_MAX - now(), "virtual time overflow");
    return At(now() + delay_ns, std::forward<F>(fn));
  }

  // Cancels a pending event: its callable is destroyed without running. Returns false (and does
  // nothing) if the event already ran, is running now, or was cancelled before.
  bool Cancel(EventId id);
  bool IsPending(EventId id) const;

  // Runs the next event, first moving the clock to its time. Returns false if none is pending.
  bool Step();
  // Runs every event due at or before t_ns (>= now()), including events those events schedule
  // for times <= t_ns, then sets the clock to t_ns.
  void RunUntil(uint64_t t_ns);
  // Runs events while pred() holds, checking it before each one. Returns false if the queue
  // ran dry while pred() still held.
  template <typename Pred>
  bool RunWhile(Pred&& pred) {
    while (pred()) {
      if (!Step()) return false;
    }
    return true;
  }

  // Time of the next pending event, or UINT64_MAX if none.
  uint64_t NextEventNs();
  // Events scheduled and neither run nor cancelled.
  uint64_t pending() const { return pending_count_; }
  const EngineStats& stats() const { return stats_; }

  // The engine's own stream, seeded from seed().
  Rng& rng() { return rng_; }
  // A sub-stream drawn from rng(): depends on how many draws and forks came before it.
  Rng Fork() { return rng_.Fork(); }
  // A sub-stream that depends only on (seed, stream_id), not on anything else the run did.
  // Prefer it for components (one id per node, per link, per fault source): adding a component
  // or a draw elsewhere then leaves every other component's stream unchanged.
  Rng StreamRng(uint64_t stream_id) const {
    return Rng(Mix64(seed_ ^ Mix64(stream_id + 0x632be59bd9b4e019ULL)));
  }

 private:
  static constexpr int kSlotBits = 24;
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
  static constexpr uint64_t kSeqLimit = uint64_t{1} << (64 - kSlotBits);
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  // The `next` field of a slot whose event waits in the overflow heap. No slot has this index.
  static constexpr uint32_t kInHeap = static_cast<uint32_t>(kSlotMask);
  static constexpr int kChunkBits = 10;  // 1024 slots = 64 KiB per chunk
  static constexpr uint32_t kChunkMask = (1u << kChunkBits) - 1;
  // Compaction rebuilds the heap in O(n), so it waits for this many stale entries.
  static constexpr uint64_t kCompactStaleCountMin = 1024;
  static constexpr uint64_t kWheelMask = kWheelSpanNs - 1;
  static constexpr size_t kBitmapWords = kWheelSpanNs / 64;   // one bit per bucket
  static constexpr size_t kSummaryWords = kBitmapWords / 64;  // one bit per bitmap word
  static_assert(kBitmapWords % 64 == 0, "the summary covers whole bitmap words");

  // A pending event's callable lives here until it runs or is cancelled. op(storage, true) runs
  // and destroys the callable, op(storage, false) only destroys it. A free slot has link 0 and
  // keeps the index of the next free slot in storage.
  struct alignas(64) Slot {
    void (*op)(void* storage, bool run);
    // seq << kSlotBits | next. seq: the pending event's sequence number, 0 while the slot is
    // free, running, or cancelled but still linked in a wheel bucket. next: in a wheel bucket,
    // the next slot of the bucket's circular list (its tail points to its head); kInHeap while
    // the event waits in the overflow heap.
    uint64_t link;
    alignas(kCaptureAlign) unsigned char storage[kCaptureBytesMax];
  };
  static_assert(sizeof(Slot) == 64, "one event slot is one cache line");

  struct Entry {
    uint64_t time_ns;
    uint64_t key;  // seq << kSlotBits | slot; seqs are unique, so (time_ns, key) is a total order
  };
  // One 128-bit compare: compiles to cmp/sbb without branches, where the two-field form
  // branches on data the predictor cannot guess.
  static bool Less(const Entry& a, const Entry& b) {
    using U128 = unsigned __int128;
    return (U128{a.time_ns} << 64 | a.key) < (U128{b.time_ns} << 64 | b.key);
  }

  template <typename Fn>
  static void Op(void* storage, bool run) {
    Fn* fn = std::launder(reinterpret_cast<Fn*>(storage));
    if (run) (*fn)();
    fn->~Fn();
  }

  static uint64_t SeqOf(const Slot& s) { return s.link >> kSlotBits; }
  static uint32_t NextOf(const Slot& s) { return static_cast<uint32_t>(s.link & kSlotMask); }
  static void SetNext(Slot& s, uint32_t next) { s.link = (s.link & ~kSlotMask) | next; }

  Slot& SlotAt(uint32_t index) const { return chunks_[index >> kChunkBits][index & kChunkMask]; }
  // The hot path of scheduling (AllocSlot, Enqueue, WheelAppend) is inline: it runs for every
  // event, and a call per step cost more than the step.
  uint32_t AllocSlot() {
    POND_CHECK_MSG(pending_count_ < pending_event_count_max_, "too many pending events");
    if (free_head_ == kNoSlot) return AllocNewSlot();
    uint32_t index = free_head_;
    std::memcpy(&free_head_, SlotAt(index).storage, sizeof(free_head_));
    return index;
  }
  uint32_t AllocNewSlot();
  void FreeSlot(uint32_t index);
  EventId Enqueue(uint64_t t_ns, uint32_t index) {
    POND_CHECK_MSG(next_seq_ < kSeqLimit, "event sequence numbers exhausted");
    const uint64_t seq = next_seq_++;
    const uint64_t key = seq << kSlotBits | index;
    stats_.events_scheduled++;
    if (++pending_count_ > stats_.pending_count_peak) stats_.pending_count_peak = pending_count_;
    // t_ns >= now() was checked, so the difference cannot wrap.
    if (t_ns - now() < kWheelSpanNs) {
      SlotAt(index).link = seq << kSlotBits;
      WheelAppend(index, t_ns);
    } else {
      EnqueueInHeap(t_ns, key);
    }
    return EventId(key);
  }
  void EnqueueInHeap(uint64_t t_ns, uint64_t key);
  // Wheel: append a slot to the bucket of t_ns (which must lie in [now, now + span)); take the
  // head of a non-empty bucket; find the first non-empty bucket at or after `from`, going round.
  void WheelAppend(uint32_t index, uint64_t t_ns) {
    const size_t b = t_ns & kWheelMask;
    Slot& s = SlotAt(index);
    const uint32_t tail = wheel_tail_[b];
    if (tail == kNoSlot) {
      SetNext(s, index);
      wheel_bits_[b / 64] |= uint64_t{1} << (b % 64);
      wheel_summary_[b / 4096] |= uint64_t{1} << (b / 64 % 64);
    } else {
      Slot& t = SlotAt(tail);
      SetNext(s, NextOf(t));
      SetNext(t, index);
    }
    wheel_tail_[b] = index;
    wheel_count_++;
  }
  uint32_t WheelPopHead(size_t bucket);
  size_t WheelFind(size_t from) const;
  size_t WheelFindFrom(size_t from) const;  // no wrap; kWheelSpanNs if none
  // Moves the clock to t_ns and brings the overflow events now within the span onto the wheel.
  void AdvanceTo(uint64_t t_ns);
  void MoveDueHeapEntries(uint64_t t_ns);
  // NextEventNs(): finds the earliest pending event, reclaiming cancelled wheel slots and
  // dropping stale heap entries in front of it.
  uint64_t Front();
  // Runs the head of t_ns's bucket, which Front() just found live.
  void RunFront(uint64_t t_ns);
  void HeapPush(Entry e);
  Entry HeapPop();
  void SiftDown(size_t i, Entry e);
  void Compact();

  const void* alloc_cache_;  // AllocCache::Enable's token for this engine's thread
  const uint64_t seed_;
  const uint32_t pending_event_count_max_;
  VirtualClock clock_;
  Rng rng_;
  std::unique_ptr<uint32_t[]> wheel_tail_;      // per bucket: its tail slot, or kNoSlot if empty
  std::unique_ptr<uint64_t[]> wheel_bits_;      // bit b: bucket b is non-empty
  uint64_t wheel_summary_[kSummaryWords] = {};  // bit w: wheel_bits_[w] != 0
  uint64_t wheel_count_ = 0;  // slots linked on the wheel, cancelled ones included
  std::vector<Entry> heap_;   // the overflow heap
  std::vector<std::unique_ptr<Slot[]>> chunks_;
  uint32_t slot_count_ = 0;  // slots handed out so far (free or not)
  uint32_t free_head_ = kNoSlot;
  uint64_t next_seq_ = 1;  // 0 marks a slot with no pending event
  uint64_t pending_count_ = 0;
  uint64_t stale_count_ = 0;  // heap entries whose event was cancelled
  EngineStats stats_;
};

template <typename F>
EventId Engine::At(uint64_t t_ns, F&& fn) {
  using Fn = std::decay_t<F>;
  static_assert(std::is_invocable_v<Fn&>, "an event is a callable taking no arguments");
  static_assert(sizeof(Fn) <= kCaptureBytesMax,
                "event callable too big for a slot: capture a pointer to the state instead");
  static_assert(alignof(Fn) <= kCaptureAlign, "event callable over-aligned");
  POND_CHECK_MSG(t_ns >= now(), "event scheduled in the past");
  uint32_t index = AllocSlot();
  Slot& slot = SlotAt(index);
  ::new (static_cast<void*>(slot.storage)) Fn(std::forward<F>(fn));
  slot.op = &Op<Fn>;
  return Enqueue(t_ns, index);
}

}  // namespace pond::sim
