#include "pond/txn/timestamp_oracle.h"

#include <gtest/gtest.h>

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
  TsoServer server(*host.ep, oracle);
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

}  // namespace
}  // namespace pond::txn
