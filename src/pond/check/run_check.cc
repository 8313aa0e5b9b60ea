#include "pond/check/run_check.h"

#include <nlohmann/json.hpp>
#include <ostream>

namespace pond::check {

int RunCheck(const CheckOptions& options, std::ostream& out, std::ostream& err) {
  Result<History> history = ReadHistoryFile(options.history_path);
  if (!history.ok()) {
    err << "pond check: " << history.status().message() << "\n";
    return kExitMalformed;
  }
  CheckerOptions checker;
  checker.model = options.model;
  checker.examples_per_anomaly_max = options.examples_per_anomaly_max;
  CheckResult result = Check(*history, checker);
  if (options.json) {
    out << ToJson(*history, result).dump(2) << "\n";
  } else {
    out << FormatText(*history, result);
  }
  out.flush();
  return result.valid ? kExitValid : kExitInvalid;
}

}  // namespace pond::check
