// `pond mn`, `pond up` and `pond down`: Pond as separate processes (server/). docs/deploy.md.
#include <ctime>
#include <fstream>
#include <memory>
#include <string>

#include "pond/server/access.h"
#include "pond/server/certs.h"
#include "pond/server/cn_daemon.h"
#include "pond/server/cn_frontend.h"
#include "pond/server/local_cluster.h"
#include "pond/server/mn_daemon.h"
#include "pond/tools/client_security.h"
#include "pond/tools/command.h"
#include "pond/tools/daemon_config.h"
#include "pond/tools/grpc_log.h"
#include "pond/tools/run_flags.h"
#include "pond/tools/served_flags.h"

namespace pond::tools {

namespace {

void AddMetricsFlag(CLI::App* cmd, std::string* metrics) {
  cmd->add_option("--metrics", *metrics,
                  "IP:PORT to serve Prometheus metrics on, at GET /metrics (port 0: any free one; "
                  "default: none; docs/deploy.md)");
}

void AddNetDevicesFlag(CLI::App* cmd, std::string* devices) {
  cmd->add_option("--ucx-net-devices", *devices,
                  "this host's network devices for UCX (UCX_NET_DEVICES), in place of the "
                  "spec's ucx_net_devices: for hosts whose interfaces are named differently");
}

// `pond mn`: one memory node.
void AddMnCommand(CLI::App& root, CommandAction* action) {
  auto o = std::make_shared<server::MnDaemonOptions>();
  CLI::App* cmd = root.add_subcommand(
      "mn", "Run one memory node: serve its region over UCX until SIGTERM (docs/deploy.md)");
  AddConfigFlag(cmd);
  cmd->add_option("--coord", o->coord, "ZooKeeper to register with: HOST:PORT[,HOST:PORT...]")
      ->required();
  cmd->add_option("--cluster", o->cluster, "the cluster's name (its keys: /pond/NAME/...)")
      ->capture_default_str();
  cmd->add_option("--id", o->id, "this MN's id, 0 to the cluster's MNs - 1")
      ->required()
      ->check(CLI::Range(0, 63));
  cmd->add_option("--wait", o->wait_s, "seconds to wait for the cluster's spec to appear")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  AddMetricsFlag(cmd, &o->metrics);
  AddNetDevicesFlag(cmd, &o->ucx_net_devices);
  auto security = std::make_shared<NodeSecurityFlags>();
  AddNodeSecurityFlags(cmd, security.get());
  auto metrics = std::make_shared<MetricsSecurityFlags>();
  AddMetricsSecurityFlags(cmd, metrics.get());
  cmd->callback([o, security, metrics, action] {
    Status secured = ApplyNodeSecurity(*security, "pond mn", &o->secret);
    if (secured.ok()) {
      secured =
          ApplyMetricsSecurity(*metrics, o->metrics, security->certs_dir, &o->metrics_security);
    }
    if (!secured.ok()) throw CLI::ValidationError(secured.message());
    *action = [o] { return server::RunMnDaemon(*o); };
  });
}

// `pond cn`: one compute node, serving clients.
void AddCnCommand(CLI::App& root, CommandAction* action) {
  auto o = std::make_shared<server::CnDaemonOptions>();
  auto served = std::make_shared<ServedFlags>();
  auto listen = std::make_shared<std::string>("127.0.0.1:0");
  auto advertise = std::make_shared<std::string>();
  CLI::App* cmd = root.add_subcommand(
      "cn",
      "Run one compute node: its workers, lock tables and clients, until SIGTERM "
      "(docs/deploy.md)");
  AddConfigFlag(cmd);
  cmd->add_option("--coord", o->coord, "ZooKeeper to register with: HOST:PORT[,HOST:PORT...]")
      ->required();
  cmd->add_option("--cluster", o->cluster, "the cluster's name (its keys: /pond/NAME/...)")
      ->capture_default_str();
  cmd->add_option("--id", o->id, "this CN's id, 0 to the cluster's CNs - 1")
      ->required()
      ->check(CLI::Range(0, 63));
  cmd->add_option("--wait", o->wait_s,
                  "seconds to wait for the spec, CN 0's tables, every MN read and the other CNs")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--grace", o->grace_s,
                  "seconds a stopping CN waits for answers the other CNs owe it")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  cmd->add_option("--listen", *listen,
                  "HOST:PORT to take clients on (port 0: any free one; published for them)")
      ->capture_default_str();
  cmd->add_option("--advertise", *advertise,
                  "HOST[:PORT] clients are told to reach this CN at (default: --listen's host; "
                  "for 0.0.0.0, this host's address on its route to --coord)");
  AddMetricsFlag(cmd, &o->metrics);
  AddNetDevicesFlag(cmd, &o->ucx_net_devices);
  AddServedFlags(cmd, served.get());
  auto security = std::make_shared<ServerSecurityFlags>();
  AddServerSecurityFlags(cmd, security.get());
  auto metrics = std::make_shared<MetricsSecurityFlags>();
  AddMetricsSecurityFlags(cmd, metrics.get());
  cmd->callback([o, served, listen, advertise, security, metrics, action] {
    Status secured = ApplyServerSecurity(*security, "pond cn", &served->service);
    if (secured.ok()) {
      secured = ApplyNodeSecurity(NodeSecurityFlags{security->certs_dir, security->insecure},
                                  "pond cn", &o->secret);
    }
    if (secured.ok()) {
      secured =
          ApplyMetricsSecurity(*metrics, o->metrics, security->certs_dir, &o->metrics_security);
    }
    if (!secured.ok()) throw CLI::ValidationError(secured.message());
    Result<std::unique_ptr<Served>> prepared = PrepareServed(*served);
    if (!prepared.ok()) throw CLI::ValidationError(prepared.status().message());
    std::shared_ptr<Served> what(std::move(prepared).value());
    auto dir = std::make_shared<server::ServiceDirectory>();
    // Every CN sets up the same workloads in the same order: CN 0 makes their tables, the
    // others open them, and all register the same procedures under the same ids.
    o->setup = [what, dir](Cluster& c, bool) { return SetUpServed(c, *what, dir.get()); };
    o->frontend = std::make_unique<server::ClientFrontend>(dir, *listen, served->service,
                                                           *advertise, o->coord);
    *action = [o] {
      QuietGrpcLog();
      return server::RunCnDaemon(*o);
    };
  });
}

// `pond up`: a local cluster of processes.
void AddUpCommand(CLI::App& root, CommandAction* action) {
  auto o = std::make_shared<server::UpOptions>();
  auto protocol = std::make_shared<std::string>("lotus");
  auto isolation = std::make_shared<std::string>("sr");
  o->config.region_mib = 256;
  CLI::App* cmd = root.add_subcommand(
      "up", "Start a local cluster as processes — ZooKeeper and one `pond mn` per MN — into DIR");
  cmd->add_option("--dir", o->dir, "directory for the cluster's pids, logs and data")->required();
  cmd->add_option("--cluster", o->cluster, "the cluster's name")->capture_default_str();
  cmd->add_option("--mns", o->config.mns, "memory nodes")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--cns", o->cn_daemons,
                  "compute nodes, each a `pond cn` daemon (0: none; an embedded run's CNs use "
                  "the MNs: pond bench --coord)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option("--workers", o->config.workers_per_cn, "worker threads per CN")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--protocol", *protocol, "lotus, motor or ford (and the ablation steps)")
      ->capture_default_str();
  cmd->add_option("--isolation", *isolation, "sr or si")
      ->check(CLI::IsMember({"sr", "si"}))
      ->capture_default_str();
  cmd->add_option("--replication", o->config.replication, "copies of each record")
      ->capture_default_str();
  cmd->add_option("--region-mib", o->config.region_mib,
                  "MiB of memory per MN (default: 256, or what TPC-C's tables need if more)");
  cmd->add_option("--ucx-tls", o->config.transport.ucx_tls,
                  "UCX transports (UCX_TLS: shm, tcp, rc,sm, ...; default UCX's choice)");
  cmd->add_option("--ucx-net-devices", o->config.transport.ucx_net_devices,
                  "network devices (UCX_NET_DEVICES: lo, mlx5_0:1, ...)");
  // Long enough that no CN of a cluster sharing two cores with its clients misses a beat;
  // dedicated hosts take far less (docs/deploy.md).
  o->config.transport.lease_ms = 1000;
  cmd->add_option("--lease-ms", o->config.transport.lease_ms,
                  "a CN daemon's lease: declared failed after this long without a beat")
      ->check(CLI::Range(20, 60'000))
      ->capture_default_str();
  AddReshardFlags(cmd, &o->config.reshard);
  auto served = std::make_shared<ServedFlags>();
  AddServedFlags(cmd, served.get());
  cmd->add_flag("--insecure", o->insecure,
                "CNs serve clients in plaintext (by default over TLS, with a CA, a node "
                "certificate and a root client certificate made in DIR/certs)");
  cmd->add_flag("!--no-metrics", o->metrics,
                "start the daemons without metrics (by default each serves them on a free "
                "loopback port, which cluster.json records)");
  cmd->add_option("--timeout", o->timeout_s, "seconds for every process to come up")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  cmd->callback([o, protocol, isolation, served, action, cmd] {
    Result<std::unique_ptr<Served>> prepared = PrepareServed(*served);
    if (!prepared.ok()) throw CLI::ValidationError(prepared.status().message());
    o->cn_args = ServedArgs(*served);
    o->cn_clients = true;
    Result<ProtocolConfig> p = ProtocolByName(*protocol);
    if (!p.ok()) throw CLI::ValidationError("--protocol", p.status().message());
    o->config.protocol = *p;
    o->config.isolation = *isolation == "si" ? Isolation::kSnapshot : Isolation::kSerializable;
    // The spec's CN count is the daemons' when there are any.
    if (o->cn_daemons > 0) o->config.cns = o->cn_daemons;
    Status fits = FitRegion(**prepared, cmd->count("--region-mib") > 0, &o->config);
    if (!fits.ok()) throw CLI::ValidationError(fits.message());
    *action = [o] { return server::Up(*o); };
  });
}

// `pond restart`: one daemon of a local cluster, again.
void AddRestartCommand(CLI::App& root, CommandAction* action) {
  auto dir = std::make_shared<std::string>();
  auto cn = std::make_shared<int>(-1);
  auto mn = std::make_shared<int>(-1);
  auto coord = std::make_shared<bool>(false);
  auto timeout = std::make_shared<double>(60);
  CLI::App* cmd = root.add_subcommand(
      "restart",
      "Start a stopped or killed CN or MN daemon, or the ZooKeeper server, of the local cluster "
      "in DIR again");
  cmd->add_option("--dir", *dir, "the directory given to pond up")->required();
  CLI::Option* cn_opt = cmd->add_option("--cn", *cn, "the CN to restart")->check(CLI::Range(0, 63));
  CLI::Option* mn_opt = cmd->add_option("--mn", *mn,
                                        "the MN to restart: it comes back blank and the CNs "
                                        "copy its replicas back (docs/recovery.md)")
                            ->check(CLI::Range(0, 63));
  CLI::Option* coord_opt =
      cmd->add_flag("--coord", *coord, "restart the ZooKeeper server (same port, same data)");
  cn_opt->excludes(coord_opt);
  mn_opt->excludes(coord_opt);
  mn_opt->excludes(cn_opt);
  cmd->add_option("--timeout", *timeout,
                  "seconds for it to serve again (an MN: to be read like any replica)")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  cmd->callback([dir, cn, mn, coord, cn_opt, mn_opt, coord_opt, timeout, action] {
    if (cn_opt->count() == 0 && mn_opt->count() == 0 && coord_opt->count() == 0) {
      throw CLI::ValidationError("pond restart", "say what to restart: --cn N, --mn N or --coord");
    }
    *action = [dir, cn, mn, coord, timeout, mn_opt] {
      if (*coord) return server::RestartCoord(*dir, *timeout);
      if (mn_opt->count() > 0) return server::RestartMn(*dir, *mn, *timeout);
      return server::Restart(*dir, *cn, *timeout);
    };
  });
}

// `pond down`: the local cluster stopped.
void AddDownCommand(CLI::App& root, CommandAction* action) {
  auto dir = std::make_shared<std::string>();
  auto grace = std::make_shared<double>(10);
  CLI::App* cmd = root.add_subcommand("down", "Stop the local cluster `pond up` started in DIR");
  cmd->add_option("--dir", *dir, "the directory given to pond up")->required();
  cmd->add_option("--grace", *grace, "seconds each process has to stop before it is killed")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  cmd->callback(
      [dir, grace, action] { *action = [dir, grace] { return server::Down(*dir, *grace); }; });
}
// `pond certs`: a cluster's TLS material, made or added to.
void AddCertsCommand(CLI::App& root, CommandAction* action) {
  auto dir = std::make_shared<std::string>();
  auto o = std::make_shared<server::CertsOptions>();
  auto hosts = std::make_shared<std::vector<std::string>>();
  auto clients = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = root.add_subcommand(
      "certs",
      "Make a cluster's TLS certificates in DIR — its CA, the CNs' node certificate and client "
      "certificates — and its secret (cluster.secret), keeping every file already there "
      "(docs/deploy.md \"Security\")");
  cmd->add_option("--certs-dir", *dir, "the directory (made if absent)")->required();
  cmd->add_option("--host", *hosts,
                  "a name or address clients reach the CNs at (repeat; default: localhost, "
                  "127.0.0.1 and ::1); only for a node certificate not made yet");
  cmd->add_option("--client", *clients,
                  "a client certificate to make, for this identity (repeat; default: root)");
  cmd->add_option("--days", o->days, "how long the certificates are good for")
      ->check(CLI::Range(1, 36500))
      ->capture_default_str();
  cmd->callback([dir, o, hosts, clients, action] {
    if (!hosts->empty()) o->hosts = *hosts;
    if (!clients->empty()) o->clients = *clients;
    *action = [dir, o] {
      Status made = server::MakeCerts(*dir, *o);
      if (!made.ok()) {
        std::fprintf(stderr, "pond certs: %s\n", made.message().c_str());
        return made.code() == Code::kInvalidArgument ? 2 : 1;
      }
      std::printf("pond certs: %s holds %s, %s, %s, %s and client certificates for", dir->c_str(),
                  server::kCaCert, server::kNodeCert, server::kNodeKey, server::kClusterSecret);
      for (const std::string& c : o->clients) std::printf(" %s", c.c_str());
      std::printf("\n");
      return 0;
    };
  });
}
// `pond token`: a bearer token made, its hash added to an access file, the token printed once.
void AddTokenCommand(CLI::App& root, CommandAction* action) {
  auto access = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>();
  auto role = std::make_shared<std::string>();
  auto days = std::make_shared<double>(90);
  CLI::App* cmd = root.add_subcommand(
      "token",
      "Make a bearer token for a client: its hash and role go into the access file, the token "
      "to stdout, once (docs/clients.md \"Roles\")");
  cmd->add_option("--access", *access, "the access file (made if absent)")->required();
  cmd->add_option("--name", *name, "who the token is for (a-z, 0-9, '_', '-')")->required();
  cmd->add_option("--role", *role, "read-only, read-write or admin")->required();
  cmd->add_option("--days", *days, "how long it is good for")
      ->check(CLI::Range(0.001, 36500.0))
      ->capture_default_str();
  cmd->callback([access, name, role, days, action] {
    Result<server::Role> r = server::RoleByName(*role);
    if (!r.ok()) throw CLI::ValidationError("--role", r.status().message());
    if (name->empty() || name->size() > 64 ||
        name->find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos) {
      throw CLI::ValidationError("--name", "1 to 64 of a-z, 0-9, '_' and '-'");
    }
    const server::Role granted = *r;
    *action = [access, name, days, granted] {
      auto fail = [](const std::string& m) {
        std::fprintf(stderr, "pond token: %s\n", m.c_str());
        return 1;
      };
      // The file must stay one the CNs read: refuse to add to one they would refuse.
      if (std::ifstream(*access).good()) {
        Result<server::Access> now = server::Access::Load(*access);
        if (!now.ok()) return fail(now.status().message());
      }
      Result<std::string> token = server::NewToken();
      if (!token.ok()) return fail(token.status().message());
      const auto expires =
          static_cast<int64_t>(std::time(nullptr)) + static_cast<int64_t>(*days * 86400);
      std::ofstream out(*access, std::ios::app);
      out << server::TokenEntry(*name, granted, *token, expires);
      if (!out.flush()) return fail(*access + ": cannot write");
      std::printf("%s\n", token->c_str());
      std::fprintf(stderr, "pond token: %s (%s) added to %s; CNs read it when they start\n",
                   name->c_str(), server::RoleName(granted), access->c_str());
      return 0;
    };
  });
}
}  // namespace

void AddDaemonCommands(CLI::App& root, CommandAction* action) {
  EnableDaemonConfig(root);
  AddMnCommand(root, action);
  AddCnCommand(root, action);
  AddUpCommand(root, action);
  AddRestartCommand(root, action);
  AddDownCommand(root, action);
  AddCertsCommand(root, action);
  AddTokenCommand(root, action);
}

}  // namespace pond::tools
