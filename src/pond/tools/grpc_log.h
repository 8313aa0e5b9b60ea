// gRPC and protobuf log to stderr on their own (a port gRPC cannot bind, a peer that went away,
// a client's string field that is not UTF-8), which would break the CLI's rule of one line per
// failure and let any client write to a server's stderr: the commands that use gRPC send both
// logs nowhere, unless POND_GRPC_LOG is set in the environment (then gRPC's own GRPC_VERBOSITY
// applies).
#pragma once

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>

#include <cstdlib>

namespace pond::tools {

inline void QuietGrpcLog() {
  if (std::getenv("POND_GRPC_LOG") != nullptr) return;
  gpr_set_log_function([](gpr_log_func_args*) {});
  google::protobuf::SetLogHandler(nullptr);
}

}  // namespace pond::tools
