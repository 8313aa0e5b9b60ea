// The client service's checks of a request, before anything runs: every table and procedure named
// must be served, every value must have its table's size, key counts stay within the limits, no
// key is written twice in one request, and an answer must fit a message. What passes becomes a
// plan in Pond's terms (table ids, byte values) that a call on a worker carries out; what fails
// is one line for a REJECTED answer. docs/clients.md "Limits" lists the rules.
//
// Pure functions of their arguments; any thread. A plan owns its bytes, so it may outlive the
// request it came from (an interactive add waits for the next execute).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pond/base/printable.h"
#include "pond/server/client_service.h"
#include "pond/server/service_directory.h"
#include "pond/v1/pond.pb.h"

namespace pond::server {

struct PlannedKey {
  const ServedTable* table = nullptr;
  uint64_t key = 0;
};

struct PlannedWrite {
  v1::Write::Kind kind = v1::Write::PUT;
  PlannedKey key;
  std::vector<std::byte> value;  // PUT and INSERT: the table's value_bytes; DELETE: empty
};

struct PlannedCondition {
  PlannedKey key;
  bool absent = false;  // else the value must equal `equals`
  std::vector<std::byte> equals;
};

struct ExecutePlan {
  bool read_only = false;
  std::vector<PlannedKey> reads;
  std::vector<PlannedWrite> writes;
  std::vector<PlannedCondition> conditions;
};

// An interactive add step: read-only and read-write keys (in that order, what the next execute
// answers values for), inserts and deletes.
struct PlannedAdd {
  std::vector<PlannedKey> read_only, read_write, deletes;
  std::vector<PlannedWrite> inserts;
  size_t keys() const {
    return read_only.size() + read_write.size() + deletes.size() + inserts.size();
  }
};

Result<ExecutePlan> PlanExecute(const v1::ExecuteRequest& req, const ServiceDirectory& dir,
                                const ClientServiceOptions& o);
// An add step of a transaction that is read-only or not: a read-only one may only read. `pending`
// are the adds since the last execute: the next execute answers their values and this one's in
// one message, so the message limit is checked over all of them.
Result<PlannedAdd> PlanAdd(const v1::Add& add, bool read_only,
                           const std::vector<PlannedAdd>& pending, const ServiceDirectory& dir,
                           const ClientServiceOptions& o);
Result<std::vector<PlannedWrite>> PlanPuts(const v1::WriteStep& w, const ServiceDirectory& dir,
                                           const ClientServiceOptions& o);

// Sets `out` from Txn::Read of `k`: found with its bytes, or not found. Any other failure (a key
// not executed) is returned.
Status FillValue(const Result<std::span<const std::byte>>& read, const PlannedKey& k,
                 v1::Value* out);

}  // namespace pond::server
