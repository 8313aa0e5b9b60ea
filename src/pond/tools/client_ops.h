// What `pond client`'s subcommands share: how a key, bytes, a value and an operation are written
// on a command line (or a line of `pond client batch`), how a value is shown, and each outcome's
// exit code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pond/client/client.h"
#include "pond/status.h"

namespace pond::tools {

// Exit codes (besides 0, and 2 for bad input).
constexpr int kExitNotFound = 1, kExitAborted = 3, kExitRejected = 4, kExitUnknown = 5,
              kExitUnreachable = 6;

// KEY: decimal, or hex after 0x.
Result<uint64_t> ParseKey(const std::string& s);
// BYTES: hex:HEX, i64:N or u64:N (8 bytes, little-endian), or the text itself.
Result<std::string> ParseBytes(const std::string& s);
// A value for `t`: BYTES, zero-padded to the table's value size.
Result<std::string> ParseValue(const std::string& s, const client::TableInfo& t);
// hex:..., then ("text") if it reads as text, else its 8-byte words as i64.
std::string Show(const std::string& v);
// The exit code of an answer: 0 committed, else kExitAborted, kExitRejected or kExitUnknown.
int ExitFor(const client::Answer& a);
// Prints an answer: COMMITTED on stdout, anything else as one line on stderr; its exit code.
int Report(const client::Answer& a);
// "TABLE KEY = VALUE" or "TABLE KEY: not found", one line each, after `prefix`.
void PrintValues(const std::vector<client::Value>& values, const std::string& prefix = "");
// An operation OP:TABLE:KEY[:VALUE] (get put insert delete if absent), added to `r`.
Status AddOp(const std::string& op, const client::Description& d, client::Request* r);

}  // namespace pond::tools
