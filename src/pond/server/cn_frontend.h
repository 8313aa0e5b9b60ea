// ClientFrontend: the client service (client_server.h) as a CN daemon's front end. It serves
// the CN's own requests on its listen address, names the tables and procedures the daemon's
// setup put in its directory, and answers Describe with every CN's client address as the daemon
// learns them from the coordination service.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pond/server/client_server.h"
#include "pond/server/cn_daemon.h"
#include "pond/server/service_directory.h"

namespace pond::server {

class ClientFrontend final : public CnFrontend {
 public:
  // `directory` is filled by the daemon's setup before Start. Clients are told `advertise`
  // (ClientServer::Start); empty, with a wildcard `listen`, this host's address on its route
  // toward `coord`, which is how the hosts of the cluster reach one another.
  ClientFrontend(std::shared_ptr<ServiceDirectory> directory, std::string listen,
                 ClientServiceOptions options, std::string advertise = "", std::string coord = "")
      : directory_(std::move(directory)),
        listen_(std::move(listen)),
        options_(options),
        advertise_(std::move(advertise)),
        coord_(std::move(coord)) {}

  Result<std::string> Start(Cluster& cluster, uint16_t cn) override;
  void Stop() override;
  void SetCnAddressSource(std::function<std::vector<std::string>()> source) override;
  ClientCounts Counts() const override;

 private:
  std::shared_ptr<ServiceDirectory> directory_;
  std::string listen_;
  ClientServiceOptions options_;
  std::string advertise_;
  std::string coord_;
  std::unique_ptr<ClientServer> server_;
};

}  // namespace pond::server
