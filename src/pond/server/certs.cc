#include "pond/server/certs.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace pond::server {

namespace {

namespace fs = std::filesystem;

// `lhs = *expr`, or return expr's status. (lhs may declare.)
#define CERTS_CONCAT2(a, b) a##b
#define CERTS_CONCAT(a, b) CERTS_CONCAT2(a, b)
#define POND_ASSIGN_OR_RETURN(lhs, expr) \
  POND_ASSIGN_OR_RETURN_IMPL(CERTS_CONCAT(_result_, __LINE__), lhs, expr)
#define POND_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

// OpenSSL's reasons for the failure, oldest first, and its error queue emptied.
Status OpenSslError(const std::string& what) {
  std::string reasons;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    reasons += reasons.empty() ? ": " : "; ";
    reasons += buf;
  }
  return Internal(what + reasons);
}

// ECDSA P-256: small, fast to make and to verify, and taken by every TLS stack gRPC uses.
Result<Key> NewKey() {
  Key k(EVP_EC_gen("P-256"));
  if (k == nullptr) return OpenSslError("making a key");
  return k;
}

Result<std::string> Pem(int (*write)(BIO*, const void*), const void* what) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || write(bio.get(), what) != 1) return OpenSslError("writing PEM");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

int WriteCert(BIO* b, const void* c) {
  return PEM_write_bio_X509(b, static_cast<X509*>(const_cast<void*>(c)));
}
int WriteKey(BIO* b, const void* k) {
  return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(const_cast<void*>(k)), nullptr, nullptr,
                                  0, nullptr, nullptr);
}

Result<std::string> ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return NotFound(p.string() + ": " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `text` to a new file `p` with `mode`, never over one that is there.
Status WriteNew(const fs::path& p, const std::string& text, mode_t mode) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Unavailable(tmp.string() + ": " + std::strerror(errno));
    ::chmod(tmp.c_str(), mode);  // before the secret goes in
    out << text;
    if (!out.flush()) return Unavailable(tmp.string() + ": cannot write");
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) return Unavailable(p.string() + ": " + ec.message());
  return Status::Ok();
}

Result<Cert> ParseCert(const std::string& pem, const std::string& what) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert c(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (c == nullptr) return OpenSslError(what + ": not a PEM certificate");
  return c;
}

Result<Key> ParseKey(const std::string& pem, const std::string& what) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key k(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (k == nullptr) return OpenSslError(what + ": not a PEM private key");
  return k;
}

Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (ext == nullptr || X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpenSslError("certificate extension " + value);
  }
  return Status::Ok();
}

// A certificate for `subject_cn` with `key`, signed by `issuer` with `issuer_key` (itself when
// issuer is null: the CA), with the extensions its use needs.
enum class Use { kCa, kServer, kClient };
Result<Cert> Sign(const std::string& subject_cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                  Use use, const std::string& san, int days) {
  Cert c(X509_new());
  if (c == nullptr) return OpenSslError("X509_new");
  X509_set_version(c.get(), 2);  // v3: extensions
  // A random 127-bit serial: certificates of one CA made in separate runs never share one.
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return OpenSslError("serial");
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  if (bn == nullptr || BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c.get())) == nullptr) {
    BN_free(bn);
    return OpenSslError("serial");
  }
  BN_free(bn);
  // An hour back: a host whose clock is a little behind the maker's still takes it.
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), static_cast<long>(days) * 86400);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("Pond"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(subject_cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : c.get();
  X509_set_issuer_name(c.get(), X509_get_subject_name(signer));
  if (X509_set_pubkey(c.get(), key) != 1) return OpenSslError("public key");
  switch (use) {
    case Use::kCa:
      POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
      POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
      break;
    case Use::kServer:
      POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
      POND_RETURN_IF_ERROR(
          AddExt(c.get(), signer, NID_key_usage, "critical,digitalSignature,keyAgreement"));
      // A CN's certificate serves clients; it is a client of the other CNs' services too.
      POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
      POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_subject_alt_name, san));
      break;
    case Use::kClient:
      POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
      POND_RETURN_IF_ERROR(
          AddExt(c.get(), signer, NID_key_usage, "critical,digitalSignature,keyAgreement"));
      POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_ext_key_usage, "clientAuth"));
      break;
  }
  POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_subject_key_identifier, "hash"));
  if (issuer != nullptr) {
    POND_RETURN_IF_ERROR(AddExt(c.get(), signer, NID_authority_key_identifier, "keyid:always"));
  }
  if (X509_sign(c.get(), issuer_key, EVP_sha256()) == 0) return OpenSslError("signing");
  return c;
}

// "DNS:localhost,IP:127.0.0.1,...", each host checked: a name OpenSSL's config syntax would read
// as more than one entry is refused rather than misread.
Result<std::string> SanOf(const std::vector<std::string>& hosts) {
  if (hosts.empty()) return InvalidArgument("the node certificate needs at least one host");
  std::string san;
  for (const std::string& h : hosts) {
    unsigned char buf[16];
    const bool ip =
        inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
    if (!ip) {
      if (h.empty() || h.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789.-*") != std::string::npos) {
        return InvalidArgument("host \"" + h + "\" is neither an IP address nor a DNS name");
      }
    }
    if (!san.empty()) san += ",";
    san += (ip ? "IP:" : "DNS:") + h;
  }
  return san;
}

Status CheckUser(const std::string& user) {
  if (user.empty() || user.size() > 64 ||
      user.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos) {
    return InvalidArgument("client name \"" + user +
                           "\": 1 to 64 of a-z, 0-9, '_' and '-' (it names its files)");
  }
  return Status::Ok();
}

}  // namespace

std::string ClientCertFile(const std::string& user) { return "client." + user + ".crt"; }
std::string ClientKeyFile(const std::string& user) { return "client." + user + ".key"; }

Status MakeCerts(const std::string& dir_name, const CertsOptions& o) {
  const fs::path dir(dir_name);
  POND_ASSIGN_OR_RETURN(const std::string san, SanOf(o.hosts));
  for (const std::string& u : o.clients) POND_RETURN_IF_ERROR(CheckUser(u));
  if (o.days < 1 || o.days > 36500) return InvalidArgument("days: 1 to 36500");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Unavailable(dir_name + ": " + ec.message());

  const bool have_ca = fs::exists(dir / kCaCert);
  // The secret is made with the CA, where a cluster begins (and added to a directory made before
  // there was one, if it still signs).
  if (!fs::exists(dir / kClusterSecret) && (!have_ca || fs::exists(dir / kCaKey))) {
    unsigned char bytes[32];
    if (RAND_bytes(bytes, sizeof(bytes)) != 1) return OpenSslError("cluster secret");
    std::string hex;
    for (unsigned char b : bytes) hex += {"0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15]};
    POND_RETURN_IF_ERROR(WriteNew(dir / kClusterSecret, hex + "\n", 0600));
  }
  const bool need_node = !fs::exists(dir / kNodeCert);
  std::vector<std::string> need_clients;
  for (const std::string& u : o.clients) {
    if (!fs::exists(dir / ClientCertFile(u))) need_clients.push_back(u);
  }
  if (have_ca && !need_node && need_clients.empty()) return Status::Ok();

  Key ca_key;
  Cert ca;
  if (!have_ca) {
    POND_ASSIGN_OR_RETURN(ca_key, NewKey());
    POND_ASSIGN_OR_RETURN(
        ca, Sign("Pond CA", ca_key.get(), nullptr, ca_key.get(), Use::kCa, "", o.days));
    POND_ASSIGN_OR_RETURN(const std::string key_pem, Pem(WriteKey, ca_key.get()));
    POND_ASSIGN_OR_RETURN(const std::string cert_pem, Pem(WriteCert, ca.get()));
    POND_RETURN_IF_ERROR(WriteNew(dir / kCaKey, key_pem, 0600));
    POND_RETURN_IF_ERROR(WriteNew(dir / kCaCert, cert_pem, 0644));
  } else {
    Result<std::string> key_pem = ReadFile(dir / kCaKey);
    if (!key_pem.ok()) {
      return InvalidArgument(dir_name + " has a " + kCaCert + " but no " + kCaKey +
                             " to sign new certificates with");
    }
    POND_ASSIGN_OR_RETURN(const std::string cert_pem, ReadFile(dir / kCaCert));
    POND_ASSIGN_OR_RETURN(ca_key, ParseKey(*key_pem, (dir / kCaKey).string()));
    POND_ASSIGN_OR_RETURN(ca, ParseCert(cert_pem, (dir / kCaCert).string()));
  }
  auto issue = [&](const std::string& cn, Use use, const std::string& cert_file,
                   const std::string& key_file) -> Status {
    POND_ASSIGN_OR_RETURN(Key key, NewKey());
    POND_ASSIGN_OR_RETURN(Cert cert, Sign(cn, key.get(), ca.get(), ca_key.get(), use, san, o.days));
    POND_ASSIGN_OR_RETURN(const std::string key_pem, Pem(WriteKey, key.get()));
    POND_ASSIGN_OR_RETURN(const std::string cert_pem, Pem(WriteCert, cert.get()));
    // The key first: a directory with a certificate has its key.
    POND_RETURN_IF_ERROR(WriteNew(dir / key_file, key_pem, 0600));
    return WriteNew(dir / cert_file, cert_pem, 0644);
  };
  if (need_node) POND_RETURN_IF_ERROR(issue("node", Use::kServer, kNodeCert, kNodeKey));
  for (const std::string& u : need_clients) {
    POND_RETURN_IF_ERROR(issue(u, Use::kClient, ClientCertFile(u), ClientKeyFile(u)));
  }
  return Status::Ok();
}

Result<ServerTls> ReadServerTls(const std::string& dir_name) {
  const fs::path dir(dir_name);
  ServerTls t;
  POND_ASSIGN_OR_RETURN(t.ca_pem, ReadFile(dir / kCaCert));
  POND_ASSIGN_OR_RETURN(t.cert_pem, ReadFile(dir / kNodeCert));
  POND_ASSIGN_OR_RETURN(t.key_pem, ReadFile(dir / kNodeKey));
  return t;
}

Result<client::ClientTls> ReadClientTls(const std::string& dir_name, const std::string& user) {
  POND_RETURN_IF_ERROR(CheckUser(user));
  const fs::path dir(dir_name);
  client::ClientTls t;
  POND_ASSIGN_OR_RETURN(t.ca_pem, ReadFile(dir / kCaCert));
  Result<std::string> cert = ReadFile(dir / ClientCertFile(user));
  if (!cert.ok()) {
    return NotFound(cert.status().message() + " (pond certs --certs-dir " + dir_name +
                    " --client " + user + " makes it)");
  }
  t.cert_pem = std::move(cert).value();
  POND_ASSIGN_OR_RETURN(t.key_pem, ReadFile(dir / ClientKeyFile(user)));
  return t;
}

Result<std::string> ReadClusterSecret(const std::string& dir) {
  const fs::path file = fs::path(dir) / kClusterSecret;
  if (!fs::exists(file)) {
    return NotFound("no " + file.string() + " (pond certs --certs-dir " + dir + " makes it)");
  }
  return ReadSecretFile(file.string());
}

Result<std::string> ReadSecretFile(const std::string& path) {
  const fs::path file(path);
  if (!fs::exists(file)) return NotFound("no " + path);
  POND_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.size() < kClusterSecretMin ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 127; })) {
    return InvalidArgument(file.string() + ": a secret is one line of at least " +
                           std::to_string(kClusterSecretMin) + " printable characters, no spaces");
  }
  return text;
}

}  // namespace pond::server
