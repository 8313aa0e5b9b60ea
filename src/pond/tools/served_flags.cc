#include "pond/tools/served_flags.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace pond::tools {

namespace {

constexpr uint64_t kTableCapacityMax = uint64_t{1} << 32;

// "NAME:VALUE_BYTES:CAPACITY" as a table to create.
Result<TableOptions> ParseTable(const std::string& spec) {
  const size_t a = spec.find(':'), b = spec.rfind(':');
  TableOptions t;
  auto bad = [&](const std::string& why) {
    return InvalidArgument("--table " + spec + ": " + why + " (NAME:VALUE_BYTES:CAPACITY)");
  };
  if (a == std::string::npos || a == b) return bad("three fields, separated by ':'");
  t.name = spec.substr(0, a);
  if (t.name.empty()) return bad("no name");
  for (char c : t.name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return bad("a name is letters, digits, '_', '-' and '.'");
    }
  }
  try {
    size_t used = 0;
    const std::string bytes = spec.substr(a + 1, b - a - 1), cap = spec.substr(b + 1);
    const unsigned long v = std::stoul(bytes, &used);
    if (used != bytes.size() || v < 1 || v > server::kServedValueBytesMax) {
      return bad(fmt::format("value bytes must be 1 to {}", server::kServedValueBytesMax));
    }
    const unsigned long long c = std::stoull(cap, &used);
    if (used != cap.size() || c < 1 || c > kTableCapacityMax) {
      return bad(fmt::format("capacity must be 1 to {}", kTableCapacityMax));
    }
    t.value_bytes = static_cast<uint32_t>(v);
    t.capacity = c;
  } catch (const std::exception&) {
    return bad("value bytes and capacity are numbers");
  }
  return t;
}

}  // namespace

void AddServedFlags(CLI::App* cmd, ServedFlags* f) {
  cmd->add_option("--workload", f->workloads,
                  "workloads to load and serve, with their procedures by name: smallbank, kvs, "
                  "tatp, tpcc, list-append (repeat or separate by commas)")
      ->delimiter(',')
      ->check(CLI::IsMember({"smallbank", "kvs", "tatp", "tpcc", "list-append"}));
  cmd->add_option("--table", f->tables,
                  "an empty table to serve: NAME:VALUE_BYTES:CAPACITY (repeatable)");
  cmd->add_option("--accounts", f->smallbank.accounts, "smallbank: accounts")
      ->capture_default_str();
  cmd->add_option("--keys", f->kvs.keys, "kvs: keys")->capture_default_str();
  cmd->add_option("--subscribers", f->tatp.subscribers, "tatp: subscribers")->capture_default_str();
  cmd->add_option("--warehouses", f->tpcc.warehouses, "tpcc: warehouses, 1 to 4095")
      ->capture_default_str();
  cmd->add_option("--items", f->tpcc.items, "tpcc: items")->capture_default_str();
  cmd->add_option("--customers", f->tpcc.customers, "tpcc: customers per district")
      ->capture_default_str();
  cmd->add_option("--order-room", f->tpcc.order_room,
                  "tpcc: orders each district may take while served, over every run (default: "
                  "as many as --customers)")
      ->capture_default_str();
  cmd->add_option("--lists", f->lists.keys,
                  "list-append: lists (each recorded run uses lists no run used before)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 28))
      ->capture_default_str();
  cmd->add_option("--keys-per-request-max", f->service.keys_per_request_max,
                  "keys in one request or interactive step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--interactive-max", f->service.interactive_streams_max,
                  "interactive transactions open at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--idle-ms", f->service.interactive_idle_ms,
                  "an interactive transaction idle this long is aborted")
      ->check(CLI::Range(1, 3'600'000))
      ->capture_default_str();
  cmd->add_option_function<uint64_t>(
         "--buffer-mib", [f](uint64_t mib) { f->service.buffer_bytes_max = mib << 20; },
         "memory gRPC may hold for messages in flight; a message too large is cut off once this "
         "much of it is held, not taken whole (default 64)")
      ->type_name("MIB")
      ->check(CLI::Range(uint64_t{32}, uint64_t{65536}));
  cmd->add_option("--threads-max", f->service.threads_max,
                  "gRPC threads (each running request and open transaction holds one)")
      ->check(CLI::Range(2, 65536))
      ->capture_default_str();
}

Result<std::unique_ptr<Served>> PrepareServed(const ServedFlags& f) {
  auto served = std::make_unique<Served>();
  for (const std::string& spec : f.tables) {
    Result<TableOptions> t = ParseTable(spec);
    if (!t.ok()) return t.status();
    served->tables.push_back(*t);
  }
  for (size_t i = 0; i < f.workloads.size(); i++) {
    const std::string& name = f.workloads[i];
    if (std::find(f.workloads.begin(), f.workloads.begin() + static_cast<long>(i), name) !=
        f.workloads.begin() + static_cast<long>(i)) {
      return InvalidArgument("--workload " + name + " twice");
    }
    if (name == "smallbank") {
      served->workloads.push_back(std::make_unique<bench::SmallBankWorkload>(f.smallbank));
    } else if (name == "kvs") {
      served->workloads.push_back(std::make_unique<bench::KvsWorkload>(f.kvs));
    } else if (name == "tatp") {
      served->workloads.push_back(std::make_unique<bench::TatpWorkload>(f.tatp));
    } else if (name == "tpcc") {
      served->workloads.push_back(std::make_unique<bench::TpccWorkload>(f.tpcc));
    } else {
      // Served plans are checked as they arrive; the run's own options are the driver's.
      served->workloads.push_back(std::make_unique<bench::ListAppendWorkload>(f.lists));
      continue;
    }
    POND_RETURN_IF_ERROR(served->workloads.back()->Validate(bench::RunOptions{}));
  }
  return served;
}

Status SetUpServed(Cluster& cluster, Served& served, server::ServiceDirectory* dir) {
  for (auto& w : served.workloads) {
    Status st = w->Serve(cluster, dir);
    if (!st.ok())
      return InvalidArgument(fmt::format("cannot set up {}: {}", w->title(), st.ToString()));
  }
  for (const TableOptions& t : served.tables) {
    Result<uint16_t> id = cluster.CreateTable(t);
    if (!id.ok()) {
      return InvalidArgument("cannot create table " + t.name + ": " + id.status().ToString());
    }
    POND_RETURN_IF_ERROR(dir->AddTable({t.name, *id, t.value_bytes, t.capacity}));
  }
  return Status::Ok();
}

Status FitRegion(const Served& served, bool given, ClusterConfig* c) {
  std::vector<bench::TableNeed> tables;
  for (const auto& w : served.workloads) {
    for (bench::TableNeed& t : w->ServedTables()) tables.push_back(std::move(t));
  }
  // A table a client fills may come to hold a record in every slot.
  for (const TableOptions& t : served.tables) tables.push_back({t, t.capacity});
  const bench::RegionNeed need = bench::RegionNeedFor(tables, *c);
  if (!given) {
    c->region_mib = std::max(c->region_mib, need.mib);
    return Status::Ok();
  }
  if (c->region_mib >= need.least_mib) return Status::Ok();
  return InvalidArgument(fmt::format(
      "--region-mib {} cannot hold the served tables: on {} MN(s) with R={} they take at least {} "
      "MiB per MN; give --region-mib {}, or leave it out to size it",
      c->region_mib, c->mns, c->replication, need.least_mib, need.mib));
}

std::vector<std::string> ServedArgs(const ServedFlags& f) {
  std::vector<std::string> a;
  for (const std::string& w : f.workloads) a.insert(a.end(), {"--workload", w});
  for (const std::string& t : f.tables) a.insert(a.end(), {"--table", t});
  // Every value spelt out, so that each CN sets up the same tables whatever its defaults.
  const std::pair<const char*, uint64_t> values[] = {
      {"--accounts", f.smallbank.accounts},
      {"--keys", f.kvs.keys},
      {"--subscribers", f.tatp.subscribers},
      {"--warehouses", f.tpcc.warehouses},
      {"--items", f.tpcc.items},
      {"--customers", f.tpcc.customers},
      {"--order-room", f.tpcc.order_room},
      {"--lists", f.lists.keys},
      {"--keys-per-request-max", static_cast<uint64_t>(f.service.keys_per_request_max)},
      {"--interactive-max", static_cast<uint64_t>(f.service.interactive_streams_max)},
      {"--idle-ms", static_cast<uint64_t>(f.service.interactive_idle_ms)},
      {"--threads-max", static_cast<uint64_t>(f.service.threads_max)}};
  for (const auto& [flag, value] : values) a.insert(a.end(), {flag, std::to_string(value)});
  return a;
}

std::string DescribeServed(const server::ServiceDirectory& dir) {
  std::string names;
  for (const server::ServedTable& t : dir.tables()) {
    names += fmt::format("{}{} ({} B x {})", names.empty() ? "" : ", ", t.name, t.value_bytes,
                         t.capacity);
  }
  return fmt::format("tables {}; {} procedure(s)", names.empty() ? "none" : names,
                     dir.procedures().size());
}

}  // namespace pond::tools
