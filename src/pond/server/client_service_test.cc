// The client service end to end: a real gRPC server on 127.0.0.1 over an embedded cluster that
// serves, and the C++ client library — one-shot requests with conditions, interactive
// transactions, procedures by name, every kind of bad request, a client that vanishes with
// locks held, an idle transaction, fail-over between two servers, and concurrent transfers
// whose total must not change.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "pond/base/loopback_port.h"
#include "pond/server/client_fixture.h"
#include "pond/v1/pond.grpc.pb.h"

namespace pond::server {
namespace {

using client::AbortReason;
using client::Outcome;
using client::Request;
using namespace testing;  // NOLINT: the bank's helpers

class ClientServiceTest : public ServiceFixture {
 protected:
  // Puts kv `key` until it commits (another transaction may still hold its lock); the outcome
  // of the last attempt.
  client::Answer PutUntilCommitted(uint64_t key, const std::string& value) {
    client::Answer a;
    for (int i = 0; i < 500; i++) {
      a = client_->Execute(Request().Put("kv", key, value)).answer;
      if (a.outcome != Outcome::kAborted || a.reason != AbortReason::kLockConflict) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return a;
  }
};

TEST_F(ClientServiceTest, DescribeNamesTheServerTablesAndProcedures) {
  Result<client::Description> d = client_->Describe();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->cluster, "pond");
  EXPECT_EQ(d->isolation, "sr");
  ASSERT_EQ(d->cn_addresses.size(), 1u);
  EXPECT_EQ(d->cn_addresses[0], server_->address());
  ASSERT_NE(d->Table("kv"), nullptr);
  EXPECT_EQ(d->Table("kv")->value_bytes, 16u);
  EXPECT_EQ(d->Table("acct")->capacity, 2 * kAccounts);
  ASSERT_NE(d->Procedure("bank.balance"), nullptr);
  EXPECT_TRUE(d->Procedure("bank.balance")->read_only);
  EXPECT_EQ(d->Procedure("bank.transfer")->args_bytes, 24u);
  EXPECT_EQ(d->keys_per_request_max, 128u);
}

// A client placed on a CN that is already down starts on the next address it was given.
TEST_F(ClientServiceTest, ConnectTriesTheAddressesInOrder) {
  const std::string dead = "127.0.0.1:1";  // nothing listens on port 1
  auto c =
      client::Client::Connect(std::vector<std::string>{dead, server_->address()}, PlainClient());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->address(), server_->address());
  EXPECT_TRUE((*c)->Execute(Request().Put("kv", 30, KvValue(30))).answer.committed());

  auto none = client::Client::Connect(std::vector<std::string>{dead, dead}, PlainClient());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("cannot reach"), std::string::npos)
      << none.status().ToString();
  EXPECT_FALSE(client::Client::Connect(std::vector<std::string>{}, PlainClient()).ok());
}

// A client that starts before its server (or whose first connection attempt fails for a moment)
// asks again for a while rather than failing at once: CI once saw the very first connection to a
// server that was up fail, on a loaded machine.
TEST_F(ClientServiceTest, ConnectWaitsBrieflyForAServerStillStarting) {
  const uint16_t port = FreeLoopbackPort().value();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  std::unique_ptr<ClientServer> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto s = ClientServer::Start(*bank_.cluster, bank_.dir, address, TestOptions());
    if (s.ok()) late = std::move(s).value();
  });
  auto c = client::Client::Connect(address, PlainClient());
  starter.join();
  ASSERT_NE(late, nullptr) << "port " << port << " was taken before the server bound it";
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->Execute(Request().Put("kv", 40, KvValue(40))).answer.committed());
  late->Stop();
}

TEST_F(ClientServiceTest, OneShotReadsPutsInsertsAndDeletes) {
  client::Reply r = client_->Execute(Request(true).Read("kv", 7).Read("kv", 999));
  ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
  ASSERT_EQ(r.values.size(), 2u);
  EXPECT_TRUE(r.values[0].found);
  EXPECT_EQ(r.values[0].bytes, KvValue(7));
  EXPECT_FALSE(r.values[1].found) << "key 999 was never loaded";

  // A put of a present key overwrites it; of an absent key creates it. The values answered are
  // those before the request's writes.
  r = client_->Execute(
      Request().Put("kv", 7, KvValue(70)).Put("kv", 500, KvValue(5)).Read("kv", 7));
  ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
  EXPECT_EQ(r.values[0].bytes, KvValue(7));
  r = client_->Execute(Request(true).Read("kv", 7).Read("kv", 500));
  EXPECT_EQ(r.values[0].bytes, KvValue(70));
  EXPECT_EQ(r.values[1].bytes, KvValue(5));

  // Insert of a present key aborts as a duplicate and writes nothing else of the request.
  r = client_->Execute(Request().Insert("kv", 500, KvValue(6)).Put("kv", 8, KvValue(80)));
  EXPECT_EQ(r.answer.outcome, Outcome::kAborted);
  EXPECT_EQ(r.answer.reason, AbortReason::kDuplicateKey);
  EXPECT_TRUE(r.values.empty());
  EXPECT_EQ(client_->Execute(Request(true).Read("kv", 8)).values[0].bytes, KvValue(8));

  r = client_->Execute(Request().Insert("kv", 501, KvValue(1)).Delete("kv", 500));
  ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
  r = client_->Execute(Request(true).Read("kv", 500).Read("kv", 501));
  EXPECT_FALSE(r.values[0].found);
  EXPECT_EQ(r.values[1].bytes, KvValue(1));
  // A delete of an absent key commits and does nothing.
  EXPECT_TRUE(client_->Execute(Request().Delete("kv", 777)).answer.committed());
}

// Puts of new keys into kv (room for 1,024) until one request finds no room: it is ABORTED
// (TABLE_FULL), not UNKNOWN, since a commit claims its new keys' room before it writes anything
// — and indeed none of its keys is there afterwards, while the keys put before it are.
TEST_F(ClientServiceTest, ATableFilledPastItsRoomAbortsTheRequestThatFindsNone) {
  constexpr uint64_t kFirst = 10'000, kBatch = 64, kBatchesMax = 512;
  client::Reply r;
  uint64_t base = kFirst;
  for (; base < kFirst + kBatch * kBatchesMax; base += kBatch) {
    Request put;
    for (uint64_t k = base; k < base + kBatch; k++) put.Put("kv", k, KvValue(k));
    r = client_->Execute(put);
    // A lock conflict changed nothing (the last batch's locks are released after its answer,
    // and a worker woken by the next may start it first): the same batch again.
    for (int again = 0; again < 20 && r.answer.outcome == Outcome::kAborted &&
                        r.answer.reason == AbortReason::kLockConflict;
         again++) {
      r = client_->Execute(put);
    }
    if (!r.answer.committed()) break;
  }
  ASSERT_EQ(r.answer.outcome, Outcome::kAborted) << r.answer.ToString();
  EXPECT_EQ(r.answer.reason, AbortReason::kTableFull) << r.answer.ToString();
  EXPECT_GT(base, kFirst) << "the first batch found no room in an empty table";
  Request read(/*read_only=*/true);
  for (uint64_t k = base; k < base + kBatch; k++) read.Read("kv", k);
  read.Read("kv", base - 1);
  const client::Reply after = client_->Execute(read);
  ASSERT_TRUE(after.answer.committed()) << after.answer.ToString();
  for (uint64_t i = 0; i < kBatch; i++) {
    EXPECT_FALSE(after.values[i].found) << "key " << base + i << " of the aborted request";
  }
  EXPECT_EQ(after.values[kBatch].bytes, KvValue(base - 1)) << "a committed put went missing";
}

TEST_F(ClientServiceTest, ConditionsCommitOnlyWhenTheyHold) {
  // Compare-and-set: holds, so the put commits.
  client::Reply r =
      client_->Execute(Request().IfEquals("kv", 3, KvValue(3)).Put("kv", 3, KvValue(30)));
  ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
  // The same again no longer holds: aborted, nothing written, the values read answered.
  r = client_->Execute(
      Request().Read("kv", 3).IfEquals("kv", 3, KvValue(3)).Put("kv", 3, KvValue(300)));
  EXPECT_EQ(r.answer.outcome, Outcome::kAborted);
  EXPECT_EQ(r.answer.reason, AbortReason::kConditionFailed);
  EXPECT_NE(r.answer.message.find("kv 3"), std::string::npos) << r.answer.message;
  ASSERT_EQ(r.values.size(), 1u);
  EXPECT_EQ(r.values[0].bytes, KvValue(30));
  // Absence: an insert-if-absent of a new key commits, of an existing one aborts.
  EXPECT_TRUE(client_->Execute(Request().IfAbsent("kv", 600).Put("kv", 600, KvValue(1)))
                  .answer.committed());
  r = client_->Execute(Request().IfAbsent("kv", 600).Put("kv", 600, KvValue(2)));
  EXPECT_EQ(r.answer.reason, AbortReason::kConditionFailed);
  // A read-only request may have conditions too.
  EXPECT_TRUE(client_->Execute(Request(true).IfEquals("kv", 600, KvValue(1))).answer.committed());
  EXPECT_EQ(client_->Execute(Request(true).IfAbsent("kv", 600)).answer.reason,
            AbortReason::kConditionFailed);
}

TEST_F(ClientServiceTest, InteractiveTransactionsCommitAndAbort) {
  auto t = client_->Begin();
  t->AddRW("acct", 1);
  t->AddRO("acct", 2);
  client::Reply e = t->Execute();
  ASSERT_EQ(e.answer.outcome, Outcome::kOpen) << e.answer.ToString();
  ASSERT_EQ(e.values.size(), 2u);
  EXPECT_EQ(e.values[0].key, 2u) << "read-only keys come first";
  EXPECT_EQ(AsI64(e.values[1].bytes), kInitialBalance);
  // A second round: keys computed from what was read.
  t->AddRW("acct", 3);
  e = t->Execute();
  ASSERT_EQ(e.answer.outcome, Outcome::kOpen) << e.answer.ToString();
  t->Write("acct", 1, I64(kInitialBalance - 10));
  t->Write("acct", 3, I64(kInitialBalance + 10));
  client::Answer done = t->Commit();
  ASSERT_TRUE(done.committed()) << done.ToString();
  EXPECT_FALSE(t->open());
  EXPECT_EQ(t->Commit().outcome, Outcome::kRejected) << "the transaction has ended";
  EXPECT_EQ(Balance(1), kInitialBalance - 10);
  EXPECT_EQ(Balance(3), kInitialBalance + 10);

  // Aborted by the client: nothing written, the locks released.
  t = client_->Begin();
  t->AddRW("acct", 1);
  ASSERT_EQ(t->Execute().answer.outcome, Outcome::kOpen);
  t->Write("acct", 1, I64(0));
  client::Answer a = t->Abort();
  EXPECT_EQ(a.outcome, Outcome::kAborted);
  EXPECT_EQ(a.reason, AbortReason::kUser);
  EXPECT_EQ(Balance(1), kInitialBalance - 10);
  EXPECT_TRUE(client_->Execute(Request().Put("acct", 1, I64(5))).answer.committed());

  // Inserts and deletes, and a read-only transaction.
  t = client_->Begin();
  t->Insert("kv", 700, KvValue(7));
  t->Delete("kv", 9);
  ASSERT_TRUE(t->Commit().outcome == Outcome::kRejected) << "commit before execute of its keys";
  t = client_->Begin();
  t->Insert("kv", 700, KvValue(7));
  t->Delete("kv", 9);
  ASSERT_EQ(t->Execute().answer.outcome, Outcome::kOpen);
  ASSERT_TRUE(t->Commit().committed());
  t = client_->Begin(/*read_only=*/true);
  t->AddRO("kv", 700);
  t->AddRO("kv", 9);
  e = t->Execute();
  ASSERT_EQ(e.values.size(), 2u);
  EXPECT_EQ(e.values[0].bytes, KvValue(7));
  EXPECT_FALSE(e.values[1].found);
  EXPECT_TRUE(t->Commit().committed());
}

// A client that goes away with locks held: its stream ends, the server aborts the transaction,
// and another transaction on the same key then commits; the vanished write never appears.
TEST_F(ClientServiceTest, AClientThatDisconnectsMidTransactionReleasesItsLocks) {
  {
    auto gone = Connect();
    auto t = gone->Begin();
    t->AddRW("kv", 11);
    ASSERT_EQ(t->Execute().answer.outcome, Outcome::kOpen);
    t->Write("kv", 11, KvValue(1111));
    // The lock is held: a one-shot put of the key aborts on it (lotus: no waiting).
    EXPECT_EQ(client_->Execute(Request().Put("kv", 11, KvValue(0))).answer.reason,
              AbortReason::kLockConflict);
    // Both the Transaction and its Client vanish without commit or abort.
  }
  client::Answer a = PutUntilCommitted(11, KvValue(22));
  EXPECT_TRUE(a.committed()) << a.ToString();
  EXPECT_EQ(client_->Execute(Request(true).Read("kv", 11)).values[0].bytes, KvValue(22));
  for (int i = 0; i < 100 && server_->counters().streams_abandoned == 0; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->counters().streams_abandoned, 1u);
}

TEST_F(ClientServiceTest, AnIdleTransactionIsAbortedAndItsLocksReleased) {
  ClientServiceOptions o = TestOptions();
  o.interactive_idle_ms = 200;
  Restart(o);
  auto t = client_->Begin();
  t->AddRW("kv", 12);
  ASSERT_EQ(t->Execute().answer.outcome, Outcome::kOpen);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  t->Write("kv", 12, KvValue(1212));
  client::Answer a = t->Commit();
  EXPECT_EQ(a.outcome, Outcome::kAborted) << a.ToString();
  EXPECT_EQ(a.reason, AbortReason::kDisconnected);
  EXPECT_TRUE(PutUntilCommitted(12, KvValue(24)).committed());
  EXPECT_EQ(client_->Execute(Request(true).Read("kv", 12)).values[0].bytes, KvValue(24));
}

// However busy, a transaction is not kept open past the lifetime limit: its locks go with it.
TEST_F(ClientServiceTest, ATransactionOpenTooLongIsAborted) {
  ClientServiceOptions o = TestOptions();
  o.interactive_idle_ms = 250;
  o.interactive_lifetime_ms = 300;
  Restart(o);
  auto t = client_->Begin();
  client::Reply e;
  int steps = 0;
  for (; steps < 100; steps++) {
    t->AddRW("kv", 14 + static_cast<uint64_t>(steps % 2));
    e = t->Execute();
    if (e.answer.outcome != Outcome::kOpen) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(e.answer.outcome, Outcome::kAborted) << e.answer.ToString();
  EXPECT_EQ(e.answer.reason, AbortReason::kDisconnected);
  EXPECT_GE(steps, 5) << "cut short before its time";
  EXPECT_TRUE(PutUntilCommitted(14, KvValue(28)).committed());
}

TEST_F(ClientServiceTest, ProceduresAreCalledByName) {
  client::CallReply r = client_->Call("bank.transfer", TransferArgs(4, 5, 25));
  ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
  EXPECT_EQ(AsI64(r.reply), kInitialBalance - 25);
  r = client_->Call("bank.balance", I64(5));
  ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
  EXPECT_EQ(AsI64(r.reply), kInitialBalance + 25);
  // A route key overrides the procedure's own hint; the call runs wherever that says.
  r = client_->Call("bank.transfer", TransferArgs(5, 4, 25), uint64_t{4095});
  ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
  EXPECT_EQ(Total(), static_cast<int64_t>(kAccounts) * kInitialBalance);
}

// Refused before anything runs, each with a line that says why.
TEST_F(ClientServiceTest, EveryKindOfBadRequestIsRejectedWithAReason) {
  struct Case {
    const char* what;
    Request r;
    const char* says;
  };
  std::vector<Case> cases;
  cases.push_back({"unknown table", Request(true).Read("nope", 1), "no table \"nope\""});
  cases.push_back({"short value", Request().Put("kv", 1, "short"), "5 bytes"});
  cases.push_back({"long insert", Request().Insert("kv", 1, std::string(17, 'x')), "17 bytes"});
  cases.push_back({"condition size", Request().IfEquals("kv", 1, "x"), "1 bytes"});
  cases.push_back({"read-only writes", Request(true).Put("kv", 1, KvValue(1)), "read-only"});
  cases.push_back(
      {"written twice", Request().Put("kv", 1, KvValue(1)).Delete("kv", 1), "written twice"});
  Request many(true);
  for (int i = 0; i < 129; i++) many.Read("kv", static_cast<uint64_t>(i));
  cases.push_back({"too many keys", std::move(many), "at most 128"});
  cases.push_back({"odd table name", Request(true).Read(std::string("a\nb\0c", 5), 1), "a\\x0ab"});
  for (Case& c : cases) {
    client::Reply r = client_->Execute(c.r);
    EXPECT_EQ(r.answer.outcome, Outcome::kRejected) << c.what << ": " << r.answer.ToString();
    EXPECT_NE(r.answer.message.find(c.says), std::string::npos)
        << c.what << ": " << r.answer.message;
    EXPECT_EQ(r.answer.message.find('\n'), std::string::npos) << c.what;
  }

  struct CallCase {
    const char* what;
    std::string proc, args;
    const char* says;
  };
  for (const CallCase& c : std::vector<CallCase>{
           {"unknown procedure", "bank.rob", "", "no procedure \"bank.rob\""},
           {"args size", "bank.transfer", "1234", "takes 24 bytes"},
           {"args the route refuses", "bank.transfer", TransferArgs(3, 3, 1), "distinct"},
           {"account out of range", "bank.balance", I64(64), "no such account"}}) {
    client::CallReply r = client_->Call(c.proc, c.args);
    EXPECT_EQ(r.answer.outcome, Outcome::kRejected) << c.what << ": " << r.answer.ToString();
    EXPECT_NE(r.answer.message.find(c.says), std::string::npos)
        << c.what << ": " << r.answer.message;
  }

  // Interactive misuse ends the transaction REJECTED; its locks go with it.
  auto t = client_->Begin(/*read_only=*/true);
  t->AddRW("kv", 1);
  EXPECT_NE(t->Execute().answer.message.find("only add read-only"), std::string::npos);
  t = client_->Begin();
  t->AddRW("kv", 1);
  ASSERT_EQ(t->Execute().answer.outcome, Outcome::kOpen);
  t->Write("kv", 2, KvValue(2));  // never added
  client::Answer a = t->Commit();
  EXPECT_EQ(a.outcome, Outcome::kRejected);
  EXPECT_NE(a.message.find("write of kv 2"), std::string::npos) << a.message;
  t = client_->Begin();
  t->AddRW("kv", 901);  // absent: a write needs an insert
  ASSERT_EQ(t->Execute().answer.outcome, Outcome::kOpen);
  t->Write("kv", 901, KvValue(2));
  EXPECT_NE(t->Commit().message.find("use Insert"), std::string::npos);
  t = client_->Begin();
  t->Insert("kv", 1, "tiny");
  EXPECT_EQ(t->Execute().answer.outcome, Outcome::kRejected);
  EXPECT_TRUE(PutUntilCommitted(1, KvValue(1)).committed()) << "no lock left behind";

  // Bigger than the server takes in one message: the client refuses to send it (it learnt the
  // limit at Connect), so it is REJECTED, never UNKNOWN, however the server would cut it off.
  Request huge;
  huge.Put("kv", 1, std::string(5 << 20, 'x'));
  client::Reply r = client_->Execute(huge);
  EXPECT_EQ(r.answer.outcome, Outcome::kRejected) << r.answer.ToString();
  EXPECT_NE(r.answer.message.find("Sent message larger than max"), std::string::npos)
      << r.answer.message;
  EXPECT_TRUE(client_->Describe().ok()) << "the server is still up";
}

// The message limit holds for each answer, not each step: an execute answers every key added
// since the last one, so an add that would take that answer past the limit is refused, while the
// same keys over two executes are not. Sent as raw steps: the client library merges adjacent adds.
TEST_F(ClientServiceTest, AddsAnsweredByOneExecuteMustFitOneAnswer) {
  ClientServiceOptions o = TestOptions();
  o.message_bytes_max = 64 << 10;
  o.keys_per_request_max = 1024;
  o.interactive_keys_max = 4096;
  Restart(o);
  auto stub = v1::Pond::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  // 700 values of 16 bytes each fit a 64 KiB answer; 1,400 do not.
  auto add = [](uint64_t first) {
    v1::InteractiveRequest req;
    for (uint64_t k = first; k < first + 700; k++) {
      v1::Key* key = req.mutable_add()->add_read_only();
      key->set_table("kv");
      key->set_key(k % 1024);
    }
    return req;
  };
  v1::InteractiveRequest begin, execute, commit;
  begin.mutable_begin()->set_read_only(true);
  execute.mutable_execute();
  commit.mutable_commit();
  auto step = [](auto& stream, const v1::InteractiveRequest& req) {
    v1::InteractiveResponse resp;
    EXPECT_TRUE(stream->Write(req));
    EXPECT_TRUE(stream->Read(&resp));
    return resp;
  };

  grpc::ClientContext two_adds;
  auto stream = stub->Interactive(&two_adds);
  ASSERT_EQ(step(stream, begin).answer().outcome(), v1::OPEN);
  ASSERT_EQ(step(stream, add(0)).answer().outcome(), v1::OPEN);
  v1::InteractiveResponse refused = step(stream, add(700));
  EXPECT_EQ(refused.answer().outcome(), v1::REJECTED) << refused.answer().message();
  EXPECT_NE(refused.answer().message().find("an answer holds at most 65536"), std::string::npos)
      << refused.answer().message();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  grpc::ClientContext two_executes;
  stream = stub->Interactive(&two_executes);
  ASSERT_EQ(step(stream, begin).answer().outcome(), v1::OPEN);
  for (uint64_t first : {0, 700}) {
    ASSERT_EQ(step(stream, add(first)).answer().outcome(), v1::OPEN);
    v1::InteractiveResponse answered = step(stream, execute);
    ASSERT_EQ(answered.answer().outcome(), v1::OPEN) << answered.answer().message();
    EXPECT_EQ(answered.values_size(), 700);
    EXPECT_LE(answered.ByteSizeLong(), o.message_bytes_max);
  }
  EXPECT_EQ(step(stream, commit).answer().outcome(), v1::COMMITTED);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Transfers from four clients at once, by procedure, by interactive transaction and by
// conditional one-shot requests: whatever commits or aborts, money is only moved, never made.
TEST_F(ClientServiceTest, ConcurrentTransfersKeepTheTotal) {
  constexpr int kThreads = 4, kTransfers = 60;
  std::atomic<int> committed{0}, unknown{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; th++) {
    threads.emplace_back([&, th] {
      auto c = Connect();
      Rng rng(static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed()) + th);
      for (int i = 0; i < kTransfers; i++) {
        const uint64_t from = rng.Uniform(8), to = (from + 1 + rng.Uniform(7)) % 8;
        const int64_t amount = 1 + static_cast<int64_t>(rng.Uniform(50));
        client::Answer a;
        if (i % 3 == 0) {
          a = c->Call("bank.transfer", TransferArgs(from, to, amount)).answer;
        } else if (i % 3 == 1) {
          auto t = c->Begin();
          t->AddRW("acct", from);
          t->AddRW("acct", to);
          client::Reply e = t->Execute();
          a = e.answer;
          if (a.outcome == Outcome::kOpen) {
            t->Write("acct", from, I64(AsI64(e.values[0].bytes) - amount));
            t->Write("acct", to, I64(AsI64(e.values[1].bytes) + amount));
            a = t->Commit();
          }
        } else {
          client::Reply r = c->Execute(Request(true).Read("acct", from).Read("acct", to));
          a = r.answer;
          if (a.committed()) {
            const std::string& f = r.values[0].bytes;
            const std::string& g = r.values[1].bytes;
            a = c->Execute(Request()
                               .IfEquals("acct", from, f)
                               .IfEquals("acct", to, g)
                               .Put("acct", from, I64(AsI64(f) - amount))
                               .Put("acct", to, I64(AsI64(g) + amount)))
                    .answer;
          }
        }
        if (a.committed()) committed++;
        if (a.outcome == Outcome::kUnknown || a.outcome == Outcome::kRejected) unknown++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(committed.load(), kThreads * kTransfers / 4);
  EXPECT_EQ(unknown.load(), 0) << "nothing failed, so nothing is unknown or refused";
  EXPECT_EQ(Total(), static_cast<int64_t>(kAccounts) * kInitialBalance);
}

// Stopping the server cancels open transactions: a commit after it hears that nothing was
// committed, and a new server over the same cluster finds the key unlocked.
TEST_F(ClientServiceTest, StoppingTheServerAbortsOpenTransactions) {
  auto t = client_->Begin();
  t->AddRW("kv", 13);
  ASSERT_EQ(t->Execute().answer.outcome, Outcome::kOpen);
  server_->Stop(/*grace_ms=*/100);
  t->Write("kv", 13, KvValue(1313));
  client::Answer a = t->Commit();
  EXPECT_EQ(a.outcome, Outcome::kAborted) << a.ToString();
  EXPECT_EQ(a.reason, AbortReason::kDisconnected);
  server_ = ClientServer::Start(*bank_.cluster, bank_.dir, "127.0.0.1:0", TestOptions()).value();
  client_ = Connect();
  EXPECT_TRUE(client_->Execute(Request().Put("kv", 13, KvValue(26))).answer.committed());
}

// Two servers in front of two CNs of one cluster: the client learns both, and when the one it
// uses stops, it goes on with the other. A read is sent again there; a write in flight would be
// UNKNOWN, never answered wrongly, and the next write commits.
TEST_F(ClientServiceTest, TheClientFailsOverToAnotherCn) {
  std::unique_ptr<ClientServer> second = StartSecondServer();
  ASSERT_EQ(client_->addresses(),
            (std::vector<std::string>{server_->address(), second->address()}));
  EXPECT_TRUE(client_->Execute(Request().Put("kv", 20, KvValue(20))).answer.committed());

  server_->Stop();
  client::Reply r = client_->Execute(Request(true).Read("kv", 20));
  ASSERT_TRUE(r.answer.committed()) << r.answer.ToString();
  EXPECT_EQ(r.values[0].bytes, KvValue(20));
  EXPECT_EQ(client_->address(), second->address());
  EXPECT_GE(client_->failovers(), 1u);
  client::Answer w = client_->Execute(Request().Put("kv", 21, KvValue(21))).answer;
  EXPECT_TRUE(w.committed() || w.outcome == Outcome::kUnknown) << w.ToString();
  EXPECT_TRUE(client_->Execute(Request().Put("kv", 22, KvValue(22))).answer.committed());
  EXPECT_TRUE(client_->Call("bank.transfer", TransferArgs(1, 2, 3)).answer.committed());
  second->Stop();
}

}  // namespace
}  // namespace pond::server
