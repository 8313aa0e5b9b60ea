#include "pond/server/client_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

namespace pond::server {

namespace {

// Server-side keepalive: a client that vanished without closing its connection (a dead host) is
// noticed within about this long, and its open transaction aborted.
constexpr int kKeepaliveTimeMs = 10'000;
constexpr int kKeepaliveTimeoutMs = 5'000;
// Clients ping a server with a call open every 2 s, data or not, to notice one gone silent
// (client.cc); pings closer than this count as abuse and, past gRPC's two strikes, close the
// connection with 'too_many_pings'.
constexpr int kClientPingIntervalMinMs = 1'000;

std::shared_ptr<grpc::ServerCredentials> Credentials(const ClientServiceOptions& o) {
  if (o.insecure) return grpc::InsecureServerCredentials();
  // Mutual TLS: a client that shows no certificate, or one the cluster's CA did not sign, fails
  // the handshake and sends nothing.
  // With bearer tokens in the access rules a client may come without a certificate (a token
  // stands for it); one it shows is still verified against the CA.
  grpc::SslServerCredentialsOptions ssl(
      o.access.has_tokens() ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = o.tls->ca_pem;
  ssl.pem_key_cert_pairs.push_back({o.tls->key_pem, o.tls->cert_pem});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

bool IsWildcardHost(const std::string& host) {
  return host == "0.0.0.0" || host == "[::]" || host == "::";
}

Result<std::string> AddressToward(const std::string& host_port) {
  const std::string first = host_port.substr(0, host_port.find(','));
  std::string host;
  int port = 0;
  POND_RETURN_IF_ERROR(ParseListenAddress(first, &host, &port));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return Unavailable("cannot resolve " + host + ": " + gai_strerror(rc));
  std::string error = "no address of " + host;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage self{};
    socklen_t len = sizeof(self);
    char text[INET6_ADDRSTRLEN] = {};
    const bool ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
                    getnameinfo(reinterpret_cast<sockaddr*>(&self), len, text, sizeof(text),
                                nullptr, 0, NI_NUMERICHOST) == 0;
    if (!ok) error = "no route to " + host + ": " + std::strerror(errno);
    close(fd);
    if (ok) {
      freeaddrinfo(found);
      const std::string address(text);
      return a->ai_family == AF_INET6 ? "[" + address + "]" : address;
    }
  }
  freeaddrinfo(found);
  return Unavailable(error);
}

Status ParseListenAddress(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) {
    return InvalidArgument("\"" + listen + "\" is not HOST:PORT (e.g. 127.0.0.1:7400)");
  }
  *host = listen.substr(0, colon);
  const std::string digits = listen.substr(colon + 1);
  int p = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), p);
  if (ec != std::errc() || end != digits.data() + digits.size() || p < 0 || p > 65535) {
    return InvalidArgument("\"" + listen + "\" has no port 0 to 65535 after the last ':'");
  }
  *port = p;
  return Status::Ok();
}

Result<std::unique_ptr<ClientServer>> ClientServer::Start(Cluster& cluster,
                                                          ServiceDirectory directory,
                                                          const std::string& listen,
                                                          ClientServiceOptions options,
                                                          const std::string& advertise) {
  std::string host;
  int port = 0;
  POND_RETURN_IF_ERROR(ParseListenAddress(listen, &host, &port));
  std::string told_host = IsWildcardHost(host) ? std::string("127.0.0.1") : host;
  int told_port = -1;  // the port bound
  if (!advertise.empty()) {
    if (advertise.find(':') == std::string::npos || advertise.front() == '[') {
      told_host = advertise;
    } else {
      Status s = ParseListenAddress(advertise, &told_host, &told_port);
      if (!s.ok()) return InvalidArgument("advertised address: " + s.message());
      if (told_port == 0) return InvalidArgument("advertised address: port 0 reaches nothing");
    }
  }
  POND_RETURN_IF_ERROR(ValidateServiceOptions(options, cluster.config().cns));
  if (options.tls.has_value() == options.insecure) {
    return InvalidArgument(options.insecure
                               ? "both TLS credentials and insecure (plaintext) given: pick one"
                               : "no TLS credentials: give a certificate, its key and the CA of "
                                 "the clients, or ask for plaintext by name (insecure)");
  }
  if (options.insecure && !options.access.open()) {
    return InvalidArgument(
        "access rules over plaintext: certificates cannot be checked and tokens would travel in "
        "the clear; serve TLS");
  }
  if (!cluster.serving()) return InvalidArgument("the cluster is not serving (StartServing)");
  std::unique_ptr<ClientServer> s(new ClientServer());
  s->service_ = std::make_unique<ClientService>(cluster, std::move(directory), options);

  grpc::ServerBuilder b;
  int bound = 0;
  b.AddListeningPort(listen, Credentials(options), &bound);
  b.RegisterService(s->service_.get());
  b.SetMaxReceiveMessageSize(static_cast<int>(options.message_bytes_max));
  b.SetMaxSendMessageSize(static_cast<int>(options.message_bytes_max));
  grpc::ResourceQuota quota("pond-client-service");
  quota.SetMaxThreads(options.threads_max);
  quota.Resize(options.buffer_bytes_max);
  b.SetResourceQuota(quota);
  // gRPC binds with SO_REUSEPORT by default, which would let a second server share the port and
  // take half the connections: a port in use must be an error.
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                       kClientPingIntervalMinMs);
  s->service_->AddPipelineQueues(b);
  s->server_ = b.BuildAndStart();
  if (s->server_ == nullptr || bound == 0) {
    if (s->server_ != nullptr) s->server_->Shutdown();
    s->service_->StopPipelines();
    s->stopped_ = true;
    return Unavailable("cannot listen on " + listen + " (address in use, or not this host's?)");
  }
  if (Status st = s->service_->StartPipelines(); !st.ok()) {
    s->Stop(0);
    return st;
  }
  s->port_ = bound;
  s->address_ = told_host + ":" + std::to_string(told_port < 0 ? bound : told_port);
  s->service_->SetSelfAddress(s->address_);
  return s;
}

ClientServer::~ClientServer() { Stop(); }

void ClientServer::Stop(uint32_t grace_ms) {
  if (stopped_) return;
  stopped_ = true;
  service_->CancelStreams();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  server_->Wait();
  service_->StopPipelines();
}

}  // namespace pond::server
