// The user-mode list-append plans (list_append_plan.h) judged across node faults in the
// simulator: random schedules of CN crashes (some aimed at a commit step), restarts, MN crashes,
// partitions and coordination outages. A transaction whose CN dies
// under it is recorded as info with exactly the appends its plan makes if it commits, so the
// checker holds recovery to all or nothing: a transaction half applied is a cycle, an
// unrecorded one a garbage read. POND_FAULT_SEEDS=K runs K seeds, POND_FAULT_SEED=N seed N.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "pond/bench/list_append.h"
#include "pond/bench/run_faults.h"
#include "pond/bench/seed_runs.h"

namespace pond::bench {
namespace {

SeedRange Seeds(uint64_t default_count) {
  return SeedsFromEnv("POND_FAULT_SEED", "POND_FAULT_SEEDS", default_count);
}

ListAppendOptions Plans(uint64_t seed) {
  ListAppendOptions o;
  o.user = true;
  o.keys = 20000;
  o.window = 24;
  o.max_appends = 24;
  o.txns_per_client = 1000000;  // the virtual time ends the run
  o.seed = seed;
  return o;
}

std::string Replay(uint64_t seed) {
  return "replay: pond sim list-append --mns 3 --cns 5 --workers 2 --coros 3 --replication 3 "
         "--versions 2 "
         "--virtual-seconds 0.008 --region-mib 64 --lock-buckets 4096 --vt-cache-entries 4096 "
         "--addr-cache-entries 16384 --lists 20000 --window 24 --list-appends 24 "
         "--txns-per-client 1000000 --faults random --seed " +
         std::to_string(seed);
}

void RunFaultSeeds(uint64_t default_seeds) {
  const SeedRange r = Seeds(default_seeds);
  uint64_t cn_crashes = 0, txns = 0, seeds_with_info = 0, committed = 0;
  for (uint64_t seed = r.first; seed < r.first + r.count; seed++) {
    TraceSeed(seed);
    RunOptions o = FaultyRun("lotus", Isolation::kSerializable, seed);
    o.record = true;
    ListAppendWorkload w(Plans(seed));
    ASSERT_TRUE(ValidateRun(w, o).ok());
    ASSERT_TRUE(ResolveFaultsFor(w, &o, "random").ok());
    const std::string where =
        "seed " + std::to_string(seed) + ", faults " + o.faults + "\n" + Replay(seed);
    Result<RunResult> run = RunWorkload(w, o, nullptr);
    ASSERT_TRUE(run.ok()) << where << ": " << run.status().ToString();
    ASSERT_TRUE(run->history.has_value()) << where;
    ASSERT_TRUE(run->history->ok) << where << ": " << run->history->report.substr(0, 3000);
    ASSERT_TRUE(run->replicas && run->replicas->ok())
        << where << ": " << (run->replicas->problems.empty() ? "" : run->replicas->problems[0]);
    ASSERT_TRUE(run->failover.has_value()) << where;
    EXPECT_EQ(run->failover->faults_not_reached, 0u) << where;
    cn_crashes += run->failover->failures.size();
    txns += run->history->txns;
    committed += run->committed;
    seeds_with_info += run->history->infos > 0;
  }
  std::printf(
      "list-append plans: %lu seeds: %lu CN crashes, %lu transactions (%lu committed), %lu seeds "
      "with info transactions\n",
      static_cast<unsigned long>(r.count), static_cast<unsigned long>(cn_crashes),
      static_cast<unsigned long>(txns), static_cast<unsigned long>(committed),
      static_cast<unsigned long>(seeds_with_info));
  if (r.count >= 10) {
    EXPECT_GT(cn_crashes, r.count / 2) << "schedules were meant to crash CNs";
    EXPECT_GT(seeds_with_info, 0u) << "no crash caught a transaction in flight";
  }
}

TEST(ListAppendFaultTest, RecoveryKeepsPlansAllOrNothing) { RunFaultSeeds(100); }

}  // namespace
}  // namespace pond::bench
