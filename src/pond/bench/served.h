// A workload as a service, and as a driver of one (docs/clients.md "Workloads"): Workload::Serve
// sets a workload up on a cluster that will serve network clients (`pond serve --workload W`),
// naming its tables and procedures in a ServiceDirectory; Workload::Remote makes a RemoteDriver,
// which drives a served copy from another process (`pond bench W --connect ADDR`) through the
// client API. The driver never touches a cluster: it draws calls as the workload's own clients
// do, books what the server answered, and checks the workload's invariant through reads and calls
// that a RemoteStore makes for it — so bench/ needs no gRPC, and the tool that owns the connection
// passes them in.
//
// Thread rules: a RemoteDriver's Next and Book are called from every client thread at once;
// Start and Finish from the controlling thread, before and after them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pond/rng.h"
#include "pond/status.h"

namespace pond::bench {

struct RunResult;

// A served table as the server describes it.
struct RemoteTable {
  std::string name;
  uint32_t value_bytes = 0;
  uint64_t capacity = 0;
};

// One call a remote client makes.
struct RemoteCall {
  size_t kind = 0;             // index into RemoteDriver::TxnNames()
  const char* procedure = "";  // "smallbank.amalgamate"
  std::string args;            // the procedure's argument bytes
  bool read_write = true;
  uint64_t client = 0;  // the client that makes it (Next's `client`)
  // Set by the caller around the call, on its clock: when it was sent and when it was answered
  // (a recorded history's times).
  uint64_t invoke_ns = 0, done_ns = 0;
  // The key whose shard's CN should run it, as the procedure's own route would say: a client
  // with the cluster's shard map sends it there directly (client.h, Pipeline). Last, so that
  // no initialiser by position can fill it with what was meant for another field.
  std::optional<uint64_t> route_key;
};

// What the server answered (the client library's outcome, and the one abort reason a workload
// may read as its own rule rather than an abort: an insert of a present key).
enum class RemoteOutcome : uint8_t { kCommitted, kAborted, kDuplicateKey, kUnknown, kRejected };

// Reads `keys` of `table` in one read-only transaction: each key's value, or nullopt if absent.
using RemoteReader = std::function<Result<std::vector<std::optional<std::string>>>(
    std::string_view table, const std::vector<uint64_t>& keys)>;

// Calls `procedure` with `args` until it commits (an aborted call is sent again, a few times):
// its reply, or the failure that ended it.
using RemoteCaller =
    std::function<Result<std::string>(std::string_view procedure, std::string_view args)>;

// What a driver reads and calls through, before and after the run.
struct RemoteStore {
  RemoteReader read;
  RemoteCaller call;
};

// The most keys a driver's checks read in one request (the service's default limit is 1024).
inline constexpr size_t kRemoteReadKeysMax = 512;

class RemoteDriver {
 public:
  virtual ~RemoteDriver() = default;
  // Its settings for the run's header: "1000 accounts (served), 90% of accesses to 4.0% hot".
  virtual std::string Settings() const = 0;
  // The transaction kinds, in the order RemoteCall::kind counts them (one name: one kind).
  virtual std::vector<std::string> TxnNames() const = 0;
  // Before the run: reads what its check compares against (SmallBank: the money there is), and
  // asks the server what it needs to draw calls (TPC-C: the scale, a run number).
  virtual Status Start(const RemoteStore& store) = 0;
  // The `n`th call (from 1) of client `client`, drawn with that client's `rng`.
  virtual RemoteCall Next(Rng& rng, uint64_t client, uint64_t n) = 0;
  // A finished call and what the server replied (COMMITTED only). Returns false if the workload
  // counts it as declined — its rule, not an abort (TATP's insert of a present forwarding).
  virtual bool Book(const RemoteCall& call, RemoteOutcome outcome, std::string_view reply) = 0;
  // After the run: fills the workload's part of `r` (loaded, committed_by_txn, declined, the
  // check, through `store`).
  virtual Status Finish(const RemoteStore& store, RunResult* r) = 0;

  // True once the workload has nothing more to run (list-append: its keys ran out); the clients
  // stop and Finish says why.
  virtual bool Done() const { return false; }
  // A recording driver's history (history.h's format), after Finish; nullopt if it records
  // nothing.
  virtual std::optional<std::string> TakeHistory() { return std::nullopt; }
};

// The table named `name` among `tables`; InvalidArgument naming it if the server has none, or
// if its values are not `value_bytes` long (0: any).
Result<RemoteTable> FindRemoteTable(const std::vector<RemoteTable>& tables, std::string_view name,
                                    uint32_t value_bytes);

}  // namespace pond::bench
