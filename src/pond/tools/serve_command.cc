// `pond serve`: an embedded cluster that serves network clients (docs/clients.md). It loads the
// workloads asked for (--workload: their tables, and their procedures by name) and any empty
// tables (--table), starts serving, runs the client API on --listen, prints "listening
// HOST:PORT" on stdout, and serves until SIGTERM or SIGINT; then it refuses new work, aborts
// open interactive transactions, lets the rest finish, and exits 0. Its other lines go to
// stderr. Bad flags: one line, exit 2; a cluster or port that cannot start: one line, exit 1.
#include <signal.h>

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pond/bench/build_info.h"
#include "pond/bench/kvs_bench.h"
#include "pond/bench/smallbank.h"
#include "pond/bench/tatp.h"
#include "pond/server/client_server.h"
#include "pond/tools/command.h"
#include "pond/tools/grpc_log.h"
#include "pond/tools/kvs_flags.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

constexpr uint64_t kTableCapacityMax = uint64_t{1} << 32;

struct ServeArgs {
  ClusterConfig cluster;
  std::string isolation = "sr";
  std::string protocol = "lotus";
  std::string listen = "127.0.0.1:7400";
  std::vector<std::string> workloads;
  std::vector<std::string> tables;  // NAME:VALUE_BYTES:CAPACITY
  bench::SmallBankParams smallbank;
  bench::KvsParams kvs;
  bench::TatpParams tatp;
  server::ClientServiceOptions service;
};

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

int RunServe(ServeArgs& a) {
  const char* what = "serve";
  QuietGrpcLog();
  // Blocked before any thread starts, so that only the sigwait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  std::optional<Testbed> no_sim;
  Status st = ResolveClusterFlags(&a.cluster, &no_sim, a.isolation, "", /*simulate=*/false);
  if (!st.ok()) return Fail(what, st.message());
  Result<ProtocolConfig> p = ProtocolByName(a.protocol);
  if (!p.ok()) return Fail(what, p.status().message());
  a.cluster.protocol = *p;
  if (st = ValidateConfig(a.cluster); !st.ok()) return Fail(what, st.message());
  std::string host;
  int port = 0;
  if (st = server::ParseListenAddress(a.listen, &host, &port); !st.ok()) {
    return Fail(what, "--listen " + st.message());
  }
  std::vector<TableOptions> tables;
  for (const std::string& spec : a.tables) {
    Result<TableOptions> t = ParseTable(spec);
    if (!t.ok()) return Fail(what, t.status().message());
    tables.push_back(*t);
  }
  std::vector<std::unique_ptr<bench::Workload>> workloads;
  for (size_t i = 0; i < a.workloads.size(); i++) {
    const std::string& name = a.workloads[i];
    if (std::find(a.workloads.begin(), a.workloads.begin() + static_cast<long>(i), name) !=
        a.workloads.begin() + static_cast<long>(i)) {
      return Fail(what, "--workload " + name + " twice");
    }
    if (name == "smallbank") {
      workloads.push_back(std::make_unique<bench::SmallBankWorkload>(a.smallbank));
    } else if (name == "kvs") {
      workloads.push_back(std::make_unique<bench::KvsWorkload>(a.kvs));
    } else {
      workloads.push_back(std::make_unique<bench::TatpWorkload>(a.tatp));
    }
    if (st = workloads.back()->Validate(bench::RunOptions{}); !st.ok()) {
      return Fail(what, st.message());
    }
  }
  a.service.cns.clear();
  for (int cn = 0; cn < a.cluster.cns; cn++) a.service.cns.push_back(static_cast<uint16_t>(cn));
  if (st = server::ValidateServiceOptions(a.service, a.cluster.cns); !st.ok()) {
    return Fail(what, st.message());
  }

  auto failed = [&](const std::string& why) {
    std::fprintf(stderr, "pond %s: %s\n", what, why.c_str());
    return 1;
  };
  Result<std::unique_ptr<Cluster>> started = Cluster::Start(a.cluster);
  if (!started.ok()) return failed("cannot start the cluster: " + started.status().ToString());
  Cluster& cluster = **started;
  server::ServiceDirectory dir;
  dir.cluster = a.cluster.transport.cluster;
  for (auto& w : workloads) {
    if (st = w->Serve(cluster, &dir); !st.ok()) {
      return failed(fmt::format("cannot set up {}: {}", w->title(), st.ToString()));
    }
  }
  for (const TableOptions& t : tables) {
    Result<uint16_t> id = cluster.CreateTable(t);
    if (!id.ok()) return failed("cannot create table " + t.name + ": " + id.status().ToString());
    if (st = dir.AddTable({t.name, *id, t.value_bytes, t.capacity}); !st.ok()) {
      return failed(st.message());
    }
  }
  if (st = cluster.StartServing(); !st.ok()) return failed(st.ToString());
  Result<std::unique_ptr<server::ClientServer>> server =
      server::ClientServer::Start(cluster, dir, a.listen, a.service);
  if (!server.ok()) return failed(server.status().message());

  std::string names;
  for (const server::ServedTable& t : dir.tables()) {
    names += fmt::format("{}{} ({} B x {})", names.empty() ? "" : ", ", t.name, t.value_bytes,
                         t.capacity);
  }
  std::fprintf(stderr,
               "pond serve: build %s, protocol %s, %s, %d MN(s), %d CN(s) x %d worker(s), R=%d; "
               "tables %s; %zu procedure(s)\n",
               bench::kBuildType, a.cluster.protocol.name.c_str(),
               IsolationName(a.cluster.isolation), a.cluster.mns, a.cluster.cns,
               a.cluster.workers_per_cn, a.cluster.replication,
               names.empty() ? "none" : names.c_str(), dir.procedures().size());
  std::printf("listening %s\n", (*server)->address().c_str());
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&stop, &sig) != 0) {
  }
  std::fprintf(stderr, "pond serve: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*server)->Stop();
  cluster.StopServing();
  const server::ServiceCounters c = (*server)->counters();
  std::fprintf(stderr,
               "pond serve: stopped; answered %lu requests: %lu committed, %lu aborted, %lu "
               "unknown, %lu rejected; %lu interactive transactions, %lu abandoned by their "
               "client\n",
               static_cast<unsigned long>(c.requests), static_cast<unsigned long>(c.committed),
               static_cast<unsigned long>(c.aborted), static_cast<unsigned long>(c.unknown),
               static_cast<unsigned long>(c.rejected), static_cast<unsigned long>(c.streams),
               static_cast<unsigned long>(c.streams_abandoned));
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& root, CommandAction* action) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = root.add_subcommand(
      "serve",
      "Run an embedded cluster that serves clients over gRPC (docs/clients.md) until SIGTERM");
  AddClusterFlags(cmd, &a->cluster, nullptr, nullptr, &a->isolation, nullptr, /*simulate=*/false);
  cmd->add_option("--protocol", a->protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  cmd->add_option("--listen", a->listen, "HOST:PORT to serve clients on (port 0: any free one)")
      ->capture_default_str();
  cmd->add_option("--workload", a->workloads,
                  "workloads to load and serve, with their procedures by name: smallbank, kvs, "
                  "tatp (repeat or separate by commas)")
      ->delimiter(',')
      ->check(CLI::IsMember({"smallbank", "kvs", "tatp"}));
  cmd->add_option("--table", a->tables,
                  "an empty table to serve: NAME:VALUE_BYTES:CAPACITY (repeatable)");
  cmd->add_option("--accounts", a->smallbank.accounts, "smallbank: accounts")
      ->capture_default_str();
  cmd->add_option("--keys", a->kvs.keys, "kvs: keys")->capture_default_str();
  cmd->add_option("--subscribers", a->tatp.subscribers, "tatp: subscribers")->capture_default_str();
  cmd->add_option("--keys-per-request-max", a->service.keys_per_request_max,
                  "keys in one request or interactive step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--interactive-max", a->service.interactive_streams_max,
                  "interactive transactions open at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--idle-ms", a->service.interactive_idle_ms,
                  "an interactive transaction idle this long is aborted")
      ->check(CLI::Range(1, 3'600'000))
      ->capture_default_str();
  cmd->add_option("--threads-max", a->service.threads_max,
                  "gRPC threads (each running request and open transaction holds one)")
      ->check(CLI::Range(2, 65536))
      ->capture_default_str();
  cmd->callback([a, action] { *action = [a] { return RunServe(*a); }; });
}

}  // namespace pond::tools
