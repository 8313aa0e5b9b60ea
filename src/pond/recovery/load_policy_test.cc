// The load and locality policies (load_policy.h): on their own, interval by interval, and in
// the membership machine, where each CN's load goes through the lease pages and an overloaded
// CN's hottest shard moves to the CN that published the lowest latency, and a shard requested
// mostly by another CN moves there.
#include "pond/recovery/load_policy.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "pond/recovery/membership_harness.h"

namespace pond::recovery {
namespace {

using namespace harness;  // NOLINT(google-build-using-namespace): the tests' vocabulary

constexpr uint32_t kTestShards = 8;

// Counts since start after an interval that committed `txns` transactions of `latency_ns` each
// and took `requests[s]` lock requests for shard s, on top of `before`.
CnLoad After(const CnLoad& before, uint64_t txns, uint64_t latency_ns,
             const std::vector<uint64_t>& requests) {
  CnLoad l = before;
  l.txns += txns;
  l.latency_ns += txns * latency_ns;
  l.shard_requests.resize(kTestShards);
  for (size_t s = 0; s < requests.size(); s++) l.shard_requests[s] += requests[s];
  return l;
}

TEST(LoadPolicyTest, AnIntervalsLatencyIsItsOwnMean) {
  LoadPolicy p(LoadPolicyOptions{.on = true});
  CnLoad l = After({}, 10, 5000, {1, 2});
  EXPECT_EQ(p.EndInterval(l), 5000u);
  l = After(l, 30, 1000, {});
  EXPECT_EQ(p.EndInterval(l), 1000u) << "the first interval's transactions counted again";
  EXPECT_EQ(p.EndInterval(l), 0u) << "an interval without a commit";
}

TEST(LoadPolicyTest, AnOverloadedCnMovesItsHottestShardToTheCoolestAfterThreeIntervals) {
  LoadPolicy p(LoadPolicyOptions{.on = true});
  const auto any = [](uint32_t) { return true; };
  // CN 0 at 3 us against 1 us and 0.5 us: mean 1.5 us, and 3 > 1.5 x 1.5.
  const std::vector<std::optional<uint64_t>> lat = {3000, 1000, 500};
  CnLoad l;
  for (int i = 1; i <= 2; i++) {
    l = After(l, 100, 3000, {5, 40, 7});
    p.EndInterval(l);
    EXPECT_FALSE(p.Judge(0, lat, std::nullopt, any).has_value()) << "interval " << i;
  }
  l = After(l, 100, 3000, {5, 40, 7});
  p.EndInterval(l);
  const std::optional<LoadPolicy::Move> m = p.Judge(0, lat, std::nullopt, any);
  ASSERT_TRUE(m.has_value());
  // (3 - 0.5) / 6 of its 52 requests: the hottest alone carries them.
  EXPECT_EQ(m->shards, std::vector<uint32_t>{1});
  EXPECT_EQ(m->to, 2);
  EXPECT_EQ(p.streak(), 0) << "the next move needs a streak of its own";
}

// A hot set over many shards moves as a range, hottest first, until it carries the share that
// would even the two CNs out.
TEST(LoadPolicyTest, AnOverloadedCnPassesTheRangeThatCarriesItsExcess) {
  LoadPolicy p(LoadPolicyOptions{.on = true, .intervals = 1});
  // 8 shards, 10 requests each but shard 7's 30: 100 in all. 4 us against 1 us (and 1 us): a
  // share of (4 - 1) / 8 = 37.5%, so shard 7 (30) and the next hottest, by id, shard 0 (10).
  p.EndInterval(After({}, 10, 1, {10, 10, 10, 10, 10, 10, 10, 30}));
  const std::optional<LoadPolicy::Move> m =
      p.Judge(0, {4000, 1000, 1000}, std::nullopt, [](uint32_t) { return true; });
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->shards, (std::vector<uint32_t>{0, 7}));
  EXPECT_EQ(m->to, 1);
}

TEST(LoadPolicyTest, OnlyAStreakOfOverloadedIntervalsCounts) {
  LoadPolicy p(LoadPolicyOptions{.on = true});
  const auto any = [](uint32_t) { return true; };
  CnLoad l;
  const std::vector<std::optional<uint64_t>> hot = {3000, 1000, 500}, even = {1000, 1000, 900};
  for (const auto* lat : {&hot, &hot, &even, &hot, &hot}) {
    l = After(l, 10, 1, {1});
    p.EndInterval(l);
    EXPECT_FALSE(p.Judge(0, *lat, std::nullopt, any).has_value());
  }
  EXPECT_EQ(p.streak(), 2);
}

TEST(LoadPolicyTest, NoMoveWithoutAMovableShardWithRequestsOrACoolerCn) {
  const std::vector<std::optional<uint64_t>> hot = {3000, 1000, 500};
  LoadPolicyOptions o{.on = true, .intervals = 1};
  {
    LoadPolicy p(o);
    p.EndInterval(After({}, 10, 1, {0, 9, 0}));
    EXPECT_FALSE(p.Judge(0, hot, std::nullopt, [](uint32_t s) { return s != 1; }).has_value())
        << "the only shard with requests may not move";
  }
  {
    LoadPolicy p(o);
    p.EndInterval(After({}, 10, 1, {0, 9, 0}));
    EXPECT_FALSE(
        p.Judge(0, {3000, std::nullopt, std::nullopt}, std::nullopt, [](uint32_t) { return true; })
            .has_value())
        << "no other CN heard from";
  }
  {
    LoadPolicy p(o);
    p.EndInterval(After({}, 10, 1, {0, 9, 0}));
    const std::optional<LoadPolicy::Move> m =
        p.Judge(2, {3000, std::nullopt, 10000}, std::nullopt, [](uint32_t) { return true; });
    ASSERT_TRUE(m.has_value()) << "10 us against a mean of 6.5 us";
    EXPECT_EQ(m->to, 0) << "CN 1, not heard from, is not a receiver";
  }
}

// The oracle's CN looks the coolest (its timestamps are local) but serves every CN's: it is passed
// over, and a cluster whose only cooler CN hosts it makes no move.
TEST(LoadPolicyTest, TheTimestampOraclesCnIsNeverTheReceiver) {
  const auto any = [](uint32_t) { return true; };
  LoadPolicyOptions o{.on = true, .intervals = 1};
  {
    LoadPolicy p(o);
    p.EndInterval(After({}, 10, 1, {0, 9, 0}));
    const std::optional<LoadPolicy::Move> m = p.Judge(2, {500, 1000, 4000}, 0, any);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->to, 1) << "CN 0, the oracle's, is cooler but not a receiver";
  }
  {
    LoadPolicy p(o);
    p.EndInterval(After({}, 10, 1, {0, 9, 0}));
    EXPECT_FALSE(p.Judge(1, {500, 4000}, 0, any).has_value())
        << "the only cooler CN is the oracle's";
  }
  {
    LoadPolicy p(o);
    p.EndInterval(After({}, 10, 1, {0, 9, 0}));
    const std::optional<LoadPolicy::Move> m = p.Judge(0, {4000, 1000, 500}, 0, any);
    ASSERT_TRUE(m.has_value()) << "the oracle's CN itself hands shards away";
    EXPECT_EQ(m->to, 2);
  }
}

// Counts after an interval in which shard s took `requests[s]` requests, `votes[s]` naming
// the CN that made most of them.
CnLoad Voted(const CnLoad& before, const std::vector<uint64_t>& requests,
             const std::vector<ShardMajority>& votes) {
  CnLoad l = After(before, 10, 1000, requests);
  l.majority = votes;
  l.majority.resize(kTestShards);
  return l;
}

TEST(LoadPolicyTest, AShardRequestedMostlyFromAnotherCnGoesThereAfterThreeIntervals) {
  LoadPolicy p(LoadPolicyOptions{.locality = true});
  const auto any_shard = [](uint32_t) { return true; };
  const auto any_cn = [](uint16_t) { return true; };
  CnLoad l;
  // On CN 0: shard 1 requested 10 times, 6 by CN 2 at least; shard 2 10 times with CN 1 named
  // but counted 4 (not half); shard 3 by CN 0 itself; shard 5 by CN 2 as shard 1.
  const std::vector<uint64_t> requests = {0, 10, 10, 10, 0, 4};
  const std::vector<ShardMajority> votes = {{}, {2, 6}, {1, 4}, {0, 10}, {}, {2, 2}};
  for (int i = 1; i <= 2; i++) {
    l = Voted(l, requests, votes);
    p.EndInterval(l);
    EXPECT_FALSE(p.JudgeLocality(0, any_cn, any_shard).has_value()) << "interval " << i;
  }
  l = Voted(l, requests, votes);
  p.EndInterval(l);
  const std::optional<LoadPolicy::Move> m = p.JudgeLocality(0, any_cn, any_shard);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->to, 2);
  EXPECT_EQ(m->shards, (std::vector<uint32_t>{1, 5}));
  l = Voted(l, requests, votes);
  p.EndInterval(l);
  EXPECT_FALSE(p.JudgeLocality(0, any_cn, any_shard).has_value())
      << "the shards moved need a run of their own";
}

TEST(LoadPolicyTest, ALocalityRunBreaksWhenTheMajorityChangesOrFades) {
  LoadPolicy p(LoadPolicyOptions{.locality = true, .intervals = 2});
  const auto any_shard = [](uint32_t) { return true; };
  const auto any_cn = [](uint16_t) { return true; };
  CnLoad l;
  // Shard 1: CN 1, then CN 2, then CN 2: a run of two for CN 2 only at the third interval.
  // Shard 2: CN 1, then no request, then CN 1: never two in a row.
  const std::vector<std::vector<ShardMajority>> votes = {
      {{}, {1, 5}, {1, 5}}, {{}, {2, 5}, {}}, {{}, {2, 5}, {1, 5}}};
  const std::vector<std::vector<uint64_t>> requests = {{0, 5, 5}, {0, 5, 0}, {0, 5, 5}};
  for (int i = 0; i < 2; i++) {
    l = Voted(l, requests[i], votes[i]);
    p.EndInterval(l);
    EXPECT_FALSE(p.JudgeLocality(0, any_cn, any_shard).has_value()) << "interval " << i;
  }
  l = Voted(l, requests[2], votes[2]);
  p.EndInterval(l);
  std::optional<LoadPolicy::Move> m = p.JudgeLocality(0, any_cn, any_shard);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->to, 2);
  EXPECT_EQ(m->shards, std::vector<uint32_t>{1});
}

TEST(LoadPolicyTest, LocalityGoesToTheCnWithTheMostRequestsAndOnlyWhereAllowed) {
  LoadPolicy p(LoadPolicyOptions{.locality = true, .intervals = 1});
  CnLoad l;
  // Shard 1 for CN 1 (8 requests), shards 2 and 3 for CN 2 (5 + 5), shard 4 for CN 3 (20).
  l = Voted(l, {0, 8, 5, 5, 20}, {{}, {1, 8}, {2, 5}, {2, 5}, {3, 20}});
  p.EndInterval(l);
  // CN 3 is not a receiver (down, or too loaded), and shard 3 is not movable.
  std::optional<LoadPolicy::Move> m = p.JudgeLocality(
      0, [](uint16_t c) { return c != 3; }, [](uint32_t s) { return s != 3; });
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->to, 1) << "CN 2's movable shards carry 5 requests, CN 1's 8";
  EXPECT_EQ(m->shards, std::vector<uint32_t>{1});
  l = Voted(l, {0, 0, 5, 5, 20}, {{}, {}, {2, 5}, {2, 5}, {3, 20}});
  p.EndInterval(l);
  m = p.JudgeLocality(
      0, [](uint16_t c) { return c != 3; }, [](uint32_t s) { return s != 3; });
  ASSERT_TRUE(m.has_value()) << "shard 2's run went on while CN 1's shard moved";
  EXPECT_EQ(m->to, 2);
  EXPECT_EQ(m->shards, std::vector<uint32_t>{2});
  l = Voted(l, {0, 0, 0, 0, 20}, {{}, {}, {}, {}, {3, 20}});
  p.EndInterval(l);
  EXPECT_FALSE(p.JudgeLocality(
                    0, [](uint16_t c) { return c != 3; }, [](uint32_t) { return true; })
                   .has_value());
}

class LoadMoveTest : public CnMembershipTest {
 protected:
  void SetUp() override {
    load_ = LoadPolicyOptions{.on = true, .interval_ns = kLeaseNs / 10};
    CnMembershipTest::SetUp();
  }
  // Each CN's counts grow by one interval's: `latency_ns` a transaction, and requests for
  // `hot` (CN 0's shard 3) on CN 0.
  void Load(const std::vector<uint64_t>& latency_ns) {
    for (uint16_t cn = 0; cn < 3; cn++) {
      CnLoad& l = node(cn).controls->load;
      l.shard_requests.resize(kShards);
      l.txns += 100;
      l.latency_ns += 100 * latency_ns[cn];
      l.shard_requests[cn] += 10;  // shard cn: its own
      if (cn == 0) l.shard_requests[3] += 50;
    }
  }
};

TEST_F(LoadMoveTest, TheOverloadedCnHandsItsHottestShardToTheCoolestThroughTheLeasePages) {
  for (int i = 0; i < 3; i++) {
    Load({1000, 1000, 1000});
    Period();
  }
  EXPECT_EQ(store_.Config().epoch, 1u) << "an even load moves nothing";
  int periods = 0;
  while (node(0).controls->owners[3] != 2 && periods++ < 10) {
    Load({5000, 1000, 400});
    Period();
  }
  ASSERT_LE(periods, 10) << "CN 0 never moved its hottest shard";
  // Three intervals overloaded, then one period each to say, make and apply the move.
  EXPECT_GE(periods, 3);
  EXPECT_EQ(node(0).controls->Said("overloaded"), 1u);
  EXPECT_EQ(node(0).controls->Said("overloaded (5000 ns a transaction): 1 shard to CN 2"), 1u)
      << "shard 3 carries (5 - 0.4) / 10 of CN 0's requests alone";
  Periods(2);
  EXPECT_EQ(node(2).controls->owners[3], 2);
  EXPECT_EQ(node(2).controls->opened.count(3), 1u);
  EXPECT_EQ(node(0).machine->move_counts().made, 1u);
}

class LocalityMoveTest : public CnMembershipTest {
 protected:
  void SetUp() override {
    load_ = LoadPolicyOptions{.locality = true, .interval_ns = kLeaseNs / 10};
    CnMembershipTest::SetUp();
  }
  // An interval on CN 0: shard 0 requested by CN 0 itself, shard 3 mostly by CN `from`.
  void Requests(uint16_t from) {
    CnLoad& l = node(0).controls->load;
    l.shard_requests.resize(kShards);
    l.majority.assign(kShards, ShardMajority{});
    l.shard_requests[0] += 10;
    l.majority[0] = {0, 10};
    l.shard_requests[3] += 10;
    l.majority[3] = {from, 6};
  }
};

TEST_F(LocalityMoveTest, AShardRequestedMostlyByAnotherCnMovesThereByAnEpoch) {
  for (int i = 0; i < 4; i++) {
    Requests(0);
    Period();
  }
  EXPECT_EQ(store_.Config().epoch, 1u) << "shards requested at home moved";
  int periods = 0;
  while (node(0).controls->owners[3] != 1 && periods++ < 10) {
    Requests(1);
    Period();
  }
  ASSERT_LE(periods, 10) << "CN 0 never moved shard 3";
  EXPECT_GE(periods, 3);
  EXPECT_EQ(node(0).controls->Said("requested mostly from CN 1: 1 shard to CN 1"), 1u);
  Periods(2);
  EXPECT_EQ(node(1).controls->owners[3], 1);
  EXPECT_EQ(node(1).controls->opened.count(3), 1u);
  EXPECT_EQ(node(0).controls->owners[0], 0) << "a shard requested at home moved";
  EXPECT_EQ(node(0).machine->move_counts().made, 1u);
}

}  // namespace
}  // namespace pond::recovery
