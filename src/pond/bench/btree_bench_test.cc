// The B+Tree benchmark runs every Sherman mix on the simulated cluster and on threads, replays a
// seed exactly, puts lock words in device memory only when asked, and its ablation steps end at
// Sherman (every technique on).
#include "pond/bench/btree_bench.h"

#include <gtest/gtest.h>

namespace pond::bench {
namespace {

BtreeBenchOptions Small() {
  BtreeBenchOptions o;
  o.mns = 2;
  o.cns = 2;
  o.workers = 1;
  o.coros = 4;
  o.keys = 4000;
  o.range_size = 20;
  o.seconds = 0.0005;
  o.region_mib = 16;
  o.lock_words = 1024;
  o.sim = Testbed::Preset("cx5").value();
  return o;
}

TEST(BtreeBenchTest, EveryMixRunsAndLeavesAWholeTree) {
  for (const BtreeMix& mix : BtreeMixes()) {
    BtreeBenchOptions o = Small();
    o.mix = mix.name;
    Result<BtreeBenchResult> r = RunBtreeBench(o, nullptr);
    ASSERT_TRUE(r.ok()) << mix.name << ": " << r.status().ToString();
    EXPECT_GT(r->ops, 0u) << mix.name;
    EXPECT_EQ(r->ops, r->inserts + r->lookups + r->ranges) << mix.name;
    EXPECT_EQ(r->inserts > 0, mix.insert_pct > 0) << mix.name;
    EXPECT_EQ(r->ranges > 0, mix.range_pct > 0) << mix.name;
    if (mix.range_pct > 0) {
      EXPECT_GT(r->range_entries, r->ranges) << mix.name;
    }
    if (mix.lookup_pct > 0) {
      EXPECT_GT(r->found, 0u) << mix.name;
    }
    EXPECT_GE(r->levels, 2) << mix.name;
    // Every entry sits in a leaf of at most 54, and leaves split in half: at least 27 a leaf
    // except the last of each run, so the tree holds between 1/54 and about 1/20 node per entry.
    EXPECT_GE(r->nodes * btree::kLeafEntries, r->entries) << mix.name;
    EXPECT_LE(r->nodes * 20, r->entries) << mix.name;
  }
}

TEST(BtreeBenchTest, OneSeedOneRun) {
  BtreeBenchOptions o = Small();
  o.theta = 0.99;
  Result<BtreeBenchResult> a = RunBtreeBench(o, nullptr), b = RunBtreeBench(o, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ops, b->ops);
  EXPECT_EQ(a->tree.lock_cas_failed, b->tree.lock_cas_failed);
  EXPECT_EQ(a->latency_ns.Percentile(0.99), b->latency_ns.Percentile(0.99));
  o.seed = 2;
  Result<BtreeBenchResult> c = RunBtreeBench(o, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->ops, c->ops);
}

TEST(BtreeBenchTest, LockWordsAreInDeviceMemoryOnlyWhenAsked) {
  // Enough writers on one MN's hot leaves (64 clients, zipf 0.99) that its lock-word CASes
  // decide the throughput: a small uniform run is bound by round trips, where the two places
  // differ by an operation or two.
  BtreeBenchOptions o = Small();
  o.mix = "write-only";
  o.mns = 1;
  o.cns = 8;
  o.workers = 2;
  o.theta = 0.99;
  Result<BtreeBenchResult> on = RunBtreeBench(o, nullptr);
  ASSERT_TRUE(on.ok());
  EXPECT_EQ(on->device_atomics, on->verb_ops[2]) << "every CAS of the run is on a lock word";
  o.device_locks = false;
  Result<BtreeBenchResult> off = RunBtreeBench(o, nullptr);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->device_atomics, 0u);
  EXPECT_GT(on->ops, off->ops) << "device-memory CAS is faster on cx5";
}

TEST(BtreeBenchTest, TheAblationEndsAtSherman) {
  BtreeBenchOptions o = Small();
  const btree::TreeOptions sherman;
  const std::vector<BtreeStep>& steps = BtreeAblationSteps();
  steps.front().apply(o);
  EXPECT_FALSE(o.tree.combine || o.tree.local_locks || o.tree.entry_writeback || o.device_locks);
  EXPECT_EQ(o.tree.handover_max, 0);
  for (size_t i = 1; i < steps.size(); i++) steps[i].apply(o);
  EXPECT_TRUE(o.tree.combine && o.tree.local_locks && o.tree.entry_writeback && o.device_locks);
  EXPECT_EQ(o.tree.handover_max, sherman.handover_max);
}

TEST(BtreeBenchTest, RunsOnThreads) {
  BtreeBenchOptions o = Small();
  o.sim.reset();
  o.seconds = 0.2;
  Result<BtreeBenchResult> r = RunBtreeBench(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->ops, 0u);
  EXPECT_EQ(r->device_atomics, 0u);
}

TEST(BtreeBenchTest, BadOptionsAreRefusedWithTheFlag) {
  BtreeBenchOptions o = Small();
  o.mix = "write-mostly";
  EXPECT_NE(ValidateBtreeOptions(o).message().find("--mix"), std::string::npos);
  o = Small();
  o.theta = 1;
  EXPECT_NE(ValidateBtreeOptions(o).message().find("--theta"), std::string::npos);
  o = Small();
  o.keys = 10'000'000;
  EXPECT_NE(ValidateBtreeOptions(o).message().find("--region-mib"), std::string::npos);
}

}  // namespace
}  // namespace pond::bench
