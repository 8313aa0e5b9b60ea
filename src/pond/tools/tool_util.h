// Small helpers shared by the `pond` subcommands.
#pragma once

#include <fmt/core.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace pond::tools {

// Prints "pond WHAT: WHY" on stderr and returns the exit code for bad input.
inline int Fail(const std::string& what, const std::string& why) {
  std::fprintf(stderr, "pond %s: %s\n", what.c_str(), why.c_str());
  return 2;
}

inline std::string HumanRate(double per_sec) {
  if (per_sec >= 1e6) return fmt::format("{:.2f} M", per_sec / 1e6);
  if (per_sec >= 1e3) return fmt::format("{:.1f} K", per_sec / 1e3);
  return fmt::format("{:.0f}", per_sec);
}

inline bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  return static_cast<bool>(f);
}

}  // namespace pond::tools
