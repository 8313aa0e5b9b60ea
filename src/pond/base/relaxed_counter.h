// RelaxedCounter: a count one thread adds to and any thread may read meanwhile — a worker's
// statistics, which a serving daemon reports while the worker runs (docs/deploy.md "Metrics").
//
// Adding is a relaxed load and a relaxed store, not a read-modify-write: with one writer no
// increment is lost, and both compile to plain moves (x86-64, AArch64), so the counting thread
// pays no locked instruction. A read is a relaxed load: never torn, but not ordered with other
// counters, so a snapshot of several is not one instant. Copying reads the source, for snapshots.
//
// Thread rules: one thread at a time adds or assigns (the owner); any thread reads.
#pragma once

#include <atomic>
#include <cstdint>

namespace pond {

class RelaxedCounter {
 public:
  RelaxedCounter() = default;
  RelaxedCounter(uint64_t v) : v_(v) {}  // NOLINT: a counter stands for its value
  RelaxedCounter(const RelaxedCounter& o) : v_(o.load()) {}
  RelaxedCounter& operator=(const RelaxedCounter& o) { return *this = o.load(); }
  RelaxedCounter& operator=(uint64_t v) {
    v_.store(v, std::memory_order_relaxed);
    return *this;
  }

  uint64_t load() const { return v_.load(std::memory_order_relaxed); }
  operator uint64_t() const { return load(); }  // NOLINT: reads as its value

  RelaxedCounter& operator+=(uint64_t n) { return *this = load() + n; }
  RelaxedCounter& operator-=(uint64_t n) { return *this = load() - n; }
  RelaxedCounter& operator++() { return *this += 1; }
  void operator++(int) { *this += 1; }
  RelaxedCounter& operator--() { return *this -= 1; }
  void operator--(int) { *this -= 1; }

 private:
  std::atomic<uint64_t> v_{0};
};

}  // namespace pond
