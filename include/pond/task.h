// Task<T>: a lazily started C++20 coroutine returning T — what every Pond call that waits
// (Txn::Execute, Session::RunTxn, Session::Call, ...) returns, and what client functions and
// procedures are written as.
//
// A Task runs when it is first awaited and resumes its awaiter by symmetric transfer when it
// finishes, so chains of awaits neither grow the stack nor go through the worker's scheduler.
// The tasks a cluster starts (Cluster::Run's clients, routed calls) are owned by the worker that
// runs them. Exceptions are not used on the data path: an exception escaping a task terminates
// the process.
//
// Thread rules: a Task is awaited once, by one coroutine, on the worker thread it runs on.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace pond {

template <typename T>
class Task;

namespace detail {

// Coroutine frames come from per-thread free lists (src/pond/runtime/frame_pool.h), not
// malloc: a transaction makes a dozen of them.
void* AllocateFrame(size_t bytes);
void FreeFrame(void* p, size_t bytes) noexcept;

struct FinalAwaiter {
  bool await_ready() noexcept { return false; }
  template <typename P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
    auto next = h.promise().continuation;
    return next ? next : std::noop_coroutine();
  }
  void await_resume() noexcept {}
};

struct PromiseBase {
  static void* operator new(size_t bytes) { return AllocateFrame(bytes); }
  static void operator delete(void* p, size_t bytes) { FreeFrame(p, bytes); }

  std::coroutine_handle<> continuation;
  std::suspend_always initial_suspend() noexcept { return {}; }
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { std::terminate(); }
};

template <typename T>
struct Promise : PromiseBase {
  std::optional<T> value;
  Task<T> get_return_object() noexcept;
  template <typename U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
};

template <>
struct Promise<void> : PromiseBase {
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
};

}  // namespace detail

template <typename T = void>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::Promise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  bool valid() const { return static_cast<bool>(h_); }
  bool done() const { return h_ && h_.done(); }

  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiter) noexcept {
    h_.promise().continuation = awaiter;
    return h_;
  }
  T await_resume() {
    if constexpr (!std::is_void_v<T>) return std::move(*h_.promise().value);
  }

  // For the scheduler only: gives up ownership of the frame.
  Handle Release() { return std::exchange(h_, {}); }

 private:
  Handle h_;
};

namespace detail {
template <typename T>
Task<T> Promise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
inline Task<void> Promise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}
}  // namespace detail

}  // namespace pond
