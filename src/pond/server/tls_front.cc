#include "pond/server/tls_front.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/base/thread_name.h"

namespace pond::server {

struct TlsFront::Connection {
  int fd = -1;
  std::thread thread;
  std::atomic<bool> done{false};
};

void TlsFront::SslCtxDeleter::operator()(void* ctx) const {
  SSL_CTX_free(static_cast<SSL_CTX*>(ctx));
}

namespace {

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return e == 0 ? "unknown error" : buf;
}

// Loads the certificate and key from PEM text: an empty or unreadable one is InvalidArgument.
Status UseCertificate(SSL_CTX* ctx, const ServerTls& tls) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(
      BIO_new_mem_buf(tls.cert_pem.data(), static_cast<int>(tls.cert_pem.size())), &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (cert == nullptr || SSL_CTX_use_certificate(ctx, cert.get()) != 1) {
    return InvalidArgument("the metrics' certificate does not load: " + OpenSslError());
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(
      BIO_new_mem_buf(tls.key_pem.data(), static_cast<int>(tls.key_pem.size())), &BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (key == nullptr || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    return InvalidArgument("the metrics' key does not load or does not match the certificate: " +
                           OpenSslError());
  }
  return Status::Ok();
}

// A listening TCP socket on host:port; its fd, or -1 with `*why`.
int Listen(const std::string& host, int port, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int gai = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (gai != 0) {
    *why = gai_strerror(gai);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      *why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

Result<std::unique_ptr<TlsFront>> TlsFront::Start(const ServerTls& tls, const std::string& host,
                                                  int port, int backend_port) {
  std::unique_ptr<TlsFront> f(new TlsFront());
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal("cannot make a TLS context: " + OpenSslError());
  f->ctx_.reset(ctx);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  POND_RETURN_IF_ERROR(UseCertificate(ctx, tls));
  std::string why;
  f->listen_fd_ = Listen(host, port, &why);
  if (f->listen_fd_ < 0) {
    return Unavailable("cannot listen at " + host + ":" + std::to_string(port) + ": " + why);
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(f->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  f->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  f->backend_port_ = backend_port;
  f->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (f->stop_fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  f->acceptor_ = std::thread([t = f.get()] {
    NameThisThread("pond-tls-front");
    t->Accept();
  });
  return f;
}

TlsFront::~TlsFront() {
  if (stop_fd_ >= 0) {
    uint64_t one = 1;
    POND_CHECK(write(stop_fd_, &one, sizeof(one)) == sizeof(one));
  }
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard lock(mu_);
    for (auto& c : connections_) c->thread.join();
    connections_.clear();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void TlsFront::Reap() {
  for (size_t i = 0; i < connections_.size();) {
    if (connections_[i]->done.load(std::memory_order_acquire)) {
      connections_[i]->thread.join();
      connections_[i] = std::move(connections_.back());
      connections_.pop_back();
    } else {
      i++;
    }
  }
}

void TlsFront::Accept() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int n = poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || fds[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    Reap();
    if (static_cast<int>(connections_.size()) >= kFrontConnectionsMax) {
      close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    Connection* raw = c.get();
    c->thread = std::thread([this, raw] { Relay(raw); });
    connections_.push_back(std::move(c));
  }
}

namespace {

// One connection's state, between polls.
struct Pipe {
  SSL* ssl;
  int client;
  int backend;
  int stop;
  std::vector<char> to_backend, to_client;  // read, not yet written on
  bool want_client_write = false;           // the last TLS call needs the client writable
  bool backend_closed = false;
};

// Waits until one of the pipe's descriptors is ready (false: stopped, idle too long, or failed).
bool Wait(const Pipe& p, bool handshake) {
  short backend_events = 0;
  if (!handshake) {
    if (p.to_client.empty() && !p.backend_closed) backend_events |= POLLIN;
    if (!p.to_backend.empty()) backend_events |= POLLOUT;
  }
  pollfd fds[3] = {{p.client, static_cast<short>(POLLIN | (p.want_client_write ? POLLOUT : 0)), 0},
                   {p.stop, POLLIN, 0},
                   {handshake ? -1 : p.backend, backend_events, 0}};
  int n;
  do {
    n = poll(fds, 3, handshake ? kFrontHandshakeMs : kFrontIdleMs);
  } while (n < 0 && errno == EINTR);
  return n > 0 && fds[1].revents == 0;
}

// One step each way; whether anything moved (false: time to wait), and *over once the
// connection is done (either side closed or failed).
bool Step(Pipe& p, bool* over) {
  bool moved = false;
  char buf[16 << 10];
  if (p.to_backend.empty()) {
    const int r = SSL_read(p.ssl, buf, sizeof(buf));
    if (r > 0) {
      p.to_backend.assign(buf, buf + r);
      moved = true;
    } else {
      const int e = SSL_get_error(p.ssl, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) *over = true;
      p.want_client_write = e == SSL_ERROR_WANT_WRITE;
    }
  }
  if (!p.to_backend.empty()) {
    const ssize_t w = send(p.backend, p.to_backend.data(), p.to_backend.size(), MSG_NOSIGNAL);
    if (w > 0) {
      p.to_backend.erase(p.to_backend.begin(), p.to_backend.begin() + w);
      moved = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *over = true;
    }
  }
  if (p.to_client.empty() && !p.backend_closed) {
    const ssize_t r = recv(p.backend, buf, sizeof(buf), 0);
    if (r > 0) {
      p.to_client.assign(buf, buf + r);
      moved = true;
    } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      p.backend_closed = true;
    }
  }
  if (!p.to_client.empty()) {
    const int w = SSL_write(p.ssl, p.to_client.data(), static_cast<int>(p.to_client.size()));
    if (w > 0) {
      p.to_client.erase(p.to_client.begin(), p.to_client.begin() + w);
      moved = true;
    } else {
      const int e = SSL_get_error(p.ssl, w);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) *over = true;
      p.want_client_write = e == SSL_ERROR_WANT_WRITE;
    }
  }
  // The backend answered and closed: done once its answer is out.
  if (p.backend_closed && p.to_client.empty()) *over = true;
  return moved;
}

}  // namespace

void TlsFront::Relay(Connection* c) {
  NameThisThread("pond-tls-conn");
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(ctx_.get()));
  SetNonBlocking(c->fd);
  Pipe p{ssl, c->fd, -1, stop_fd_};
  bool ok = ssl != nullptr && SSL_set_fd(ssl, c->fd) == 1;
  // The handshake first, within the idle bound: a client that never finishes it is dropped.
  while (ok) {
    const int r = SSL_accept(ssl);
    if (r == 1) break;
    const int e = SSL_get_error(ssl, r);
    p.want_client_write = e == SSL_ERROR_WANT_WRITE;
    ok = (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) && Wait(p, true);
  }
  if (ok) {
    p.backend = Connect(backend_port_);
    ok = p.backend >= 0;
  }
  if (ok) {
    SetNonBlocking(p.backend);
    bool over = false;
    while (!over) {
      if (!Step(p, &over) && !over && !Wait(p, false)) break;
    }
    SSL_shutdown(ssl);
  }
  if (ssl != nullptr) SSL_free(ssl);
  ERR_clear_error();
  if (p.backend >= 0) close(p.backend);
  close(c->fd);
  c->done.store(true, std::memory_order_release);
}

}  // namespace pond::server
