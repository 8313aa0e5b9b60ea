// Invariant checks. POND_ASSERT is compiled out in Release (NDEBUG) and kept in RelAssert,
// the build every test runs; POND_CHECK stays in every build and guards what must never be
// skipped (setup, memory safety of remote copies). Both print the condition and abort.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace pond::detail {
[[noreturn]] inline void AssertFail(const char* cond, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "%s:%d: assertion failed: %s%s%s\n", file, line, cond, msg[0] ? ": " : "",
               msg);
  std::abort();
}
}  // namespace pond::detail

#define POND_CHECK_MSG(cond, msg) \
  ((cond) ? (void)0 : ::pond::detail::AssertFail(#cond, __FILE__, __LINE__, msg))
#define POND_CHECK(cond) POND_CHECK_MSG(cond, "")

#ifdef NDEBUG
#define POND_ASSERT(cond) ((void)sizeof(cond))
#define POND_ASSERT_MSG(cond, msg) ((void)sizeof(cond))
#else
#define POND_ASSERT(cond) POND_CHECK(cond)
#define POND_ASSERT_MSG(cond, msg) POND_CHECK_MSG(cond, msg)
#endif
