// Every protocol and every ablation step through the same tests: known answers on real threads,
// bank totals on real threads and in the simulator, and the mechanism the comparison is about —
// whether transactions send atomics to memory nodes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/txn/test_cluster.h"

namespace pond {
namespace {

using testing_cluster::AllConfigurations;
using testing_cluster::AsU64;
using testing_cluster::Config;
using testing_cluster::RunOn;
using testing_cluster::StartLoaded;
using testing_cluster::U64Value;

class ProtocolTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ProtocolTest, KnownAnswers) {
  uint16_t t = 0;
  auto c = StartLoaded(Config(GetParam()), &t, 100, 0);
  RunOn(*c, 1, [&](Session& s) -> Task<void> {
    Txn w = s.Begin(TxnKind::kReadWrite);
    w.AddRW(t, 7);
    w.AddRO(t, 8);
    EXPECT_TRUE((co_await w.Execute()).ok());
    EXPECT_EQ(AsU64(*w.Read(t, 7)), 1007u);
    EXPECT_EQ(AsU64(*w.Read(t, 8)), 1008u);
    EXPECT_TRUE(w.Write(t, 7, U64Value(77)).ok());
    EXPECT_TRUE((co_await w.Commit()).ok());
  });
  RunOn(*c, 2, [&](Session& s) -> Task<void> {
    Txn r = s.Begin(TxnKind::kReadOnly);
    r.AddRO(t, 7);
    r.AddRO(t, 99);
    r.AddRO(t, 500);
    EXPECT_TRUE((co_await r.Execute()).ok());
    EXPECT_EQ(AsU64(*r.Read(t, 7)), 77u) << "a later transaction sees the committed write";
    EXPECT_EQ(AsU64(*r.Read(t, 99)), 1099u);
    EXPECT_EQ(r.Read(t, 500).status().code(), Code::kNotFound);
    EXPECT_TRUE((co_await r.Commit()).ok());
  });
  // Insert, duplicate insert, delete, reinsert.
  RunOn(*c, 0, [&](Session& s) -> Task<void> {
    Txn a = s.Begin(TxnKind::kReadWrite);
    a.Insert(t, 500, U64Value(5));
    EXPECT_TRUE((co_await a.Execute()).ok());
    EXPECT_TRUE((co_await a.Commit()).ok());
    Txn dup = s.Begin(TxnKind::kReadWrite);
    dup.Insert(t, 500, U64Value(6));
    EXPECT_EQ((co_await dup.Execute()).code(), Code::kAlreadyExists);
    Txn d = s.Begin(TxnKind::kReadWrite);
    d.Delete(t, 500);
    Status de = co_await d.Execute();
    EXPECT_TRUE(de.ok()) << de.ToString();
    Status dc = co_await d.Commit();
    EXPECT_TRUE(dc.ok()) << dc.ToString();
    Txn r = s.Begin(TxnKind::kReadOnly);
    r.AddRO(t, 500);
    EXPECT_TRUE((co_await r.Execute()).ok());
    EXPECT_EQ(r.Read(t, 500).status().code(), Code::kNotFound);
    Txn again = s.Begin(TxnKind::kReadWrite);
    again.Insert(t, 500, U64Value(7));
    EXPECT_TRUE((co_await again.Execute()).ok());
    EXPECT_TRUE((co_await again.Commit()).ok());
    Txn r2 = s.Begin(TxnKind::kReadOnly);
    r2.AddRO(t, 500);
    EXPECT_TRUE((co_await r2.Execute()).ok());
    EXPECT_EQ(AsU64(*r2.Read(t, 500)), 7u);
  });
  // A conflicting writer aborts and lets go of what it locked.
  RunOn(*c, 0, [&](Session& s) -> Task<void> {
    Txn a = s.Begin(TxnKind::kReadWrite);
    a.AddRW(t, 3);
    EXPECT_TRUE((co_await a.Execute()).ok());
    Txn b = s.Begin(TxnKind::kReadWrite);
    b.AddRW(t, 4);
    EXPECT_TRUE((co_await b.Execute()).ok());
    b.AddRW(t, 3);  // held by a
    EXPECT_EQ((co_await b.Execute()).code(), Code::kAborted);
    EXPECT_TRUE((co_await a.Commit()).ok());
    co_await s.Yield();  // let a detached release of b's MN locks run
    co_await s.SleepFor(100'000);
    Txn c2 = s.Begin(TxnKind::kReadWrite);
    c2.AddRW(t, 4);
    c2.AddRW(t, 3);
    EXPECT_TRUE((co_await c2.Execute()).ok()) << "b's locks must be gone";
    EXPECT_TRUE((co_await c2.Commit()).ok());
  });
}

// Transfers never change the total; audits always see it exactly.
struct BankOutcome {
  uint64_t audits = 0, bad_audits = 0, transfers = 0, total = 0, aborts = 0;
};

BankOutcome Bank(const ClusterConfig& cfg, const Testbed* model, int rounds) {
  constexpr uint64_t kAccounts = 20, kStart = 1000;
  uint16_t t = 0;
  auto c = StartLoaded(cfg, &t, kAccounts, kStart, model);
  BankOutcome o;
  std::atomic<uint64_t> audits{0}, bad{0}, transfers{0};
  c->Run(3, [&](Session& s) -> Task<void> {
    for (int n = 0; n < rounds; n++) {
      if (s.client() == 0 && n % 4 == 0) {
        uint64_t total = 0;
        Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& a) -> Task<Status> {
          for (uint64_t k = 0; k < kAccounts; k++) a.AddRO(t, k);
          Status e = co_await a.Execute();
          if (!e.ok()) co_return e;
          total = 0;
          for (uint64_t k = 0; k < kAccounts; k++) total += AsU64(*a.Read(t, k));
          co_return Status::Ok();
        });
        if (st.ok()) {
          audits++;
          if (total != kAccounts * kStart) bad++;
        }
        continue;
      }
      uint64_t from = s.rng().Uniform(kAccounts), to = s.rng().Uniform(kAccounts - 1);
      if (to >= from) to++;
      uint64_t amount = 1 + s.rng().Uniform(50);
      Status st = co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& x) -> Task<Status> {
        x.AddRW(t, from);
        x.AddRO(t, to);  // promoted below: exercises read-only-then-read-write items
        Status e = co_await x.Execute();
        if (!e.ok()) co_return e;
        x.AddRW(t, to);
        e = co_await x.Execute();
        if (!e.ok()) co_return e;
        uint64_t a = AsU64(*x.Read(t, from)), b = AsU64(*x.Read(t, to));
        if (a < amount) co_return Status::Ok();
        POND_CHECK(x.Write(t, from, U64Value(a - amount)).ok());
        POND_CHECK(x.Write(t, to, U64Value(b + amount)).ok());
        co_return Status::Ok();
      });
      if (st.ok()) transfers++;
    }
  });
  o.audits = audits;
  o.bad_audits = bad;
  o.transfers = transfers;
  RunOn(*c, 2, [&](Session& s) -> Task<void> {
    co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& a) -> Task<Status> {
      for (uint64_t k = 0; k < kAccounts; k++) a.AddRO(t, k);
      Status e = co_await a.Execute();
      if (!e.ok()) co_return e;
      o.total = 0;
      for (uint64_t k = 0; k < kAccounts; k++) o.total += AsU64(*a.Read(t, k));
      co_return Status::Ok();
    });
  });
  o.aborts = c->Stats().aborts.Total();
  return o;
}

void ExpectBank(const BankOutcome& o) {
  EXPECT_EQ(o.total, 20u * 1000) << "money was created or destroyed";
  EXPECT_EQ(o.bad_audits, 0u) << "an audit saw a total that never existed";
  EXPECT_GT(o.audits, 0u);
  EXPECT_GT(o.transfers, 100u);
  EXPECT_GT(o.aborts, 0u) << "20 accounts and 9 clients must collide";
}

TEST_P(ProtocolTest, BankOnThreadsSerializable) {
  ClusterConfig cfg = Config(GetParam());
  cfg.cns = 4;
  ExpectBank(Bank(cfg, nullptr, 300));
}

TEST_P(ProtocolTest, BankOnThreadsSnapshot) {
  ClusterConfig cfg = Config(GetParam(), Isolation::kSnapshot);
  if (cfg.protocol.single_version) {
    EXPECT_EQ(Cluster::Start(cfg).status().code(), Code::kInvalidArgument)
        << "ford has one version: no snapshots";
    return;
  }
  cfg.cns = 4;
  ExpectBank(Bank(cfg, nullptr, 300));
}

TEST_P(ProtocolTest, BankInSimulator) {
  for (Isolation iso : {Isolation::kSerializable, Isolation::kSnapshot}) {
    ClusterConfig cfg = Config(GetParam(), iso);
    if (cfg.protocol.single_version && iso == Isolation::kSnapshot) continue;
    cfg.cns = 4;
    cfg.workers_per_cn = 2;
    cfg.seed = 5;
    Testbed model;
    ExpectBank(Bank(cfg, &model, 200));
  }
}

// The mechanism behind Lotus's claim: in the simulator at the default model, read-write
// transactions send CAS/FAA to memory nodes exactly when locks live there.
TEST_P(ProtocolTest, AtomicsOnMemoryNodesOnlyWithMemoryNodeLocks) {
  ClusterConfig cfg = Config(GetParam());
  cfg.cns = 4;
  cfg.versions = 2;  // the warm-up below gives every cell a record buffer
  cfg.seed = 7;
  Testbed model;
  uint16_t t = 0;
  auto c = StartLoaded(cfg, &t, 1000, 1, &model);
  auto update_all = [&](Session& s, int count, bool every_key) -> Task<void> {
    for (int i = 0; i < count; i++) {
      uint64_t k = every_key ? static_cast<uint64_t>(i) : s.rng().Uniform(1000);
      co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& x) -> Task<Status> {
        x.AddRW(t, k);
        Status e = co_await x.Execute();
        if (!e.ok()) co_return e;
        co_return x.Write(t, k, U64Value(k));
      });
    }
  };
  // Every key's second cell first gets a record buffer (an FAA per chunk of record space).
  RunOn(*c, 0, [&](Session& s) -> Task<void> { co_await update_all(s, 1000, true); });
  c->ResetSimStats();
  uint64_t before = c->Stats().committed;
  c->Run(2, [&](Session& s) -> Task<void> { co_await update_all(s, 50, false); });
  uint64_t committed = c->Stats().committed - before;
  SimStats sim = c->GetSimStats();
  uint64_t atomics = 0;
  for (const auto& n : sim.mn_nics) atomics += n.ops[2] + n.ops[3];
  ASSERT_GT(committed, 0u);
  double per_txn = static_cast<double>(atomics) / static_cast<double>(committed);
  if (cfg.protocol.cn_locks) {
    EXPECT_EQ(atomics, 0u) << GetParam() << " locks on CNs: no CAS or FAA reaches an MN";
  } else {
    EXPECT_GE(per_txn, 1.0) << GetParam() << " locks by CAS on MNs";
  }
}

TEST(PondStepsTest, NamesTurnOnTheirSwitches) {
  ProtocolConfig pond = ProtocolByName("pond").value();
  EXPECT_TRUE(pond.latest_reads && pond.early_ack && pond.cn_locks && pond.vt_cache);
  ProtocolConfig latest = ProtocolByName("lotus+latest-reads").value();
  EXPECT_TRUE(latest.latest_reads && !latest.early_ack);
  ProtocolConfig early = ProtocolByName("lotus+early-ack").value();
  EXPECT_TRUE(!early.latest_reads && early.early_ack);
  EXPECT_EQ(ProtocolByName("lotus+fast").status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(pond.value_cache && pond.tso_combine);
  ProtocolConfig relay = ProtocolByName("lotus+tso-combine").value();
  EXPECT_TRUE(relay.tso_combine && !relay.early_ack && !relay.latest_reads && !relay.value_cache);
  ProtocolConfig no_relay = ProtocolByName("pond-tso-combine").value();
  EXPECT_TRUE(!no_relay.tso_combine && no_relay.early_ack && no_relay.latest_reads &&
              no_relay.value_cache);
  EXPECT_EQ(no_relay.name, "pond-tso-combine");
  EXPECT_EQ(ProtocolByName("pond-fast").status().code(), Code::kInvalidArgument);
  ClusterConfig c = Config("motor");
  c.protocol.early_ack = true;
  EXPECT_EQ(ValidateConfig(c).code(), Code::kInvalidArgument) << "early-ack on MN locks";
}

// latest_reads: which transactions take a start timestamp, and a read-only transaction that read
// one key at its newest and then executes more reads it again at its snapshot, aborting if it
// changed in between (lotus's snapshot, taken first, is not moved by that write). Under pond the
// commits are answered early too: a read right after the answer must still see the write.
TEST(PondStepsTest, LatestReadsTakeASnapshotOnlyWhenTheyNeedOne) {
  for (const char* protocol : {"lotus", "lotus+latest-reads", "pond"}) {
    const bool latest = std::string(protocol) != "lotus";
    uint16_t t = 0;
    auto c = StartLoaded(Config(protocol), &t, 100, 0);
    RunOn(*c, 1, [&](Session& s) -> Task<void> {
      Txn w = s.Begin(TxnKind::kReadWrite);
      w.AddRW(t, 7);
      w.AddRO(t, 8);
      EXPECT_TRUE((co_await w.Execute()).ok());
      EXPECT_EQ(w.start_ts() == 0, latest) << protocol << ": a locked read-write transaction";
      EXPECT_TRUE(w.Write(t, 7, U64Value(77)).ok());
      EXPECT_TRUE((co_await w.Commit()).ok());
      EXPECT_GT(w.commit_ts(), 0u);

      Txn r = s.Begin(TxnKind::kReadOnly);
      r.AddRO(t, 7);
      EXPECT_TRUE((co_await r.Execute()).ok());
      EXPECT_EQ(r.start_ts() == 0, latest) << protocol << ": one key, read once";
      EXPECT_EQ(AsU64(*r.Read(t, 7)), 77u);
      // Key 7 changes after r read it.
      Txn w2 = s.Begin(TxnKind::kReadWrite);
      w2.AddRW(t, 7);
      EXPECT_TRUE((co_await w2.Execute()).ok());
      EXPECT_TRUE(w2.Write(t, 7, U64Value(78)).ok());
      EXPECT_TRUE((co_await w2.Commit()).ok());
      r.AddRO(t, 9);
      Status more = co_await r.Execute();
      if (latest) {
        EXPECT_EQ(more.code(), Code::kAborted) << "key 7 at the snapshot is not what was read";
      } else {
        EXPECT_TRUE(more.ok()) << more.ToString();
        EXPECT_EQ(AsU64(*r.Read(t, 7)), 77u) << "lotus's snapshot predates the change";
        EXPECT_TRUE((co_await r.Commit()).ok());
      }
      // Unchanged between the two: the second Execute keeps the first read, at a snapshot.
      Txn r2 = s.Begin(TxnKind::kReadOnly);
      r2.AddRO(t, 7);
      EXPECT_TRUE((co_await r2.Execute()).ok());
      r2.AddRO(t, 9);
      EXPECT_TRUE((co_await r2.Execute()).ok());
      EXPECT_GT(r2.start_ts(), 0u);
      EXPECT_EQ(AsU64(*r2.Read(t, 7)), 78u);
      EXPECT_EQ(AsU64(*r2.Read(t, 9)), 1009u);
      EXPECT_TRUE((co_await r2.Commit()).ok());
    });
  }
}

INSTANTIATE_TEST_SUITE_P(All, ProtocolTest, ::testing::ValuesIn(AllConfigurations()),
                         testing_cluster::ProtocolTestName);

}  // namespace
}  // namespace pond
