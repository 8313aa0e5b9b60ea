// How a client command (`pond client`, `pond bench --connect`) and a serving one (`pond cn`,
// `pond serve`) say how they are secured — TLS from a certs directory, or plaintext asked for by
// name — as flags (docs/clients.md "Security", docs/deploy.md "Security").
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "pond/client/client.h"
#include "pond/server/client_service.h"
#include "pond/server/metrics.h"

namespace pond::tools {

struct ClientSecurityFlags {
  std::string certs_dir;  // ca.crt and client.USER.crt/.key (server/certs.h)
  std::string dir;        // a `pond up` directory: its certs/ is the certs directory
  std::string user = server::kRootUser;
  std::string token_file;  // a bearer token in place of the client certificate
  bool insecure = false;
};

// --certs-dir, --dir, --user, --token-file and --insecure on `cmd`; `f` must outlive the parse.
// `what` says what the flags are for in their help ("" for a client command, "with --connect: " for
// bench).
void AddClientSecurityFlags(CLI::App* cmd, ClientSecurityFlags* f, const std::string& what = "");
// Sets o->tls from the certs directory (read now) or o->insecure: InvalidArgument, one line,
// when neither or both are asked for, NotFound naming a missing file.
Status ApplyClientSecurity(const ClientSecurityFlags& f, client::ClientOptions* o);

struct ServerSecurityFlags {
  std::string certs_dir;    // ca.crt, node.crt and node.key
  std::string access_file;  // who may do what (server/access.h); none: every client is admin
  bool insecure = false;
};
void AddServerSecurityFlags(CLI::App* cmd, ServerSecurityFlags* f);
// Sets o->tls from the certs directory (read now, so a missing file fails before anything
// starts) or o->insecure; the errors as ApplyClientSecurity's. `command` names it in them.
Status ApplyServerSecurity(const ServerSecurityFlags& f, const std::string& command,
                           server::ClientServiceOptions* o);

// How a daemon proves it belongs to its cluster: the secret in its certs directory
// (cluster.secret; server/certs.h), or nothing with --insecure (the cluster's znodes open).
struct NodeSecurityFlags {
  std::string certs_dir;
  bool insecure = false;
};
// --certs-dir and --insecure, for a daemon that serves no clients (`pond mn`).
void AddNodeSecurityFlags(CLI::App* cmd, NodeSecurityFlags* f);
// Reads the secret into *secret ("" with --insecure): InvalidArgument, one line, when neither
// or both are given or the file is missing or malformed.
Status ApplyNodeSecurity(const NodeSecurityFlags& f, const std::string& command,
                         std::string* secret);

// Who may scrape a daemon's metrics: HTTPS with the certs directory's node certificate, and a
// token as the HTTP Basic password (server/metrics.h's MetricsSecurity).
struct MetricsSecurityFlags {
  bool tls = false;
  std::string token_file;
};
void AddMetricsSecurityFlags(CLI::App* cmd, MetricsSecurityFlags* f);
// Reads what the flags name (node.crt and node.key from `certs_dir`, the token file):
// InvalidArgument, one line, for --metrics-tls without a certs directory or a file that is
// missing or malformed, or either flag without --metrics.
Status ApplyMetricsSecurity(const MetricsSecurityFlags& f, const std::string& metrics,
                            const std::string& certs_dir, server::MetricsSecurity* o);

// The certs directory of the `pond up` cluster in `dir`.
std::string UpCertsDir(const std::string& dir);

}  // namespace pond::tools
