#include "pond/server/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include <chrono>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "pond/base/temp_dir.h"

namespace pond::server {
namespace {

// Every sample line of the text, by its name and labels as written: "name{labels}" -> value.
// Fails the test on a line that is not the exposition format's.
std::map<std::string, double> Samples(const std::string& text) {
  static const std::regex kSample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})?) )"
      R"(([-+]?([0-9.]+(e[-+]?[0-9]+)?|Inf|NaN|Nan))$)");
  static const std::regex kComment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::map<std::string, double> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::smatch m;
    if (std::regex_match(line, kComment)) continue;
    if (!std::regex_match(line, m, kSample)) {
      ADD_FAILURE() << "not a sample: " << line;
      continue;
    }
    samples[m[1].str()] = std::stod(m[4].str());
  }
  return samples;
}

DaemonMetrics ServingCn() {
  DaemonMetrics m;
  m.role = "cn";
  m.id = 1;
  m.cluster = "prod";
  m.uptime_s = 12.5;
  ClusterStats s;
  s.committed = 5;
  s.committed_read_only = 2;
  s.aborts.lock_conflict = 3;
  s.reads = 100;
  s.writes = 2600;
  s.cas = 7;
  s.batches = 90;
  // 15 us, 15 us, 3 ms and 2 s: buckets 20 us, 20 us, 5 ms and beyond every bound.
  for (uint64_t ns : {15'000ULL, 15'000ULL, 3'000'000ULL, 2'000'000'000ULL}) {
    s.commit_latency.counts[LatencyBuckets::BucketOf(ns)]++;
    s.commit_latency.sum_ns += ns;
  }
  m.totals = s;
  // It loaded tables before it served: 2500 WRITEs, 30 READs and 40 batches of them.
  m.before_serving.reads = 30;
  m.before_serving.writes = 2500;
  m.before_serving.batches = 40;
  CnStats c;
  c.lock_slots = 8192;
  c.locks_held = 4;
  c.cns_failed = 1;
  c.recoveries = 1;
  c.epoch = 3;
  m.cn = c;
  return m;
}

TEST(MetricsTest, ServingCnShowsItsCounts) {
  const std::string text = MetricsText(ServingCn());
  std::map<std::string, double> s = Samples(text);
  EXPECT_EQ(s["pond_info{role=\"cn\",id=\"1\",cluster=\"prod\"}"], 1);
  EXPECT_EQ(s["pond_uptime_seconds"], 12.5);
  EXPECT_EQ(s["pond_serving"], 1);
  EXPECT_EQ(s["pond_commits_total{kind=\"read_write\"}"], 5);
  EXPECT_EQ(s["pond_commits_total{kind=\"read_only\"}"], 2);
  EXPECT_EQ(s["pond_aborts_total{reason=\"lock_conflict\"}"], 3);
  EXPECT_EQ(s["pond_aborts_total{reason=\"mn_unreachable\"}"], 0);
  // Loading apart from serving: operations per commit are read off the second.
  EXPECT_EQ(s["pond_one_sided_ops_total{verb=\"read\",phase=\"loading\"}"], 30);
  EXPECT_EQ(s["pond_one_sided_ops_total{verb=\"read\",phase=\"serving\"}"], 70);
  EXPECT_EQ(s["pond_one_sided_ops_total{verb=\"write\",phase=\"loading\"}"], 2500);
  EXPECT_EQ(s["pond_one_sided_ops_total{verb=\"write\",phase=\"serving\"}"], 100);
  EXPECT_EQ(s["pond_one_sided_ops_total{verb=\"cas\",phase=\"loading\"}"], 0);
  EXPECT_EQ(s["pond_one_sided_ops_total{verb=\"cas\",phase=\"serving\"}"], 7);
  EXPECT_EQ(s["pond_doorbell_batches_total{phase=\"loading\"}"], 40);
  EXPECT_EQ(s["pond_doorbell_batches_total{phase=\"serving\"}"], 50);
  EXPECT_EQ(s.count("pond_one_sided_ops_total{verb=\"read\"}"), 0u) << "a sample without phase";
  EXPECT_EQ(s["pond_lock_slots"], 8192);
  EXPECT_EQ(s["pond_locks_held"], 4);
  EXPECT_EQ(s["pond_failures_declared_total{node=\"cn\"}"], 1);
  EXPECT_EQ(s["pond_recoveries_total"], 1);
  EXPECT_EQ(s["pond_membership_epoch"], 3);
  EXPECT_EQ(s.count("pond_client_refused_total{reason=\"role\"}"), 0u) << "no front end, no counts";
  EXPECT_NE(text.find("# TYPE pond_commits_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE pond_commit_latency_seconds histogram"), std::string::npos);
}

// A CN taking clients says what it answered and whom its access rules refused, and why.
TEST(MetricsTest, ClientRefusalsAreCountedByReason) {
  DaemonMetrics m = ServingCn();
  m.clients =
      ClientCounts{.requests = 40, .rejected = 9, .refused_unauthenticated = 3, .refused_role = 5};
  std::map<std::string, double> s = Samples(MetricsText(m));
  EXPECT_EQ(s["pond_client_requests_total"], 40);
  EXPECT_EQ(s["pond_client_rejected_total"], 9);
  EXPECT_EQ(s["pond_client_refused_total{reason=\"unauthenticated\"}"], 3);
  EXPECT_EQ(s["pond_client_refused_total{reason=\"role\"}"], 5);
}

// With the coordination service gone and a CN dead undeclared, a CN says so and stops saying it
// serves: an operator must not see a healthy cluster that commits nothing.
TEST(MetricsTest, UndeclaredFailureIsNotServing) {
  std::map<std::string, double> s = Samples(MetricsText(ServingCn()));
  EXPECT_EQ(s["pond_coordination_up"], 1);
  EXPECT_EQ(s["pond_failures_undeclared"], 0);
  DaemonMetrics m = ServingCn();
  m.cn->coordination_up = false;
  s = Samples(MetricsText(m));
  EXPECT_EQ(s["pond_coordination_up"], 0);
  EXPECT_EQ(s["pond_serving"], 1) << "nothing failed: it still commits";
  m.cn->failures_undeclared = 1;
  s = Samples(MetricsText(m));
  EXPECT_EQ(s["pond_failures_undeclared"], 1);
  EXPECT_EQ(s["pond_serving"], 0);
}

TEST(MetricsTest, LatencyHistogramIsCumulativeInSeconds) {
  std::map<std::string, double> s = Samples(MetricsText(ServingCn()));
  // Buckets count everything at or below their bound, in seconds; +Inf counts all.
  EXPECT_EQ(s["pond_commit_latency_seconds_bucket{le=\"1e-05\"}"], 0);
  EXPECT_EQ(s["pond_commit_latency_seconds_bucket{le=\"1e-06\"}"], 0);
  EXPECT_EQ(s["pond_commit_latency_seconds_bucket{le=\"2e-05\"}"], 2);
  EXPECT_EQ(s["pond_commit_latency_seconds_bucket{le=\"0.002\"}"], 2);
  EXPECT_EQ(s["pond_commit_latency_seconds_bucket{le=\"0.005\"}"], 3);
  EXPECT_EQ(s["pond_commit_latency_seconds_bucket{le=\"1\"}"], 3);
  EXPECT_EQ(s["pond_commit_latency_seconds_bucket{le=\"+Inf\"}"], 4);
  EXPECT_EQ(s["pond_commit_latency_seconds_count"], 4);
  EXPECT_DOUBLE_EQ(s["pond_commit_latency_seconds_sum"], 2.00303);
}

TEST(MetricsTest, CnNotYetServingShowsOnlyWhatItIs) {
  DaemonMetrics m = ServingCn();
  m.totals.reset();
  m.cn.reset();
  std::map<std::string, double> s = Samples(MetricsText(m));
  EXPECT_EQ(s["pond_serving"], 0);
  EXPECT_EQ(s.count("pond_commits_total{kind=\"read_write\"}"), 0u);
  EXPECT_EQ(s.count("pond_uptime_seconds"), 1u);
}

TEST(MetricsTest, MnShowsRegionAndBeats) {
  DaemonMetrics m;
  m.role = "mn";
  m.id = 0;
  m.cluster = "pond";
  m.region_bytes = 64 << 20;
  m.beats = 1234;
  m.incarnation = 2;
  m.declared_alive = 1;
  std::map<std::string, double> s = Samples(MetricsText(m));
  EXPECT_EQ(s["pond_region_bytes"], 64 << 20);
  EXPECT_EQ(s["pond_mn_beats_total"], 1234);
  EXPECT_EQ(s["pond_mn_incarnation"], 2);
  EXPECT_EQ(s["pond_mn_declared_alive_total"], 1);
  EXPECT_EQ(s.count("pond_serving"), 0u);
}

TEST(MetricsTest, BadAddressIsRefused) {
  for (const char* bad : {"9400", "host:", ":9400", "127.0.0.1:99999", "127.0.0.1:http"}) {
    auto s = MetricsServer::Start(bad, "mn", 0, "pond");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << bad;
  }
}

// A connection to 127.0.0.1:`port` that sends nothing; -1 if it could not connect.
int ConnectIdle(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// GET `path` from 127.0.0.1:`port`; the whole answer, headers and body.
std::string HttpGet(int port, const std::string& path) {
  const int fd = ConnectIdle(port);
  if (fd < 0) return "";
  timeval limit{.tv_sec = 10, .tv_usec = 0};  // a server that never answers fails the test
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string answer;
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fd, buf, sizeof(buf))) > 0) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  return answer;
}

// "Authorization: Basic ..." for `user`:`password`.
std::string BasicAuth(const std::string& user, const std::string& password) {
  const std::string plain = user + ":" + password;
  std::string b64(4 * ((plain.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                reinterpret_cast<const unsigned char*>(plain.data()),
                                static_cast<int>(plain.size()));
  b64.resize(static_cast<size_t>(n));
  return "Authorization: Basic " + b64 + "\r\n";
}

// GET `path` from 127.0.0.1:`port` over TLS, trusting `ca_pem` alone and checking that the
// certificate names 127.0.0.1; "handshake failed" if it does not verify.
std::string HttpsGet(int port, const std::string& path, const std::string& ca_pem,
                     const std::string& headers = "") {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
  X509_free(ca);
  BIO_free(bio);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  std::string answer;
  const int fd = ConnectIdle(port);
  SSL* ssl = SSL_new(ctx);
  if (fd >= 0) {
    timeval limit{.tv_sec = 10, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) {
      answer = "handshake failed";
    } else {
      const std::string request =
          "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" + headers + "\r\n";
      SSL_write(ssl, request.data(), static_cast<int>(request.size()));
      char buf[4096];
      int n = 0;
      while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0) answer.append(buf, static_cast<size_t>(n));
    }
    close(fd);
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return answer;
}

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

// Issue 34's "the metrics endpoint can require TLS and a token": over HTTPS with the cluster's
// node certificate, a scraper with the token reads the metrics; plaintext, no token or a wrong
// one gets none of them.
TEST(MetricsTest, TlsAndATokenKeepStrangersOut) {
  TempDir dir("pond-metrics-tls");
  ASSERT_TRUE(MakeCerts(dir.path(), CertsOptions{}).ok());
  Result<ServerTls> tls = ReadServerTls(dir.path());
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  const std::string token(40, 'q');
  auto s = MetricsServer::Start("127.0.0.1:0", "mn", 1, "pond", MetricsSecurity{*tls, token});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_STREQ((*s)->scheme(), "https");
  const int port = PortOf((*s)->address());
  const std::string ok = HttpsGet(port, "/metrics", tls->ca_pem, BasicAuth("prometheus", token));
  EXPECT_NE(ok.find("200 OK"), std::string::npos) << ok;
  EXPECT_NE(ok.find("pond_info{role=\"mn\",id=\"1\",cluster=\"pond\"} 1"), std::string::npos) << ok;
  for (const std::string& refused :
       {HttpsGet(port, "/metrics", tls->ca_pem),
        HttpsGet(port, "/metrics", tls->ca_pem, BasicAuth("prometheus", std::string(40, 'r'))),
        HttpsGet(port, "/metrics", tls->ca_pem, BasicAuth("prometheus", "q"))}) {
    EXPECT_NE(refused.find("401"), std::string::npos) << refused;
    EXPECT_EQ(refused.find("pond_info"), std::string::npos) << refused;
  }
  EXPECT_EQ(HttpGet(port, "/metrics").find("pond_info"), std::string::npos)
      << "plaintext to a TLS port";
  // Another cluster's CA does not vouch for this one's certificate.
  TempDir other("pond-metrics-other");
  ASSERT_TRUE(MakeCerts(other.path(), CertsOptions{}).ok());
  EXPECT_EQ(HttpsGet(port, "/metrics", ReadServerTls(other.path())->ca_pem,
                     BasicAuth("prometheus", token)),
            "handshake failed");

  // A token alone, over plain HTTP.
  auto plain = MetricsServer::Start("127.0.0.1:0", "cn", 0, "pond", MetricsSecurity{{}, token});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_STREQ((*plain)->scheme(), "http");
  const int plain_port = PortOf((*plain)->address());
  EXPECT_NE(HttpGet(plain_port, "/metrics").find("401"), std::string::npos);
  // HttpGet sends no headers of its own: the token through a raw request.
  const int fd = ConnectIdle(plain_port);
  ASSERT_GE(fd, 0);
  const std::string request =
      "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n" + BasicAuth("any", token) + "\r\n";
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string answer;
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fd, buf, sizeof(buf))) > 0) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
}

TEST(MetricsTest, ServesOverHttpOnAnyFreePort) {
  auto s = MetricsServer::Start("127.0.0.1:0", "mn", 2, "pond");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::string& address = (*s)->address();
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  const int port = std::stoi(address.substr(address.find(':') + 1));
  EXPECT_GT(port, 0);
  (*s)->SetRegionBytes(4096);
  (*s)->CountBeat();
  (*s)->CountBeat();
  const std::string answer = HttpGet(port, "/metrics");
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
  EXPECT_NE(answer.find("pond_info{role=\"mn\",id=\"2\",cluster=\"pond\"} 1"), std::string::npos)
      << answer;
  EXPECT_NE(answer.find("pond_mn_beats_total 2"), std::string::npos) << answer;
  EXPECT_NE(answer.find("pond_region_bytes 4096"), std::string::npos) << answer;
  // A second server cannot take the same port.
  auto again = MetricsServer::Start(address, "mn", 3, "pond");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kUnavailable);
}

int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

// An idle client must not keep the metrics from a scraper: one idle connection leaves the other
// threads serving at once, and more idle connections than threads are closed by the request
// timeout, after which the scrape is served.
// The TLS front (tls_front.h) keeps no idle client: one that never starts its handshake is
// dropped after kFrontHandshakeMs, and scrapes beside a few of them go through at once.
TEST(MetricsTest, TheTlsFrontDropsIdleClients) {
  TempDir dir("pond-metrics-idle");
  ASSERT_TRUE(MakeCerts(dir.path(), CertsOptions{}).ok());
  Result<ServerTls> tls = ReadServerTls(dir.path());
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  auto s = MetricsServer::Start("127.0.0.1:0", "mn", 1, "pond", MetricsSecurity{*tls, ""});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const int port = PortOf((*s)->address());
  std::vector<int> idle;
  for (int i = 0; i < 4; i++) {
    idle.push_back(ConnectIdle(port));
    ASSERT_GE(idle.back(), 0);
  }
  auto start = std::chrono::steady_clock::now();
  EXPECT_NE(HttpsGet(port, "/metrics", tls->ca_pem).find("200 OK"), std::string::npos);
  EXPECT_LT(MsSince(start), kFrontHandshakeMs / 2) << "a scrape beside idle clients";
  timeval limit{.tv_sec = 10, .tv_usec = 0};
  for (int fd : idle) {
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    char c;
    EXPECT_EQ(read(fd, &c, 1), 0) << "an idle client was kept";
    close(fd);
  }
  EXPECT_LT(MsSince(start), kFrontHandshakeMs + 2000);
}

TEST(MetricsTest, IdleConnectionsDoNotBlockScrapes) {
  auto s = MetricsServer::Start("127.0.0.1:0", "mn", 0, "pond");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::string& address = (*s)->address();
  const int port = std::stoi(address.substr(address.find(':') + 1));

  const int idle = ConnectIdle(port);
  ASSERT_GE(idle, 0);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; i++) {
    EXPECT_NE(HttpGet(port, "/metrics").find("200 OK"), std::string::npos);
  }
  EXPECT_LT(MsSince(start), kMetricsRequestTimeoutMs / 2) << "three scrapes beside an idle client";

  std::vector<int> crowd;
  for (int i = 0; i < 2 * kMetricsThreads; i++) {
    const int fd = ConnectIdle(port);
    ASSERT_GE(fd, 0);
    crowd.push_back(fd);
  }
  start = std::chrono::steady_clock::now();
  EXPECT_NE(HttpGet(port, "/metrics").find("200 OK"), std::string::npos);
  // Each idle connection is dropped a timeout after a thread took it; the crowd of 2T takes two
  // rounds of T threads at most (three, with the first idle one).
  EXPECT_LT(MsSince(start), 3 * kMetricsRequestTimeoutMs + 1000) << "a scrape behind a crowd";
  // The server closed the idle connections it timed out: each reads end of file.
  timeval limit{.tv_sec = 10, .tv_usec = 0};
  setsockopt(idle, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  char c;
  EXPECT_EQ(read(idle, &c, 1), 0) << "the first idle connection is still open";
  close(idle);
  for (int fd : crowd) close(fd);
}

}  // namespace
}  // namespace pond::server
