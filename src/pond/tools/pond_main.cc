// `pond`: the command-line front end. Subcommands live in their own files (command.h).
#include <cstdio>
#include <string>

#include "pond/tools/command.h"

int main(int argc, char** argv) {
  CLI::App app{"Pond: a transactional key-value store for disaggregated memory", "pond"};
  // At most one subcommand; a missing one is reported after parsing, so that a misspelt
  // subcommand is named in the error rather than reported as missing.
  app.require_subcommand(0, 1);
  // Bad input gets exactly one line on stderr and a non-zero exit.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("pond: ") + e.what() + " (see --help)\n";
  });
  pond::tools::CommandAction action;
  pond::tools::AddBenchCommand(app, &action);
  pond::tools::AddCheckCommand(app, &action);
  pond::tools::AddSimCommand(app, &action);
  pond::tools::AddDaemonCommands(app, &action);
  pond::tools::AddServeCommand(app, &action);
  pond::tools::AddClientCommand(app, &action);
  pond::tools::SetCommandLine(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a ParseError that exits 0; every real parse error exits 2.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!action) {
    std::fprintf(stderr,
                 "pond: a subcommand is required: bench, sim, check, up, down, restart, mn, cn, "
                 "serve or client (see --help)\n");
    return 2;
  }
  return action();
}
