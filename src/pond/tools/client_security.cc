#include "pond/tools/client_security.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <utility>

#include "pond/server/certs.h"

namespace pond::tools {

std::string UpCertsDir(const std::string& dir) { return dir + "/certs"; }

void AddClientSecurityFlags(CLI::App* cmd, ClientSecurityFlags* f, const std::string& what) {
  cmd->add_option("--certs-dir", f->certs_dir,
                  what +
                      "TLS: the cluster's ca.crt and this client's client.USER.crt/.key "
                      "(pond certs makes them)")
      ->type_name("DIR");
  cmd->add_option("--dir", f->dir,
                  what + "TLS with the certificates of the pond up cluster in DIR (DIR/certs)")
      ->type_name("DIR");
  cmd->add_option("--user", f->user,
                  what + "the client certificate to show: client.USER.crt in the certs directory")
      ->capture_default_str();
  cmd->add_option("--token-file", f->token_file,
                  what +
                      "prove who this client is with the bearer token in FILE (pond token "
                      "makes one) instead of a client certificate; TLS with the certs "
                      "directory's ca.crt")
      ->type_name("FILE");
  cmd->add_flag("--insecure", f->insecure,
                what + "plaintext, no TLS: only against a server started with --insecure");
}

Status ApplyClientSecurity(const ClientSecurityFlags& f, client::ClientOptions* o) {
  const int given = !f.certs_dir.empty() + !f.dir.empty() + f.insecure;
  if (given == 0) {
    return InvalidArgument(
        "say how to reach the server: --dir DIR of a pond up cluster, --certs-dir DIR (TLS), or "
        "--insecure (plaintext, for a server started with --insecure)");
  }
  if (given > 1) return InvalidArgument("--certs-dir, --dir and --insecure: give one");
  if (f.insecure) {
    if (!f.token_file.empty()) return InvalidArgument("--token-file goes only over TLS");
    o->insecure = true;
    o->tls.reset();
    return Status::Ok();
  }
  const std::string dir = f.dir.empty() ? f.certs_dir : UpCertsDir(f.dir);
  o->insecure = false;
  if (f.token_file.empty()) {
    Result<client::ClientTls> tls = server::ReadClientTls(dir, f.user);
    if (!tls.ok()) return tls.status();
    o->tls = std::move(tls).value();
    return Status::Ok();
  }
  std::ifstream in(f.token_file, std::ios::binary);
  std::ostringstream token;
  if (!in || !(token << in.rdbuf()))
    return NotFound("--token-file " + f.token_file + ": cannot be read");
  o->bearer_token = token.str();
  while (!o->bearer_token.empty() &&
         std::isspace(static_cast<unsigned char>(o->bearer_token.back()))) {
    o->bearer_token.pop_back();
  }
  if (o->bearer_token.empty()) return InvalidArgument("--token-file " + f.token_file + " is empty");
  std::ifstream ca(dir + "/" + server::kCaCert, std::ios::binary);
  std::ostringstream ca_pem;
  if (!ca || !(ca_pem << ca.rdbuf())) {
    return NotFound(dir + "/" + server::kCaCert + ": cannot be read");
  }
  o->tls = client::ClientTls{.ca_pem = ca_pem.str()};
  return Status::Ok();
}

void AddServerSecurityFlags(CLI::App* cmd, ServerSecurityFlags* f) {
  cmd->add_option("--certs-dir", f->certs_dir,
                  "serve clients over TLS with ca.crt, node.crt and node.key from DIR, taking "
                  "only clients with a certificate ca.crt signed (pond certs makes them)")
      ->type_name("DIR");
  cmd->add_option("--access", f->access_file,
                  "who may do what: client certificates and bearer tokens with their roles, a "
                  "TOML file read at start (docs/clients.md \"Roles\"); default: every client "
                  "with a certificate the CA signed is admin")
      ->type_name("FILE");
  cmd->add_flag("--insecure", f->insecure,
                "serve clients in plaintext, with no TLS and no client certificates: anyone who "
                "reaches the port can do anything");
}

Status ApplyServerSecurity(const ServerSecurityFlags& f, const std::string& command,
                           server::ClientServiceOptions* o) {
  if (f.certs_dir.empty() == !f.insecure) {
    return InvalidArgument(
        f.insecure ? "--certs-dir and --insecure: give one"
                   : command +
                         " serves clients over TLS: give --certs-dir DIR (ca.crt, node.crt, "
                         "node.key; pond certs makes them), or --insecure for plaintext");
  }
  if (!f.access_file.empty()) {
    if (f.insecure) return InvalidArgument("--access needs TLS: not with --insecure");
    Result<server::Access> access = server::Access::Load(f.access_file);
    if (!access.ok()) return InvalidArgument("--access: " + access.status().message());
    o->access = std::move(access).value();
  }
  if (f.insecure) {
    o->insecure = true;
    o->tls.reset();
    return Status::Ok();
  }
  Result<server::ServerTls> tls = server::ReadServerTls(f.certs_dir);
  if (!tls.ok()) {
    return InvalidArgument("--certs-dir: " + tls.status().message() + " (pond certs --certs-dir " +
                           f.certs_dir + " makes the cluster's certificates)");
  }
  o->tls = std::move(tls).value();
  o->insecure = false;
  return Status::Ok();
}

void AddNodeSecurityFlags(CLI::App* cmd, NodeSecurityFlags* f) {
  cmd->add_option("--certs-dir", f->certs_dir,
                  "the cluster's certs directory: its cluster.secret proves this daemon belongs "
                  "(pond certs makes it)")
      ->type_name("DIR");
  cmd->add_flag("--insecure", f->insecure,
                "join a cluster started --insecure: its znodes open to anyone who reaches "
                "ZooKeeper");
}

Status ApplyNodeSecurity(const NodeSecurityFlags& f, const std::string& command,
                         std::string* secret) {
  if (f.certs_dir.empty() == !f.insecure) {
    return InvalidArgument(f.insecure ? "--certs-dir and --insecure: give one"
                                      : command +
                                            " proves it belongs with the cluster's secret: give "
                                            "--certs-dir DIR (its cluster.secret; pond certs "
                                            "makes it), or --insecure for an open cluster");
  }
  if (f.insecure) {
    secret->clear();
    return Status::Ok();
  }
  Result<std::string> read = server::ReadClusterSecret(f.certs_dir);
  if (!read.ok()) return InvalidArgument("--certs-dir: " + read.status().message());
  *secret = std::move(read).value();
  return Status::Ok();
}

void AddMetricsSecurityFlags(CLI::App* cmd, MetricsSecurityFlags* f) {
  cmd->add_flag("--metrics-tls", f->tls,
                "serve the metrics over HTTPS with node.crt and node.key from --certs-dir");
  cmd->add_option("--metrics-token-file", f->token_file,
                  "scrapers must give the token in FILE as their HTTP Basic password (any user "
                  "name; Prometheus's basic_auth password_file)")
      ->type_name("FILE");
}

Status ApplyMetricsSecurity(const MetricsSecurityFlags& f, const std::string& metrics,
                            const std::string& certs_dir, server::MetricsSecurity* o) {
  if (metrics.empty() && (f.tls || !f.token_file.empty())) {
    return InvalidArgument(std::string(f.tls ? "--metrics-tls" : "--metrics-token-file") +
                           " goes with --metrics");
  }
  if (f.tls) {
    if (certs_dir.empty()) {
      return InvalidArgument("--metrics-tls serves node.crt and node.key: give --certs-dir DIR");
    }
    Result<server::ServerTls> tls = server::ReadServerTls(certs_dir);
    if (!tls.ok()) return InvalidArgument("--metrics-tls: " + tls.status().message());
    o->tls = std::move(tls).value();
  }
  if (!f.token_file.empty()) {
    Result<std::string> token = server::ReadSecretFile(f.token_file);
    if (!token.ok()) return InvalidArgument("--metrics-token-file: " + token.status().message());
    o->token = std::move(token).value();
  }
  return Status::Ok();
}

}  // namespace pond::tools
