// ClientServer: a gRPC server that runs a ClientService (client_service.h) on one address — what
// `pond serve` starts over its embedded cluster, and a CN daemon over its own CN. Start binds
// (port 0 picks a free port; address() says which) with the service's limits set on gRPC itself:
// message sizes, and threads through a grpc::ResourceQuota.
//
// Stop ends it cleanly: new interactive transactions are refused and open ones cancelled (each
// aborts on its worker), requests in flight get a grace period to finish, then the rest are
// cancelled. The cluster must serve until Stop has returned, so its owner stops the ClientServer
// before Cluster::StopServing.
//
// Thread rules: Start, Stop and the destructor from one controlling thread (never from a gRPC
// handler); the accessors from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pond/server/client_service.h"

namespace grpc {
class Server;
}

namespace pond::server {

// Whether `host` (of a listen address) stands for every interface: "0.0.0.0", "[::]".
bool IsWildcardHost(const std::string& host);

// This host's address on the route toward `host_port` ("zk1:2181", the first of a list): the
// address a peer on that network reaches this host at. Sends nothing (a UDP socket's connect only
// picks the route). Unavailable if the name does not resolve or no route leads there.
Result<std::string> AddressToward(const std::string& host_port);

class ClientServer {
 public:
  // Serves `cluster` (serving already) on `listen`, "HOST:PORT" ("127.0.0.1:0": a free port on
  // loopback). `advertise` is the address clients are told to reach it at (address()): "HOST" (with
  // the port bound) or "HOST:PORT"; empty, it is listen's host, or 127.0.0.1 when that is a
  // wildcard. InvalidArgument for a malformed address or options, Unavailable if it cannot bind.
  static Result<std::unique_ptr<ClientServer>> Start(Cluster& cluster, ServiceDirectory directory,
                                                     const std::string& listen,
                                                     ClientServiceOptions options = {},
                                                     const std::string& advertise = "");
  ~ClientServer();
  ClientServer(const ClientServer&) = delete;
  ClientServer& operator=(const ClientServer&) = delete;

  // The address clients are told, with the port chosen: "127.0.0.1:41234".
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  ServiceCounters counters() const { return service_->counters(); }
  ClientService& service() { return *service_; }

  // Stops serving (see above); requests still running after `grace_ms` are cancelled — their
  // clients hear UNKNOWN if they may have written. Idempotent.
  void Stop(uint32_t grace_ms = 5000);

 private:
  ClientServer() = default;
  std::unique_ptr<ClientService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
  bool stopped_ = false;
};

// Splits "HOST:PORT" ("[::1]:PORT" for IPv6); InvalidArgument with one line if malformed or the
// port is not 0 to 65535.
Status ParseListenAddress(const std::string& listen, std::string* host, int* port);

}  // namespace pond::server
