// gRPC logs to stderr on its own (a port it cannot bind, a peer that went away), which would
// break the CLI's rule of one line per failure: the commands that use gRPC send its log nowhere,
// unless POND_GRPC_LOG is set in the environment (then gRPC's own GRPC_VERBOSITY applies).
#pragma once

#include <grpc/support/log.h>

#include <cstdlib>

namespace pond::tools {

inline void QuietGrpcLog() {
  if (std::getenv("POND_GRPC_LOG") != nullptr) return;
  gpr_set_log_function([](gpr_log_func_args*) {});
}

}  // namespace pond::tools
