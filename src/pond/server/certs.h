// A cluster's TLS material: one directory of PEM files, laid out as CockroachDB lays out its
// certs directory (docs/deploy.md "Security"):
//
//   ca.crt                   the cluster's own certificate authority; every CN and client trusts it
//   ca.key                   its key: only where certificates are made (`pond certs`, `pond up`)
//   node.crt, node.key       a CN's server certificate, naming every host clients reach CNs at
//   client.NAME.crt, .key    a client's certificate; NAME (its subject's CN) is who the client is
//   cluster.secret           what MNs and CNs prove they belong with: the cluster's znodes are
//                            writable only by its holders (cluster/zk_config_store.h). Never
//                            give it to a client.
//
// MakeCerts writes keys 0600 and never replaces a file that is there: a new CA would orphan every
// certificate signed by the old one, so a directory is made once and then only added to.
#pragma once

#include <string>
#include <vector>

#include "pond/client/client.h"
#include "pond/status.h"

namespace pond::server {

inline constexpr const char* kCaCert = "ca.crt";
inline constexpr const char* kCaKey = "ca.key";
inline constexpr const char* kNodeCert = "node.crt";
inline constexpr const char* kNodeKey = "node.key";
inline constexpr const char* kClusterSecret = "cluster.secret";
inline constexpr size_t kClusterSecretMin = 32;
// The client `pond up` makes, and the one `pond client` and `pond bench --connect` present unless
// told another (--user).
inline constexpr const char* kRootUser = "root";

struct CertsOptions {
  // The names and addresses the node certificate is good for: what clients dial. An entry that
  // parses as an IPv4 or IPv6 address is an IP SAN, anything else a DNS SAN.
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "::1"};
  // A client certificate for each of these identities.
  std::vector<std::string> clients = {kRootUser};
  int days = 3650;
};

// Makes whatever of the CA, the node certificate and the client certificates is missing in `dir`
// (created if absent), signing with the CA there. InvalidArgument for a bad host or client name
// or a certificate to sign with no ca.key, Internal if OpenSSL fails (its reason attached).
Status MakeCerts(const std::string& dir, const CertsOptions& o);

// What a CN serves TLS with: its certificate and key, and the CA whose clients it takes.
struct ServerTls {
  std::string ca_pem, cert_pem, key_pem;
};
// Reads ca.crt, node.crt and node.key from `dir`: NotFound naming the file that is missing.
Result<ServerTls> ReadServerTls(const std::string& dir);

// Reads ca.crt and client.USER.crt/.key from `dir` for a client: NotFound naming what is missing
// (and `pond certs`, which makes it).
Result<client::ClientTls> ReadClientTls(const std::string& dir, const std::string& user);

// Reads cluster.secret from `dir` (MakeCerts writes 64 hex digits): NotFound naming the file,
// InvalidArgument for a secret shorter than kClusterSecretMin or with blanks.
Result<std::string> ReadClusterSecret(const std::string& dir);
// The same for a secret file anywhere.
Result<std::string> ReadSecretFile(const std::string& path);

// The file names of a client's certificate and key in a certs directory.
std::string ClientCertFile(const std::string& user);
std::string ClientKeyFile(const std::string& user);

}  // namespace pond::server
