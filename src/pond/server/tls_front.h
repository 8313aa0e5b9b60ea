// TlsFront: TLS in front of a plaintext HTTP server on loopback — how the metrics endpoint
// serves HTTPS. civetweb, the server prometheus-cpp exposes metrics with, loads OpenSSL itself
// by name at run time, and Debian 12's build of it asks OpenSSL 3 for a function OpenSSL 3 no
// longer has (SSL_get_peer_certificate), so its own TLS never starts. The front takes each
// connection on the public address, does the TLS handshake with OpenSSL (linked, as gRPC's is),
// and relays the bytes both ways to the backend's loopback port, one thread per connection.
//
// Connections are bounded (kFrontConnectionsMax at once: more are closed at accept) and so is
// their idleness (kFrontHandshakeMs for each step of the handshake, then kFrontIdleMs without a
// byte either way ends one), so that port scanners and stuck scrapers cannot pile up threads, and
// hold the metrics from a scraper for seconds at most. The token, if any, is checked by the
// backend: the front relays bytes and knows nothing of HTTP.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pond/server/certs.h"
#include "pond/status.h"

namespace pond::server {

inline constexpr int kFrontConnectionsMax = 16;
inline constexpr int kFrontHandshakeMs = 2'000;
inline constexpr int kFrontIdleMs = 10'000;

class TlsFront {
 public:
  // Listens on `host`:`port` (0: any free port) and relays to 127.0.0.1:`backend_port`, with
  // `tls`'s certificate and key, TLS 1.2 or later. InvalidArgument for a certificate or key
  // that does not load; Unavailable when the address cannot be bound.
  static Result<std::unique_ptr<TlsFront>> Start(const ServerTls& tls, const std::string& host,
                                                 int port, int backend_port);
  // Stops taking connections, ends those open, and joins every thread.
  ~TlsFront();
  TlsFront(const TlsFront&) = delete;
  TlsFront& operator=(const TlsFront&) = delete;

  int port() const { return port_; }

 private:
  struct Connection;
  TlsFront() = default;
  void Accept();
  void Relay(Connection* c);
  // Joins the threads of connections that have ended (under mu_).
  void Reap();

  struct SslCtxDeleter {
    void operator()(void* ctx) const;
  };
  std::unique_ptr<void, SslCtxDeleter> ctx_;  // an SSL_CTX
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd: written once, wakes every thread
  int port_ = 0;
  int backend_port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> connections_;  // guarded by mu_
};

}  // namespace pond::server
