// TLS on the client API: certificates made by MakeCerts, a server that takes only clients its CA
// signed, and every way in without the right credentials refused.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pond/server/access.h"
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
  for (const char* f : {kCaKey, kNodeKey, "client.root.key", kClusterSecret}) {
    struct stat st {};
    ASSERT_EQ(::stat((d / f).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  // The cluster's secret: 32 random bytes, kept like the certificates.
  Result<std::string> secret = ReadClusterSecret(d.string());
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ(secret->size(), 64u);
  EXPECT_EQ(secret->find_first_not_of("0123456789abcdef"), std::string::npos);
  const fs::path other = FreshDir("other");
  ASSERT_TRUE(MakeCerts(other.string(), CertsOptions{}).ok());
  EXPECT_NE(*ReadClusterSecret(other.string()), *secret) << "each cluster has its own";
  // A secret a user wrote: one line, long enough, no blanks; a missing one names its file.
  for (const char* bad : {"short\n", "has a space in it that is long enough to pass\n", ""}) {
    std::ofstream(other / "bad.secret") << bad;
    EXPECT_EQ(ReadSecretFile((other / "bad.secret").string()).status().code(),
              Code::kInvalidArgument)
        << bad;
  }
  std::ofstream(other / "good.secret") << std::string(40, 'k') << "\n";
  EXPECT_EQ(*ReadSecretFile((other / "good.secret").string()), std::string(40, 'k'));
  fs::remove(other / kClusterSecret);
  Result<std::string> gone = ReadClusterSecret(other.string());
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
  EXPECT_NE(gone.status().message().find("cluster.secret"), std::string::npos);
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

// The bank served over TLS with the certificates in dir_, and `access`'s rules.
class TlsServerTest : public ::testing::Test {
 protected:
  void StartServer(Access access) {
    bank_ = StartBank();
    ClientServiceOptions o = TestOptions();
    o.insecure = false;
    o.tls = ReadServerTls(dir_.string()).value();
    o.access = std::move(access);
    auto s = ClientServer::Start(*bank_.cluster, bank_.dir, "127.0.0.1:0", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (bank_.cluster) bank_.cluster->StopServing();
  }

  fs::path dir_;
  Bank bank_;
  std::unique_ptr<ClientServer> server_;
};

class TlsTest : public TlsServerTest {
 protected:
  void SetUp() override {
    dir_ = FreshDir("tls");
    ASSERT_TRUE(MakeCerts(dir_.string(), CertsOptions{}).ok());
    StartServer(Access::Open());
  }

  // Connects with `o`. A refused handshake looks like a server not there yet, which Connect
  // tries again until its timeout: short for the refusals, long for a client that must get in.
  Result<std::unique_ptr<client::Client>> Connect(client::ClientOptions o,
                                                  uint32_t timeout_ms = 1000) {
    o.timeout_ms = timeout_ms;
    return client::Client::Connect(server_->address(), o);
  }
};

TEST_F(TlsTest, AClientWithTheClustersCertificateCommits) {
  client::ClientOptions o;
  o.tls = ReadClientTls(dir_.string(), kRootUser).value();
  auto c = Connect(o, 10'000);
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

TEST(AccessTest, RolesAndTokensFromTheFileAndBadFilesRefused) {
  const std::string writer_token = NewToken().value(), old_token = NewToken().value();
  const std::string text = "[users]\nroot = \"admin\"\nreader = \"read-only\"\n" +
                           TokenEntry("writer", Role::kReadWrite, writer_token, 4'000'000'000) +
                           TokenEntry("old", Role::kAdmin, old_token, 1'000'000'000);
  Result<Access> a = Access::Parse(text, "access.toml");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const int64_t now = 2'000'000'000;
  EXPECT_EQ(a->Identify({"root", ""}, now).role, Role::kAdmin);
  EXPECT_EQ(a->Identify({"reader", ""}, now).role, Role::kReadOnly);
  EXPECT_EQ(a->Identify({"reader", ""}, now).identity, "cert:reader");
  const Grant stranger = a->Identify({"stranger", ""}, now);
  EXPECT_EQ(stranger.role, Role::kNone);
  EXPECT_NE(stranger.why_not.find("not in the access file"), std::string::npos);
  EXPECT_EQ(a->Identify({"", writer_token}, now).role, Role::kReadWrite);
  // A certificate the rules do not name does not stop a valid token.
  EXPECT_EQ(a->Identify({"stranger", writer_token}, now).identity, "token:writer");
  const Grant expired = a->Identify({"", old_token}, now);
  EXPECT_EQ(expired.role, Role::kNone);
  EXPECT_NE(expired.why_not.find("expired"), std::string::npos);
  EXPECT_EQ(a->Identify({"", "not-a-token"}, now).role, Role::kNone);
  EXPECT_EQ(a->Identify({"", ""}, now).role, Role::kNone);
  // Without a file everyone is admin.
  EXPECT_EQ(Access::Open().Identify({"", ""}, now).role, Role::kAdmin);
  // Each bad file is refused with one line naming what is wrong.
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"[users]\nroot = \"superuser\"\n", "superuser"},
           {"[people]\nroot = \"admin\"\n", "unknown key \"people\""},
           {"[[tokens]]\nname = \"x\"\nrole = \"admin\"\nsha256 = \"abc\"\n"
            "expires = 2030-01-01T00:00:00Z\n",
            "sha256"},
           {"[[tokens]]\nname = \"x\"\nrole = \"admin\"\nsha256 = \"" + TokenHash("t") + "\"\n",
            "expires"},
           {"[users\n", "not TOML"},
           // Names from the file are shown made printable: a quoted TOML key may hold a
           // newline, and one once made the message two lines (found by fuzz/config_fuzz.cc).
           {"\"a\\nb\" = 1\n", "unknown key \"a\\x0ab\""},
           {"[users]\n\"r\\noot\" = \"super\\nuser\"\n",
            "users.r\\x0aoot: role \"super\\x0auser\""},
           {"[[tokens]]\nname = \"x\\ny\"\nrole = \"admin\"\n", "(x\\x0ay): sha256"},
       }) {
    Result<Access> r = Access::Parse(bad, "f.toml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

// A server with access rules: root admin, reader read-only, a read-write token and an expired one.
class RolesTest : public TlsServerTest {
 protected:
  void SetUp() override {
    dir_ = FreshDir("roles");
    CertsOptions certs;
    certs.clients = {"root", "reader", "stranger"};
    ASSERT_TRUE(MakeCerts(dir_.string(), certs).ok());
    writer_token_ = NewToken().value();
    expired_token_ = NewToken().value();
    const std::string rules =
        "[users]\nroot = \"admin\"\nreader = \"read-only\"\n" +
        TokenEntry("writer", Role::kReadWrite, writer_token_, std::time(nullptr) + 3600) +
        TokenEntry("old", Role::kAdmin, expired_token_, std::time(nullptr) - 1);
    StartServer(Access::Parse(rules, "rules").value());
  }
  Result<std::unique_ptr<client::Client>> As(const std::string& user) {
    client::ClientOptions o;
    o.timeout_ms = 2000;
    o.tls = ReadClientTls(dir_.string(), user).value();
    return client::Client::Connect(server_->address(), o);
  }
  Result<std::unique_ptr<client::Client>> WithToken(const std::string& token) {
    client::ClientOptions o;
    o.timeout_ms = 2000;
    o.tls = client::ClientTls{.ca_pem = Slurp(dir_ / kCaCert)};
    o.bearer_token = token;
    return client::Client::Connect(server_->address(), o);
  }

  std::string writer_token_, expired_token_;
};

TEST_F(RolesTest, AReaderReadsAndIsRefusedEveryWriteWithTheReason) {
  auto c = As("reader");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  client::Reply read = (*c)->Execute(client::Request(/*read_only=*/true).Read("acct", 1));
  EXPECT_TRUE(read.answer.committed()) << read.answer.ToString();
  EXPECT_TRUE((*c)->Call("bank.balance", std::string(8, '\0')).answer.committed());
  // Writes, every way they can be asked for.
  const client::Answer put =
      (*c)->Execute(client::Request().Put("acct", 1, std::string(8, 'x'))).answer;
  EXPECT_EQ(put.outcome, client::Outcome::kRejected);
  EXPECT_NE(put.ToString().find("cert:reader is read-only"), std::string::npos) << put.ToString();
  EXPECT_EQ((*c)->Call("bank.transfer", TransferArgs(0, 1, 5)).answer.outcome,
            client::Outcome::kRejected);
  auto t = (*c)->Begin();
  t->AddRW("acct", 1);
  EXPECT_EQ(t->Execute().answer.outcome, client::Outcome::kRejected);
  auto p = (*c)->OpenPipeline();
  p->Call("bank.transfer", TransferArgs(0, 1, 5));
  p->Call("bank.balance", std::string(8, '\0'));
  std::vector<client::Outcome> outcomes;
  while (p->in_flight() > 0) {
    for (const client::PipelinedReply& r : p->Receive()) outcomes.push_back(r.answer.outcome);
  }
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), client::Outcome::kRejected), 1);
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), client::Outcome::kCommitted), 1);
  EXPECT_EQ(server_->counters().refused_role, 4u);
  EXPECT_EQ(server_->counters().committed, 3u);  // the reads only
  // An admin and a read-write token write.
  auto root = As("root");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_TRUE((*root)->Call("bank.transfer", TransferArgs(0, 1, 5)).answer.committed());
  auto writer = WithToken(writer_token_);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_TRUE((*writer)->Call("bank.transfer", TransferArgs(1, 0, 5)).answer.committed());
}

TEST_F(RolesTest, StrangersAndExpiredTokensGetNothing) {
  // A certificate the CA signed for an identity the rules do not name.
  auto stranger = As("stranger");
  ASSERT_FALSE(stranger.ok());
  EXPECT_NE(stranger.status().message().find("not in the access file"), std::string::npos)
      << stranger.status().message();
  auto expired = WithToken(expired_token_);
  ASSERT_FALSE(expired.ok());
  EXPECT_NE(expired.status().message().find("expired"), std::string::npos)
      << expired.status().message();
  auto unknown = WithToken("0123");
  ASSERT_FALSE(unknown.ok());
  // No certificate and no token: the handshake takes it (tokens are allowed), the call does not.
  client::ClientOptions bare;
  bare.timeout_ms = 2000;
  bare.tls = client::ClientTls{.ca_pem = Slurp(dir_ / kCaCert)};
  EXPECT_FALSE(client::Client::Connect(server_->address(), bare).ok());
  EXPECT_GE(server_->counters().refused_unauthenticated, 4u);
  EXPECT_EQ(server_->counters().requests, 0u);
}

}  // namespace
}  // namespace pond::server
