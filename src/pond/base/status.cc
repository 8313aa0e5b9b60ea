#include "pond/status.h"

namespace pond {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kNotFound:
      return "NotFound";
    case Code::kAlreadyExists:
      return "AlreadyExists";
    case Code::kAborted:
      return "Aborted";
    case Code::kConflict:
      return "Conflict";
    case Code::kTornRead:
      return "TornRead";
    case Code::kOutOfSpace:
      return "OutOfSpace";
    case Code::kWrongShard:
      return "WrongShard";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kCorruption:
      return "Corruption";
    case Code::kUnknown:
      return "Unknown";
    case Code::kInternal:
      return "Internal";
    case Code::kPermissionDenied:
      return "PermissionDenied";
  }
  return "BadCode";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName(code_));
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

}  // namespace pond
