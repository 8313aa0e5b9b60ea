// The client service under hostile input: random bytes and mutated messages sent raw to every
// method (grpc::GenericStub, no client library in between), and random well-formed requests that
// are wrong in every way the checks know — random tables, sizes, kinds, step orders. The server
// must stay up and answer each with REJECTED or a gRPC error that says the message was bad, never
// UNKNOWN (nothing failed), and the bank's money must be where it was: requests may only move it.
// Seeded by gtest's --gtest_random_seed, so a failure replays.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pond/server/client_testing.h"
#include "pond/v1/pond.grpc.pb.h"

namespace pond::server {
namespace {

using namespace testing;  // NOLINT: the bank's helpers

constexpr const char* kMethods[] = {"/pond.v1.Pond/Describe", "/pond.v1.Pond/Execute",
                                    "/pond.v1.Pond/Call", "/pond.v1.Pond/Interactive"};
constexpr int kRounds = 200;

class ClientFuzzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Protobuf logs every string field that is not UTF-8; the fuzzer sends thousands.
    google::protobuf::SetLogHandler(nullptr);
    bank_ = StartBank();
    server_ = ClientServer::Start(*bank_.cluster, bank_.dir, "127.0.0.1:0", TestOptions()).value();
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::Pond::NewStub(channel_);
    seed_ = static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed());
  }

  void TearDown() override {
    // The server is up and the money is all there; nothing holds a lock (a transfer over every
    // account commits), and nothing was answered UNKNOWN.
    auto c = client::Client::Connect(server_->address(), PlainClient()).value();
    client::Request all(/*read_only=*/true);
    for (uint64_t a = 0; a < kAccounts; a++) all.Read("acct", a);
    client::Reply r = c->Execute(all);
    ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
    int64_t total = 0;
    for (const client::Value& v : r.values) total += AsI64(v.bytes);
    EXPECT_EQ(total, static_cast<int64_t>(kAccounts) * kInitialBalance) << "seed " << seed_;
    for (uint64_t a = 0; a < kAccounts; a++) {
      client::Answer t;
      for (int i = 0; i < 200; i++) {
        t = c->Call("bank.transfer", TransferArgs(a, (a + 1) % kAccounts, 0)).answer;
        if (t.committed()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_TRUE(t.committed()) << "account " << a << ": " << t.ToString();
    }
    EXPECT_EQ(server_->counters().unknown, 0u) << "seed " << seed_;
    c.reset();
    server_->Stop();
    bank_.cluster->StopServing();
  }

  std::string RandomBytes(Rng& rng, size_t max) {
    std::string s(rng.Uniform(max + 1), '\0');
    for (char& ch : s) ch = static_cast<char>(rng.Uniform(256));
    return s;
  }

  // `valid` with random bytes flipped, cut short, or grown.
  std::string Mutate(Rng& rng, std::string valid) {
    const int edits = 1 + static_cast<int>(rng.Uniform(4));
    for (int e = 0; e < edits && !valid.empty(); e++) {
      const size_t at = rng.Uniform(valid.size());
      switch (rng.Uniform(3)) {
        case 0:
          valid[at] = static_cast<char>(rng.Uniform(256));
          break;
        case 1:
          valid.resize(at);
          break;
        default:
          valid.insert(at, RandomBytes(rng, 8));
          break;
      }
    }
    return valid;
  }

  // A unary call of raw bytes; the status, and the answer's outcome if it came back parsed.
  grpc::Status RawUnary(const std::string& method, const std::string& bytes, v1::Answer* answer) {
    grpc::GenericStub generic(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer req(&slice, 1), resp;
    grpc::CompletionQueue cq;
    auto call = generic.PrepareUnaryCall(&ctx, method, req, &cq);
    call->StartCall();
    grpc::Status st;
    call->Finish(&resp, &st, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    std::vector<grpc::Slice> slices;
    std::string out;
    if (st.ok() && resp.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices)
        out.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    answer->Clear();
    if (st.ok() && method.ends_with("Execute")) {
      v1::ExecuteResponse r;
      EXPECT_TRUE(r.ParseFromString(out));
      *answer = r.answer();
    } else if (st.ok() && method.ends_with("Call")) {
      v1::CallResponse r;
      EXPECT_TRUE(r.ParseFromString(out));
      *answer = r.answer();
    }
    return st;
  }

  // A stream of raw messages to Interactive; every answer's outcome is checked by `check`.
  grpc::Status RawStream(const std::vector<std::string>& messages) {
    grpc::GenericStub generic(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::CompletionQueue cq;
    void* tag = nullptr;
    bool ok = false;
    auto call = generic.PrepareCall(&ctx, "/pond.v1.Pond/Interactive", &cq);
    call->StartCall(reinterpret_cast<void*>(1));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    for (const std::string& m : messages) {
      grpc::Slice slice(m);
      grpc::ByteBuffer buf(&slice, 1);
      call->Write(buf, reinterpret_cast<void*>(2));
      if (!cq.Next(&tag, &ok) || !ok) break;
    }
    call->WritesDone(reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
    for (;;) {
      grpc::ByteBuffer resp;
      call->Read(&resp, reinterpret_cast<void*>(4));
      if (!cq.Next(&tag, &ok) || !ok) break;
      std::vector<grpc::Slice> slices;
      std::string out;
      if (resp.Dump(&slices).ok()) {
        for (const grpc::Slice& s : slices)
          out.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      v1::InteractiveResponse r;
      EXPECT_TRUE(r.ParseFromString(out));
      EXPECT_NE(r.answer().outcome(), v1::UNKNOWN) << r.answer().message();
    }
    grpc::Status st;
    call->Finish(&st, reinterpret_cast<void*>(5));
    cq.Next(&tag, &ok);
    return st;
  }

  // What a bad message may get: an answer other than UNKNOWN, or a gRPC error saying the message
  // could not be taken (unparsable, over a limit).
  void ExpectSafe(const grpc::Status& st, const v1::Answer& a, const std::string& what) {
    if (st.ok()) {
      EXPECT_NE(a.outcome(), v1::UNKNOWN)
          << what << ": " << a.message() << " (seed " << seed_ << ")";
      if (a.outcome() == v1::REJECTED) {
        EXPECT_FALSE(a.message().empty()) << what;
        EXPECT_EQ(a.message().find('\n'), std::string::npos) << what;
      }
      return;
    }
    const grpc::StatusCode c = st.error_code();
    EXPECT_TRUE(c == grpc::StatusCode::INTERNAL || c == grpc::StatusCode::INVALID_ARGUMENT ||
                c == grpc::StatusCode::RESOURCE_EXHAUSTED || c == grpc::StatusCode::UNIMPLEMENTED)
        << what << ": " << st.error_code() << " " << st.error_message() << " (seed " << seed_
        << ")";
  }

  Bank bank_;
  std::unique_ptr<ClientServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Pond::Stub> stub_;
  uint64_t seed_ = 0;
};

// Valid requests to mutate: they touch only `kv`, so no mutation can reach the bank's money.
std::vector<std::pair<std::string, std::string>> Seeds() {
  std::vector<std::pair<std::string, std::string>> seeds;
  v1::ExecuteRequest e;
  e.add_reads()->set_table("kv");
  v1::Write* w = e.add_writes();
  w->set_table("kv");
  w->set_key(3);
  w->set_value(KvValue(3));
  v1::Condition* c = e.add_conditions();
  c->set_table("kv");
  c->set_key(3);
  c->set_equals(KvValue(3));
  seeds.emplace_back("/pond.v1.Pond/Execute", e.SerializeAsString());
  v1::CallRequest call;
  call.set_procedure("bank.balance");
  call.set_args(I64(4));
  seeds.emplace_back("/pond.v1.Pond/Call", call.SerializeAsString());
  seeds.emplace_back("/pond.v1.Pond/Describe", v1::DescribeRequest().SerializeAsString());
  return seeds;
}

TEST_F(ClientFuzzTest, RandomAndMutatedBytesAreRefusedAndTheServerStaysUp) {
  Rng rng(seed_);
  const auto seeds = Seeds();
  for (int i = 0; i < kRounds; i++) {
    v1::Answer a;
    const char* method = kMethods[rng.Uniform(3)];
    ExpectSafe(RawUnary(method, RandomBytes(rng, 256), &a), a, std::string(method) + " random");
    const auto& [m, valid] = seeds[rng.Uniform(seeds.size())];
    ExpectSafe(RawUnary(m, Mutate(rng, valid), &a), a, m + " mutated");
    if (i % 10 == 0) {
      std::vector<std::string> msgs;
      for (uint64_t k = rng.Uniform(5); k > 0; k--) msgs.push_back(RandomBytes(rng, 64));
      ExpectSafe(RawStream(msgs), a, "Interactive random");
    }
  }
  v1::Answer a;
  EXPECT_TRUE(RawUnary("/pond.v1.Pond/NoSuchMethod", "", &a).error_code() ==
              grpc::StatusCode::UNIMPLEMENTED);
  grpc::ClientContext ctx;
  v1::DescribeResponse d;
  EXPECT_TRUE(stub_->Describe(&ctx, v1::DescribeRequest(), &d).ok()) << "the server is up";
}

// Well-formed messages, wrong in every way the checks know: answered without a crash, never
// UNKNOWN; a request that happens to be right runs.
TEST_F(ClientFuzzTest, WellFormedButWrongRequestsAreRejected) {
  Rng rng(seed_ + 1);
  const char* tables[] = {"kv", "kv", "acct", "nope", "", "kv\n"};
  auto table = [&] { return tables[rng.Uniform(std::size(tables))]; };
  auto value = [&] { return std::string(rng.Chance(0.5) ? 16 : rng.Uniform(40), 'v'); };
  uint64_t rejected = 0;
  for (int i = 0; i < kRounds; i++) {
    v1::ExecuteRequest e;
    e.set_read_only(rng.Chance(0.3));
    for (uint64_t k = rng.Uniform(4); k > 0; k--) {
      v1::Key* key = e.add_reads();
      key->set_table(table());
      key->set_key(rng.Uniform(200));
    }
    for (uint64_t k = rng.Uniform(3); k > 0; k--) {
      // Writes only to kv (or tables that do not exist): the money is not the fuzzer's.
      v1::Write* w = e.add_writes();
      w->set_kind(static_cast<v1::Write::Kind>(rng.Uniform(5)));
      w->set_table(rng.Chance(0.8) ? "kv" : "nope");
      w->set_key(rng.Uniform(200));
      if (rng.Chance(0.8)) w->set_value(value());
    }
    for (uint64_t k = rng.Uniform(3); k > 0; k--) {
      v1::Condition* c = e.add_conditions();
      c->set_table(table());
      c->set_key(rng.Uniform(200));
      const uint64_t how = rng.Uniform(3);
      if (how == 0) c->set_equals(value());
      if (how == 1) c->set_absent(rng.Chance(0.7));
    }
    if (rng.Chance(0.05)) {
      for (int k = 0; k < 200; k++) e.add_reads()->set_table("kv");
    }
    grpc::ClientContext ctx;
    v1::ExecuteResponse r;
    grpc::Status st = stub_->Execute(&ctx, e, &r);
    ExpectSafe(st, r.answer(), "Execute " + e.ShortDebugString());
    if (r.answer().outcome() == v1::REJECTED) rejected++;

    v1::CallRequest call;
    const char* procs[] = {"bank.transfer", "bank.balance", "bank.", "", "bank.transfer\0x"};
    call.set_procedure(procs[rng.Uniform(std::size(procs))]);
    call.set_args(rng.Chance(0.5) ? TransferArgs(rng.Uniform(70), rng.Uniform(70),
                                                 static_cast<int64_t>(rng.Next()))
                                  : RandomBytes(rng, 40));
    if (rng.Chance(0.2)) call.set_route_key(rng.Next());
    grpc::ClientContext cctx;
    v1::CallResponse cr;
    ExpectSafe(stub_->Call(&cctx, call, &cr), cr.answer(), "Call " + call.procedure());
  }
  EXPECT_GT(rejected, uint64_t{kRounds / 4}) << "most of them are wrong";
}

// Random step sequences on interactive streams: steps out of order, twice, empty; keys of
// unknown tables, values of wrong sizes. Every answer is safe, every stream ends, and no lock is
// left behind (TearDown transfers over every account).
TEST_F(ClientFuzzTest, InteractiveStepsInAnyOrderAreSafe) {
  Rng rng(seed_ + 2);
  for (int i = 0; i < kRounds / 2; i++) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stream = stub_->Interactive(&ctx);
    const uint64_t steps = 1 + rng.Uniform(8);
    for (uint64_t s = 0; s < steps; s++) {
      v1::InteractiveRequest req;
      switch (rng.Uniform(7)) {
        case 0:
          req.mutable_begin()->set_read_only(rng.Chance(0.3));
          break;
        case 1: {
          v1::Add* add = req.mutable_add();
          // acct read-only only: a random write could move money out of the total.
          v1::Key* k = add->add_read_only();
          k->set_table(rng.Chance(0.5) ? "acct" : "kv");
          k->set_key(rng.Uniform(kAccounts + 8));
          k = add->add_read_write();
          k->set_table(rng.Chance(0.8) ? "kv" : "nope");
          k->set_key(rng.Uniform(200));
          if (rng.Chance(0.3)) {
            v1::KeyValue* kv = add->add_inserts();
            kv->set_table("kv");
            kv->set_key(100 + rng.Uniform(200));
            kv->set_value(std::string(rng.Chance(0.7) ? 16 : 3, 'i'));
          }
          if (rng.Chance(0.2)) {
            v1::Key* d = add->add_deletes();
            d->set_table("kv");
            d->set_key(rng.Uniform(200));
          }
          break;
        }
        case 2:
        case 3:
          req.mutable_execute();
          break;
        case 4: {
          v1::KeyValue* kv = req.mutable_write()->add_puts();
          kv->set_table(rng.Chance(0.9) ? "kv" : "acct");
          kv->set_key(rng.Uniform(200));
          kv->set_value(std::string(rng.Chance(0.7) ? 16 : 5, 'w'));
          break;
        }
        case 5:
          if (rng.Chance(0.5)) {
            req.mutable_commit();
          } else {
            req.mutable_abort();
          }
          break;
        default:
          break;  // an empty step
      }
      if (!stream->Write(req)) break;
      v1::InteractiveResponse resp;
      if (!stream->Read(&resp)) break;
      const v1::Outcome o = resp.answer().outcome();
      EXPECT_NE(o, v1::UNKNOWN) << resp.answer().message() << " (seed " << seed_ << ")";
      // acct keys are never added read-write, so a write of one is REJECTED, never applied.
      if (o != v1::OPEN) break;
    }
    if (rng.Chance(0.5)) ctx.TryCancel();  // a client that goes away mid-transaction
    stream->WritesDone();
    stream->Finish().ok();
  }
}

}  // namespace
}  // namespace pond::server
