// How `pond` subcommands plug into the CLI: each Add*Command registers a CLI11 subcommand on
// the root app and, when the user picks it, stores in *action the function that runs it. The
// action's return value is the process exit code (0 ok, 1 a failed check, 2 bad input).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace pond::tools {

using CommandAction = std::function<int()>;

void AddBenchCommand(CLI::App& root, CommandAction* action);
void AddCheckCommand(CLI::App& root, CommandAction* action);
void AddSimCommand(CLI::App& root, CommandAction* action);
// `mn`, `up`, `down`: the daemons and a local cluster of them (daemon_commands.cc).
void AddDaemonCommands(CLI::App& root, CommandAction* action);
// `serve`: an embedded cluster serving clients over gRPC (serve_command.cc).
void AddServeCommand(CLI::App& root, CommandAction* action);
// `client`: the client API from a shell (client_command.cc).
void AddClientCommand(CLI::App& root, CommandAction* action);

// `bench kvs` and `sim kvs`: one workload, two transports (kvs_command.cc).
void AddKvsCommand(CLI::App& parent, CommandAction* action, bool simulate);
// `bench compare` and `sim compare`: every protocol on one workload (compare_command.cc).
void AddCompareCommand(CLI::App& parent, CommandAction* action, bool simulate);

// `bench WORKLOAD` and `sim WORKLOAD` for the registry's workloads with the generic command:
// smallbank, tatp, tpcc (workload_command.cc, workload_registry.h).
void AddWorkloadCommands(CLI::App& parent, CommandAction* action, bool simulate);
// `bench list-append` and `sim list-append`: recorded and checked (list_append_command.cc).
void AddListAppendCommand(CLI::App& parent, CommandAction* action, bool simulate);
// `bench btree` and `sim btree`: Sherman's B+Tree benchmark (btree_command.cc).
void AddBtreeCommand(CLI::App& parent, CommandAction* action, bool simulate);

// The command line as typed, for printing the command that replays a simulated run.
void SetCommandLine(int argc, char** argv);
const std::string& CommandLine();

}  // namespace pond::tools
