// Routed calls message by message (STYLE.md item 10): a callee's RoutedCalls fed one request at a
// time — new, a copy while it runs, a copy after it finished, one below its caller's floor, a
// malformed one, with and without kCallWantsReply — and a caller's RoutedCalls fed answers: its
// own, a copy, one for no call, one with a reply, one whose sizes do not add up.
// Single-threaded over the local transport: every worker is driven by calling its scheduler's
// RunOnce() in turn.
#include "pond/node/routed_call.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "pond/base/assert.h"
#include "pond/runtime/clocks.h"
#include "pond/transport/local/local_fabric.h"

namespace pond::node {
namespace {

std::unique_ptr<LocalFabric> MakeFabric() {
  auto f = LocalFabric::Create(1, 1 << 20);
  POND_CHECK(f.ok());
  return std::move(f).value();
}

std::vector<std::byte> Request(uint64_t id, uint64_t floor, ProcedureId proc, uint8_t arg = 0,
                               uint16_t flags = 0) {
  std::vector<std::byte> b(sizeof(CallHeader) + 1);
  CallHeader h{id, floor, proc, flags, {}};
  std::memcpy(b.data(), &h, sizeof(h));
  b[sizeof(h)] = std::byte{arg};
  return b;
}

std::vector<std::byte> Result(uint64_t id, Code code) {
  std::vector<std::byte> b(sizeof(CallResult));
  CallResult r{id, static_cast<uint8_t>(code), 0, 0, 0};
  std::memcpy(b.data(), &r, sizeof(r));
  return b;
}

// An answer to a call that wanted the reply: the header, the message, the reply.
std::vector<std::byte> ResultWith(uint64_t id, Code code, const std::string& message,
                                  const std::vector<std::byte>& reply) {
  CallResult r{id, static_cast<uint8_t>(code), 0, static_cast<uint16_t>(message.size()),
               static_cast<uint32_t>(reply.size())};
  std::vector<std::byte> b(sizeof(r));
  std::memcpy(b.data(), &r, sizeof(r));
  for (char c : message) b.push_back(static_cast<std::byte>(c));
  b.insert(b.end(), reply.begin(), reply.end());
  return b;
}

std::vector<std::byte> Bytes(std::initializer_list<int> v) {
  std::vector<std::byte> b;
  for (int x : v) b.push_back(static_cast<std::byte>(x));
  return b;
}

// A worker that records every call and answer it receives.
struct Peer {
  ManualClock clock;
  Scheduler sched{clock};
  std::unique_ptr<Endpoint> ep;
  std::vector<CallHeader> requests;
  std::vector<CallResult> answers;
  std::vector<std::vector<std::byte>> tails;  // what followed each answer's header
  Peer(LocalFabric& f, WorkerAddr a) : ep(f.CreateEndpoint(a, sched)) {
    ep->OnMessage(kMsgCall, [this](const Message& m) {
      CallHeader h;
      std::memcpy(&h, m.payload.data(), sizeof(h));
      requests.push_back(h);
    });
    ep->OnMessage(kMsgCallResult, [this](const Message& m) {
      CallResult r;
      ASSERT_GE(m.payload.size(), sizeof(r));
      std::memcpy(&r, m.payload.data(), sizeof(r));
      ASSERT_EQ(m.payload.size(), sizeof(r) + r.message_bytes + r.reply_bytes);
      answers.push_back(r);
      tails.emplace_back(m.payload.begin() + sizeof(r), m.payload.end());
    });
  }
};

// A procedure that waits until the test lets it finish.
struct Gate {
  std::coroutine_handle<> waiter;
  bool open = false;
  bool await_ready() const noexcept { return open; }
  void await_suspend(std::coroutine_handle<> h) { waiter = h; }
  void await_resume() const noexcept {}
};

class RoutedCallTest : public ::testing::Test {
 protected:
  RoutedCallTest()
      : fabric_(MakeFabric()),
        ep_(fabric_->CreateEndpoint({1, 0}, sched_)),
        calls_(*ep_, sched_,
               [this](ProcedureId proc, std::span<const std::byte> args,
                      std::vector<std::byte>* reply) { return Run(proc, args, reply); }),
        peer_(*fabric_, {0, 0}) {}

  // The procedures: 0 answers its argument as a Code at once; 1 waits at the gate, then Ok;
  // 2 replies with its argument twice; 3 replies with one byte more than a reply may hold.
  Task<Status> Run(ProcedureId proc, std::span<const std::byte> args,
                   std::vector<std::byte>* reply) {
    runs_++;
    if (proc == 1) {
      co_await gate_;
      co_return Status::Ok();
    }
    if (proc == 2 || proc == 3) {
      if (reply != nullptr && proc == 2) *reply = {args[0], args[0]};
      if (reply != nullptr && proc == 3) reply->resize(kReplyBytesMax + 1);
      co_return Status::Ok();
    }
    co_return Status(static_cast<Code>(args[0]), "as asked");
  }

  // Hands one message from the peer to the callee, lets what it sends travel, and returns the
  // answers the peer received.
  std::vector<CallResult> Feed(const std::vector<std::byte>& payload) {
    peer_.tails.clear();
    calls_.OnCall(Message{peer_.ep->self(), kMsgCall, payload});
    Settle();
    return std::exchange(peer_.answers, {});
  }
  // What followed the header of the one answer the last Feed returned.
  const std::vector<std::byte>& Tail() const {
    POND_CHECK(peer_.tails.size() == 1);
    return peer_.tails[0];
  }
  void Settle() {
    sched_.RunOnce();  // runs what was spawned; EndRound sends
    peer_.sched.RunOnce();
  }

  ManualClock clock_;
  Scheduler sched_{clock_};
  std::unique_ptr<LocalFabric> fabric_;
  std::unique_ptr<Endpoint> ep_;
  Gate gate_;
  int runs_ = 0;
  RoutedCalls calls_;
  Peer peer_;
};

TEST_F(RoutedCallTest, ANewCallRunsAndIsAnsweredWithItsCode) {
  auto answers = Feed(Request(1, 1, 0, static_cast<uint8_t>(Code::kAborted)));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].call_id, 1u);
  EXPECT_EQ(answers[0].code, static_cast<uint8_t>(Code::kAborted));
  EXPECT_EQ(runs_, 1);
}

TEST_F(RoutedCallTest, ACopyOfARunningCallIsDroppedAndTheAnswerFollowsOnce) {
  EXPECT_TRUE(Feed(Request(1, 1, 1)).empty());  // waits at the gate: no answer yet
  // Expect: the copy neither runs it again nor is answered.
  EXPECT_TRUE(Feed(Request(1, 1, 1)).empty());
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(calls_.table().stats().copies_running, 1u);
  gate_.open = true;
  sched_.Ready(gate_.waiter);
  Settle();
  ASSERT_EQ(peer_.answers.size(), 1u);
  EXPECT_EQ(peer_.answers[0].code, static_cast<uint8_t>(Code::kOk));
}

TEST_F(RoutedCallTest, ACopyOfAFinishedCallIsAnsweredAgainNotRun) {
  ASSERT_EQ(Feed(Request(1, 1, 0, static_cast<uint8_t>(Code::kConflict))).size(), 1u);
  auto again = Feed(Request(1, 1, 0, static_cast<uint8_t>(Code::kOk)));
  // Expect: the stored outcome, whatever the copy says; one run in all.
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].code, static_cast<uint8_t>(Code::kConflict));
  EXPECT_EQ(runs_, 1);
}

TEST_F(RoutedCallTest, ACopyBelowTheCallersFloorIsDropped) {
  ASSERT_EQ(Feed(Request(1, 1, 0)).size(), 1u);
  ASSERT_EQ(Feed(Request(2, 2, 0)).size(), 1u);  // the caller had call 1's answer by then
  // Expect: a late copy of call 1 is neither run nor answered; call 1 is forgotten.
  EXPECT_TRUE(Feed(Request(1, 1, 0)).empty());
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(calls_.table().stats().stale, 1u);
  EXPECT_EQ(calls_.table().entries(), 1u);
}

TEST_F(RoutedCallTest, AMalformedRequestIsDroppedAndCounted) {
  std::vector<std::byte> shortish(sizeof(CallHeader) - 1);
  EXPECT_TRUE(Feed(shortish).empty());
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(calls_.stats().malformed, 1u);
}

// An answer that does not parse — sizes that do not add up, a code Pond has not, a message or a
// reply longer than an answer may carry — is dropped and counted; the call awaits the true one.
TEST_F(RoutedCallTest, AnAnswerThatDoesNotParseIsNotTaken) {
  std::optional<pond::Result<std::vector<std::byte>>> out;
  std::byte arg{7};
  sched_.Spawn([](RoutedCalls* c, auto* o, std::byte* a) -> Task<void> {
    o->emplace(co_await c->CallWithReply({0, 0}, 2, std::span(a, 1)));
  }(&calls_, &out, &arg));
  Settle();
  std::vector<std::vector<std::byte>> bad;
  bad.push_back(ResultWith(1, Code::kOk, "", {std::byte{1}}));
  bad.back().pop_back();                             // a reply byte short
  bad.push_back(Result(1, static_cast<Code>(200)));  // no such code
  bad.push_back(ResultWith(1, Code::kAborted, std::string(kCallMessageBytesMax + 1, 'x'), {}));
  bad.push_back(ResultWith(1, Code::kOk, "", std::vector<std::byte>(kReplyBytesMax + 1)));
  for (const auto& b : bad) calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult, b});
  sched_.RunOnce();
  EXPECT_FALSE(out.has_value());
  EXPECT_EQ(calls_.stats().malformed, bad.size());
  EXPECT_EQ(ep_->stats().messages_malformed, bad.size());
  EXPECT_EQ(calls_.awaited(), 1u);
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult,
                          ResultWith(1, Code::kOk, "", {std::byte{7}, std::byte{7}})});
  sched_.RunOnce();
  ASSERT_TRUE(out.has_value() && out->ok());
  EXPECT_EQ(out->value(), Bytes({7, 7}));
}

TEST_F(RoutedCallTest, ACallThatWantsTheReplyIsAnsweredWithItsBytes) {
  auto answers = Feed(Request(1, 1, 2, 7, kCallWantsReply));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_EQ(answers[0].message_bytes, 0u);
  EXPECT_EQ(answers[0].reply_bytes, 2u);
  EXPECT_EQ(Tail(), Bytes({7, 7}));
}

TEST_F(RoutedCallTest, AFailedCallThatWantsTheReplyGetsTheStatusMessageAndNoBytes) {
  auto answers = Feed(Request(1, 1, 0, static_cast<uint8_t>(Code::kConflict), kCallWantsReply));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code, static_cast<uint8_t>(Code::kConflict));
  EXPECT_EQ(answers[0].reply_bytes, 0u);
  std::string message(reinterpret_cast<const char*>(Tail().data()), answers[0].message_bytes);
  EXPECT_EQ(message, "as asked");
}

TEST_F(RoutedCallTest, ACallWithoutTheFlagIsAnsweredInSixteenBytes) {
  // Expect: neither the failed procedure's message nor a reply procedure's bytes are sent, so
  // Status-only calls cost the bytes (and simulated time) they cost before replies existed.
  auto failed = Feed(Request(1, 1, 0, static_cast<uint8_t>(Code::kConflict)));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].code, static_cast<uint8_t>(Code::kConflict));
  EXPECT_TRUE(Tail().empty());
  auto replied = Feed(Request(2, 2, 2, 7));
  ASSERT_EQ(replied.size(), 1u);
  EXPECT_EQ(replied[0].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_EQ(replied[0].message_bytes + replied[0].reply_bytes, 0u);
  EXPECT_TRUE(Tail().empty());
}

TEST_F(RoutedCallTest, ACopyOfAFinishedReplyCallIsAnsweredWithTheStoredReply) {
  ASSERT_EQ(Feed(Request(1, 1, 2, 5, kCallWantsReply)).size(), 1u);
  ASSERT_EQ(Tail(), Bytes({5, 5}));
  auto again = Feed(Request(1, 1, 2, 9, kCallWantsReply));
  // Expect: the stored reply from the one run, whatever the copy's arguments say.
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_EQ(Tail(), Bytes({5, 5}));
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(calls_.table().stats().copies_answered, 1u);
}

TEST_F(RoutedCallTest, AReplyAboveTheLimitFailsTheCall) {
  auto answers = Feed(Request(1, 1, 3, 0, kCallWantsReply));
  // Expect: InvalidArgument naming the limit, and none of the bytes.
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code, static_cast<uint8_t>(Code::kInvalidArgument));
  EXPECT_EQ(answers[0].reply_bytes, 0u);
  std::string message(reinterpret_cast<const char*>(Tail().data()), answers[0].message_bytes);
  EXPECT_NE(message.find("kReplyBytesMax"), std::string::npos) << message;
}

// The caller's side: what it sends, and what it does with answers.
TEST_F(RoutedCallTest, TheCallerTakesItsAnswerOnceAndCarriesItsFloor) {
  std::optional<Status> first, second;
  std::byte arg{7};
  sched_.Spawn([](RoutedCalls* c, std::optional<Status>* out, std::byte* a) -> Task<void> {
    *out = co_await c->Call({0, 0}, 3, std::span(a, 1));
  }(&calls_, &first, &arg));
  sched_.Spawn([](RoutedCalls* c, std::optional<Status>* out, std::byte* a) -> Task<void> {
    *out = co_await c->Call({0, 0}, 3, std::span(a, 1));
  }(&calls_, &second, &arg));
  Settle();
  // Expect: two requests, ids 1 and 2, both carrying floor 1 (call 1 is unanswered).
  ASSERT_EQ(peer_.requests.size(), 2u);
  EXPECT_EQ(peer_.requests[0].call_id, 1u);
  EXPECT_EQ(peer_.requests[1].call_id, 2u);
  EXPECT_EQ(peer_.requests[1].floor, 1u);
  EXPECT_EQ(peer_.requests[1].proc, 3u);
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult, Result(1, Code::kAborted)});
  sched_.RunOnce();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->code(), Code::kAborted);
  EXPECT_FALSE(second.has_value());
  // Expect: a copy of call 1's answer, and an answer for a call never made, change nothing.
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult, Result(1, Code::kOk)});
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult, Result(9, Code::kOk)});
  EXPECT_EQ(calls_.stats().answer_copies, 2u);
  EXPECT_EQ(calls_.awaited(), 1u);
  // A third call now carries floor 2.
  std::optional<Status> third;
  sched_.Spawn([](RoutedCalls* c, std::optional<Status>* out, std::byte* a) -> Task<void> {
    *out = co_await c->Call({0, 0}, 3, std::span(a, 1));
  }(&calls_, &third, &arg));
  Settle();
  ASSERT_EQ(peer_.requests.size(), 3u);
  EXPECT_EQ(peer_.requests[2].floor, 2u);
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult, Result(2, Code::kOk)});
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult, Result(3, Code::kOk)});
  sched_.RunOnce();
  ASSERT_TRUE(second.has_value() && third.has_value());
  EXPECT_TRUE(second->ok() && third->ok());
  EXPECT_EQ(calls_.stats().answers, 3u);
}

TEST_F(RoutedCallTest, TheCallerGetsTheReplyOrTheCalleesWholeStatus) {
  using Reply = pond::Result<std::vector<std::byte>>;
  std::optional<Reply> first, second;
  std::byte arg{7};
  for (auto* out : {&first, &second}) {
    sched_.Spawn([](RoutedCalls* c, std::optional<Reply>* out, std::byte* a) -> Task<void> {
      out->emplace(co_await c->CallWithReply({0, 0}, 2, std::span(a, 1)));
    }(&calls_, out, &arg));
  }
  Settle();
  // Expect: both requests ask for the reply.
  ASSERT_EQ(peer_.requests.size(), 2u);
  EXPECT_EQ(peer_.requests[0].flags, kCallWantsReply);
  // Expect: an answer whose sizes do not add up is dropped and counted; the call still waits.
  std::vector<std::byte> torn = ResultWith(1, Code::kOk, "", Bytes({1, 2, 3}));
  torn.pop_back();
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult, torn});
  EXPECT_EQ(calls_.stats().malformed, 1u);
  EXPECT_EQ(calls_.awaited(), 2u);
  calls_.OnResult(
      Message{peer_.ep->self(), kMsgCallResult, ResultWith(1, Code::kOk, "", Bytes({1, 2, 3}))});
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult,
                          ResultWith(2, Code::kNotFound, "no account 42", {})});
  sched_.RunOnce();
  ASSERT_TRUE(first.has_value() && second.has_value());
  ASSERT_TRUE(first->ok()) << first->status().ToString();
  EXPECT_EQ(first->value(), Bytes({1, 2, 3}));
  // Expect: the callee's Status itself, not "remote call failed".
  EXPECT_EQ(second->status().code(), Code::kNotFound);
  EXPECT_EQ(second->status().message(), "no account 42");
}

// The callee's CN fails (docs/recovery.md): a call awaited from it may have run and committed
// before it died, so its outcome is Unknown — never a guess; a later call is refused unsent.
TEST_F(RoutedCallTest, ACallAwaitedFromAFailedCnEndsUnknownAndALaterOneIsRefused) {
  std::optional<Status> awaited;
  std::optional<pond::Result<std::vector<std::byte>>> with_reply;
  std::byte arg{7};
  sched_.Spawn([](RoutedCalls* c, std::optional<Status>* out, std::byte* a) -> Task<void> {
    *out = co_await c->Call({0, 0}, 3, std::span(a, 1));
  }(&calls_, &awaited, &arg));
  sched_.Spawn([](RoutedCalls* c, std::optional<pond::Result<std::vector<std::byte>>>* out,
                  std::byte* a) -> Task<void> {
    out->emplace(co_await c->CallWithReply({0, 0}, 2, std::span(a, 1)));
  }(&calls_, &with_reply, &arg));
  Settle();
  ASSERT_EQ(peer_.requests.size(), 2u);
  EXPECT_EQ(calls_.PeerFailed(0), 2u);
  sched_.RunOnce();
  ASSERT_TRUE(awaited.has_value() && with_reply.has_value());
  EXPECT_EQ(awaited->code(), Code::kUnknown) << awaited->ToString();
  EXPECT_NE(awaited->message().find("CN 0 failed"), std::string::npos) << awaited->message();
  EXPECT_EQ(with_reply->status().code(), Code::kUnknown);
  EXPECT_EQ(calls_.awaited(), 0u) << "nothing is resent to a failed CN";
  // A late answer from the dead CN changes nothing.
  calls_.OnResult(Message{peer_.ep->self(), kMsgCallResult, Result(1, Code::kOk)});
  EXPECT_EQ(calls_.stats().answer_copies, 1u);
  std::optional<Status> later;
  sched_.Spawn([](RoutedCalls* c, std::optional<Status>* out, std::byte* a) -> Task<void> {
    *out = co_await c->Call({0, 0}, 3, std::span(a, 1));
  }(&calls_, &later, &arg));
  Settle();
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->code(), Code::kAborted) << "known not to have run";
  EXPECT_TRUE(later->message().starts_with("not sent")) << later->message();
  EXPECT_EQ(peer_.requests.size(), 2u) << "refused without being sent";
}

}  // namespace
}  // namespace pond::node
