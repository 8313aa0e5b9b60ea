// Fault schedules aimed at MNs and at hosts' links (fault_seed_test.cc says what every faulty run
// is checked for): MN crashes and restarts, lock words on MNs moving to a backup, CNs and hosts
// cut off, cut apart and healed, and the soak seeds that once broke one of these.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "pond/bench/fault_seed_common.h"
#include "pond/node/sim_membership.h"

namespace pond::bench {
namespace {

// Motor, FORD and the ablation step +log-visible (lock words on MNs) through MN crashes: a key's
// words move to a backup once the crashed MN is down and every transaction that could
// hold one there has ended (store::Placement::LockReplica). Each seed crashes one MN, or two
// (R = 3 over 3 MNs: the last one then holds every key's words), at drawn times; every check
// holds, the history is judged, and commits come back: the run's last full millisecond commits
// at least a third of what its first one did (keys whose words were stuck would abort nearly
// every transaction, each touching up to four keys).
TEST(FaultSeedTest, LockWordsOnMnsMoveToABackupWhenTheirMnCrashes) {
  const SeedRange seeds = Seeds(4);
  uint64_t unreachable = 0, runs = 0;
  for (const char* protocol : {"motor", "ford", "+log-visible"}) {
    for (uint64_t seed = seeds.first; seed < seeds.first + seeds.count; seed++) {
      Rng rng(seed);
      const uint64_t first = rng.Uniform(3), at = 1 + rng.Uniform(3);
      std::string spec = "crash-mn:" + std::to_string(first) + "@" + std::to_string(at) + "ms";
      if (rng.Uniform(2) == 1) {
        spec += ",crash-mn:" + std::to_string((first + 1 + rng.Uniform(2)) % 3) + "@" +
                std::to_string(at + 1 + rng.Uniform(2)) + "ms";
      }
      const std::string where =
          std::string(protocol) + " seed " + std::to_string(seed) + " " + spec;
      Result<RunResult> run = RunScheduled(spec, seed, 0.016, Isolation::kSerializable, 2000,
                                           /*record=*/true, protocol);
      ASSERT_TRUE(run.ok()) << where << ": " << run.status().ToString();
      ASSERT_TRUE(run->failover.has_value()) << where;
      for (const FailoverStats::MnFailure& m : run->failover->mn_failures) {
        EXPECT_GT(m.down_ns, m.crash_ns) << where << ": MN " << m.mn << " was never declared down";
      }
      ExpectChecksHold(*run, where);
      ASSERT_TRUE(run->history.has_value()) << where;
      EXPECT_TRUE(run->history->ok) << where << ": " << run->history->detail;
      const std::vector<uint64_t>& per_ms = run->committed_per_ms;
      // The last crash is at 6 ms at the latest, and declared a few ms later.
      ASSERT_GE(per_ms.size(), 16u) << where;
      const uint64_t before = per_ms[0], after = per_ms[14];
      EXPECT_GT(after * 3, before) << where << ": commits did not come back";
      unreachable += run->stats.aborts.mn_unreachable;
      runs++;
    }
  }
  EXPECT_GT(unreachable, runs) << "transactions were meant to meet the crashed MNs";
}

// A crashed MN restarted under motor, +log-visible and ford: the copy onto it takes each live
// key's lock word where the key's words are (node/rereplication.cc; ford's single-version slots
// go over whole, value inside), the words come back to it once it is read
// (store::Placement::LockReplica refuses from its freeze until then), and every check holds with
// the history judged — the restarted MN's replicas compared byte for byte.
TEST(FaultSeedTest, MotorAndFordCopyARestartedMnUnderItsLockWords) {
  const SeedRange seeds = Seeds(3);
  uint64_t copied = 0;
  for (const char* protocol : {"motor", "+log-visible", "ford"}) {
    for (uint64_t seed = seeds.first; seed < seeds.first + seeds.count; seed++) {
      Rng rng(seed);
      const uint64_t mn = rng.Uniform(3), at = 1 + rng.Uniform(3);
      const std::string spec = "crash-mn:" + std::to_string(mn) + "@" + std::to_string(at) +
                               "ms,restart-mn:" + std::to_string(mn) + "@" +
                               std::to_string(at + rng.Uniform(3)) + "ms";
      const std::string where =
          std::string(protocol) + " seed " + std::to_string(seed) + " " + spec;
      Result<RunResult> run = RunScheduled(spec, seed, 0.010, Isolation::kSerializable, 2000,
                                           /*record=*/true, protocol);
      ASSERT_TRUE(run.ok()) << where << ": " << run.status().ToString();
      ASSERT_TRUE(run->failover.has_value()) << where;
      ASSERT_EQ(run->failover->mn_failures.size(), 1u) << where;
      const FailoverStats::MnFailure& m = run->failover->mn_failures[0];
      EXPECT_GT(m.readable_ns, m.restart_ns) << where << ": the restarted MN was never read";
      EXPECT_GT(m.slots_copied, 0u) << where;
      copied += m.slots_copied;
      ExpectChecksHold(*run, where);
      ASSERT_TRUE(run->history.has_value()) << where;
      EXPECT_TRUE(run->history->ok) << where << ": " << run->history->detail;
      ASSERT_GE(run->committed_per_ms.size(), 2u) << where;
      EXPECT_GT(run->committed_per_ms[run->committed_per_ms.size() - 2], 0u)
          << where << ": nothing committed once the MN was back";
    }
  }
  EXPECT_GT(copied, 0u);
}

// Partitions (docs/recovery.md "Partitions and fencing"). The CN hosting the timestamp oracle is
// cut off: nobody counts its lease for it (its beats still reach the memory pool), so it learns
// that it is cut off from the others' reports in the lease pages — every other CN has waited on
// it for a lease and heard nothing — and fences itself; only then does its beat stop and the CM
// declare it. Healed, it restarts and rejoins. Every check holds and the history is judged.
TEST(FaultSeedTest, ACnCutOffFencesItselfOnTheOthersReportsBeforeItIsDeclared) {
  for (Isolation iso : {Isolation::kSerializable, Isolation::kSnapshot}) {
    Result<RunResult> run =
        RunScheduled("partition-cn:0@2ms,heal-cn:0@6ms", 3, 0.010, iso, 2000, /*record=*/true);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ASSERT_TRUE(run->failover.has_value());
    const FailoverStats& f = *run->failover;
    ASSERT_EQ(f.partitions.size(), 1u);
    const FailoverStats::Partition& p = f.partitions[0];
    EXPECT_GT(p.fenced_ns, p.cut_ns);
    // A lease of silence, then a period or two for the reports to be written and read.
    EXPECT_LE(p.fenced_ns - p.cut_ns, 2 * node::kSimLeaseNs) << "it fences soon after a lease";
    EXPECT_EQ(p.healed_ns, 6'000'000u);
    ASSERT_EQ(f.failures.size(), 1u);
    const FailoverStats::Failure& x = f.failures[0];
    EXPECT_TRUE(x.fenced);
    EXPECT_EQ(x.crash_ns, p.fenced_ns);
    EXPECT_GT(x.detected_ns, x.crash_ns) << "the CM declared it only after it had stopped";
    EXPECT_GT(x.restart_ns, p.healed_ns) << "healed, it rejoined as a new incarnation";
    EXPECT_GT(x.returned_ns, x.restart_ns) << "its shards came home";
    EXPECT_EQ(f.tso_moves, 1u);
    ASSERT_TRUE(run->history.has_value());
    EXPECT_TRUE(run->history->ok) << IsolationName(iso) << ": " << run->history->detail;
    ExpectChecksHold(*run, IsolationName(iso));
    ASSERT_EQ(run->committed_per_ms.size(), 11u);
    EXPECT_GT(run->committed_per_ms[9], 0u) << "the cluster serves again";
  }
}

// A CN healed before anyone has waited on it for a lease goes on: no report marks it, no epoch,
// no recovery; the requests lost both ways were sent again.
TEST(FaultSeedTest, ACnHealedWithinALeaseGoesOn) {
  Result<RunResult> run = RunScheduled("partition-cn:2@2ms,heal-cn:2@2500us", 3);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const FailoverStats& f = *run->failover;
  ASSERT_EQ(f.partitions.size(), 1u);
  EXPECT_EQ(f.partitions[0].fenced_ns, 0u);
  EXPECT_TRUE(f.failures.empty());
  EXPECT_GT(f.cut_packets, 0u);
  ExpectChecksHold(*run, "a short partition");
  EXPECT_GT(run->committed_per_ms[7], 0u);
}

// A host's link goes down (docs/recovery.md "Partitions and fencing"): CN 2 and MN 2 are cut off
// from everyone else together, CN 2 still reaching MN 2. MN 2 runs on, its memory kept, but
// nobody else reads its beat, so the CM declares it. CN 2's beats land on MN 2 alone, which is
// no LeaseQuorum and which no CM reads once it is declared, and it cannot read the
// configuration: by the lease rule it fences before anyone declares it (the simulator checks it
// at every configuration put, and this test on the timings). Healed, CN 2 restarts and MN 2 comes
// back as restart-mn brings one, blank, and is read again once it holds its replicas. The other
// CNs commit through the cut; every check holds and the history is judged.
TEST(FaultSeedTest, AHostCutOffFencesItsCnAndItsMnComesBackAsARestart) {
  for (Isolation iso : {Isolation::kSerializable, Isolation::kSnapshot}) {
    SCOPED_TRACE(IsolationName(iso));
    Result<RunResult> run =
        RunScheduled("partition-host:2@2ms,heal-host:2@10ms", 3, 0.018, iso, 2000, /*record=*/true);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ASSERT_TRUE(run->failover.has_value());
    const FailoverStats& f = *run->failover;
    EXPECT_EQ(f.faults_not_reached, 0u);
    ASSERT_EQ(f.partitions.size(), 1u);
    const FailoverStats::Partition& p = f.partitions[0];
    EXPECT_TRUE(p.host);
    EXPECT_EQ(p.cut_ns, 2'000'000u);
    EXPECT_EQ(p.healed_ns, 10'000'000u);
    ASSERT_GT(p.fenced_ns, p.cut_ns) << "CN 2 was meant to fence itself";
    // The lease rule: 0.9 of a lease after its last fresh read of the configuration.
    EXPECT_LE(p.fenced_ns - p.cut_ns, node::kSimLeaseNs) << "it fences within a lease";
    ASSERT_EQ(f.failures.size(), 1u);
    const FailoverStats::Failure& x = f.failures[0];
    EXPECT_EQ(x.cn, 2);
    EXPECT_TRUE(x.fenced);
    EXPECT_EQ(x.crash_ns, p.fenced_ns);
    EXPECT_GT(x.detected_ns, x.crash_ns) << "the CM declared CN 2 only after it had stopped";
    EXPECT_GT(x.open_ns, x.detected_ns) << "its failure was recovered";
    EXPECT_GT(x.restart_ns, p.healed_ns) << "healed, it rejoined as a new incarnation";
    ASSERT_EQ(f.mn_failures.size(), 1u);
    const FailoverStats::MnFailure& m = f.mn_failures[0];
    EXPECT_EQ(m.mn, 2);
    EXPECT_TRUE(m.cut);
    EXPECT_EQ(m.crash_ns, p.cut_ns);
    EXPECT_GT(m.detected_ns, m.crash_ns) << "MN 2 was meant to be declared";
    EXPECT_LT(m.detected_ns, p.healed_ns);
    EXPECT_GT(m.down_ns, m.detected_ns);
    EXPECT_GE(m.restart_ns, p.healed_ns) << "it came back as a restarted MN, after the heal";
    EXPECT_GT(m.readable_ns, m.restart_ns) << "and was read again, R copies restored";
    EXPECT_GT(m.slots_copied, 0u);
    const FaultsExercised e = CountExercised(f);
    EXPECT_EQ(e.host_cuts, 1u);
    EXPECT_EQ(e.mns_cut_lost, 1u);
    EXPECT_EQ(e.mn_crashes, 0u);
    EXPECT_EQ(e.partitions, 0u);
    ASSERT_TRUE(run->history.has_value());
    EXPECT_TRUE(run->history->ok) << run->history->detail;
    ExpectChecksHold(*run, IsolationName(iso));
    // The other CNs commit through the cut (read-only transactions; read-write ones wait for
    // MN 2's declaration, as at a crash), and everyone after the heal, MN 2 read again among the
    // replicas.
    const std::vector<uint64_t>& per_ms = run->committed_per_ms;
    ASSERT_GE(per_ms.size(), 16u);
    const auto ms_of = [](uint64_t ns) { return static_cast<size_t>(ns / 1'000'000); };
    for (size_t ms = ms_of(p.fenced_ns) + 1; ms < ms_of(p.healed_ns); ms++) {
      EXPECT_GT(per_ms[ms], 0u) << "ms " << ms << " of the cut, after CN 2 fenced: "
                                << ::testing::PrintToString(per_ms);
    }
    for (size_t ms = ms_of(m.readable_ns) + 1; ms + 1 < per_ms.size(); ms++) {
      EXPECT_GT(per_ms[ms], 0u) << "ms " << ms << " after MN 2 was read again";
    }
  }
}

// Two hosts cut apart, each still reaching the rest (docs/recovery.md "An MN one CN cannot
// reach"): CN 1 cannot reach MN 2 nor CN 2 MN 1, while CNs 0, 3 and 4 reach every MN. No beat
// stops, and the CM (CN 0) reads every MN, so nobody would ever be declared: CN 1's commits to
// MN 2 would wait until the heal. The reports show each CN the odd one out for its missing MN:
// both fence, are declared after, and come back at the heal; no MN is taken out; the other CNs
// commit through the cut, and every check and the history hold.
TEST(FaultSeedTest, TwoHostsCutApartFenceTheirCnsAndTheRestCommitsThrough) {
  for (Isolation iso : {Isolation::kSerializable, Isolation::kSnapshot}) {
    SCOPED_TRACE(IsolationName(iso));
    Result<RunResult> run =
        RunScheduled("cut-hosts:1-2@2ms,heal-hosts:1-2@10ms", 3, 0.016, iso, 2000, /*record=*/true);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    const FailoverStats& f = *run->failover;
    EXPECT_EQ(f.faults_not_reached, 0u);
    EXPECT_EQ(f.faults_given_up, 0u);
    ASSERT_EQ(f.partitions.size(), 2u);
    uint64_t last_fenced = 0;
    for (const FailoverStats::Partition& p : f.partitions) {
      EXPECT_EQ(p.apart_from, 3 - p.cn);
      EXPECT_EQ(p.cut_ns, 2'000'000u);
      EXPECT_EQ(p.healed_ns, 10'000'000u);
      ASSERT_GT(p.fenced_ns, p.cut_ns) << "CN " << p.cn << " was meant to fence itself";
      // A lease before its beats to the other MN count as unanswered, half a lease of reports,
      // and a period or two for them to be written and read.
      EXPECT_LE(p.fenced_ns - p.cut_ns, 2 * node::kSimLeaseNs) << "CN " << p.cn;
      last_fenced = std::max(last_fenced, p.fenced_ns);
    }
    ASSERT_EQ(f.failures.size(), 2u);
    for (const FailoverStats::Failure& x : f.failures) {
      EXPECT_TRUE(x.fenced) << "CN " << x.cn;
      EXPECT_GT(x.detected_ns, x.crash_ns) << "CN " << x.cn << " was declared before it fenced";
      EXPECT_GT(x.open_ns, x.detected_ns);
      EXPECT_GT(x.restart_ns, 10'000'000u) << "CN " << x.cn << " came back after the heal";
    }
    EXPECT_TRUE(f.mn_failures.empty()) << "an MN that most CNs reach was taken out";
    EXPECT_EQ(CountExercised(f).hosts_apart, 1u);
    ASSERT_TRUE(run->history.has_value());
    EXPECT_TRUE(run->history->ok) << run->history->detail;
    ExpectChecksHold(*run, IsolationName(iso));
    const std::vector<uint64_t>& per_ms = run->committed_per_ms;
    ASSERT_GE(per_ms.size(), 16u);
    for (size_t ms = last_fenced / 1'000'000 + 2; ms < per_ms.size(); ms++) {
      EXPECT_GT(per_ms[ms], 0u) << "ms " << ms << ": " << ::testing::PrintToString(per_ms);
    }
  }
}

// A host healed before its MN is declared, or while that declaration is on its way: a commit
// whose round MN 2 did not answer posts it again until MN 2 answers or is declared
// (TxnState::CommitFlush), so nothing waits for a declaration that never comes. Healed before
// the CM gives MN 2 up, it simply goes on; declared after all, it comes back as a restarted MN.
// Either way every CN commits to the end of the run, and every check and the history hold —
// under motor and ford too, whose rounds free lock words and are posted again only as far as
// their releases did not land, and whose words on MN 2 a lost acknowledgement or release left
// taken are freed again (docs/recovery.md "Host cuts under lock words on MNs"): the replica
// check finds no word still taken at the end.
TEST(FaultSeedTest, AHostHealedBeforeItsMnIsDeclaredHoldsNoCommitUp) {
  for (const std::string protocol : {"lotus", "motor", "ford"}) {
    for (const char* heal : {"2500us", "3500us", "4500us", "6ms",
                             "2500us,crash-coord@2100us,"
                             "restart-coord@3ms"}) {
      const std::string spec = std::string("partition-host:2@2ms,heal-host:2@") + heal;
      SCOPED_TRACE(protocol + " " + spec);
      // Ford commits its history's calls (kSmallBankHistoryTxnsMax) in less than 14 ms: its
      // histories under host cuts are judged by FordHistoriesUnderRandomFaultsSerializable.
      const bool record = protocol != "ford";
      Result<RunResult> run =
          RunScheduled(spec, 3, 0.014, Isolation::kSerializable, 2000, record, protocol);
      ASSERT_TRUE(run.ok()) << run.status().ToString();
      const FailoverStats& f = *run->failover;
      EXPECT_EQ(f.faults_given_up, 0u);
      ASSERT_EQ(f.partitions.size(), 1u);
      EXPECT_TRUE(f.partitions[0].host);
      if (record) {
        ASSERT_TRUE(run->history.has_value());
        EXPECT_TRUE(run->history->ok) << run->history->detail;
      }
      ExpectChecksHold(*run, spec);
      EXPECT_GT(run->stats.commit_rounds_posted_again, 0u) << "MN 2 went unanswered, not declared";
      // Commits flow in each of the last 4 ms at a quarter of the rate before the cut at least
      // (the recovery of a fenced CN 2 and the rejoin of a declared MN 2 end well before): a
      // commit stuck on MN 2 would hold its client and its locks to the end.
      const std::vector<uint64_t>& per_ms = run->committed_per_ms;
      ASSERT_GE(per_ms.size(), 14u);
      const uint64_t before = (per_ms[0] + per_ms[1]) / 2;
      for (size_t ms = 10; ms < 14; ms++) {
        EXPECT_GE(per_ms[ms] * 4, before)
            << "ms " << ms << ": " << ::testing::PrintToString(per_ms);
      }
    }
    // The shortest cut: nobody is declared, and CN 2 does not fence.
    Result<RunResult> run = RunScheduled("partition-host:2@2ms,heal-host:2@2500us", 3, 0.01,
                                         Isolation::kSerializable, 20000, false, protocol);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_TRUE(run->failover->failures.empty()) << protocol;
    EXPECT_TRUE(run->failover->mn_failures.empty()) << protocol;
    EXPECT_EQ(run->failover->partitions[0].fenced_ns, 0u) << protocol;
    ExpectChecksHold(*run, protocol + " shortest cut");
  }
}

// Soak seed 533 (SmallBank, SR), once host cuts healed early: CN 2, the CM by then, was on host 2,
// cut for 1.3 ms — less than the lease, so it did not fence — and could read no MN but its own
// meanwhile. Healed, it renewed at once and declared MN 0, running all along, on the beat it had
// last read before the cut, before its first read of MN 0 got through (the simulator's check
// stopped the run). An MN's beat now counts as unmoved only from when the CM renewed after such
// a gap (CnMembership::MnExpired).
TEST(FaultSeedTest, ACmHealedFromAShortCutDeclaresNoMnItCouldNotRead) {
  const char* spec =
      "crash-cn:1@1538us+step=unlocked,crash-cn:0@1960us,restart-cn:0@3120us,"
      "crash-cn:0@3257us+step=timestamped,restart-cn:1@3271us,partition-host:2@4085us,"
      "heal-host:2@5401us,restart-cn:0@6178us,drop:0.0053,delay:0.0027@178us-185us,jitter:4us";
  Result<RunResult> run = RunScheduled(spec, 533);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectChecksHold(*run, spec);
  const FailoverStats& f = *run->failover;
  EXPECT_TRUE(f.mn_failures.empty()) << "an MN was declared";
  ASSERT_EQ(f.partitions.size(), 1u);
  EXPECT_EQ(f.partitions[0].fenced_ns, 0u) << "cut for less than the lease";
}

// An MN crashes: its lease expires, every CN reads the replicas left and writes skip it; the
// recorded history passes the isolation checker under SR and SI, and so does a run where a CN
// crashes while the MN is down.
TEST(FaultSeedTest, AnMnCrashKeepsEveryCommitAndIsolation) {
  struct Case {
    Isolation iso;
    const char* spec;
  };
  for (const Case& c : {Case{Isolation::kSerializable, "crash-mn:1@3ms"},
                        Case{Isolation::kSnapshot, "crash-mn:0@2500us"},
                        Case{Isolation::kSerializable, "crash-mn:2@3ms,crash-cn:3@3500us"}}) {
    // Few accounts: many conflicts for the checker to judge.
    Result<RunResult> run = RunScheduled(c.spec, 5, 0.008, c.iso, 2000, /*record=*/true);
    ASSERT_TRUE(run.ok()) << c.spec << ": " << run.status().ToString();
    ASSERT_TRUE(run->failover.has_value());
    ASSERT_EQ(run->failover->mn_failures.size(), 1u);
    const auto& m = run->failover->mn_failures[0];
    EXPECT_GT(m.detected_ns, m.crash_ns);
    EXPECT_GT(m.down_ns, m.detected_ns);
    EXPECT_GT(run->stats.aborts.mn_unreachable, 0u) << c.spec << ": readers met the dead MN";
    ExpectChecksHold(*run, c.spec);
    EXPECT_GT(run->replicas->acked, 0u);
    // Commits go on once the MN is declared down (the last full millisecond commits).
    ASSERT_GE(run->committed_per_ms.size(), 8u);
    EXPECT_GT(run->committed_per_ms[6], 0u) << c.spec;
    ASSERT_TRUE(run->history.has_value()) << c.spec;
    EXPECT_TRUE(run->history->ok) << c.spec << ": " << run->history->detail;
    EXPECT_GT(run->history->txns, 1000u);
  }
}

// A crashed MN restarts blank: it takes writes at once, its replicas are copied to it under the
// keys' locks while transactions go on, its cursors are brought into step, and it is read again.
// The replica check then compares it byte for byte with the others, and the isolation checker
// judges the history — also when a CN dies mid-copy (its units are copied again elsewhere),
// when another MN dies mid-copy (the copy reads from the replica left), and when the restarted
// MN dies again before it is readable (the rejoin is abandoned).
TEST(FaultSeedTest, AnMnRestartGetsItsReplicasBackWhileTransactionsGoOn) {
  struct Case {
    Isolation iso;
    const char* spec;
    bool readable;  // the restarted MN is read again by the end
  };
  for (const Case& c :
       {Case{Isolation::kSerializable, "crash-mn:1@2ms,restart-mn:1@3ms", true},
        Case{Isolation::kSnapshot, "crash-mn:0@1500us,restart-mn:0@4ms", true},
        Case{Isolation::kSerializable,
             "crash-mn:2@1ms,restart-mn:2@2ms,crash-cn:3@4ms,crash-cn:1@6ms", true},
        Case{Isolation::kSerializable, "crash-mn:1@1ms,restart-mn:1@2ms,crash-mn:0@5ms", true},
        // A copier's CN cut off mid-copy: healed within its lease (its report waits for the
        // heal), or past it (it fences itself; its units are copied again elsewhere); and CN 0,
        // the lowest (which syncs the cursors), cut off for good near the copy's end.
        Case{Isolation::kSerializable,
             "crash-mn:1@2ms,restart-mn:1@3ms,partition-cn:2@5ms,heal-cn:2@5500us", true},
        Case{Isolation::kSnapshot,
             "crash-mn:1@2ms,restart-mn:1@3ms,partition-cn:3@5ms,heal-cn:3@7900us", true},
        Case{Isolation::kSerializable, "crash-mn:1@1ms,restart-mn:1@1ms,partition-cn:0@7900us",
             true},
        Case{Isolation::kSerializable, "crash-mn:1@1ms,restart-mn:1@2ms,crash-mn:1@5ms", false}}) {
    Result<RunResult> run = RunScheduled(c.spec, 5, 0.008, c.iso, 2000, /*record=*/true);
    ASSERT_TRUE(run.ok()) << c.spec << ": " << run.status().ToString();
    ASSERT_TRUE(run->failover.has_value());
    const auto& m = run->failover->mn_failures[0];
    EXPECT_GT(m.restart_ns, m.down_ns) << c.spec << ": restarts only once it is declared down";
    if (c.readable) {
      EXPECT_GT(m.copy_start_ns, m.restart_ns) << c.spec;
      EXPECT_GT(m.copied_ns, m.copy_start_ns) << c.spec;
      EXPECT_GT(m.readable_ns, m.copied_ns) << c.spec;
      // 3 MNs, R = 3: every MN holds a replica of every key (2000 accounts, 2 tables). When a
      // copier's CN or an MN fails mid-copy, its share is dealt again and copied again.
      const std::string spec = c.spec;
      if (std::count(spec.begin(), spec.end(), ',') == 1) {  // the MN's crash and restart alone
        EXPECT_EQ(m.slots_copied, 4000u) << c.spec;
      } else {
        EXPECT_GE(m.slots_copied, 4000u) << c.spec;
      }
    } else {
      EXPECT_EQ(m.readable_ns, 0u) << c.spec;
      ASSERT_EQ(run->failover->mn_failures.size(), 2u) << c.spec;
    }
    ExpectChecksHold(*run, c.spec);
    ASSERT_TRUE(run->history.has_value()) << c.spec;
    EXPECT_TRUE(run->history->ok) << c.spec << ": " << run->history->detail;
    EXPECT_GT(run->history->txns, 1000u);
  }
  // A crash that would leave no full copy of a group (MN 1 rejoining, MN 0 down, and now MN 2)
  // waits until MN 1 is readable; then MN 1 alone holds every group, and nothing is lost.
  const char* spec = "crash-mn:1@1ms,restart-mn:1@2ms,crash-mn:0@3ms,crash-mn:2@4ms";
  Result<RunResult> run = RunScheduled(spec, 5, 0.008, Isolation::kSerializable, 2000, true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const auto& m = run->failover->mn_failures;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[2].mn, 2);
  EXPECT_GT(m[0].readable_ns, 0u);
  EXPECT_GE(m[2].crash_ns, m[0].readable_ns) << "MN 2's crash waited for MN 1's rejoin";
  ExpectChecksHold(*run, spec);
  EXPECT_TRUE(run->history->ok) << run->history->detail;
}

// Readers of a restarted MN's keys move to it when it turns readable. A commit between its two
// write-visible rounds at that instant would, had the switch not waited for it, send its second
// round to the restarted MN only — the replica read so far never getting the timestamp. These
// two seeds caught that; the replica check would fail them.
TEST(FaultSeedTest, AnMnTurnsReadableOnlyWhenNoCommitIsBetweenItsVisibleRounds) {
  for (uint64_t seed : {2, 11}) {
    RunOptions o = FaultyRun("lotus", Isolation::kSerializable, seed);
    o.coros = 6;
    o.seconds = 0.02;
    ASSERT_TRUE(ResolveFaults(&o, "crash-mn:1@1ms,restart-mn:1@2ms").ok());
    SmallBankParams p;
    p.accounts = 2000;
    SmallBankWorkload w(p);
    Result<RunResult> run = RunWorkload(w, o, nullptr);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_GT(run->failover->mn_failures[0].readable_ns, 0u);
    ExpectChecksHold(*run, "seed " + std::to_string(seed));
  }
}

// Soak seeds 3747 and 4249 (SmallBank, SR): CN 0, the CM, healed from a cut while the other CNs
// in the configuration crashed one after another, and fenced itself on the reports they had made
// just before — that they could not hear it — since a crashed CN takes part in the judgement for
// half a lease after its last beat. Nobody alive was left in the configuration, the restarted CNs
// waited for a CM to let them back in, and the run never settled (kSettleLimitNs). A CN now fences
// only on the word of CNs still beating (CnMembership::Links). The schedules those seeds drew
// then, before host cuts were drawn too, are replayed as written.
TEST(FaultSeedTest, ACnDoesNotFenceOnTheWordOfCnsThatCrashedSinceTheySaidIt) {
  const std::pair<uint64_t, const char*> runs[] = {
      {3747,
       "crash-cn:4@1132us,partition-cn:0@1546us,crash-mn:0@1590us,crash-cn:1@2887us+step=visible,"
       "restart-cn:4@3916us,crash-cn:2@3919us,restart-mn:0@4195us,heal-cn:0@4688us,"
       "restart-cn:1@5451us,restart-cn:2@5481us"},
      {4249,
       "crash-cn:2@1126us+step=timestamped,partition-cn:0@1382us,crash-cn:4@2315us,"
       "heal-cn:0@3761us,restart-cn:2@3880us,crash-cn:3@4010us,crash-cn:1@4111us,"
       "restart-cn:4@5163us,restart-cn:1@5354us,delay:0.002@127us-165us"}};
  for (const auto& [seed, spec] : runs) {
    SCOPED_TRACE("seed " + std::to_string(seed) + ", faults " + spec);
    Result<RunResult> run = RunScheduled(spec, seed);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectChecksHold(*run, spec);
    size_t returned = 0;
    for (const FailoverStats::Failure& f : run->failover->failures) {
      returned += f.returned_ns != 0;
    }
    EXPECT_GE(returned, 3u) << "its three restarted CNs took their shards home";
  }
}

}  // namespace
}  // namespace pond::bench
