// Shard moves for load (shard_move.h), step by step on the membership harness: the holder closes
// and drains, says so, the CM makes the move by an epoch, the receiver opens — and what happens
// when the holder, the receiver or the CM is missing at each step. Three CNs; shard s starts on
// CN s % 3.
#include "pond/recovery/shard_move.h"

#include <gtest/gtest.h>

#include <vector>

#include "pond/recovery/membership_harness.h"

namespace pond::recovery {
namespace {

using namespace harness;  // NOLINT(google-build-using-namespace): the tests' vocabulary

class ShardMoveTest : public CnMembershipTest {
 protected:
  std::vector<uint16_t> Map() {
    return cluster::ReadShardMap(store_, kCluster, store_.Config().epoch, kShards).value();
  }
  bool Said(uint16_t holder) const { return store_.Has(cluster::MoveKey(kCluster, holder)); }
  // Whether CN `cn` grants shard `s`'s locks: it manages it and has it open.
  bool Grants(uint16_t cn, uint32_t s) {
    const TestControls& c = *node(cn).controls;
    return c.owners[s] == cn && c.closed.count(s) == 0;
  }
  // How many CNs grant shard `s`'s locks.
  int Grantors(uint32_t s) {
    int n = 0;
    for (uint16_t cn = 0; cn < 3; cn++) n += node(cn).running && Grants(cn, s);
    return n;
  }
};

TEST_F(ShardMoveTest, AMoveIsMadeByAnEpochOnlyOnceItsHolderHasDrainedIt) {
  Periods(3);
  node(0).controls->held_in = {3};  // a lock in shard 3 still held on CN 0
  ASSERT_TRUE(node(0).machine->StartMove({0, 3}, 1).ok());
  EXPECT_TRUE(node(0).machine->Moving());
  Periods(5);
  EXPECT_FALSE(Said(0)) << "said drained with a lock held";
  EXPECT_EQ(store_.Config().epoch, 1u);
  for (uint32_t s : {0u, 3u}) EXPECT_EQ(Grantors(s), 0) << "shard " << s;
  node(0).controls->held_in.clear();
  ASSERT_TRUE(Until([&] { return !node(0).machine->Moving(); }, 10));
  Periods(2);
  const cluster::Configuration c = store_.Config();
  EXPECT_EQ(c.epoch, 2u);
  EXPECT_EQ(c.cns[0].moves, 1u);
  const std::vector<uint16_t> map = Map();
  for (uint32_t s = 0; s < kShards; s++) {
    const uint16_t want = s == 0 || s == 3 ? 1 : s % 3;
    EXPECT_EQ(map[s], want) << "shard " << s;
    EXPECT_EQ(Grantors(s), 1) << "shard " << s;
    for (uint16_t cn = 0; cn < 3; cn++) EXPECT_EQ(node(cn).controls->owners[s], want);
  }
  EXPECT_EQ(node(1).controls->opened, (std::set<uint32_t>{0, 3}));
  EXPECT_EQ(node(0).controls->opened.count(0), 0u) << "the holder served a moved shard again";
  EXPECT_EQ(node(0).machine->move_counts().made, 1u);
  // Closed from Start to the epoch: at least the five periods the lock was held.
  EXPECT_GE(node(0).machine->move_counts().closed_ns_max, 5 * kLeaseNs / 10);
}

// The record stays at MoveKey after its move is made: read again by every later CM, it is made
// no second time — not even once the shards it names are back on its holder, whose new move
// they would otherwise follow undrained.
TEST_F(ShardMoveTest, ARecordReadAgainIsNotMadeAgain) {
  Periods(3);
  ASSERT_TRUE(node(0).machine->StartMove({3}, 1).ok());
  ASSERT_TRUE(Until([&] { return store_.Config().epoch == 2; }, 10));
  Periods(10);
  EXPECT_EQ(store_.Config().epoch, 2u) << "a made move was made again";
  ASSERT_TRUE(Until([&] { return Grants(1, 3); }, 5));
  ASSERT_TRUE(node(1).machine->StartMove({3}, 0).ok());
  ASSERT_TRUE(Until([&] { return store_.Config().epoch == 3; }, 10));
  ASSERT_TRUE(Until([&] { return Grants(0, 3); }, 5));
  Periods(10);
  EXPECT_EQ(store_.Config().epoch, 3u);
  EXPECT_EQ(Map()[3], 0);
  EXPECT_EQ(Grantors(3), 1);
  EXPECT_EQ(store_.Config().cns[0].moves, 1u);
  EXPECT_EQ(store_.Config().cns[1].moves, 1u);
}

TEST_F(ShardMoveTest, AHolderThatCannotDrainWithinTheBoundGivesUpAndServesAgain) {
  Periods(3);
  node(0).controls->held_in = {6};
  ASSERT_TRUE(node(0).machine->StartMove({6, 9}, 2).ok());
  ASSERT_TRUE(Until([&] { return !node(0).machine->Moving(); }, 15));
  EXPECT_FALSE(Said(0));
  EXPECT_TRUE(Grants(0, 6));
  EXPECT_TRUE(Grants(0, 9));
  EXPECT_EQ(node(0).machine->move_counts().given_up, 1u);
  Periods(5);
  EXPECT_EQ(store_.Config().epoch, 1u);
  // Free to try again.
  node(0).controls->held_in.clear();
  ASSERT_TRUE(node(0).machine->StartMove({6, 9}, 2).ok());
  ASSERT_TRUE(Until([&] { return Grants(2, 6) && Grants(2, 9); }, 10));
  EXPECT_EQ(store_.Config().cns[0].moves, 1u);
}

TEST_F(ShardMoveTest, StartRefusesWhatItCannotMove) {
  Periods(3);
  CnMembership& m = *node(0).machine;
  EXPECT_EQ(m.StartMove({1}, 2).code(), Code::kInvalidArgument) << "shard 1 is CN 1's";
  EXPECT_EQ(m.StartMove({0}, 0).code(), Code::kInvalidArgument) << "to itself";
  EXPECT_EQ(m.StartMove({0}, 7).code(), Code::kInvalidArgument) << "no CN 7";
  EXPECT_EQ(m.StartMove({3, 0}, 1).code(), Code::kInvalidArgument) << "not ascending";
  EXPECT_EQ(m.StartMove({}, 1).code(), Code::kInvalidArgument);
  node(0).controls->held_in = {0};
  ASSERT_TRUE(m.StartMove({0}, 1).ok());
  EXPECT_EQ(m.StartMove({3}, 1).code(), Code::kConflict) << "one move at a time";
  EXPECT_TRUE(Grants(0, 3)) << "a refused move closed a shard";
}

// The holder dies after it stopped granting, before it said drained: its failure takes every
// shard it managed, moving or not, to the survivors, who open them once it is recovered.
TEST_F(ShardMoveTest, AHolderThatDiesBeforeSayingDrainedLeavesItsShardsToItsFailure) {
  Periods(3);
  node(1).controls->held_in = {4};
  ASSERT_TRUE(node(1).machine->StartMove({1, 4}, 2).ok());
  Periods(2);
  node(1).running = false;
  ASSERT_TRUE(Until([&] { return StepDone(2, "opened", 0, 1) && StepDone(2, "opened", 2, 1); }));
  Periods(3);
  for (uint32_t s = 1; s < kShards; s += 3) EXPECT_EQ(Grantors(s), 1) << "shard " << s;
  EXPECT_EQ(store_.Config().cns[1].moves, 0u);
}

// The holder dies after it said drained, before any CM made the move: it is the CM itself, and
// says drained after its turn as CM. The next CM declares it in the same turn it reads the record,
// which names an incarnation the next epoch holds dead, and so makes no move; the holder's
// failure takes every shard it managed to the survivors.
TEST_F(ShardMoveTest, AHolderThatDiesAfterSayingDrainedLeavesItsShardsToItsFailure) {
  Periods(3);
  ASSERT_TRUE(node(0).machine->StartMove({0, 3}, 2).ok());
  ASSERT_TRUE(Until([&] { return Said(0); }, 5));
  node(0).running = false;
  ASSERT_TRUE(Until([&] { return StepDone(2, "opened", 1, 0) && StepDone(2, "opened", 2, 0); }));
  Periods(3);
  EXPECT_EQ(store_.Config().epoch, 2u) << "only the failure's epoch";
  EXPECT_EQ(store_.Config().cns[0].moves, 0u);
  for (uint32_t s = 0; s < kShards; s += 3) EXPECT_EQ(Grantors(s), 1) << "shard " << s;
}

// The receiver dies after the holder said drained, before the move was made (the CM, CN 0, is
// paused from before the record until the receiver's lease is out): the epoch that
// declares it rules the move out, and the holder serves its shards again — and the record is
// never made, even once the receiver is back as a new incarnation.
TEST_F(ShardMoveTest, AReceiverThatDiesBeforeTheMoveIsMadeCancelsIt) {
  Periods(3);
  node(0).coordinating = false;
  ASSERT_TRUE(node(1).machine->StartMove({1, 4}, 2).ok());
  ASSERT_TRUE(Until([&] { return Said(1); }, 5));
  node(2).running = false;
  Periods(12);  // CN 2's beat stops for a lease: the CM's next turn declares it
  node(0).coordinating = true;
  ASSERT_TRUE(Until([&] { return !node(1).machine->Moving(); }, 30));
  EXPECT_EQ(node(1).machine->move_counts().cancelled, 1u);
  EXPECT_TRUE(Grants(1, 1));
  EXPECT_TRUE(Grants(1, 4));
  ASSERT_TRUE(Until([&] { return StepDone(2, "opened", 0) && StepDone(2, "opened", 1); }));
  AskToComeBack(2, 1);
  Node& back = Start(2, 1);
  ASSERT_TRUE(Until([&] { return back.machine->alive() && !node(1).machine->Returning(); }));
  Periods(5);
  EXPECT_EQ(Map()[1], 1);
  EXPECT_EQ(Map()[4], 1);
  EXPECT_EQ(store_.Config().cns[1].moves, 1u)
      << "CN 1's one hand-over made is its return of CN 2's home, numbered as the move was";
  for (uint32_t s = 0; s < kShards; s++) EXPECT_EQ(Grantors(s), 1) << "shard " << s;
}

// The receiver dies after the move was made: the moved shards are its own now, and go to the
// survivors with its failure like every other.
TEST_F(ShardMoveTest, AReceiverThatDiesAfterTheMoveLeavesTheMovedShardsToItsFailure) {
  Periods(3);
  ASSERT_TRUE(node(0).machine->StartMove({0, 3}, 2).ok());
  ASSERT_TRUE(Until([&] { return Grants(2, 0) && Grants(2, 3); }, 10));
  node(2).running = false;
  ASSERT_TRUE(Until([&] { return StepDone(3, "opened", 0) && StepDone(3, "opened", 1); }));
  Periods(3);
  for (uint32_t s = 0; s < kShards; s++) EXPECT_EQ(Grantors(s), 1) << "shard " << s;
}

// A return's record is numbered as a move's, and made once: a shard that went home and then
// moved back to its old holder by load is not taken home again by the holder's old record
// (fault seed: a CM read the record again and moved the shard off a holder that served it).
TEST_F(ShardMoveTest, AReturnRecordReadAgainIsNotMadeAgain) {
  Periods(3);
  node(2).running = false;
  ASSERT_TRUE(Until([&] { return StepDone(2, "opened", 0) && StepDone(2, "opened", 1); }));
  std::vector<uint32_t> at_0;  // the shards of CN 2's home that CN 0 took: its return's list
  for (uint32_t x = 2; x < kShards; x += 3) {
    if (node(0).controls->owners[x] == 0) at_0.push_back(x);
  }
  ASSERT_FALSE(at_0.empty());
  AskToComeBack(2, 1);
  Node& back = Start(2, 1);
  ASSERT_TRUE(Until([&] { return Grants(2, at_0[0]) && !node(0).machine->Returning(); }));
  // All of them back to CN 0 by load: the old record's list, all on its holder again.
  ASSERT_TRUE(back.machine->StartMove(at_0, 0).ok());
  ASSERT_TRUE(Until([&] { return Grants(0, at_0[0]); }, 10));
  Periods(10);
  for (uint32_t s : at_0) {
    EXPECT_EQ(Map()[s], 0) << "shard " << s << ": the old return record was made again";
    EXPECT_EQ(Grantors(s), 1) << "shard " << s;
  }
  EXPECT_EQ(store_.Config().cns[0].moves, 1u);
}

// A move under way keeps its shards out of a return: a restarted CN let in while a holder moves
// shards of its home elsewhere takes home the others only, and the move is made.
TEST_F(ShardMoveTest, AMovingShardDoesNotGoHome) {
  Periods(3);
  node(2).running = false;
  ASSERT_TRUE(Until([&] { return StepDone(2, "opened", 0) && StepDone(2, "opened", 1); }));
  std::vector<uint32_t> at_0;  // CN 2's home shards CN 0 took
  for (uint32_t s = 2; s < kShards; s += 3) {
    if (node(0).controls->owners[s] == 0) at_0.push_back(s);
  }
  ASSERT_GE(at_0.size(), 2u);
  node(0).controls->held_in = {at_0[0]};  // the move waits while CN 2 comes back
  ASSERT_TRUE(node(0).machine->StartMove({at_0[0]}, 1).ok());
  AskToComeBack(2, 1);
  Node& back = Start(2, 1);
  ASSERT_TRUE(Until([&] { return back.machine->alive(); }));
  ASSERT_TRUE(Until([&] { return Grants(2, at_0[1]); }));
  EXPECT_FALSE(Grants(2, at_0[0]));
  node(0).controls->held_in.clear();
  ASSERT_TRUE(Until([&] { return Grants(1, at_0[0]); }, 10));
  Periods(3);
  for (uint32_t s = 0; s < kShards; s++) EXPECT_EQ(Grantors(s), 1) << "shard " << s;
}

}  // namespace
}  // namespace pond::recovery
