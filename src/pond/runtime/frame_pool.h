// FramePool: recycles the memory of coroutine frames. Every Task call allocates a frame, and a
// transaction makes a dozen of them, so frames come from per-thread free lists by size class
// (64-byte steps up to kFrameBytesMax) instead of malloc. A frame may be freed on another thread
// than the one that made it; it then simply joins that thread's list.
//
// Thread rules: each thread has its own lists (thread_local); nothing is shared.
#pragma once

#include <cstddef>
#include <new>

namespace pond::detail {

inline constexpr size_t kFrameClassBytes = 64;
inline constexpr size_t kFrameBytesMax = 4096;
inline constexpr size_t kFrameClasses = kFrameBytesMax / kFrameClassBytes;
inline constexpr size_t kFramesKeptPerClassMax = 4096;  // beyond this, memory goes back to malloc

class FramePool {
 public:
  ~FramePool() {
    for (auto& l : lists_) {
      while (l.head != nullptr) {
        Node* n = l.head;
        l.head = n->next;
        ::operator delete(n);
      }
    }
  }

  void* Allocate(size_t bytes) {
    size_t c = ClassOf(bytes);
    if (c >= kFrameClasses) return ::operator new(bytes);
    List& l = lists_[c];
    if (l.head != nullptr) {
      Node* n = l.head;
      l.head = n->next;
      l.count--;
      return n;
    }
    return ::operator new((c + 1) * kFrameClassBytes);
  }

  void Free(void* p, size_t bytes) {
    size_t c = ClassOf(bytes);
    if (c >= kFrameClasses || lists_[c].count >= kFramesKeptPerClassMax) {
      ::operator delete(p);
      return;
    }
    List& l = lists_[c];
    l.head = new (p) Node{l.head};
    l.count++;
  }

  static FramePool& ForThisThread() {
    thread_local FramePool pool;
    return pool;
  }

 private:
  struct Node {
    Node* next;
  };
  struct List {
    Node* head = nullptr;
    size_t count = 0;
  };
  static size_t ClassOf(size_t bytes) {
    return (bytes + kFrameClassBytes - 1) / kFrameClassBytes - 1;
  }

  List lists_[kFrameClasses];
};

}  // namespace pond::detail
