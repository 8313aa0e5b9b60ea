// `pond check HISTORY [--model M] [--json]`: checks a recorded history (Elle's list-append
// format) against an isolation model. A thin wrapper: the work is check::RunCheck.
#include <iostream>
#include <memory>
#include <string>

#include "pond/check/run_check.h"
#include "pond/tools/command.h"

namespace pond::tools {

void AddCheckCommand(CLI::App& root, CommandAction* action) {
  struct Args {
    check::CheckOptions options;
    std::string model = "strict-serializable";
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = root.add_subcommand(
      "check", "Check a transaction history (Elle list-append JSON lines) for isolation anomalies");
  cmd->add_option("HISTORY", args->options.history_path, "History file, one operation per line")
      ->required();
  cmd->add_option("--model", args->model, "Isolation level the history must satisfy")
      ->check(CLI::IsMember({"serializable", "snapshot-isolation", "strict-serializable"}))
      ->capture_default_str();
  cmd->add_flag("--json", args->options.json, "Print the result as one JSON object");
  cmd->add_option("--examples", args->options.examples_per_anomaly_max,
                  "Examples shown per anomaly")
      ->check(CLI::Range(0u, check::kExamplesPerAnomalyLimit))
      ->capture_default_str();
  cmd->callback([args, action] {
    *action = [args] {
      // --model was validated by CLI11, so parsing cannot fail here.
      args->options.model = check::ParseModel(args->model).value();
      return check::RunCheck(args->options, std::cout, std::cerr);
    };
  });
}

}  // namespace pond::tools
