#include "pond/server/cn_frontend.h"

namespace pond::server {

Result<std::string> ClientFrontend::Start(Cluster& cluster, uint16_t cn) {
  ClientServiceOptions o = options_;
  o.cns = {cn};  // a CN daemon runs its clients' requests on its own CN; routing does the rest
  POND_RETURN_IF_ERROR(ValidateServiceOptions(o, cluster.config().cns));
  directory_->cluster = cluster.config().transport.cluster;
  std::string advertise = advertise_;
  std::string host;
  int port = 0;
  POND_RETURN_IF_ERROR(ParseListenAddress(listen_, &host, &port));
  if (advertise.empty() && IsWildcardHost(host) && !coord_.empty()) {
    Result<std::string> self = AddressToward(coord_);
    if (!self.ok()) {
      return Unavailable("cannot tell which address clients reach this host at (" +
                         self.status().message() + "); name it with --advertise");
    }
    advertise = *self;
  }
  Result<std::unique_ptr<ClientServer>> s =
      ClientServer::Start(cluster, *directory_, listen_, o, advertise);
  if (!s.ok()) return s.status();
  server_ = std::move(s).value();
  return server_->address();
}

void ClientFrontend::Stop() {
  if (server_ != nullptr) server_->Stop();
}

ClientCounts ClientFrontend::Counts() const {
  if (server_ == nullptr) return {};
  const ServiceCounters c = server_->counters();
  return ClientCounts{c.requests, c.rejected, c.refused_unauthenticated, c.refused_role};
}

void ClientFrontend::SetCnAddressSource(std::function<std::vector<std::string>()> source) {
  if (server_ != nullptr) server_->service().SetCnAddressSource(std::move(source));
}

}  // namespace pond::server
