#include "pond/bench/fault_seed_common.h"

#include <gtest/gtest.h>

namespace pond::bench {

SeedRange Seeds(uint64_t default_count) {
  return SeedsFromEnv("POND_FAULT_SEED", "POND_FAULT_SEEDS", default_count);
}

std::string Replay(const std::string& protocol, Isolation iso, uint64_t seed,
                   const std::string& workload) {
  return "replay: pond sim " + workload + " --protocol " + protocol + " --isolation " +
         (iso == Isolation::kSnapshot ? "si" : "sr") +
         " --mns 3 --cns 5 --workers 2 --coros 3 --virtual-seconds 0.008 --accounts 20000 "
         "--region-mib 64 --lock-buckets 4096 --vt-cache-entries 4096 --addr-cache-entries "
         "16384 --faults random --seed " +
         std::to_string(seed);
}

void ExpectPlayed(const RunOptions& o, const FailoverStats& f, const std::string& where) {
  EXPECT_EQ(f.faults_not_reached, 0u) << where << "\nfaults after the run's end";
  // A partition or MN crash waits while the cluster would not survive it, and is given up only
  // if that outlasts kMnsOutWaitNsMax (SimMembership::Cut and CrashMn).
  EXPECT_EQ(f.faults_given_up, 0u) << where << "\npartitions or CN or MN crashes given up";
  uint64_t crash_cn = 0, crash_mn = 0, partition_cn = 0, partition_host = 0, crash_coord = 0,
           cut_hosts = 0;
  for (const NodeFault& x : o.node_faults) {
    crash_cn += x.kind == NodeFaultKind::kCrashCn;
    crash_mn += x.kind == NodeFaultKind::kCrashMn;
    partition_cn += x.kind == NodeFaultKind::kPartitionCn;
    partition_host += x.kind == NodeFaultKind::kPartitionHost;
    crash_coord += x.kind == NodeFaultKind::kCrashCoord;
    cut_hosts += x.kind == NodeFaultKind::kCutHosts;
  }
  const FaultsExercised e = CountExercised(f);
  EXPECT_EQ(e.coord_outages, crash_coord) << where;
  for (const FailoverStats::CoordOutage& c : f.coord_outages) {
    EXPECT_GT(c.up_ns, c.down_ns) << where << "\nthe coordination service never came back";
  }
  EXPECT_EQ(e.cn_crashes, crash_cn) << where;
  EXPECT_EQ(e.mn_crashes, crash_mn) << where;
  EXPECT_EQ(e.partitions, partition_cn) << where;
  EXPECT_EQ(e.host_cuts, partition_host) << where;
  EXPECT_EQ(e.hosts_apart, cut_hosts) << where;
  EXPECT_EQ(e.recoveries, e.cn_crashes + e.fenced) << where;
  EXPECT_EQ(e.mid_commit, e.rolled_forward + e.rolled_back) << where;
}

Result<RunResult> RunScheduled(const std::string& spec, uint64_t seed, double seconds,
                               Isolation iso, uint64_t accounts, bool record,
                               const std::string& protocol) {
  RunOptions o = FaultyRun(protocol, iso, seed);
  o.seconds = seconds;
  if (!spec.empty()) POND_RETURN_IF_ERROR(ResolveFaults(&o, spec));
  if (record) {
    o.record = true;
    o.calls_max = kSmallBankHistoryTxnsMax;
  }
  SmallBankParams p;
  p.accounts = accounts;
  SmallBankWorkload w(p);
  return RunWorkload(w, o, nullptr);
}

void ExpectChecksHold(const RunResult& r, const std::string& where) {
  ASSERT_TRUE(r.check.has_value()) << where;
  EXPECT_TRUE(r.check->ok) << where << ": " << r.check->detail;
  ASSERT_TRUE(r.replicas.has_value()) << where;
  EXPECT_TRUE(r.replicas->ok()) << where << ": "
                                << (r.replicas->problems.empty() ? "" : r.replicas->problems[0]);
}

}  // namespace pond::bench
