// `pond mn --config FILE` and `pond cn --config FILE`: a daemon's flags read from a TOML file,
// one `key = value` a line, the keys the flag names without their leading `--` (docs/deploy.md
// "Config files"). A flag given on the command line wins over the file.
//
// The file is parsed by toml++ (Debian's libtomlplusplus), so a file TOML refuses is refused.
// CLI11 (2.1) reads a config file only for the root app, so the file is the root's config, and
// its keys are handed to the subcommand that was picked: a key that subcommand has no flag for
// is an error, as is a section (`[name]`). Bad files fail the parse with one line, as any bad
// flag does (pond_main.cc).
#pragma once

#include <CLI/CLI.hpp>

namespace pond::tools {

// Makes `root`'s config file the one a subcommand's --config names. Call once, before parsing.
void EnableDaemonConfig(CLI::App& root);
// Gives `cmd` a --config FILE flag (after EnableDaemonConfig on its root).
void AddConfigFlag(CLI::App* cmd);

}  // namespace pond::tools
