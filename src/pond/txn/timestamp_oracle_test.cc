#include "pond/txn/timestamp_oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "pond/store/store_testing.h"

namespace pond::txn {
namespace {

TEST(TimestampOracleTest, GrantsIncreaseAndFollowTheClock) {
  ManualClock clock(5'000'000);  // 5 ms
  TimestampOracle tso(clock);
  uint64_t a = tso.Grant(1);
  EXPECT_EQ(a, uint64_t{5000} << kLogicalBits) << "physical part is the clock in µs";
  uint64_t b = tso.Grant(10);
  EXPECT_EQ(b, a + 1) << "same microsecond: the logical part counts on";
  uint64_t c = tso.Grant(1);
  EXPECT_EQ(c, b + 10) << "a block of 10 was handed out";
  clock.Set(1'000'000);  // the clock goes back: grants must not
  EXPECT_GT(tso.Grant(1), c);
  clock.Set(9'000'000);
  EXPECT_EQ(tso.Grant(1), uint64_t{9000} << kLogicalBits);
}

TEST(TimestampOracleTest, ConcurrentGrantsAreUnique) {
  TimestampOracle tso(SystemClock::Get());
  std::vector<std::vector<uint64_t>> got(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 20000; i++) {
        uint64_t first = tso.Grant(3);
        for (uint64_t k = 0; k < 3; k++) got[t].push_back(first + k);
      }
    });
  }
  for (auto& th : ts) th.join();
  std::vector<uint64_t> all;
  for (auto& g : got) {
    EXPECT_TRUE(std::is_sorted(g.begin(), g.end())) << "each thread sees increasing grants";
    all.insert(all.end(), g.begin(), g.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a timestamp granted twice";
}

TEST(TsoClientTest, OneRequestPerRoundAcrossCoroutines) {
  auto pool = store::testing::FormattedPool(1, 16 << 20);
  ManualClock clock(1'000'000);
  TimestampOracle oracle(clock);
  store::testing::Worker host(*pool, {0, 0});
  store::testing::Worker remote(*pool, {1, 0});
  TsoServer server(*host.ep, &oracle);
  TsoClient client(*remote.ep, {0, 0}, nullptr);
  std::vector<uint64_t> got(5, 0);
  for (int i = 0; i < 5; i++) {
    remote.sched.Spawn([](TsoClient* c, uint64_t* out) -> Task<void> { *out = co_await c->Get(); }(
                                                           &client, &got[i]));
  }
  remote.sched.RunOnce();  // all five ask; one request leaves
  EXPECT_EQ(client.stats().requests, 1u);
  EXPECT_EQ(remote.ep->stats().messages_sent, 1u);
  host.sched.RunOnce();    // the host answers with one block of five
  remote.sched.RunOnce();  // the reply arrives; the five are made ready
  remote.sched.RunOnce();  // and run
  EXPECT_EQ(remote.sched.live(), 0u);
  for (int i = 1; i < 5; i++) EXPECT_EQ(got[i], got[i - 1] + 1);
  EXPECT_EQ(got[0], uint64_t{1000} << kLogicalBits);
}

TEST(TsoClientTest, HostUsesTheOracleDirectly) {
  auto pool = store::testing::FormattedPool(1, 16 << 20);
  TimestampOracle oracle(SystemClock::Get());
  store::testing::Worker host(*pool, {0, 0});
  TsoClient client(*host.ep, {0, 0}, &oracle);
  uint64_t a =
      host.Run([](TsoClient* c) -> Task<uint64_t> { co_return co_await c->Get(); }(&client));
  uint64_t b =
      host.Run([](TsoClient* c) -> Task<uint64_t> { co_return co_await c->Get(); }(&client));
  EXPECT_LT(a, b);
  EXPECT_EQ(host.ep->stats().messages_sent, 0u);
}

// Message by message: a peer endpoint sends requests and replies by hand, as a duplicating or
// reordering network would deliver them.
struct TsoPeer {
  std::vector<TsoReply> replies;
  explicit TsoPeer(store::testing::Worker& w) {
    w.ep->OnMessage(kMsgTsoReply, [this](const Message& m) {
      TsoReply r;
      ASSERT_EQ(m.payload.size(), sizeof(r));
      std::memcpy(&r, m.payload.data(), sizeof(r));
      replies.push_back(r);
    });
  }
};

TEST(TsoServerTest, ADuplicateRequestGetsAFreshBlockEchoingItsSeq) {
  auto pool = store::testing::FormattedPool(1, 16 << 20);
  ManualClock clock(1'000'000);
  TimestampOracle oracle(clock);
  store::testing::Worker host(*pool, {0, 0});
  store::testing::Worker remote(*pool, {1, 0});
  TsoServer server(*host.ep, &oracle);
  TsoPeer peer(remote);
  TsoRequest req{3, 41};
  for (int copy = 0; copy < 2; copy++) {
    remote.ep->Send({0, 0}, kMsgTsoRequest, std::as_bytes(std::span(&req, 1)));
  }
  remote.sched.RunOnce();  // the two copies leave
  host.sched.RunOnce();    // both are answered
  remote.sched.RunOnce();
  // Expect: two answers for seq 41, blocks of 3 that do not overlap — a copy costs timestamps,
  // never hands one out twice; the client takes the first (next test).
  ASSERT_EQ(peer.replies.size(), 2u);
  for (const TsoReply& r : peer.replies) {
    EXPECT_EQ(r.seq, 41u);
    EXPECT_EQ(r.count, 3u);
  }
  EXPECT_GE(peer.replies[1].first, peer.replies[0].first + 3);
}

TEST(TsoClientTest, RepliesServeTheirOwnAskersInAnyOrderAndCopiesAreIgnored) {
  auto pool = store::testing::FormattedPool(1, 16 << 20);
  store::testing::Worker remote(*pool, {1, 0});
  store::testing::Worker host(*pool, {0, 0});  // no server: the test answers by hand
  std::vector<TsoRequest> asked;
  host.ep->OnMessage(kMsgTsoRequest, [&](const Message& m) {
    TsoRequest r;
    std::memcpy(&r, m.payload.data(), sizeof(r));
    asked.push_back(r);
  });
  TsoClient client(*remote.ep, {0, 0}, nullptr);
  uint64_t a = 0, b = 0;
  auto ask = [](TsoClient* c, uint64_t* out) -> Task<void> { *out = co_await c->Get(); };
  remote.sched.Spawn(ask(&client, &a));
  remote.sched.RunOnce();  // request seq 0 (one asker)
  remote.sched.Spawn(ask(&client, &b));
  remote.sched.RunOnce();  // request seq 1
  EXPECT_EQ(client.stats().requests, 2u);
  host.sched.RunOnce();  // the two requests arrive
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].seq, 0u);
  EXPECT_EQ(asked[1].seq, 1u);
  auto reply = [&](uint64_t first, uint32_t seq) {
    TsoReply r{first, 1, seq};
    host.ep->Send({1, 0}, kMsgTsoReply, std::as_bytes(std::span(&r, 1)));
    host.sched.RunOnce();
    remote.sched.RunOnce();  // delivered; the asker made ready
    remote.sched.RunOnce();  // and run
  };
  reply(900, 1);  // seq 1's answer overtakes seq 0's
  EXPECT_EQ(b, 900u);
  EXPECT_EQ(a, 0u);
  reply(500, 0);
  EXPECT_EQ(a, 500u);
  // Expect: a copy of an answer already taken changes nothing.
  reply(777, 1);
  EXPECT_EQ(b, 900u);
  EXPECT_EQ(remote.sched.live(), 0u);
  EXPECT_EQ(client.stats().timestamps, 2u);
}

// The oracle's host fails with a request unanswered: the client, told the new host, sends it
// there in its next round; the new oracle, started later from its own clock, grants past every
// timestamp of the old one. A CN that does not host the oracle drops a request sent to it.
TEST(TsoClientTest, ARequestTheOldHostNeverAnsweredGoesToTheNewOne) {
  auto pool = store::testing::FormattedPool(1, 16 << 20);
  ManualClock clock(1'000'000);
  TimestampOracle old_oracle(clock);
  store::testing::Worker old_host(*pool, {0, 0});
  store::testing::Worker new_host(*pool, {2, 0});
  store::testing::Worker remote(*pool, {1, 0});
  TsoServer not_yet(*new_host.ep, nullptr);  // CN 2 hosts nothing yet
  TsoClient client(*remote.ep, {0, 0}, nullptr);
  const uint64_t old_last = old_oracle.Grant(1000);
  uint64_t got = 0;
  remote.sched.Spawn(
      [](TsoClient* c, uint64_t* out) -> Task<void> { *out = co_await c->Get(); }(&client, &got));
  remote.sched.RunOnce();  // the request leaves for CN 0, which dies with it unread
  EXPECT_EQ(client.awaiting(), 1u);
  // A stray request to CN 2 before it hosts the oracle is dropped, not answered.
  TsoRequest stray{1, 99};
  remote.ep->Send({2, 0}, kMsgTsoRequest, std::as_bytes(std::span(&stray, 1)));
  remote.sched.RunOnce();
  new_host.sched.RunOnce();
  EXPECT_EQ(not_yet.dropped(), 1u);
  // The lease passes; CN 2 starts an oracle from its clock and hosts it.
  clock.Advance(2'000'000);
  TimestampOracle new_oracle(clock);
  not_yet.SetOracle(&new_oracle);
  client.SetHost({2, 0}, nullptr);
  remote.sched.RunOnce();  // resent to CN 2 at once, not after kResendAfterNs
  new_host.sched.RunOnce();
  remote.sched.RunOnce();
  remote.sched.RunOnce();
  EXPECT_EQ(remote.sched.live(), 0u);
  EXPECT_GT(got, old_last + 999) << "the new oracle granted below the old one";
  EXPECT_EQ(client.stats().resends, 1u);
  EXPECT_EQ(client.awaiting(), 0u);
}

// On the new host's own workers the waiting requests are served by the oracle directly.
TEST(TsoClientTest, ANewHostServesItsOwnWaitingRequestsDirectly) {
  auto pool = store::testing::FormattedPool(1, 16 << 20);
  ManualClock clock(1'000'000);
  store::testing::Worker me(*pool, {2, 0});
  store::testing::Worker dead(*pool, {0, 0});  // the old host: never runs again
  TsoClient client(*me.ep, {0, 0}, nullptr);
  uint64_t got = 0;
  me.sched.Spawn(
      [](TsoClient* c, uint64_t* out) -> Task<void> { *out = co_await c->Get(); }(&client, &got));
  me.sched.RunOnce();  // sent to CN 0, which is gone
  TimestampOracle oracle(clock);
  client.SetHost({2, 0}, &oracle);
  me.sched.RunOnce();
  EXPECT_EQ(me.sched.live(), 0u);
  EXPECT_EQ(got, uint64_t{1000} << kLogicalBits);
  EXPECT_EQ(client.awaiting(), 0u);
}

// The timestamp host (worker 0 of CN 0, its oracle's clock at 1 ms) and a remote worker (CN 1),
// for the tests of what does not parse.
struct HostAndRemote {
  store::testing::Pool pool = store::testing::FormattedPool(1, 16 << 20);
  ManualClock clock{1'000'000};
  TimestampOracle oracle{clock};
  store::testing::Worker host{*pool, {0, 0}};
  store::testing::Worker remote{*pool, {1, 0}};
  // `from` sends one message of `kind` to the other, which handles it; any answer arrives.
  void Exchange(store::testing::Worker& from, uint16_t kind, std::span<const std::byte> bytes) {
    store::testing::Worker& to = &from == &host ? remote : host;
    from.ep->Send(to.ep->self(), kind, bytes);
    from.sched.RunOnce();
    to.sched.RunOnce();
    from.sched.RunOnce();
    from.sched.RunOnce();
  }
};

// A request that does not parse, or asks for no timestamps or for more than a block, is dropped
// unanswered and grants nothing: it came from another process.
TEST(TsoServerTest, ARequestThatDoesNotParseIsDroppedAndGrantsNothing) {
  HostAndRemote w;
  TsoServer server(*w.host.ep, &w.oracle);
  TsoPeer peer(w.remote);
  const TsoRequest none{0, 1}, too_many{kTsoBlockMax + 1, 2}, most{kTsoBlockMax, 3};
  const uint32_t short_request = 7;
  w.Exchange(w.remote, kMsgTsoRequest, std::as_bytes(std::span(&none, 1)));
  w.Exchange(w.remote, kMsgTsoRequest, std::as_bytes(std::span(&too_many, 1)));
  w.Exchange(w.remote, kMsgTsoRequest, std::as_bytes(std::span(&short_request, 1)));
  EXPECT_TRUE(peer.replies.empty());
  EXPECT_EQ(w.oracle.last(), 0u) << "nothing was granted";
  EXPECT_EQ(w.host.ep->stats().messages_malformed, 3u);
  // Expect: a block of the most a request may ask for is granted.
  w.Exchange(w.remote, kMsgTsoRequest, std::as_bytes(std::span(&most, 1)));
  ASSERT_EQ(peer.replies.size(), 1u);
  EXPECT_EQ(peer.replies[0].count, kTsoBlockMax);
}

// A reply that does not parse, or grants a block of another size than asked, serves no one: the
// request stays awaited (and is sent again), and the true reply is taken when it comes.
TEST(TsoClientTest, AReplyForAnotherBlockIsNotTaken) {
  HostAndRemote w;
  w.host.ep->OnMessage(kMsgTsoRequest, [](const Message&) {});  // the test answers by hand
  TsoClient client(*w.remote.ep, {0, 0}, nullptr);
  uint64_t got = 0;
  w.remote.sched.Spawn(
      [](TsoClient* c, uint64_t* out) -> Task<void> { *out = co_await c->Get(); }(&client, &got));
  w.remote.sched.RunOnce();  // request seq 0, for one timestamp
  w.host.sched.RunOnce();
  const TsoReply two{900, 2, 0}, zero{0, 1, 0}, wraps{UINT64_MAX, 1, 0}, right{500, 1, 0};
  w.Exchange(w.host, kMsgTsoReply, std::as_bytes(std::span(&two, 1)));
  w.Exchange(w.host, kMsgTsoReply, std::as_bytes(std::span(&zero, 1)));
  w.Exchange(w.host, kMsgTsoReply, std::as_bytes(std::span(&wraps, 1)));
  w.Exchange(w.host, kMsgTsoReply, std::as_bytes(std::span(&right, 1)).first(12));
  w.remote.sched.RunOnce();
  EXPECT_EQ(got, 0u);
  EXPECT_EQ(client.awaiting(), 1u);
  EXPECT_EQ(w.remote.ep->stats().messages_malformed, 4u);
  w.Exchange(w.host, kMsgTsoReply, std::as_bytes(std::span(&right, 1)));
  w.remote.sched.RunOnce();
  EXPECT_EQ(got, 500u);
  EXPECT_EQ(client.awaiting(), 0u);
}

// More askers in one round than a block holds: blocks of at most kTsoBlockMax, in the order asked.
TEST(TsoClientTest, MoreAskersThanABlockHoldsAskInSeveralRequests) {
  HostAndRemote w;
  TsoServer server(*w.host.ep, &w.oracle);
  TsoClient client(*w.remote.ep, {0, 0}, nullptr);
  std::vector<uint64_t> got(kTsoBlockMax + 2, 0);
  for (uint64_t& out : got) {
    w.remote.sched.Spawn(
        [](TsoClient* c, uint64_t* o) -> Task<void> { *o = co_await c->Get(); }(&client, &out));
  }
  w.remote.sched.RunOnce();
  EXPECT_EQ(client.stats().requests, 2u);
  w.host.sched.RunOnce();
  w.remote.sched.RunOnce();
  w.remote.sched.RunOnce();
  EXPECT_EQ(w.remote.sched.live(), 0u);
  EXPECT_EQ(w.host.ep->stats().messages_malformed, 0u);
  for (size_t i = 1; i < got.size(); i++) ASSERT_LT(got[i - 1], got[i]) << i;
}

// tso_combine: two workers of CN 1 ask its relay (worker 0), which asks the host once for their
// timestamps and its own, and hands each its part of the grant.
TEST(TsoRelayTest, ACnsWorkersAskTheOracleOnceThroughTheirRelay) {
  HostAndRemote w;  // the host is {0, 0}; the relay is {1, 0}
  store::testing::Worker a(*w.pool, {1, 1});
  store::testing::Worker b(*w.pool, {1, 2});
  TsoServer host_server(*w.host.ep, &w.oracle);
  TsoClient relay(*w.remote.ep, {0, 0}, nullptr);
  TsoServer relay_server(*w.remote.ep, nullptr, &relay);
  TsoClient client_a(*a.ep, {1, 0}, nullptr);
  TsoClient client_b(*b.ep, {1, 0}, nullptr);
  std::vector<uint64_t> got(5, 0);  // a, a, b, b, relay
  auto ask = [](TsoClient* c, uint64_t* out) -> Task<void> { *out = co_await c->Get(); };
  a.sched.Spawn(ask(&client_a, &got[0]));
  a.sched.Spawn(ask(&client_a, &got[1]));
  b.sched.Spawn(ask(&client_b, &got[2]));
  b.sched.Spawn(ask(&client_b, &got[3]));
  w.remote.sched.Spawn(ask(&relay, &got[4]));
  a.sched.RunOnce();
  b.sched.RunOnce();  // each sends its request of two to the relay
  EXPECT_EQ(w.remote.ep->stats().messages_received, 0u);
  for (int i = 0; i < 10 && (a.sched.live() + b.sched.live() + w.remote.sched.live()) > 0; i++) {
    w.remote.sched.RunOnce();
    w.host.sched.RunOnce();
    a.sched.RunOnce();
    b.sched.RunOnce();
  }
  EXPECT_EQ(a.sched.live() + b.sched.live() + w.remote.sched.live(), 0u);
  EXPECT_EQ(w.host.ep->stats().messages_received, 1u) << "one request for the CN's five";
  EXPECT_EQ(relay.stats().requests, 1u);
  EXPECT_EQ(relay.stats().relayed, 2u);
  EXPECT_EQ(relay.stats().timestamps, 1u);
  EXPECT_EQ(client_a.stats().timestamps, 2u);
  EXPECT_EQ(w.oracle.last() + 1 - (uint64_t{1000} << kLogicalBits), 5u) << "five granted at once";
  std::vector<uint64_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  EXPECT_EQ(sorted.front(), uint64_t{1000} << kLogicalBits);
  EXPECT_EQ(sorted.back(), w.oracle.last());
  EXPECT_LT(got[0], got[1]);
  EXPECT_LT(got[2], got[3]);
  EXPECT_EQ(w.host.ep->stats().messages_malformed + w.remote.ep->stats().messages_malformed, 0u);
}

// A relay relays for its own CN only: another CN's request, sent to a worker that does not
// host the oracle (it has not heard yet that the oracle moved there), is dropped as before.
TEST(TsoRelayTest, ARequestFromAnotherCnIsNotRelayed) {
  HostAndRemote w;  // {1, 0} is the relay; {0, 0} asks it as if it were the host
  TsoClient relay(*w.remote.ep, {2, 0}, nullptr);
  TsoServer relay_server(*w.remote.ep, nullptr, &relay);
  TsoRequest req{3, 7};
  w.Exchange(w.host, kMsgTsoRequest, std::as_bytes(std::span(&req, 1)));
  EXPECT_EQ(relay_server.dropped(), 1u);
  EXPECT_EQ(relay.stats().requests, 0u);
  EXPECT_EQ(w.remote.ep->stats().messages_sent, 0u);
}

}  // namespace
}  // namespace pond::txn
