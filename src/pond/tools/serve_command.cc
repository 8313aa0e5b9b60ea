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
#include "pond/server/client_server.h"
#include "pond/tools/client_security.h"
#include "pond/tools/command.h"
#include "pond/tools/grpc_log.h"
#include "pond/tools/run_flags.h"
#include "pond/tools/served_flags.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct ServeArgs {
  ClusterConfig cluster;
  std::string isolation = "sr";
  std::string protocol = "lotus";
  std::string listen = "127.0.0.1:7400";
  ServedFlags served;
  ServerSecurityFlags security;
  bool region_given = false;  // --region-mib: else what the served tables need, if more
};

// The settings as given, resolved and checked (one line says what is wrong), and the workloads
// to serve.
Result<std::unique_ptr<Served>> ResolveServe(ServeArgs& a) {
  std::optional<Testbed> no_sim;
  POND_RETURN_IF_ERROR(
      ResolveClusterFlags(&a.cluster, &no_sim, a.isolation, "", /*simulate=*/false));
  Result<ProtocolConfig> p = ProtocolByName(a.protocol);
  if (!p.ok()) return p.status();
  a.cluster.protocol = *p;
  Result<std::unique_ptr<Served>> served = PrepareServed(a.served);
  if (!served.ok()) return served.status();
  POND_RETURN_IF_ERROR(FitRegion(**served, a.region_given, &a.cluster));
  POND_RETURN_IF_ERROR(ValidateConfig(a.cluster));
  std::string host;
  int port = 0;
  if (Status st = server::ParseListenAddress(a.listen, &host, &port); !st.ok()) {
    return InvalidArgument("--listen " + st.message());
  }
  server::ClientServiceOptions& service = a.served.service;
  POND_RETURN_IF_ERROR(ApplyServerSecurity(a.security, "pond serve", &service));
  service.cns.clear();
  for (int cn = 0; cn < a.cluster.cns; cn++) service.cns.push_back(static_cast<uint16_t>(cn));
  POND_RETURN_IF_ERROR(server::ValidateServiceOptions(service, a.cluster.cns));
  return served;
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

  Result<std::unique_ptr<Served>> served = ResolveServe(a);
  if (!served.ok()) return Fail(what, served.status().message());
  server::ClientServiceOptions& service = a.served.service;
  Status st;

  auto failed = [&](const std::string& why) {
    std::fprintf(stderr, "pond %s: %s\n", what, why.c_str());
    return 1;
  };
  Result<std::unique_ptr<Cluster>> started = Cluster::Start(a.cluster);
  if (!started.ok()) return failed("cannot start the cluster: " + started.status().ToString());
  Cluster& cluster = **started;
  server::ServiceDirectory dir;
  dir.cluster = a.cluster.transport.cluster;
  if (st = SetUpServed(cluster, **served, &dir); !st.ok()) return failed(st.message());
  if (st = cluster.StartServing(); !st.ok()) return failed(st.ToString());
  Result<std::unique_ptr<server::ClientServer>> server =
      server::ClientServer::Start(cluster, dir, a.listen, service);
  if (!server.ok()) return failed(server.status().message());

  std::fprintf(stderr,
               "pond serve: build %s, protocol %s, %s, %d MN(s), %d CN(s) x %d worker(s), R=%d; "
               "%s\n",
               bench::kBuildType, a.cluster.protocol.name.c_str(),
               IsolationName(a.cluster.isolation), a.cluster.mns, a.cluster.cns,
               a.cluster.workers_per_cn, a.cluster.replication, DescribeServed(dir).c_str());
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
  AddServedFlags(cmd, &a->served);
  AddServerSecurityFlags(cmd, &a->security);
  cmd->get_option("--region-mib")
      ->description("MiB of memory per MN (default: 1024, or what TPC-C's tables need if more)");
  cmd->callback([a, action, cmd] {
    a->region_given = cmd->count("--region-mib") > 0;
    *action = [a] { return RunServe(*a); };
  });
}

}  // namespace pond::tools
