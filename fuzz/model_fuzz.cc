// The model-file reader (include/pond/testbed.h, Testbed::FromJson: `--testbed FILE`) on
// arbitrary text: a testbed that validates, or one line naming the file and the key.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pond/testbed.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  pond::Result<pond::Testbed> t = pond::Testbed::FromJson(text, "model.json");
  if (t.ok()) {
    if (!t->Validate().ok()) __builtin_trap();  // what it returns, it has validated
  } else if (t.status().message().find('\n') != std::string_view::npos) {
    __builtin_trap();
  }
  return 0;
}
