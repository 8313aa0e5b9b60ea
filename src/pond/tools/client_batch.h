// `pond client batch`: many one-shot transactions and procedure calls from a file or standard
// input, sent on one pipeline (client::Pipeline) with a bounded number in flight — loading a
// table or replaying a workload from a shell without a process per transaction.
#pragma once

#include <cstdint>
#include <string>

#include "pond/client/client.h"

namespace pond::tools {

struct BatchArgs {
  std::string file = "-";   // the lines to run; "-" is standard input
  uint32_t in_flight = 64;  // requests sent and not yet answered, at most
  uint32_t retries = 5;     // a line aborted by a conflict is sent again up to this many times
};

// Reads every line of a.file first (a line that does not parse fails the whole batch, exit 2,
// before anything is sent), then runs them, `a.in_flight` at a time. A line is one of
//   txn OP...         a read-write transaction of OP:TABLE:KEY[:VALUE] operations (as `txn`)
//   ro OP...          a read-only one (get, if and absent only)
//   call PROC ARG...  a procedure, its argument bytes concatenated (as `call`)
// and blank lines and lines that start with # are skipped. Each answer is printed on stdout as
// it comes, behind its line's number (a line aborted by a conflict with another transaction —
// a lock, a newer version, a failed validation — changed nothing, and is first sent again up to
// a.retries times): "N COMMITTED" and its values or reply, or "N " and why
// it did not commit. A count of each outcome ends on stderr. 0 if every line committed, else
// the exit code (client_ops.h) of the first line, by number, that did not.
int RunBatch(client::Client& c, const client::Description& d, const BatchArgs& a);

}  // namespace pond::tools
