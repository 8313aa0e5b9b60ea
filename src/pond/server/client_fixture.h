// The client service tests' fixture: the bank of client_testing.h, served on 127.0.0.1 (a free
// port) with TestOptions unless a test starts it otherwise, and a client connected to it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "pond/server/client_testing.h"

namespace pond::server::testing {

class ServiceFixture : public ::testing::Test {
 protected:
  void SetUp() override { Start(TestOptions()); }

  void Start(const ClientServiceOptions& o) {
    bank_ = StartBank();
    auto s = ClientServer::Start(*bank_.cluster, bank_.dir, "127.0.0.1:0", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    client_ = Connect();
  }

  // Stops the server and the cluster, and starts both again with `o`.
  void Restart(const ClientServiceOptions& o) {
    server_->Stop();
    bank_.cluster->StopServing();
    Start(o);
  }

  // A second server over the same cluster, fronting CN 1 (the first fronts both, or what its
  // options say); both servers name both addresses, and client_ connects again to learn them.
  std::unique_ptr<ClientServer> StartSecondServer() {
    ClientServiceOptions o = TestOptions();
    o.cns = {1};
    auto second = ClientServer::Start(*bank_.cluster, bank_.dir, "127.0.0.1:0", o).value();
    const std::vector<std::string> both = {server_->address(), second->address()};
    server_->service().SetCnAddresses(both);
    second->service().SetCnAddresses(both);
    client_ = Connect();
    return second;
  }

  std::unique_ptr<client::Client> Connect() {
    auto c = client::Client::Connect(server_->address(), PlainClient());
    POND_CHECK_MSG(c.ok(), c.status().ToString().c_str());
    return std::move(c).value();
  }

  int64_t Balance(uint64_t account) {
    client::Reply r = client_->Execute(client::Request(/*read_only=*/true).Read("acct", account));
    EXPECT_TRUE(r.answer.committed()) << r.answer.ToString();
    return r.values.empty() ? 0 : AsI64(r.values[0].bytes);
  }

  int64_t Total() {
    client::Request r(/*read_only=*/true);
    for (uint64_t a = 0; a < kAccounts; a++) r.Read("acct", a);
    client::Reply reply = client_->Execute(r);
    EXPECT_TRUE(reply.answer.committed()) << reply.answer.ToString();
    int64_t sum = 0;
    for (const client::Value& v : reply.values) sum += AsI64(v.bytes);
    return sum;
  }

  void TearDown() override {
    client_.reset();
    if (server_) server_->Stop();
    bank_.cluster->StopServing();
  }

  Bank bank_;
  std::unique_ptr<ClientServer> server_;
  std::unique_ptr<client::Client> client_;
};

}  // namespace pond::server::testing
