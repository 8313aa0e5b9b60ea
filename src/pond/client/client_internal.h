// What the client library's files share (client.cc, pipeline.cc): the translation of the
// service's answers into the library's, and a Client's channel. Not part of the library's API.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "pond/client/client.h"
#include "pond/v1/pond.grpc.pb.h"

namespace pond::client {

struct Client::Channel {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Pond::Stub> stub;
};

namespace detail {

Answer FromProto(const v1::Answer& a);
Answer Make(Outcome o, AbortReason r, std::string message);
// The answer for a request that failed at the gRPC level. `may_have_run`: the server may have
// carried it out (its answer was lost), so only UNKNOWN is honest; otherwise the failure is
// one the server gives before running anything (a limit, a malformed message).
Answer FromRpcFailure(const grpc::Status& s, const std::string& address, bool may_have_run);
std::vector<Value> Values(const google::protobuf::RepeatedPtrField<v1::Value>& vs);

}  // namespace detail
}  // namespace pond::client
