// How the client service turns a transaction's Status into the Answer a client gets
// (proto/pond/v1/pond.proto, docs/clients.md "Outcomes"). The rule that matters: never a wrong
// answer. ABORTED only when nothing can have been written, COMMITTED only for OK, and UNKNOWN
// whenever a failure came from a point where the writes may have taken effect. So the same code
// maps differently by where it came from (`Phase`).
//
// Pure functions; any thread.
#pragma once

#include <string_view>

#include "pond/status.h"
#include "pond/v1/pond.pb.h"

namespace pond::server {

enum class Phase {
  // Before Commit (Execute, reads, the service's own checks): nothing is written yet, so every
  // failure is an abort, or a rejection for misuse (InvalidArgument).
  kBeforeCommit,
  // Txn::Commit: aborts (kAborted, kAlreadyExists, kConflict), a full table (kOutOfSpace: room
  // is claimed before any write) and misuse are known to have written nothing; any other
  // failure is UNKNOWN, the server being unable to prove otherwise.
  kCommit,
  // A stored procedure's Status, from wherever inside it: aborts and misuse are told apart as
  // above; a procedure's own refusal (kNotFound: "no account 42") is an abort by the user; any
  // other code is UNKNOWN, since it may have come from the procedure's commit.
  kProcedure,
};

// Sets `answer` for `s` (OK: COMMITTED) from `phase`.
void SetAnswer(const Status& s, Phase phase, v1::Answer* answer);

// The reason words of an aborted Status ("lock conflict" -> LOCK_CONFLICT), by the message the
// protocols give (AbortedBecause in txn/txn_state.h) and the code; USER if none matches.
v1::AbortReason ReasonOf(const Status& s);

// Sets an answer of the service's own: REJECTED with `why`; ABORTED with `reason` and `why`.
void Reject(std::string_view why, v1::Answer* answer);
void Abort(v1::AbortReason reason, std::string_view why, v1::Answer* answer);

}  // namespace pond::server
