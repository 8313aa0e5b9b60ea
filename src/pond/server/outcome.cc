#include "pond/server/outcome.h"

#include <string>

namespace pond::server {

namespace {

struct Words {
  std::string_view prefix;
  v1::AbortReason reason;
};

// The messages Pond's protocols abort with, and the reason each is counted under
// (AbortCounts): "locked" is ford's lock conflict, "changed since read" a promoted key's
// validation.
constexpr Words kAbortWords[] = {
    {"lock conflict", v1::LOCK_CONFLICT},   {"locked", v1::LOCK_CONFLICT},
    {"newer version", v1::NEWER_VERSION},   {"snapshot too old", v1::SNAPSHOT_TOO_OLD},
    {"torn read", v1::TORN_READ},           {"invisible too long", v1::INVISIBLE_WAIT},
    {"validation", v1::VALIDATION},         {"changed since read", v1::VALIDATION},
    {"MN unreachable", v1::MN_UNREACHABLE}, {"not sent", v1::NOT_SENT},
};

}  // namespace

v1::AbortReason ReasonOf(const Status& s) {
  if (s.code() == Code::kAlreadyExists) return v1::DUPLICATE_KEY;
  if (s.code() == Code::kConflict) return v1::LOCK_CONFLICT;
  for (const Words& w : kAbortWords) {
    if (std::string_view(s.message()).starts_with(w.prefix)) return w.reason;
  }
  return v1::USER;
}

void Reject(std::string_view why, v1::Answer* answer) {
  answer->set_outcome(v1::REJECTED);
  answer->set_reason(v1::REASON_UNSPECIFIED);
  answer->set_message(std::string(why));
}

void Abort(v1::AbortReason reason, std::string_view why, v1::Answer* answer) {
  answer->set_outcome(v1::ABORTED);
  answer->set_reason(reason);
  answer->set_message(std::string(why));
}

void SetAnswer(const Status& s, Phase phase, v1::Answer* answer) {
  answer->Clear();
  switch (s.code()) {
    case Code::kOutOfSpace:
      // From any phase: a commit claims its new keys' room before it writes anything (the
      // transaction layer's PrepareWrites), and a commit that has begun to write never fails.
      Abort(v1::TABLE_FULL, s.message(), answer);
      return;
    case Code::kOk:
      answer->set_outcome(v1::COMMITTED);
      return;
    case Code::kAborted:
    case Code::kAlreadyExists:
    case Code::kConflict:
      Abort(ReasonOf(s), s.message(), answer);
      return;
    case Code::kInvalidArgument:
      // Refused before anything ran: a misuse the service's checks let through, or a
      // procedure refusing its arguments.
      Reject(s.message(), answer);
      return;
    case Code::kUnknown:
      break;
    default:
      if (phase == Phase::kBeforeCommit) {
        Abort(s.code() == Code::kUnavailable ? v1::MN_UNREACHABLE : v1::OTHER, s.ToString(),
              answer);
        return;
      }
      if (phase == Phase::kProcedure && s.code() == Code::kNotFound) {
        Abort(v1::USER, s.ToString(), answer);
        return;
      }
      break;
  }
  answer->set_outcome(v1::UNKNOWN);
  answer->set_message(s.ToString());
}

}  // namespace pond::server
