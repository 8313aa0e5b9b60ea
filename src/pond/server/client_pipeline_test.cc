// Pipelines end to end (the Pipeline call, client::Pipeline): many requests on one stream, each
// answered once with the answer its unary call would give; the server's rules for a message
// that breaks them, checked with raw gRPC (the client library never breaks them); a stream cut
// with requests in flight; a server that stops, and fail-over to another; a server gone silent.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "pond/server/client_fixture.h"
#include "pond/v1/pond.grpc.pb.h"

namespace pond::server {
namespace {

using client::AbortReason;
using client::Outcome;
using client::PipelinedReply;
using client::Request;
using namespace testing;  // NOLINT: the bank's helpers

using PipelineTest = ServiceFixture;

// Forwards TCP connections on loopback to `target_port` until silenced; silenced, it forwards
// nothing either way and closes nothing, so that to each end the other has gone silent, as when
// a host is cut off or a process stopped: no reset, no answer, not even to a ping.
class SilenceableProxy {
 public:
  explicit SilenceableProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = Loopback(0);
    POND_CHECK(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    POND_CHECK(listen(listen_fd_, 16) == 0);
    socklen_t len = sizeof a;
    POND_CHECK(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~SilenceableProxy() {
    stop_ = true;
    thread_.join();
    for (auto [a, b] : pairs_) close(a), close(b);
    close(listen_fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void Silence() { silent_ = true; }
  // Resets every connection: what a test does so that, should it fail, it does not hang.
  void Reset() { reset_ = true; }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }

  // Copies what `from` has to `to`; false once `from` has ended.
  static bool Copy(int from, int to) {
    char buf[64 << 10];
    const ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0) return false;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = write(to, buf + done, static_cast<size_t>(n - done));
      if (w <= 0) return false;
      done += w;
    }
    return true;
  }

  void Run() {
    while (!stop_) {
      if (reset_.exchange(false)) {
        for (auto [a, b] : pairs_) shutdown(a, SHUT_RDWR), shutdown(b, SHUT_RDWR);
      }
      std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
      if (!silent_) {
        for (auto [a, b] : pairs_) fds.push_back({a, POLLIN, 0}), fds.push_back({b, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), /*timeout_ms=*/20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int in = accept(listen_fd_, nullptr, nullptr);
        const int out = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in t = Loopback(target_port_);
        POND_CHECK(connect(out, reinterpret_cast<sockaddr*>(&t), sizeof t) == 0);
        pairs_.emplace_back(in, out);
        continue;  // fds no longer matches pairs_
      }
      for (size_t i = 0; i + 1 < fds.size(); i++) {
        if (fds[i + 1].revents == 0) continue;
        auto [a, b] = pairs_[i / 2];
        const bool from_a = i % 2 == 0;
        if (!Copy(from_a ? a : b, from_a ? b : a)) shutdown(from_a ? b : a, SHUT_WR);
      }
    }
  }

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<std::pair<int, int>> pairs_;  // (accepted, toward the target)
  std::atomic<bool> silent_{false}, reset_{false}, stop_{false};
  std::thread thread_;
};

// Every answer until nothing is in flight, by id; fails the test on an id answered twice.
std::map<uint64_t, PipelinedReply> Drain(client::Pipeline& p) {
  std::map<uint64_t, PipelinedReply> all;
  while (p.in_flight() > 0) {
    for (PipelinedReply& r : p.Receive()) {
      const uint64_t id = r.id;
      EXPECT_TRUE(all.emplace(id, std::move(r)).second) << "request " << id << " answered twice";
    }
  }
  return all;
}

// Transfers, reads, a procedure that does not exist and a condition that fails, all in flight at
// once: each answered once, as the unary call answers it, and no money made or lost.
TEST_F(PipelineTest, EveryRequestIsAnsweredOnceAsItsUnaryCallWouldBe) {
  auto p = client_->OpenPipeline();
  std::set<uint64_t> transfers, reads;
  Rng rng(static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed()));
  for (int i = 0; i < 300; i++) {
    const uint64_t from = rng.Uniform(kAccounts), to = (from + 1 + rng.Uniform(7)) % kAccounts;
    transfers.insert(p->Call("bank.transfer", TransferArgs(from, to, 1 + i % 5)));
    if (i % 10 == 0) reads.insert(p->Execute(Request(true).Read("kv", 7).Read("kv", 8)));
  }
  const uint64_t no_such = p->Call("bank.nothing", "");
  const uint64_t condition =
      p->Execute(Request().IfEquals("kv", 9, KvValue(10)).Put("kv", 9, KvValue(1)));
  const uint64_t balance = p->Call("bank.balance", I64(3));
  EXPECT_EQ(p->in_flight(), transfers.size() + reads.size() + 3);

  std::map<uint64_t, PipelinedReply> all = Drain(*p);
  ASSERT_EQ(all.size(), transfers.size() + reads.size() + 3);
  int committed = 0;
  for (uint64_t id : transfers) {
    const client::Answer& a = all.at(id).answer;
    EXPECT_TRUE(a.committed() || a.outcome == Outcome::kAborted) << a.ToString();
    if (a.committed()) {
      committed++;
      EXPECT_EQ(all.at(id).reply.size(), 8u);
    }
  }
  EXPECT_GT(committed, 0);
  for (uint64_t id : reads) {
    const PipelinedReply& r = all.at(id);
    ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
    ASSERT_EQ(r.values.size(), 2u);
    EXPECT_EQ(r.values[0].bytes, KvValue(7));
    EXPECT_EQ(r.values[1].bytes, KvValue(8));
  }
  EXPECT_EQ(all.at(no_such).answer.outcome, Outcome::kRejected);
  EXPECT_NE(all.at(no_such).answer.message.find("no procedure \"bank.nothing\""), std::string::npos)
      << all.at(no_such).answer.ToString();
  EXPECT_EQ(all.at(condition).answer.outcome, Outcome::kAborted);
  EXPECT_EQ(all.at(condition).answer.reason, AbortReason::kConditionFailed);
  EXPECT_EQ(all.at(condition).values.size(), 0u) << "a request with no reads answers no values";
  EXPECT_TRUE(all.at(balance).answer.committed()) << all.at(balance).answer.ToString();
  EXPECT_EQ(Total(), static_cast<int64_t>(kAccounts) * kInitialBalance);
  EXPECT_EQ(p->Receive().size(), 0u) << "nothing in flight: Receive returns at once";
}

// A read-write procedure is run where it would be routed (the CN managing its first key's
// shard) when the service fronts that CN, as this one fronts both: no call hops between CNs.
// Without that, half would (the service takes its CNs in turn).
TEST_F(PipelineTest, ProceduresRunWhereTheyAreRoutedWithoutAHop) {
  const uint64_t hops = bank_.cluster->Stats().remote_calls;
  auto p = client_->OpenPipeline();
  for (uint64_t i = 0; i < 64; i++)
    p->Call("bank.transfer", TransferArgs(i, (i + 1) % kAccounts, 1));
  for (const auto& [id, r] : Drain(*p)) {
    EXPECT_TRUE(r.answer.committed() || r.answer.outcome == Outcome::kAborted)
        << r.answer.ToString();
  }
  for (uint64_t i = 0; i < 8; i++) client_->Call("bank.transfer", TransferArgs(i, i + 8, 1));
  EXPECT_EQ(bank_.cluster->Stats().remote_calls, hops);
}

// Two servers, each fronting one CN and naming both by id, as CN daemons do (cn_daemon.cc).
class RoutedPipelineTest : public ServiceFixture {
 protected:
  void SetUp() override {
    ClientServiceOptions o = TestOptions();
    o.cns = {0};
    Start(o);
    o.cns = {1};
    second_ = ClientServer::Start(*bank_.cluster, bank_.dir, "127.0.0.1:0", o).value();
    const std::vector<std::string> by_id = {server_->address(), second_->address()};
    server_->service().SetCnAddressSource([by_id] { return by_id; });
    second_->service().SetCnAddressSource([by_id] { return by_id; });
    client_ = Connect();
  }
  void TearDown() override {
    if (second_) second_->Stop();
    ServiceFixture::TearDown();
  }
  // A route key whose shard CN `cn` manages (the shard map's first split: the lower half of the
  // shards to CN 0, the upper to CN 1), for a call whose first account is `account`.
  static uint64_t RouteTo(uint16_t cn, uint64_t account) {
    return cn == 0 ? account : account | 0x800;
  }

  std::unique_ptr<ClientServer> second_;
};

// Describe gives the shard map, and a pipeline sends each read-write call with a route key to
// the server of the CN managing its shard: no call hops between CNs (each server would send a
// call of the other's CN on), and each server runs exactly its own CN's calls.
TEST_F(RoutedPipelineTest, EachCallGoesStraightToItsShardsCn) {
  Result<client::Description> d = client_->Describe();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->routing.has_value()) << "two servers of one CN each, named by id: a map is due";
  EXPECT_EQ(d->routing->shard_cns.size(), size_t{1} << d->routing->shard_bits);
  EXPECT_EQ(d->routing->AddressOf(RouteTo(1, 5)), second_->address());
  const uint64_t hops = bank_.cluster->Stats().remote_calls;
  const uint64_t first_before = server_->service().counters().requests;
  const uint64_t second_before = second_->service().counters().requests;
  auto p = client_->OpenPipeline();
  constexpr uint64_t kCalls = 64;
  for (uint64_t i = 0; i < kCalls; i++) {
    const uint64_t from = i % kAccounts;
    p->Call("bank.transfer", TransferArgs(from, (from + 1) % kAccounts, 1),
            RouteTo(static_cast<uint16_t>(i % 2), from));
  }
  for (const auto& [id, r] : Drain(*p)) {
    EXPECT_TRUE(r.answer.committed() || r.answer.outcome == Outcome::kAborted)
        << r.answer.ToString();
  }
  EXPECT_EQ(bank_.cluster->Stats().remote_calls, hops) << "a routed call hopped between CNs";
  EXPECT_EQ(server_->service().counters().requests - first_before, kCalls / 2);
  EXPECT_EQ(second_->service().counters().requests - second_before, kCalls / 2);
  EXPECT_EQ(Total(), static_cast<int64_t>(kAccounts) * kInitialBalance);
}

// Without a route key, or read-only, a call goes to the address in use, and the CN there sends
// a read-write one on to its shard's CN: the hop routing saves, counted.
TEST_F(RoutedPipelineTest, UnroutedCallsGoThroughTheAddressInUse) {
  const uint64_t hops = bank_.cluster->Stats().remote_calls;
  const uint64_t second_before = second_->service().counters().requests;
  auto p = client_->OpenPipeline();
  for (uint64_t i = 0; i < 8; i++) {
    p->Call("bank.balance", I64(i), RouteTo(1, i));
    p->Call("bank.transfer", TransferArgs(i, i + 8, 1));
  }
  p->Call("bank.transfer", TransferArgs(1, 2, 1), RouteTo(1, 1));
  Drain(*p);
  EXPECT_EQ(second_->service().counters().requests - second_before, 1u);
  EXPECT_EQ(bank_.cluster->Stats().remote_calls - hops, 0u)
      << "calls routed by their first account (CN 0's shards) ran at CN 0";
  // The server in use fronts CN 0; a route key of CN 1 sent there hops.
  client::ClientOptions one = PlainClient();
  one.follow_cns = false;
  auto pinned = client::Client::Connect(server_->address(), one).value();
  auto r = pinned->OpenPipeline();
  r->Call("bank.transfer", TransferArgs(3, 4, 1), RouteTo(1, 3));
  Drain(*r);
  EXPECT_EQ(bank_.cluster->Stats().remote_calls - hops, 1u)
      << "a client kept to one address routes nothing itself";
}

// The server of a routed stream stops with calls on it: they are answered as on any stream that
// fails (reads sent again, writes committed, aborted or UNKNOWN, none lost), and that CN's calls
// go through the address in use from then on — and commit there.
TEST_F(RoutedPipelineTest, ARoutedStreamThatEndsSendsItsCnsCallsThroughTheAddressInUse) {
  auto p = client_->OpenPipeline();
  const uint64_t warm = p->Call("bank.transfer", TransferArgs(1, 2, 1), RouteTo(1, 1));
  ASSERT_TRUE(Drain(*p).at(warm).answer.committed());
  std::set<uint64_t> during;
  for (uint64_t i = 0; i < 32; i++) {
    during.insert(p->Call("bank.transfer", TransferArgs(i % 8, i % 8 + 8, 1), RouteTo(1, i % 8)));
  }
  p->Flush();
  second_->Stop(/*grace_ms=*/2000);
  second_.reset();
  // Accounts of their own, each in one call: the calls of before the stop may hold their locks
  // still (CN 1 runs them on), and calls that shared accounts with them, or with each other,
  // could all abort on lock conflicts (a loaded host saw 16 of 16 do so).
  std::set<uint64_t> after;
  for (uint64_t i = 0; i < 8; i++) {
    after.insert(p->Call("bank.transfer", TransferArgs(16 + i, 24 + i, 1), RouteTo(1, 16 + i)));
  }
  std::map<uint64_t, PipelinedReply> all = Drain(*p);
  ASSERT_EQ(all.size(), during.size() + after.size());
  for (uint64_t id : during) {
    const client::Answer& a = all.at(id).answer;
    EXPECT_TRUE(a.committed() || a.outcome == Outcome::kAborted || a.outcome == Outcome::kUnknown)
        << a.ToString();
  }
  int committed_after = 0;
  for (uint64_t id : after) committed_after += all.at(id).answer.committed() ? 1 : 0;
  std::string outcomes;
  for (uint64_t id : after) outcomes += " " + all.at(id).answer.ToString();
  EXPECT_GT(committed_after, 0) << "no call of CN 1 committed through the address in use:"
                                << outcomes;
  EXPECT_EQ(client_->address(), server_->address()) << "the address in use did not fail";
  EXPECT_EQ(Total(), static_cast<int64_t>(kAccounts) * kInitialBalance);
}

// Limits far below the requests sent: the client sends no more than the server takes, the
// server reads no more than it may run, and every request is answered.
TEST_F(PipelineTest, SmallLimitsHoldBackTheClientWithoutLosingARequest) {
  ClientServiceOptions o = TestOptions();
  o.pipeline_batch_max = 3;
  o.pipeline_in_flight_max = 5;
  Restart(o);
  auto p = client_->OpenPipeline();
  for (int i = 0; i < 200; i++) p->Call("bank.balance", I64(i % kAccounts));
  std::map<uint64_t, PipelinedReply> all = Drain(*p);
  ASSERT_EQ(all.size(), 200u);
  for (const auto& [id, r] : all) {
    EXPECT_TRUE(r.answer.committed()) << id << ": " << r.answer.ToString();
    EXPECT_EQ(AsI64(r.reply), kInitialBalance);
  }
}

// Raw gRPC: the client library never breaks the rules, so these are sent by hand.
class RawPipeline {
 public:
  explicit RawPipeline(const std::string& address)
      : stub_(v1::Pond::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    rw_ = stub_->Pipeline(&ctx_);
  }
  static v1::PipelinedRequest Balance(uint64_t id) {
    v1::PipelinedRequest r;
    r.set_id(id);
    r.mutable_call()->set_procedure("bank.balance");
    r.mutable_call()->set_args(I64(1));
    return r;
  }
  bool Send(const std::vector<v1::PipelinedRequest>& requests) {
    v1::PipelineRequest m;
    for (const v1::PipelinedRequest& r : requests) *m.add_requests() = r;
    return rw_->Write(m);
  }
  // Reads until the stream ends: the ids answered, the messages they came in, the status.
  grpc::Status ReadToEnd(std::multiset<uint64_t>* ids, int* messages) {
    v1::PipelineResponse m;
    while (rw_->Read(&m)) {
      (*messages)++;
      for (const v1::PipelinedResponse& r : m.responses()) {
        ids->insert(r.id());
        EXPECT_EQ(r.call().answer().outcome(), v1::COMMITTED) << r.call().answer().message();
      }
    }
    return rw_->Finish();
  }
  grpc::ClientReaderWriter<v1::PipelineRequest, v1::PipelineResponse>& rw() { return *rw_; }

 private:
  std::unique_ptr<v1::Pond::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::PipelineRequest, v1::PipelineResponse>> rw_;
};

// A message that breaks a rule is refused whole and ends the stream INVALID_ARGUMENT, naming
// the rule; what came before it is answered, and the server goes on serving.
TEST_F(PipelineTest, AMessageThatBreaksARuleIsRefusedWholeAndEndsTheStream) {
  ClientServiceOptions o = TestOptions();
  o.pipeline_batch_max = 4;
  o.pipeline_in_flight_max = 8;
  Restart(o);
  struct Case {
    const char* what;
    std::vector<v1::PipelinedRequest> second;
    const char* says;
  };
  std::vector<Case> cases;
  cases.push_back({"too many",
                   {RawPipeline::Balance(10), RawPipeline::Balance(11), RawPipeline::Balance(12),
                    RawPipeline::Balance(13), RawPipeline::Balance(14)},
                   "5 requests in one message; at most 4"});
  cases.push_back({"a duplicate id",
                   {RawPipeline::Balance(20), RawPipeline::Balance(20)},
                   "request id 20 is already in flight on this stream"});
  v1::PipelinedRequest empty;
  empty.set_id(31);
  cases.push_back(
      {"no body", {RawPipeline::Balance(30), empty}, "request 31 has no body (execute or call)"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    RawPipeline raw(server_->address());
    ASSERT_TRUE(raw.Send({RawPipeline::Balance(1), RawPipeline::Balance(2)}));
    raw.Send(c.second);  // may fail once the server has ended the stream
    std::multiset<uint64_t> ids;
    int messages = 0;
    const grpc::Status st = raw.ReadToEnd(&ids, &messages);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_EQ(st.error_message(), c.says);
    EXPECT_EQ(ids, (std::multiset<uint64_t>{1, 2})) << "the first message answered, none after";
  }
  EXPECT_EQ(Balance(1), kInitialBalance);
}

// Answers that finish while one is being written go out together.
TEST_F(PipelineTest, AnswersThatFinishTogetherShareAMessage) {
  RawPipeline raw(server_->address());
  constexpr uint64_t kRequests = 1000;
  for (uint64_t first = 0; first < kRequests; first += 100) {
    std::vector<v1::PipelinedRequest> m;
    for (uint64_t id = first; id < first + 100; id++) m.push_back(RawPipeline::Balance(id));
    ASSERT_TRUE(raw.Send(m));
  }
  raw.rw().WritesDone();
  std::multiset<uint64_t> ids;
  int messages = 0;
  const grpc::Status st = raw.ReadToEnd(&ids, &messages);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(ids.size(), kRequests);
  EXPECT_EQ(std::set<uint64_t>(ids.begin(), ids.end()).size(), kRequests);
  EXPECT_LT(messages, static_cast<int>(kRequests)) << "no two answers shared a message";
}

// A client that goes away with transfers in flight: they run or ran (none half-done), the
// server's stream ends, and a new pipeline works.
TEST_F(PipelineTest, AStreamCutWithRequestsInFlightLosesNoMoney) {
  for (int round = 0; round < 5; round++) {
    auto c = Connect();
    auto p = c->OpenPipeline();
    for (int i = 0; i < 200; i++) {
      p->Call("bank.transfer", TransferArgs(i % 8, (i + 3) % 8, 1));
    }
    p->Flush();
    if (round % 2 == 1) p->Receive();  // some answered, the rest cut
  }
  // Every transfer sent has finished once its locks are free again: a transfer through them
  // commits.
  client::Answer a;
  for (int i = 0; i < 200 && !a.committed(); i++) {
    a = client_->Call("bank.transfer", TransferArgs(0, 1, 0)).answer;
    if (!a.committed()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(a.committed()) << a.ToString();
  EXPECT_EQ(Total(), static_cast<int64_t>(kAccounts) * kInitialBalance);
  auto p = client_->OpenPipeline();
  const uint64_t id = p->Call("bank.balance", I64(5));
  std::map<uint64_t, PipelinedReply> all = Drain(*p);
  EXPECT_TRUE(all.at(id).answer.committed()) << all.at(id).answer.ToString();
}

// A request larger than the server's message limit is refused by the client, never sent.
TEST_F(PipelineTest, ARequestPastTheMessageLimitIsRefusedUnsent) {
  ClientServiceOptions o = TestOptions();
  o.message_bytes_max = 64 << 10;
  Restart(o);
  auto p = client_->OpenPipeline();
  const uint64_t big = p->Call("bank.balance", std::string(100 << 10, 'x'));
  const uint64_t fine = p->Call("bank.balance", I64(2));
  std::map<uint64_t, PipelinedReply> all = Drain(*p);
  EXPECT_EQ(all.at(big).answer.outcome, Outcome::kRejected) << all.at(big).answer.ToString();
  EXPECT_TRUE(all.at(fine).answer.committed()) << all.at(fine).answer.ToString();
}

// An open pipeline does not hold up the server's stop, and its client goes on at the other
// server: reads sent again there, writes in flight UNKNOWN or committed, never lost silently.
TEST_F(PipelineTest, AStoppingServerEndsItsPipelinesAndTheClientFailsOver) {
  std::unique_ptr<ClientServer> second = StartSecondServer();
  auto p = client_->OpenPipeline();
  const uint64_t before = p->Call("bank.balance", I64(4));
  EXPECT_TRUE(Drain(*p).at(before).answer.committed());

  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop(/*grace_ms=*/5000);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3))
      << "an idle pipeline held the stop for its grace";
  std::set<uint64_t> reads, writes;
  for (int i = 0; i < 20; i++) {
    reads.insert(p->Call("bank.balance", I64(i)));
    writes.insert(p->Call("bank.transfer", TransferArgs(i % 8, (i + 1) % 8, 1)));
  }
  std::map<uint64_t, PipelinedReply> all = Drain(*p);
  ASSERT_EQ(all.size(), reads.size() + writes.size());
  for (uint64_t id : reads)
    EXPECT_TRUE(all.at(id).answer.committed()) << all.at(id).answer.ToString();
  for (uint64_t id : writes) {
    const client::Answer& a = all.at(id).answer;
    EXPECT_TRUE(a.committed() || a.outcome == Outcome::kAborted || a.outcome == Outcome::kUnknown)
        << a.ToString();
  }
  EXPECT_EQ(client_->address(), second->address());
  EXPECT_EQ(Total(), static_cast<int64_t>(kAccounts) * kInitialBalance);
  second->Stop();
}

// A server gone silent with requests in flight (its host cut off: no reset, no answer) holds a
// pipeline only until a keepalive ping goes unanswered, not forever: its reads are then sent again
// at the next address and its writes are UNKNOWN, as after a reset.
TEST_F(PipelineTest, AServerGoneSilentIsLeftWithinSecondsNotWaitedOnForever) {
  SilenceableProxy proxy(server_->port());
  auto c = client::Client::Connect(proxy.address(), PlainClient());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto p = (*c)->OpenPipeline();
  const uint64_t before = p->Call("bank.balance", I64(4));
  EXPECT_TRUE(Drain(*p).at(before).answer.committed());
  ASSERT_EQ((*c)->address(), proxy.address());

  proxy.Silence();
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<bool> drained{false};
  std::thread watchdog([&] {
    while (!drained && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    proxy.Reset();
  });
  const uint64_t read = p->Call("bank.balance", I64(5));
  const uint64_t write = p->Call("bank.transfer", TransferArgs(1, 2, 1));
  std::map<uint64_t, PipelinedReply> all = Drain(*p);
  const auto waited = std::chrono::steady_clock::now() - t0;
  drained = true;
  watchdog.join();
  EXPECT_LT(waited, std::chrono::seconds(15)) << "the client waited on a silent server";
  EXPECT_TRUE(all.at(read).answer.committed()) << all.at(read).answer.ToString();
  EXPECT_EQ(all.at(write).answer.outcome, Outcome::kUnknown) << all.at(write).answer.ToString();
  EXPECT_EQ((*c)->address(), server_->address());
  EXPECT_EQ(Total(), static_cast<int64_t>(kAccounts) * kInitialBalance);
}

}  // namespace
}  // namespace pond::server
