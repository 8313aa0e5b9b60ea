// Fault schedules aimed at CNs (fault_seed_test.cc says what every faulty run is checked for): a
// crash at each commit step, CNs crashing together, restarting, crashing again while recovered or
// recovering, and the soak seeds that once broke one of these.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "pond/bench/fault_seed_common.h"

namespace pond::bench {
namespace {

// A crash aimed at each commit step happens at that step — not at its arming time — and every
// check holds: the window between each two steps is entered on purpose. At "logged" the
// transaction's log and invisible cells are on every replica but it has no timestamp, so
// recovery must roll it back; at "visible" its timestamp is on some replicas, so recovery must
// roll it forward.
TEST(FaultSeedTest, ACrashAimedAtEachCommitStepHappensThere) {
  const char* steps[] = {"locked", "read", "logged", "timestamped", "visible", "unlocked"};
  uint64_t rolled_forward = 0, rolled_back = 0;
  for (int i = 0; i < 6; i++) {
    const std::string spec = std::string("crash-cn:2@3ms+step=") + steps[i] + ",restart-cn:2@6ms";
    Result<RunResult> run = RunScheduled(spec, 11);
    ASSERT_TRUE(run.ok()) << spec << ": " << run.status().ToString();
    ASSERT_TRUE(run->failover.has_value());
    const FailoverStats& f = *run->failover;
    EXPECT_EQ(f.step_crashes[i + 1], 1u) << spec << ": the crash did not happen at its step";
    EXPECT_EQ(f.step_crashes_unaimed, 0u) << spec;
    ASSERT_EQ(f.failures.size(), 1u) << spec;
    EXPECT_GE(f.failures[0].crash_ns, 3'000'000u) << spec << ": armed at 3 ms";
    EXPECT_LT(f.failures[0].crash_ns, 3'000'000u + kStepCrashWaitNsMax) << spec;
    EXPECT_GT(f.failures[0].restart_ns, 0u) << spec << ": the restart waited behind the crash";
    ExpectChecksHold(*run, spec);
    rolled_forward += f.failures[0].rolled_forward;
    rolled_back += f.failures[0].rolled_back;
  }
  EXPECT_GT(rolled_back, 0u) << "a crash after `logged` leaves a transaction to roll back";
  EXPECT_GT(rolled_forward, 0u) << "a crash after `visible` leaves one to roll forward";
}

// The same under motor and ford (cluster/mn_lock_recovery.h), recorded and judged: at "logged"
// motor's record and backup cells are written and its primaries not — nobody can have used its
// writes, so recovery undoes it; ford's undo record is written (and, at "visible", its backups):
// undone too. Nothing the CN posts after the step leaves it (SimFabric::DieNow), so "logged"
// leaves motor's commit to undo every time, whatever the seed.
TEST(FaultSeedTest, ACrashAimedAtEachStepOfMotorAndFordIsRecovered) {
  struct Case {
    const char* protocol;
    std::vector<std::pair<const char*, int>> steps;  // name, CommitStep
  };
  for (const Case& c : std::vector<Case>{
           {"motor", {{"read", 2}, {"timestamped", 4}, {"logged", 3}, {"unlocked", 6}}},
           {"ford", {{"read", 2}, {"logged", 3}, {"visible", 5}, {"unlocked", 6}}}}) {
    uint64_t rolled_back = 0, gone_freed = 0;
    for (const auto& [step, index] : c.steps) {
      const std::string spec = std::string("crash-cn:2@3ms+step=") + step + ",restart-cn:2@6ms";
      const std::string where = std::string(c.protocol) + " " + spec;
      Result<RunResult> run = RunScheduled(spec, 11, 0.008, Isolation::kSerializable, 2000,
                                           /*record=*/true, c.protocol);
      ASSERT_TRUE(run.ok()) << where << ": " << run.status().ToString();
      ASSERT_TRUE(run->failover.has_value());
      const FailoverStats& f = *run->failover;
      EXPECT_EQ(f.step_crashes[index], 1u) << where << ": the crash did not happen at its step";
      ASSERT_EQ(f.failures.size(), 1u) << where;
      EXPECT_GT(f.failures[0].restart_ns, 0u) << where;
      ExpectChecksHold(*run, where);
      ASSERT_TRUE(run->history.has_value()) << where;
      EXPECT_TRUE(run->history->ok) << where << ": " << run->history->detail;
      rolled_back += f.failures[0].rolled_back;
      gone_freed += run->stats.gone_lock_words_freed;
    }
    EXPECT_GT(rolled_back, 0u) << c.protocol << ": no crash left a commit to undo";
    // A crash at "read" leaves the words of a transaction that wrote no record: recovery finds
    // none of them, and the transactions that meet them free them.
    EXPECT_GT(gone_freed, 0u) << c.protocol << ": no lock word of the dead CN was met and freed";
  }
}

// Two of the five CNs crash at the same instant (Lotus §6 Remarks: concurrent failures are
// recovered in parallel), every check holding.
TEST(FaultSeedTest, TwoCnsCrashAtOnce) {
  Result<RunResult> run = RunScheduled("crash-cn:2@3ms,crash-cn:4@3ms", 7);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(run->failover.has_value());
  ASSERT_EQ(run->failover->failures.size(), 2u);
  for (const auto& f : run->failover->failures) {
    EXPECT_EQ(f.crash_ns, 3'000'000u);
    EXPECT_GT(f.detected_ns, f.crash_ns);
    EXPECT_GE(f.recovered_ns, f.detected_ns);
    EXPECT_GE(f.open_ns, f.recovered_ns);
    EXPECT_GT(f.log_records, 0u) << "CN " << f.cn << " had committed before it crashed";
  }
  EXPECT_EQ(run->failover->epoch, 2u) << "one epoch per failure";
  ExpectChecksHold(*run, "two CNs at once");
  EXPECT_GT(run->replicas->acked, 0u);
  // Throughput came back after the shards reopened: the last full millisecond commits.
  ASSERT_GE(run->committed_per_ms.size(), 8u);
  EXPECT_GT(run->committed_per_ms[6], 0u);
}

// A CN restarts before its lease has even expired: it waits until its failure is recovered and
// its shards are open elsewhere, then comes back empty, runs clients, and takes its shards home.
TEST(FaultSeedTest, ARestartedCnComesBackAfterItsRecoveryAndTakesItsShardsHome) {
  Result<RunResult> run = RunScheduled("crash-cn:2@2ms,restart-cn:2@2500us", 5);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(run->failover.has_value());
  ASSERT_EQ(run->failover->failures.size(), 1u);
  const FailoverStats::Failure& f = run->failover->failures[0];
  EXPECT_GT(f.detected_ns, 2'500'000u) << "the restart came before the lease expired";
  EXPECT_GT(f.restart_ns, f.open_ns) << "it serves only after its recovery finished";
  EXPECT_GT(f.returned_ns, f.restart_ns) << "its shards came home";
  // One epoch for the failure, one to let it back in, and one per holder as each gives its
  // shards back (two here: they drain at different times).
  EXPECT_EQ(run->failover->epoch, 5u);
  ExpectChecksHold(*run, "a restart");
  // Five CNs' clients run again: the last full millisecond commits within 5% of what it does in
  // the same run without faults (four CNs' clients alone commit about a fifth less).
  Result<RunResult> base = RunScheduled("", 5);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ASSERT_EQ(run->committed_per_ms.size(), 9u);
  ASSERT_EQ(base->committed_per_ms.size(), 9u);
  const uint64_t after = run->committed_per_ms[7], calm_ms = base->committed_per_ms[7];
  EXPECT_GT(after * 100, calm_ms * 95) << after << " at the end, " << calm_ms << " without faults";
  EXPECT_LT(after * 100, calm_ms * 105) << after << " at the end, " << calm_ms << " without faults";
}

// CN 0 hosts the timestamp oracle and crashes: the oracle moves to the lowest survivor, which
// starts a new one past every timestamp of the old (SimMembership checks it), clients waiting for a
// timestamp ask it instead, and the recorded history is still strictly serializable (or SI) —
// then the host fails again, and the oracle moves on.
TEST(FaultSeedTest, TheTimestampOracleMovesWhenItsCnFails) {
  for (Isolation iso : {Isolation::kSerializable, Isolation::kSnapshot}) {
    Result<RunResult> run = RunScheduled("crash-cn:0@2ms,restart-cn:0@2ms,crash-cn:1@6ms", 4, 0.010,
                                         iso, 2000, /*record=*/true);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ASSERT_TRUE(run->failover.has_value());
    EXPECT_EQ(run->failover->tso_moves, 2u);
    std::string timeline;
    for (const FailoverStats::Failure& f : run->failover->failures) {
      timeline += " CN " + std::to_string(f.cn) + ": crashed " + std::to_string(f.crash_ns / 1000) +
                  " us, declared " + std::to_string(f.detected_ns / 1000) + ", open " +
                  std::to_string(f.open_ns / 1000) + ", back " +
                  std::to_string(f.restart_ns / 1000) + ";";
    }
    // The scenario's premise: CN 0 serves again before CN 1 dies.
    ASSERT_EQ(run->failover->failures.size(), 2u);
    EXPECT_LT(run->failover->failures[0].restart_ns, 6'000'000u) << timeline;
    EXPECT_EQ(run->failover->tso_host, 0u)
        << "CN 1 died too; CN 0, back, is the lowest alive." << timeline;
    ASSERT_TRUE(run->history.has_value());
    EXPECT_TRUE(run->history->ok) << IsolationName(iso) << ": " << run->history->detail;
    ExpectChecksHold(*run, IsolationName(iso));
    ASSERT_EQ(run->committed_per_ms.size(), 11u);
    EXPECT_GT(run->committed_per_ms[9], 0u) << "the cluster serves again after both moves";
  }
}

// Restarts wait for recoveries, so they come later than scheduled, and a schedule that keeps two
// CNs up on paper may not in fact: here CNs 1-3 are "back" at 1.1 ms but wait for CN 4 to
// recover them, and CN 4's crash at 1.3 ms would leave nobody serving. It waits until a
// restarted CN serves (found by the soak with partitions: seed 323 of LotusSerializable).
TEST(FaultSeedTest, ACrashThatWouldLeaveNoCnServingWaitsForARestart) {
  Result<RunResult> run = RunScheduled(
      "crash-cn:1@1ms,crash-cn:2@1ms,crash-cn:3@1ms,restart-cn:1@1100us,restart-cn:2@1100us,"
      "restart-cn:3@1100us,crash-cn:0@1200us,crash-cn:4@1300us",
      3, 0.012);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(run->failover.has_value());
  // A restart happens once its failure's shards are open elsewhere (its clients start a put and
  // a one-way later, restart_ns).
  uint64_t first_restart = UINT64_MAX, crash4 = 0;
  for (const auto& f : run->failover->failures) {
    if (f.restart_ns != 0) first_restart = std::min(first_restart, f.open_ns);
    if (f.cn == 4) crash4 = f.crash_ns;
  }
  EXPECT_GT(crash4, 1'300'000u) << "CN 4 was the last CN serving: its crash waited";
  EXPECT_GE(crash4, first_restart) << "until a restarted CN served";
  ExpectChecksHold(*run, "a crash that waited");
}

// Found by the 5,000-seed soak (seed 331): CN 0 managed a shard, lost it home to a restarted CN,
// and got it back when that CN crashed again. Between the map naming CN 0 and the shard opening
// there, a snapshot reader on CN 0 used a VT-cache entry left from its first time — stale — and
// saw one write of a transaction and not another (G-single). The cache now serves only shards
// this CN manages, and an opening drops what the cache kept of the shard.
TEST(FaultSeedTest, ASnapshotReaderNeverUsesCacheEntriesOfAShardNotOpenHereYet) {
  for (Isolation iso : {Isolation::kSerializable, Isolation::kSnapshot}) {
    Result<RunResult> run = RunScheduled(
        "crash-cn:0@1192us,crash-cn:3@1472us,restart-cn:3@3173us,restart-cn:0@3548us,"
        "crash-cn:2@4650us,crash-cn:0@4860us,restart-cn:0@6660us",
        331, 0.008, iso, 2000, /*record=*/true);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ASSERT_TRUE(run->history.has_value());
    EXPECT_TRUE(run->history->ok) << IsolationName(iso) << ": " << run->history->detail;
    ExpectChecksHold(*run, IsolationName(iso));
  }
}

// Found by the 5,000-seed soak (seed 463, SR): a crash rolled back a write into the cell that held
// a key's oldest version; a snapshot reader that needed that version found only newer ones and an
// empty cell, and answered that the key did not exist (SmallBank failed: NotFound). A reader
// cannot tell a lost version from a key inserted after its snapshot, so both now abort.
TEST(FaultSeedTest, AVersionARollbackGaveUpIsTooOldNotAbsent) {
  Result<RunResult> run =
      RunScheduled("crash-cn:0@3111us,restart-cn:0@6063us,drop:0.0038,delay:0.0078@49us-158us", 463,
                   0.008, Isolation::kSerializable, 2000, /*record=*/true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(run->history.has_value());
  EXPECT_TRUE(run->history->ok) << run->history->detail;
  ExpectChecksHold(*run, "seed 463");
}

// Found by the 5,000-seed soak (seed 1785, SR: lost update): a holder closed a shard to return it
// to a restarted CN while a transaction of its own held a lock in it; that transaction committed
// during the close without updating the VT cache (the shard was no longer managed there); the
// restarted CN crashed, the holder reopened the shard with the stale entry, and its next writer
// overwrote the newest version. Every opening now drops the shard's cache entries.
TEST(FaultSeedTest, AShardReopenedAfterAFailedReturnDropsItsCacheEntries) {
  Result<RunResult> run = RunScheduled(
      "crash-cn:0@1407us,restart-cn:0@4389us,crash-cn:0@4545us,restart-cn:0@6611us,drop:0.0066,"
      "duplicate:0.0011,delay:0.0025@143us-179us",
      1785, 0.008, Isolation::kSerializable, 2000, /*record=*/true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(run->history.has_value());
  EXPECT_TRUE(run->history->ok) << run->history->detail;
  ExpectChecksHold(*run, "seed 1785");
}

// A CN crashes, restarts, crashes and restarts again. In the second run its second crash is
// scheduled while the first restart still waits for the recovery: the crash comes after that
// restart, in its order, once the new incarnation is let in — before its shards came home.
TEST(FaultSeedTest, ACnMayCrashAndRestartAgainAndAgain) {
  for (const bool queued : {false, true}) {
    const std::string spec = queued ? "crash-cn:3@1ms,restart-cn:3@1500us,crash-cn:3@2ms,"
                                      "restart-cn:3@2500us"
                                    : "crash-cn:3@1ms,restart-cn:3@1500us,crash-cn:3@6ms,"
                                      "restart-cn:3@6500us";
    Result<RunResult> run = RunScheduled(spec, 2, 0.012);
    ASSERT_TRUE(run.ok()) << spec << ": " << run.status().ToString();
    ASSERT_TRUE(run->failover.has_value());
    const auto& failures = run->failover->failures;
    ASSERT_EQ(failures.size(), 2u) << spec;
    if (queued) {
      EXPECT_GE(failures[1].crash_ns, failures[0].restart_ns) << spec << ": the crash waited";
      EXPECT_EQ(failures[0].returned_ns, 0u) << spec << ": it died before its shards came home";
    } else {
      EXPECT_GT(failures[0].restart_ns, failures[0].open_ns) << spec;
      EXPECT_GT(failures[0].returned_ns, failures[0].restart_ns) << spec;
      EXPECT_GT(failures[1].crash_ns, failures[0].returned_ns) << spec;
    }
    EXPECT_GT(failures[1].restart_ns, failures[1].open_ns) << spec;
    EXPECT_GT(failures[1].returned_ns, failures[1].restart_ns) << spec;
    EXPECT_EQ(run->failover->epoch, 9u) << spec << ": four per crash and restart (above)";
    EXPECT_EQ(run->failover->faults_not_reached, 0u) << spec;
    ExpectChecksHold(*run, spec);
  }
}

// A CN crashes while the survivors are recovering another (it is declared 2.1-2.2 ms after its
// crash, and its recovery takes half a millisecond more): whatever the second CN owed the first
// failure — a log to recover, its locks to release, its drain — is taken over by a survivor or
// no longer waited for.
TEST(FaultSeedTest, ACnCrashingWhileRecoveringAnotherIsRecoveredToo) {
  for (const char* spec : {"crash-cn:1@3ms,crash-cn:3@5300us", "crash-cn:2@3ms,crash-cn:1@5350us",
                           "crash-cn:3@3ms,crash-cn:4@5250us,crash-cn:2@5500us"}) {
    Result<RunResult> run = RunScheduled(spec, 3, 0.012);
    ASSERT_TRUE(run.ok()) << spec << ": " << run.status().ToString();
    ASSERT_TRUE(run->failover.has_value());
    const auto& failures = run->failover->failures;
    ASSERT_GE(failures.size(), 2u) << spec;
    // The second crash fell inside the first one's recovery, once it was declared.
    EXPECT_GT(failures[1].crash_ns, failures[0].detected_ns) << spec;
    EXPECT_LT(failures[1].crash_ns, failures[0].open_ns) << spec;
    for (const auto& f : failures) {
      EXPECT_GT(f.open_ns, f.detected_ns) << spec << ": CN " << f.cn << " never reopened";
    }
    ExpectChecksHold(*run, spec);
    EXPECT_GT(
        run->committed_per_ms.back() + run->committed_per_ms[run->committed_per_ms.size() - 2], 0u)
        << spec << ": the survivors serve again";
  }
}

}  // namespace
}  // namespace pond::bench
