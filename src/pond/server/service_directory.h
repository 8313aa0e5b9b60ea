// ServiceDirectory: what a client service (client_service.h) serves of a cluster — its tables and
// stored procedures by the names clients use, and where clients reach each of the cluster's CNs.
// Whoever sets the cluster up fills it (`pond serve` from its workloads, bench/workload.h
// Workload::Serve; a CN daemon the same way), before the service starts; the service only reads
// it, from any thread.
//
// Invariants (Add* refuse what would break them): names are unique and non-empty; a procedure's
// `route` is set; every table's value_bytes is 1 .. kServedValueBytesMax.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pond/cluster.h"

namespace pond::server {

// The largest value a served table may have: one value, with its key and table name, must fit a
// message many times over (the service's message limit is 4 MiB).
inline constexpr uint32_t kServedValueBytesMax = 64 * 1024;

struct ServedTable {
  std::string name;
  uint16_t id = 0;
  uint32_t value_bytes = 0;
  uint64_t capacity = 0;
};

struct ServedProcedure {
  std::string name;  // "smallbank.send_payment": WORKLOAD.PROCEDURE by convention
  ProcedureId id = 0;
  // The exact size of the arguments; 0: any size up to kReplyBytesMax. Procedures read their
  // arguments without checking their size, so the service checks it before any call.
  uint32_t args_bytes = 0;
  bool read_only = false;  // its transaction only reads (clients may send it again)
  // Checks the arguments against the workload's rules (accounts in range, two distinct accounts)
  // and says where hybrid routing should run the call; InvalidArgument with one line otherwise.
  // Called on the service's threads, concurrently: it must only read what it captured.
  std::function<Result<RouteHint>(std::span<const std::byte> args)> route;
};

class ServiceDirectory {
 public:
  std::string cluster = "pond";
  // Client addresses of every CN, in CN order; a server that serves alone may leave it empty and
  // the server names its own address (ClientServer::Start).
  std::vector<std::string> cn_addresses;

  Status AddTable(ServedTable t) {
    if (t.name.empty() || Table(t.name) != nullptr) {
      return InvalidArgument("table name \"" + t.name + "\" is empty or served twice");
    }
    if (t.value_bytes == 0 || t.value_bytes > kServedValueBytesMax) {
      return InvalidArgument("table \"" + t.name + "\" has values of " +
                             std::to_string(t.value_bytes) + " bytes; a served table's are 1 to " +
                             std::to_string(kServedValueBytesMax));
    }
    tables_.push_back(std::move(t));
    return Status::Ok();
  }
  Status AddProcedure(ServedProcedure p) {
    if (p.name.empty() || Procedure(p.name) != nullptr) {
      return InvalidArgument("procedure name \"" + p.name + "\" is empty or served twice");
    }
    if (!p.route) return InvalidArgument("procedure \"" + p.name + "\" has no route function");
    procedures_.push_back(std::move(p));
    return Status::Ok();
  }

  // By name; nullptr if not served. A linear search: a cluster serves a handful of each.
  const ServedTable* Table(std::string_view name) const {
    for (const ServedTable& t : tables_) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  const ServedProcedure* Procedure(std::string_view name) const {
    for (const ServedProcedure& p : procedures_) {
      if (p.name == name) return &p;
    }
    return nullptr;
  }
  const std::vector<ServedTable>& tables() const { return tables_; }
  const std::vector<ServedProcedure>& procedures() const { return procedures_; }

 private:
  std::vector<ServedTable> tables_;
  std::vector<ServedProcedure> procedures_;
};

}  // namespace pond::server
