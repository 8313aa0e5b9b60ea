// TLS on the client API: certificates made by MakeCerts, a server that takes only clients its CA
// signed, and every way in without the right credentials refused.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "pond/server/certs.h"
#include "pond/server/client_fixture.h"

namespace pond::server {
namespace {

using namespace testing;  // NOLINT: the bank's helpers
namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory under the test's temporary directory.
fs::path FreshDir(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) /
                     (name + "-" + std::to_string(::getpid()) + "-" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(d);
  return d;
}

TEST(CertsTest, MakesACaNodeAndClientsAndKeepsWhatIsThere) {
  const fs::path d = FreshDir("certs");
  ASSERT_TRUE(MakeCerts(d.string(), CertsOptions{}).ok());
  for (const char* f :
       {kCaCert, kCaKey, kNodeCert, kNodeKey, "client.root.crt", "client.root.key"}) {
    EXPECT_TRUE(fs::exists(d / f)) << f;
  }
  // Keys are the owner's alone.
  for (const char* f : {kCaKey, kNodeKey, "client.root.key"}) {
    struct stat st {};
    ASSERT_EQ(::stat((d / f).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  const std::string ca = Slurp(d / kCaCert), node = Slurp(d / kNodeCert);
  // Again, with one more client: only that one is made; the CA and the node certificate stay.
  CertsOptions more;
  more.clients = {"root", "reader"};
  ASSERT_TRUE(MakeCerts(d.string(), more).ok());
  EXPECT_EQ(Slurp(d / kCaCert), ca);
  EXPECT_EQ(Slurp(d / kNodeCert), node);
  EXPECT_TRUE(fs::exists(d / "client.reader.crt"));
  // Bad names are refused before anything is written.
  CertsOptions bad;
  bad.clients = {"../escape"};
  EXPECT_EQ(MakeCerts(d.string(), bad).code(), Code::kInvalidArgument);
  bad = CertsOptions{};
  bad.hosts = {"a,DNS:evil"};
  EXPECT_EQ(MakeCerts(FreshDir("bad").string(), bad).code(), Code::kInvalidArgument);
  // A CA without its key cannot sign more.
  fs::remove(d / kCaKey);
  more.clients = {"writer"};
  EXPECT_EQ(MakeCerts(d.string(), more).code(), Code::kInvalidArgument);
  // A missing client certificate is named.
  Result<client::ClientTls> missing = ReadClientTls(d.string(), "nobody");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("client.nobody.crt"), std::string::npos);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshDir("tls");
    ASSERT_TRUE(MakeCerts(dir_.string(), CertsOptions{}).ok());
    bank_ = StartBank();
    ClientServiceOptions o = TestOptions();
    o.insecure = false;
    o.tls = ReadServerTls(dir_.string()).value();
    auto s = ClientServer::Start(*bank_.cluster, bank_.dir, "127.0.0.1:0", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    bank_.cluster->StopServing();
  }

  // Connects with `o` and says whether a read-write request commits through it.
  Result<std::unique_ptr<client::Client>> Connect(client::ClientOptions o) {
    o.timeout_ms = 2000;
    return client::Client::Connect(server_->address(), o);
  }

  fs::path dir_;
  Bank bank_;
  std::unique_ptr<ClientServer> server_;
};

TEST_F(TlsTest, AClientWithTheClustersCertificateCommits) {
  client::ClientOptions o;
  o.tls = ReadClientTls(dir_.string(), kRootUser).value();
  auto c = Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  client::CallReply r = (*c)->Call("bank.transfer", TransferArgs(0, 1, 5));
  EXPECT_TRUE(r.answer.committed()) << r.answer.ToString();
  EXPECT_EQ(server_->counters().committed, 1u);
}

TEST_F(TlsTest, EveryOtherWayInIsRefusedBeforeARequestRuns) {
  // Plaintext to a TLS port.
  EXPECT_EQ(Connect(PlainClient()).status().code(), Code::kUnavailable);
  // The right CA but no client certificate: mutual TLS wants one.
  client::ClientOptions no_cert;
  no_cert.tls = client::ClientTls{.ca_pem = Slurp(dir_ / kCaCert)};
  EXPECT_EQ(Connect(no_cert).status().code(), Code::kUnavailable);
  // A certificate of another cluster's CA (and that CA, which does not know this server's).
  const fs::path other = FreshDir("other");
  ASSERT_TRUE(MakeCerts(other.string(), CertsOptions{}).ok());
  client::ClientOptions stranger;
  stranger.tls = ReadClientTls(other.string(), kRootUser).value();
  EXPECT_EQ(Connect(stranger).status().code(), Code::kUnavailable);
  // Another cluster's client certificate, trusting this cluster's CA: the server refuses it.
  client::ClientOptions forged = stranger;
  forged.tls->ca_pem = Slurp(dir_ / kCaCert);
  EXPECT_EQ(Connect(forged).status().code(), Code::kUnavailable);
  // Nothing ran.
  EXPECT_EQ(server_->counters().requests, 0u);
}

TEST(TlsOptionsTest, NeitherOrBothAreRefusedByName) {
  EXPECT_EQ(client::Client::Connect("127.0.0.1:1", client::ClientOptions{}).status().code(),
            Code::kInvalidArgument);
  client::ClientOptions both = PlainClient();
  both.tls = client::ClientTls{};
  EXPECT_EQ(client::Client::Connect("127.0.0.1:1", both).status().code(), Code::kInvalidArgument);
  Bank bank = StartBank();
  ClientServiceOptions o = TestOptions();
  o.insecure = false;
  EXPECT_EQ(ClientServer::Start(*bank.cluster, bank.dir, "127.0.0.1:0", o).status().code(),
            Code::kInvalidArgument);
  bank.cluster->StopServing();
}

}  // namespace
}  // namespace pond::server
