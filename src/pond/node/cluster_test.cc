// The Lotus protocol end to end on an embedded cluster: single transactions with known answers,
// then concurrent bank transfers whose total must never change.
#include "pond/cluster.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "pond/base/assert.h"
#include "pond/txn/test_cluster.h"

namespace pond {
namespace {

using testing_cluster::AsU64;
using testing_cluster::U64Value;

ClusterConfig SmallConfig(Isolation iso = Isolation::kSerializable) {
  return testing_cluster::Config("lotus", iso);
}

struct Fixture {
  testing_cluster::TestCluster cluster;
  uint16_t table = 0;
  explicit Fixture(ClusterConfig c = SmallConfig(), uint64_t keys = 100) {
    auto started = Cluster::Start(c);
    POND_CHECK_MSG(started.ok(), started.status().ToString().c_str());
    cluster = testing_cluster::Checked(std::move(started).value());
    auto t = cluster->CreateTable({.name = "t", .value_bytes = 16, .capacity = 1000});
    POND_CHECK(t.ok());
    table = *t;
    Status s = cluster->Load(table, keys, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
      *key = i;
      uint64_t val = 1000 + i;
      std::memcpy(v.data(), &val, 8);
    });
    POND_CHECK_MSG(s.ok(), s.ToString().c_str());
  }
  // Runs `fn` once on CN `cn`'s worker (one client there, none elsewhere).
  void RunOn(uint16_t cn, std::function<Task<void>(Session&)> fn) {
    cluster->Run(1, [&](Session& s) -> Task<void> {
      if (s.cn() == cn) co_await fn(s);
    });
  }
};

// Every counter of ClusterStats, seen as the array of u64 it is, is subtracted by Since: a
// counter added later and forgotten in Since fails here, not in a benchmark's report.
TEST(ClusterStatsTest, SinceSubtractsEveryCounter) {
  static_assert(std::is_trivially_copyable_v<ClusterStats>);
  static_assert(sizeof(ClusterStats) % sizeof(uint64_t) == 0);
  constexpr size_t kCounters = sizeof(ClusterStats) / sizeof(uint64_t);
  uint64_t before_words[kCounters], after_words[kCounters];
  for (size_t i = 0; i < kCounters; i++) {
    before_words[i] = i;
    after_words[i] = 1000 + 3 * i;
  }
  ClusterStats before, after;
  std::memcpy(&before, before_words, sizeof(before));
  std::memcpy(&after, after_words, sizeof(after));
  ClusterStats d = after.Since(before);
  uint64_t d_words[kCounters];
  std::memcpy(d_words, &d, sizeof(d));
  for (size_t i = 0; i < kCounters; i++) EXPECT_EQ(d_words[i], 1000 + 2 * i) << "counter " << i;
}

TEST(ClusterTest, StartRejectsBadConfig) {
  ClusterConfig c = SmallConfig();
  c.replication = 4;  // more than MNs
  EXPECT_EQ(Cluster::Start(c).status().code(), Code::kInvalidArgument);
  c = SmallConfig();
  c.versions = 0;
  EXPECT_EQ(Cluster::Start(c).status().code(), Code::kInvalidArgument);
}

// A library user sets fields, not flags: the reason names the ClusterConfig field.
TEST(ClusterTest, ConfigErrorsNameTheField) {
  ClusterConfig c = SmallConfig();
  c.workers_per_cn = 0;
  EXPECT_EQ(ValidateConfig(c).message(), "ClusterConfig.workers_per_cn must be 1 to 64");
  c = SmallConfig();
  c.region_mib = 1;
  EXPECT_EQ(ValidateConfig(c).message(), "ClusterConfig.region_mib must be 16 to 1048576");
}

// Ford's values are in its single-version slots, so its tables take their whole size from the
// general heap and nothing from the lanes: its heap is three quarters of the region
// (store::GeneralHeapBytes). A table whose index needs about 28 MiB on each MN of a 64 MiB
// region fits there, and would not in a quarter (16 MiB), as TATP at its default scale did not
// under ford in the default region.
TEST(ClusterTest, FordGivesItsIndexMostOfTheRegion) {
  ClusterConfig c = testing_cluster::Config("ford");
  ASSERT_EQ(c.region_mib, 64u);
  auto cluster = Cluster::Start(c);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  TableOptions big{.name = "big", .value_bytes = 100, .capacity = 120'000};
  Result<uint16_t> t = (*cluster)->CreateTable(big);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE((*cluster)
                  ->Load(*t, 1000,
                         [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                           *key = i;
                           std::memcpy(v.data(), &i, sizeof(i));
                         })
                  .ok());
}

TEST(ClusterTest, ReadsLoadedDataAndSeesCommittedWrites) {
  Fixture fx;
  uint16_t t = fx.table;
  for (uint16_t cn = 0; cn < 3; cn++) {
    fx.RunOn(cn, [&](Session& s) -> Task<void> {
      // Read-write: add 1 to key 7 (whichever CN manages its lock).
      Txn w = s.Begin(TxnKind::kReadWrite);
      w.AddRW(t, 7);
      EXPECT_TRUE((co_await w.Execute()).ok());
      uint64_t before = AsU64(*w.Read(t, 7));
      EXPECT_TRUE(w.Write(t, 7, U64Value(before + 1)).ok());
      EXPECT_TRUE((co_await w.Commit()).ok());
      EXPECT_GT(w.commit_ts(), w.start_ts());
      // A later read-only transaction sees it.
      Txn r = s.Begin(TxnKind::kReadOnly);
      r.AddRO(t, 7);
      r.AddRO(t, 8);
      EXPECT_TRUE((co_await r.Execute()).ok());
      EXPECT_EQ(AsU64(*r.Read(t, 7)), before + 1);
      EXPECT_EQ(AsU64(*r.Read(t, 8)), 1008u);
      EXPECT_TRUE((co_await r.Commit()).ok());
    });
  }
  // Three increments from three CNs, each over more versions than the CVT has cells (N = 3 with
  // one loaded version): cells were recycled and the newest value survived.
  fx.RunOn(0, [&](Session& s) -> Task<void> {
    Txn r = s.Begin(TxnKind::kReadOnly);
    r.AddRO(t, 7);
    EXPECT_TRUE((co_await r.Execute()).ok());
    EXPECT_EQ(AsU64(*r.Read(t, 7)), 1010u);
  });
  EXPECT_EQ(fx.cluster->Stats().committed, 3u);
}

TEST(ClusterTest, InsertDeleteAndMissingKeys) {
  Fixture fx;
  uint16_t t = fx.table;
  fx.RunOn(1, [&](Session& s) -> Task<void> {
    Txn a = s.Begin(TxnKind::kReadWrite);
    a.Insert(t, 500, U64Value(5));
    a.AddRO(t, 501);
    EXPECT_TRUE((co_await a.Execute()).ok());
    EXPECT_EQ(a.Read(t, 501).status().code(), Code::kNotFound);
    EXPECT_EQ(AsU64(*a.Read(t, 500)), 5u) << "a transaction reads its own insert";
    EXPECT_TRUE((co_await a.Commit()).ok());

    Txn dup = s.Begin(TxnKind::kReadWrite);
    dup.Insert(t, 500, U64Value(6));
    EXPECT_EQ((co_await dup.Execute()).code(), Code::kAlreadyExists);

    Txn d = s.Begin(TxnKind::kReadWrite);
    d.Delete(t, 500);
    EXPECT_TRUE((co_await d.Execute()).ok());
    EXPECT_TRUE((co_await d.Commit()).ok());

    Txn r = s.Begin(TxnKind::kReadOnly);
    r.AddRO(t, 500);
    EXPECT_TRUE((co_await r.Execute()).ok());
    EXPECT_EQ(r.Read(t, 500).status().code(), Code::kNotFound) << "deleted";

    Txn again = s.Begin(TxnKind::kReadWrite);
    again.Insert(t, 500, U64Value(7));
    EXPECT_TRUE((co_await again.Execute()).ok()) << "a deleted key can be inserted again";
    EXPECT_TRUE((co_await again.Commit()).ok());
    Txn r2 = s.Begin(TxnKind::kReadOnly);
    r2.AddRO(t, 500);
    EXPECT_TRUE((co_await r2.Execute()).ok());
    EXPECT_EQ(AsU64(*r2.Read(t, 500)), 7u);
  });
}

TEST(ClusterTest, ConflictingWriterAbortsAndReleasesItsLocks) {
  Fixture fx;
  uint16_t t = fx.table;
  fx.RunOn(0, [&](Session& s) -> Task<void> {
    Txn a = s.Begin(TxnKind::kReadWrite);
    a.AddRW(t, 3);
    EXPECT_TRUE((co_await a.Execute()).ok());
    Txn b = s.Begin(TxnKind::kReadWrite);
    b.AddRW(t, 4);
    b.AddRW(t, 3);  // held by a: b must abort, and drop its lock on 4
    Status sb = co_await b.Execute();
    EXPECT_EQ(sb.code(), Code::kAborted);
    Txn c = s.Begin(TxnKind::kReadWrite);
    c.AddRW(t, 4);
    EXPECT_TRUE((co_await c.Execute()).ok()) << "b released key 4 when it aborted";
    c.Abort();
    EXPECT_TRUE((co_await a.Commit()).ok());
  });
  EXPECT_EQ(fx.cluster->Stats().aborts.lock_conflict, 1u);
}

TEST(ClusterTest, ReaderWhoseVersionWasRecycledAbortsInsteadOfReadingWrongData) {
  // N = 3 cells per key. A read-only transaction takes its snapshot, then three updates of key 9
  // commit — the third recycles the cell holding the version the snapshot needs. Reading key 9
  // at the old snapshot must abort, not return a newer value.
  Fixture fx;
  uint16_t t = fx.table;
  fx.RunOn(0, [&](Session& s) -> Task<void> {
    Txn reader = s.Begin(TxnKind::kReadOnly);
    reader.AddRO(t, 1);
    EXPECT_TRUE((co_await reader.Execute()).ok());  // fixes the start timestamp
    for (uint64_t v = 1; v <= 3; v++) {
      Txn w = s.Begin(TxnKind::kReadWrite);
      w.AddRW(t, 9);
      EXPECT_TRUE((co_await w.Execute()).ok());
      EXPECT_TRUE(w.Write(t, 9, U64Value(v)).ok());
      EXPECT_TRUE((co_await w.Commit()).ok());
    }
    reader.AddRO(t, 9);
    Status st = co_await reader.Execute();
    EXPECT_EQ(st.code(), Code::kAborted);
    EXPECT_EQ(st.message(), "snapshot too old");
    // With two updates only, the loaded version survives in the third cell and is read.
    Txn r2 = s.Begin(TxnKind::kReadOnly);
    r2.AddRO(t, 1);
    EXPECT_TRUE((co_await r2.Execute()).ok());
    for (uint64_t v = 4; v <= 5; v++) {
      Txn w = s.Begin(TxnKind::kReadWrite);
      w.AddRW(t, 10);
      EXPECT_TRUE((co_await w.Execute()).ok());
      EXPECT_TRUE(w.Write(t, 10, U64Value(v)).ok());
      EXPECT_TRUE((co_await w.Commit()).ok());
    }
    r2.AddRO(t, 10);
    EXPECT_TRUE((co_await r2.Execute()).ok());
    EXPECT_EQ(AsU64(*r2.Read(t, 10)), 1010u) << "the snapshot's version, not a newer one";
  });
  EXPECT_EQ(fx.cluster->Stats().aborts.snapshot_too_old, 1u);
}

// Bank: transfers between accounts never change the total, and read-only audits of every
// account always see the exact total — under SR and under SI (transfers write both accounts, so
// SI's write skew cannot break this invariant).
void BankRun(Isolation iso) {
  constexpr uint64_t kAccounts = 20, kStart = 1000;
  constexpr int kTransfers = 400, kClients = 3;
  ClusterConfig cfg = SmallConfig(iso);
  cfg.cns = 4;
  Fixture fx(cfg, 0);
  uint16_t t = fx.table;
  ASSERT_TRUE(fx.cluster
                  ->Load(t, kAccounts,
                         [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                           *key = i;
                           uint64_t start = kStart;
                           std::memcpy(v.data(), &start, 8);
                         })
                  .ok());
  std::atomic<uint64_t> audits{0}, bad_audits{0}, transfers{0};
  fx.cluster->Run(kClients, [&](Session& s) -> Task<void> {
    for (int n = 0; n < kTransfers; n++) {
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
          if (total != kAccounts * kStart) bad_audits++;
        }
        continue;
      }
      uint64_t from = s.rng().Uniform(kAccounts), to = s.rng().Uniform(kAccounts - 1);
      if (to >= from) to++;
      uint64_t amount = 1 + s.rng().Uniform(50);
      Status st = co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& x) -> Task<Status> {
        x.AddRW(t, from);
        x.AddRW(t, to);
        Status e = co_await x.Execute();
        if (!e.ok()) co_return e;
        uint64_t a = AsU64(*x.Read(t, from)), b = AsU64(*x.Read(t, to));
        if (a < amount) co_return Status::Ok();  // insufficient funds: commit nothing
        POND_CHECK(x.Write(t, from, U64Value(a - amount)).ok());
        POND_CHECK(x.Write(t, to, U64Value(b + amount)).ok());
        co_return Status::Ok();
      });
      if (st.ok()) transfers++;
    }
  });
  EXPECT_EQ(bad_audits.load(), 0u) << "an audit saw money created or destroyed";
  EXPECT_GT(audits.load(), 0u);
  EXPECT_GT(transfers.load(), uint64_t{kTransfers});
  uint64_t total = 0;
  fx.RunOn(2, [&](Session& s) -> Task<void> {
    Txn a = s.Begin(TxnKind::kReadOnly);
    for (uint64_t k = 0; k < kAccounts; k++) a.AddRO(t, k);
    EXPECT_TRUE((co_await a.Execute()).ok());
    for (uint64_t k = 0; k < kAccounts; k++) total += AsU64(*a.Read(t, k));
  });
  EXPECT_EQ(total, kAccounts * kStart);
  ClusterStats st = fx.cluster->Stats();
  EXPECT_GT(st.aborts.Total(), 0u) << "20 accounts and 12 clients must collide";
}

TEST(BankTest, TotalIsConstantUnderSerializable) { BankRun(Isolation::kSerializable); }
TEST(BankTest, TotalIsConstantUnderSnapshotIsolation) { BankRun(Isolation::kSnapshot); }

}  // namespace
}  // namespace pond

namespace pond {
namespace {

// A call of a procedure nobody registered is refused, on this CN as on another (where the
// callee answers it), and the process goes on.
TEST(TxnMisuseTest, UnknownProcedureIsRefused) {
  uint16_t t = 0;
  auto c = testing_cluster::StartLoaded(SmallConfig(), &t, 10, 0);
  testing_cluster::RunOn(*c, 0, [&](Session& s) -> Task<void> {
    std::byte arg{0};
    for (TxnKind kind : {TxnKind::kReadOnly, TxnKind::kReadWrite}) {
      for (uint64_t key = 0; key < 8; key++) {  // keys whose shards some other CN manages too
        Status st = co_await s.Call(42, std::span(&arg, 1), RouteHint{kind, t, key});
        EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
        Result<std::vector<std::byte>> r =
            co_await s.CallWithReply(42, std::span(&arg, 1), RouteHint{kind, t, key});
        EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
      }
    }
  });
}

// Misuse of a Txn is refused with a Status, never fatal (txn.h).
TEST(TxnMisuseTest, IsRefusedAtTheNextExecuteOrCommit) {
  uint16_t t = 0;
  auto c = testing_cluster::StartLoaded(SmallConfig(), &t, 10, 0);
  testing_cluster::RunOn(*c, 0, [&](Session& s) -> Task<void> {
    {
      Txn r = s.Begin(TxnKind::kReadOnly);
      r.AddRO(t, 1);
      r.AddRW(t, 2);  // a read-only transaction may only read
      EXPECT_EQ((co_await r.Execute()).code(), Code::kInvalidArgument);
      EXPECT_EQ((co_await r.Execute()).code(), Code::kInvalidArgument) << "and it is over";
    }
    {
      Txn r = s.Begin(TxnKind::kReadOnly);
      r.Delete(t, 2);
      EXPECT_EQ((co_await r.Commit()).code(), Code::kInvalidArgument);
    }
    {
      Txn w = s.Begin(TxnKind::kReadWrite);
      w.AddRO(999, 1);  // no such table
      EXPECT_EQ((co_await w.Execute()).code(), Code::kInvalidArgument);
    }
    {
      Txn w = s.Begin(TxnKind::kReadWrite);
      w.Insert(t, 50, std::vector<std::byte>(3));  // the table's values are 16 bytes
      EXPECT_EQ((co_await w.Execute()).code(), Code::kInvalidArgument);
    }
    {
      // Commit before Execute of every key: refused, and the transaction holds nothing after.
      Txn w = s.Begin(TxnKind::kReadWrite);
      w.AddRW(t, 3);
      EXPECT_EQ((co_await w.Commit()).code(), Code::kInvalidArgument);
      Txn v = s.Begin(TxnKind::kReadWrite);
      v.AddRW(t, 3);
      EXPECT_TRUE((co_await v.Execute()).ok()) << "key 3's lock was released";
      EXPECT_TRUE((co_await v.Commit()).ok());
    }
  });
  EXPECT_EQ(c->Stats().aborts.user, 5u);
}

}  // namespace
}  // namespace pond
