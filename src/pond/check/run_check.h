// RunCheck: everything `pond check HISTORY` does, as a library call that tests can drive
// without a process: read the history, check it, print the verdict.
//
// Exit codes (the command's, returned here): 0 the history satisfies the model, 1 it does not,
// 2 the input is malformed or unreadable, with exactly one line on `err`:
//   pond check: h.jsonl:17: micro-op 2: key must be an integer
// Thread-safe as far as its streams are.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "pond/check/checker.h"

namespace pond::check {

struct CheckOptions {
  std::string history_path;
  Model model = Model::kStrictSerializable;  // Elle's default too
  bool json = false;                         // one JSON object on `out` instead of text
  uint32_t examples_per_anomaly_max = 3;
};

inline constexpr int kExitValid = 0;
inline constexpr int kExitInvalid = 1;
inline constexpr int kExitMalformed = 2;

int RunCheck(const CheckOptions& options, std::ostream& out, std::ostream& err);

}  // namespace pond::check
