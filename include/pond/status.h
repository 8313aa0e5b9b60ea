// Status and Result<T>: how Pond reports expected failures.
//
// Lock conflicts, validation failures, lost CAS races, full buckets and bad user input are
// values, never exceptions: every call that can fail that way returns a Status or a Result<T>
// and the caller must look at it ([[nodiscard]]). A broken invariant is an assert instead.
// An OK Status costs one byte-sized enum; the message string is allocated only on failure.
//
// Thread rules: plain values, like std::string: one thread may use an object at a time, and
// copies are independent.
#pragma once

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace pond {

enum class Code : unsigned char {
  kOk = 0,
  kInvalidArgument,   // the caller passed something malformed or out of range
  kNotFound,          // the key or object does not exist
  kAlreadyExists,     // insert of a key that is present
  kAborted,           // a transaction aborted; the message says why
  kConflict,          // a lock or CAS lost against a concurrent holder; retrying may succeed
  kTornRead,          // cacheline versions disagreed: a concurrent writer was caught mid-write
  kOutOfSpace,        // an allocator, bucket or table is full
  kWrongShard,        // a lock request reached a CN that does not manage the shard
  kUnavailable,       // a node or resource cannot be reached now
  kCorruption,        // remote memory does not parse as the format says
  kInternal,          // a bug surfaced as a value (e.g. from a layer that cannot assert)
  kUnknown,           // the outcome is not known: the node running it failed, and the work may
                      // or may not have taken effect (a history records it as `info`)
  kPermissionDenied,  // the caller is not who it must be, or may not do this
  // A new code goes above this line: kPermissionDenied is the last, for KnownCode.
};

std::string_view CodeName(Code code);
// Whether `v` is a Code's value: for a code read off the wire, which a receiver checks first.
constexpr bool KnownCode(unsigned v) { return v <= static_cast<unsigned>(Code::kPermissionDenied); }

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
inline Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
inline Status TornRead(std::string m) { return {Code::kTornRead, std::move(m)}; }
inline Status OutOfSpace(std::string m) { return {Code::kOutOfSpace, std::move(m)}; }
inline Status WrongShard(std::string m) { return {Code::kWrongShard, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status Unknown(std::string m) { return {Code::kUnknown, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }

namespace detail {
// value() of a Result that holds an error is a bug in every build: say so and stop, rather than
// read a value that is not there.
[[noreturn]] inline void ValueOfError(const Status& s) {
  std::fprintf(stderr, "pond: Result::value() of an error: %s\n", s.ToString().c_str());
  std::abort();
}
}  // namespace detail

// Result<T> holds either a T or a non-OK Status. value() (and * and ->) of an error aborts the
// process with the error on stderr, in every build; check ok() first, or use value_or.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result built from an OK status carries no value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & {
    if (!ok()) detail::ValueOfError(status_);
    return *value_;
  }
  const T& value() const& {
    if (!ok()) detail::ValueOfError(status_);
    return *value_;
  }
  T&& value() && {
    if (!ok()) detail::ValueOfError(status_);
    return std::move(*value_);
  }
  // The value, or `fallback` if this holds an error.
  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace pond

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define POND_RETURN_IF_ERROR(expr) \
  do {                             \
    ::pond::Status _st = (expr);   \
    if (!_st.ok()) return _st;     \
  } while (0)

// The same inside a coroutine, which must co_return.
#define POND_CO_RETURN_IF_ERROR(expr) \
  do {                                \
    ::pond::Status _st = (expr);      \
    if (!_st.ok()) co_return _st;     \
  } while (0)
