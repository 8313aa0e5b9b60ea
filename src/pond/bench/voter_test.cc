// Voter under every protocol, on real threads and in the simulator, SR and SI (ford only SR):
// votes and leaderboards commit and the vote check holds after the run; the per-voter limit
// declines votes and is never passed; and under random fault schedules every vote is counted
// once, those caught mid-commit by a crash whole or not at all.
#include "pond/bench/voter.h"

#include <gtest/gtest.h>

#include <string>

#include "pond/bench/run_faults.h"
#include "pond/bench/seed_runs.h"
#include "pond/bench/test_run.h"

namespace pond::bench {
namespace {

uint64_t Committed(const RunResult& r, VoterTxn t) {
  return r.committed_by_txn.at(static_cast<size_t>(t)).second;
}
uint64_t Votes(const RunResult& r) { return r.check->json["votes"].get<uint64_t>(); }

void RunAndCheck(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  VoterWorkload w({.voters = 500, .contestants = 20});
  Result<RunResult> r =
      ValidateAndRun(w, SmallTestRun(protocol, iso, simulate, simulate ? 0.001 : 0.15));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->check.has_value());
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  EXPECT_GT(Committed(*r, VoterTxn::kVote), 0u);
  // FORD's single versions: a leaderboard meets some tally locked by a vote and aborts, nearly
  // always (docs/workloads.md "Voter"); the multi-version protocols read a snapshot.
  if (protocol != "ford") {
    EXPECT_GT(Committed(*r, VoterTxn::kLeaderboard), 0u);
  }
  EXPECT_GT(Votes(*r), 0u);
}

class VoterTest : public testing::TestWithParam<std::string> {};
class VoterTestSnapshot : public testing::TestWithParam<std::string> {};

TEST_P(VoterTest, EveryVoteIsCountedOnceOnThreadsSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, false);
}
TEST_P(VoterTestSnapshot, EveryVoteIsCountedOnceOnThreadsSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, false);
}
TEST_P(VoterTest, EveryVoteIsCountedOnceSimulatedSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, true);
}
TEST_P(VoterTestSnapshot, EveryVoteIsCountedOnceSimulatedSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, true);
}

INSTANTIATE_TEST_SUITE_P(Protocols, VoterTest, testing::ValuesIn(ProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Protocols, VoterTestSnapshot, testing::ValuesIn(SnapshotProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// Ten voters with two votes each and a run long enough to spend them all: every later vote is
// declined, and the tallies hold exactly the twenty.
TEST(VoterLimitTest, VotesPastTheLimitAreDeclinedAndNeverCounted) {
  VoterWorkload w({.voters = 10, .contestants = 3, .max_votes = 2, .leaderboard_pct = 0});
  RunOptions o = SmallTestRun("lotus", Isolation::kSerializable, true, 0.002);
  Result<RunResult> r = ValidateAndRun(w, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  EXPECT_EQ(Votes(*r), 20u);
  ASSERT_TRUE(r->declined.has_value());
  EXPECT_GT(*r->declined, 0u);
}

// A popular contestant: the share of the votes asked for goes to contestant 0.
TEST(VoterHotTest, AHotShareMakesOneContestantPopular) {
  VoterWorkload w({.voters = 2000, .contestants = 20, .leaderboard_pct = 0, .hot_share = 0.5});
  Result<RunResult> r =
      ValidateAndRun(w, SmallTestRun("lotus", Isolation::kSerializable, true, 0.002));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  EXPECT_GT(Votes(*r), 100u);
}

// CN and MN crashes, restarts and partitions drawn from each seed: the vote check holds, with
// the votes caught mid-commit by a crash counted whole or not at all, and the replicas agree.
TEST(VoterFaultTest, VotesAreCountedOnceSimulatedUnderRandomFaults) {
  uint64_t in_doubt = 0;
  const SeedRange seeds = SeedsFromEnv("POND_FAULT_SEED", "POND_FAULT_SEEDS", 20);
  for (uint64_t seed = seeds.first; seed < seeds.first + seeds.count; seed++) {
    TraceSeed(seed);
    for (const char* protocol : {"lotus", "motor", "ford"}) {
      SCOPED_TRACE(std::string(protocol) + " seed " + std::to_string(seed));
      VoterWorkload w({.voters = 2000, .contestants = 20});
      RunOptions o = FaultyRun(protocol, Isolation::kSerializable, seed);
      ASSERT_TRUE(ResolveFaultsFor(w, &o, "random").ok());
      Result<RunResult> r = ValidateAndRun(w, o);
      ASSERT_TRUE(r.ok()) << o.faults << ": " << r.status().ToString();
      EXPECT_TRUE(r->check->ok) << o.faults << ": " << r->check->detail;
      EXPECT_GT(Votes(*r), 0u);
      in_doubt += r->check->json["in_doubt"].get<uint64_t>();
    }
  }
  if (seeds.count >= 20) {
    EXPECT_GT(in_doubt, 0u) << "no crash caught a vote mid-commit";
  }
}

TEST(VoterKeyTest, AVotersShardIsItsLowBits) {
  EXPECT_EQ(VoterKey(5) & 0xfff, 5u);
  EXPECT_EQ(VoterKey(4096 + 7) & 0xfff, 7u);
  EXPECT_EQ(VoterKey(123) >> 12, 123u);
  EXPECT_EQ(ContestantKey(9) >> 12, 9u);
}

TEST(VoterValidateTest, BadSettingsNameTheirFlag) {
  RunOptions o = SmallTestRun("lotus", Isolation::kSerializable, true, 0.001);
  EXPECT_NE(VoterWorkload({.voters = 0}).Validate(o).message().find("--voters"), std::string::npos);
  EXPECT_NE(VoterWorkload({.contestants = 0}).Validate(o).message().find("--contestants"),
            std::string::npos);
  EXPECT_NE(VoterWorkload({.max_votes = 0}).Validate(o).message().find("--max-votes"),
            std::string::npos);
  EXPECT_NE(VoterWorkload({.hot_share = 2}).Validate(o).message().find("--hot-share"),
            std::string::npos);
  o.record = true;
  EXPECT_FALSE(VoterWorkload({}).Validate(o).ok());
}

}  // namespace
}  // namespace pond::bench
