// The readers of the files an operator writes and a daemon trusts: the access file (`pond cn
// --access FILE`, server/access.h: who may do what) and a daemon's config file (`pond mn|cn
// --config FILE`, tools/daemon_config.h). The first byte picks the reader. Each must answer
// rules, flags or one error line, never crash; the config file goes through CLI11 as `pond`
// runs it, so whatever it throws besides CLI11's own parse errors (which `pond` prints as one
// line) would reach the user as a crash, and traps here.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "pond/server/access.h"
#include "pond/tools/daemon_config.h"

namespace {

void Check(bool holds) {
  if (!holds) __builtin_trap();
}

void AccessFile(const std::string& text) {
  pond::Result<pond::server::Access> a = pond::server::Access::Parse(text, "access.toml");
  if (!a.ok()) Check(a.status().message().find('\n') == std::string::npos);
}

// A daemon's flags of every kind the real ones have: numbers, text, a list, a switch.
void ConfigFile(const std::string& text) {
  static const std::string path =
      (getenv("TMPDIR") != nullptr ? std::string(getenv("TMPDIR")) : "/tmp") +
      "/pond-config-fuzz-" + std::to_string(getpid()) + ".toml";
  // The file goes when the fuzzer exits (libFuzzer ends by exit(), which runs this).
  static const bool removed_at_exit = std::atexit([] { std::remove(path.c_str()); }) == 0;
  (void)removed_at_exit;
  {
    std::ofstream out(path, std::ios::trunc | std::ios::binary);
    out << text;
  }
  CLI::App root("pond");
  pond::tools::EnableDaemonConfig(root);
  CLI::App* mn = root.add_subcommand("mn");
  int id = 0;
  uint64_t region_mib = 0;
  double jitter = 0;
  std::string coord, metrics;
  std::vector<std::string> hosts;
  bool insecure = false;
  mn->add_option("--id", id)->check(CLI::Range(0, 63));
  mn->add_option("--region-mib", region_mib);
  mn->add_option("--jitter", jitter);
  mn->add_option("--coord", coord);
  mn->add_option("--metrics", metrics);
  mn->add_option("--hosts", hosts);
  mn->add_flag("--insecure", insecure);
  pond::tools::AddConfigFlag(mn);
  std::vector<std::string> args = {"pond", "mn", "--config", path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    root.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    // A bad file: `pond` prints the error and exits 2.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    AccessFile(text);
  } else {
    ConfigFile(text);
  }
  return 0;
}
