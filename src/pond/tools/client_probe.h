// `pond client probe`: is every shard writable through every CN? An operator's (and a fault
// test's) answer to "the cluster is up, but does it commit?" — a failover that left shards
// unwritable through some CN shows here, where a valid history would not show it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pond/client/client.h"

namespace pond::tools {

struct ProbeArgs {
  std::string table;               // a table of the server's that the probe may write
  std::vector<std::string> cns;    // the CNs' client addresses; empty: every one `d` names
  uint32_t within_ms = 10'000;     // every shard commits through a CN within this, or it fails
  uint32_t threads = 4;            // clients per CN, each with its own connection
  uint32_t timeout_ms = 10'000;    // each request's deadline
  client::ClientOptions security;  // its tls or insecure: how each probing client connects
};

// Through each CN in turn (the i-th of a.cns, else of `d`), one put in every shard: key
// (i + 1) * 4096 + shard of `table`, retried while it does not commit until `within_ms` after that
// CN's probe began. One line per CN on stdout; a shard that never committed is named on stderr with
// its last answer. 0 if every shard committed through every CN; 3 if some did not; 2 on bad input.
int RunProbe(const client::Description& d, const ProbeArgs& a);

}  // namespace pond::tools
