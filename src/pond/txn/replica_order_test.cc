// Replica order: after any run, every replica of every record holds the same newest version.
//
// The defect this pins down: a commit posted the new images to every replica and the release of
// the primary's lock word in one flush. Batches to different MNs are not ordered, so the next
// writer could take the lock, write every replica, and then have the previous writer's late
// backup WRITE put the older image back — a backup that would serve a lost write the day its
// primary fails. The simulator shows it deterministically once batches are jittered; on real
// threads it needs a preemption in the gap, so those runs are long and repeated.
#include <gtest/gtest.h>

#include <string>

#include "pond/cluster.h"
#include "pond/txn/test_cluster.h"

namespace pond {
namespace {

using testing_cluster::AllConfigurations;
using testing_cluster::AsU64;
using testing_cluster::Config;
using testing_cluster::StartLoaded;
using testing_cluster::U64Value;

class ReplicaOrderTest : public ::testing::TestWithParam<std::string> {};

// 2 CNs x 2 workers x 6 clients increment 5 hot keys, in `rounds` short runs with the replicas
// checked after each (`model` given: simulated, one-sided batches jittered across MNs). Short
// runs, because a backup that fell behind is healed by the next commit of its key: only a race on
// a key's last write before a check shows. Returns the first failed check, or the last one.
ReplicaCheck HotKeyRuns(const std::string& protocol, uint64_t seed, int rounds, int txns_per_client,
                        const Testbed* model) {
  constexpr uint64_t kKeys = 5;
  ClusterConfig cfg = Config(protocol);
  cfg.cns = 2;
  cfg.workers_per_cn = 2;
  cfg.seed = seed;
  uint16_t t = 0;
  auto c = StartLoaded(cfg, &t, kKeys, 0, model);
  ReplicaCheck r;
  for (int round = 0; round < rounds; round++) {
    c->Run(6, [&](Session& s) -> Task<void> {
      for (int n = 0; n < txns_per_client; n++) {
        const uint64_t k = s.rng().Uniform(kKeys);
        co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& x) -> Task<Status> {
          x.AddRW(t, k);
          Status e = co_await x.Execute();
          if (!e.ok()) co_return e;
          co_return x.Write(t, k, U64Value(AsU64(*x.Read(t, k)) + 1));
        });
      }
    });
    r = c->CheckReplicas();
    if (!r.ok()) break;
  }
  EXPECT_GT(c->Stats().committed, 100u) << "the hot keys must see many commits";
  return r;
}

void ExpectAgree(const ReplicaCheck& r, const std::string& where) {
  ASSERT_TRUE(r.ok()) << where << ": " << r.disagreements << " disagreements; "
                      << (r.problems.empty() ? std::string() : r.problems[0]);
  EXPECT_GT(r.slots, 0u);
}

// Real threads: the race needs a worker preempted between two batches of one flush, rare per
// transaction; this run did not show it on the code before the fix (the jittered simulator
// below does, on every seed). It stays as the real-thread check of the same property, sized to
// run under ThreadSanitizer too.
TEST_P(ReplicaOrderTest, BackupsNeverKeepAnOlderVersionOnThreads) {
  ExpectAgree(HotKeyRuns(GetParam(), 1, 40, 10, nullptr), GetParam() + " threads");
}

// The simulator with jitter: batches to different MNs overtake each other on purpose, so a
// commit that frees a lock before its backups are written is caught on every seed that races.
// About a third of seeds race, and which ones moves with anything that changes the draws before
// the run (loading in bulk took both of the two seeds this ran from catching motor's): twelve.
TEST_P(ReplicaOrderTest, BackupsNeverKeepAnOlderVersionUnderJitter) {
  Testbed model;
  model.jitter_ns = 2'000;
  for (uint64_t seed = 1; seed <= 12; seed++) {
    ExpectAgree(HotKeyRuns(GetParam(), seed, 100, 3, &model),
                GetParam() + " simulated with jitter, seed " + std::to_string(seed));
  }
}

INSTANTIATE_TEST_SUITE_P(All, ReplicaOrderTest, ::testing::ValuesIn(AllConfigurations()),
                         testing_cluster::ProtocolTestName);

}  // namespace
}  // namespace pond
