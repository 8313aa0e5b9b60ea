#include "pond/tools/client_security.h"

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
    o->insecure = true;
    o->tls.reset();
    return Status::Ok();
  }
  Result<client::ClientTls> tls =
      server::ReadClientTls(f.dir.empty() ? f.certs_dir : UpCertsDir(f.dir), f.user);
  if (!tls.ok()) return tls.status();
  o->tls = std::move(tls).value();
  o->insecure = false;
  return Status::Ok();
}

void AddServerSecurityFlags(CLI::App* cmd, ServerSecurityFlags* f) {
  cmd->add_option("--certs-dir", f->certs_dir,
                  "serve clients over TLS with ca.crt, node.crt and node.key from DIR, taking "
                  "only clients with a certificate ca.crt signed (pond certs makes them)")
      ->type_name("DIR");
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

}  // namespace pond::tools
