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

class ClientServer {
 public:
  // Serves `cluster` (serving already) on `listen`, "HOST:PORT" ("127.0.0.1:0": a free port on
  // loopback). InvalidArgument for a malformed address or options, Unavailable if it cannot bind.
  static Result<std::unique_ptr<ClientServer>> Start(Cluster& cluster, ServiceDirectory directory,
                                                     const std::string& listen,
                                                     ClientServiceOptions options = {});
  ~ClientServer();
  ClientServer(const ClientServer&) = delete;
  ClientServer& operator=(const ClientServer&) = delete;

  // The address as bound, with the port chosen: "127.0.0.1:41234".
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
