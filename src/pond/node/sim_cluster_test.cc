// The same protocol code on the simulated cluster: one thread, virtual time, one seed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "pond/base/assert.h"
#include "pond/cluster.h"

namespace pond {
namespace {

ClusterConfig SimConfig(uint64_t seed) {
  ClusterConfig c;
  c.mns = 3;
  c.cns = 4;
  c.workers_per_cn = 2;
  c.replication = 3;
  c.versions = 2;
  c.region_mib = 64;
  c.lock_buckets = 1 << 12;
  c.vt_cache_entries = 1 << 12;
  c.addr_cache_entries = 1 << 12;
  c.seed = seed;
  return c;
}

uint64_t AsU64(std::span<const std::byte> v) {
  uint64_t x;
  std::memcpy(&x, v.data(), 8);
  return x;
}

struct Outcome {
  uint64_t committed, aborted, virtual_ns, events, audits_bad, total;
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

// Bank transfers and audits for 2 ms of virtual time.
Outcome RunBank(uint64_t seed, Isolation iso = Isolation::kSerializable) {
  constexpr uint64_t kAccounts = 50, kStart = 1000;
  ClusterConfig cfg = SimConfig(seed);
  cfg.isolation = iso;
  auto cluster = Cluster::StartSimulated(cfg, Testbed{});
  POND_CHECK_MSG(cluster.ok(), cluster.status().ToString().c_str());
  Cluster& c = **cluster;
  uint16_t t = *c.CreateTable({.name = "bank", .value_bytes = 8, .capacity = 100});
  POND_CHECK(c.Load(t, kAccounts, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                *key = i;
                uint64_t b = kStart;
                std::memcpy(v.data(), &b, 8);
              }).ok());
  uint64_t deadline = c.clock().NowNs() + 2'000'000;
  uint64_t bad = 0;
  c.Run(3, [&](Session& s) -> Task<void> {
    while (s.clock().NowNs() < deadline) {
      if (s.client() == 0) {
        uint64_t total = 0;
        Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& a) -> Task<Status> {
          for (uint64_t k = 0; k < kAccounts; k++) a.AddRO(t, k);
          Status e = co_await a.Execute();
          if (!e.ok()) co_return e;
          total = 0;
          for (uint64_t k = 0; k < kAccounts; k++) total += AsU64(*a.Read(t, k));
          co_return Status::Ok();
        });
        if (st.ok() && total != kAccounts * kStart) bad++;
        continue;
      }
      uint64_t from = s.rng().Uniform(kAccounts),
               to = (from + 1 + s.rng().Uniform(kAccounts - 1)) % kAccounts;
      co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& x) -> Task<Status> {
        x.AddRW(t, from);
        x.AddRW(t, to);
        Status e = co_await x.Execute();
        if (!e.ok()) co_return e;
        uint64_t a = AsU64(*x.Read(t, from)), b = AsU64(*x.Read(t, to));
        if (a == 0) co_return Status::Ok();
        std::byte va[8], vb[8];
        a--;
        b++;
        std::memcpy(va, &a, 8);
        std::memcpy(vb, &b, 8);
        POND_CHECK(x.Write(t, from, va).ok());
        POND_CHECK(x.Write(t, to, vb).ok());
        co_return Status::Ok();
      });
    }
  });
  uint64_t total = 0;
  c.Run(1, [&](Session& s) -> Task<void> {
    if (s.cn() != 0 || s.worker() != 0) co_return;
    Txn a = s.Begin(TxnKind::kReadOnly);
    for (uint64_t k = 0; k < kAccounts; k++) a.AddRO(t, k);
    POND_CHECK((co_await a.Execute()).ok());
    for (uint64_t k = 0; k < kAccounts; k++) total += AsU64(*a.Read(t, k));
  });
  ClusterStats st = c.Stats();
  SimStats sim = c.GetSimStats();
  return Outcome{st.committed + st.committed_read_only,
                 st.aborts.Total(),
                 sim.virtual_ns,
                 sim.events,
                 bad,
                 total};
}

TEST(SimClusterTest, BankKeepsItsTotalInVirtualTime) {
  Outcome o = RunBank(1);
  EXPECT_EQ(o.total, 50u * 1000);
  EXPECT_EQ(o.audits_bad, 0u);
  EXPECT_GT(o.committed, 500u) << "2 ms of a 4-CN cluster commits hundreds of transactions";
  EXPECT_GE(o.virtual_ns, 2'000'000u);
}

TEST(SimClusterTest, OneSeedOneRun) {
  Outcome a = RunBank(42), b = RunBank(42), c = RunBank(43);
  EXPECT_EQ(a, b) << "same seed, same events, same outcome";
  EXPECT_NE(a.events, c.events) << "another seed, another run";
}

TEST(SimClusterTest, LotusUsesNoAtomicsOnMemoryNodesForTransactions) {
  ClusterConfig cfg = SimConfig(7);
  auto cluster = Cluster::StartSimulated(cfg, Testbed{});
  ASSERT_TRUE(cluster.ok());
  Cluster& c = **cluster;
  uint16_t t = *c.CreateTable({.name = "kv", .value_bytes = 40, .capacity = 1000});
  ASSERT_TRUE(
      c.Load(t, 1000, [](uint64_t i, uint64_t* key, std::span<std::byte>) { *key = i; }).ok());
  // First give every key's second cell a record buffer (allocating one costs an FAA per chunk
  // of record space); after that a transaction's writes only recycle cells. Then count.
  c.Run(1, [&](Session& s) -> Task<void> {
    if (s.cn() != 0 || s.worker() != 0) co_return;
    for (uint64_t k = 0; k < 1000; k++) {
      co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& x) -> Task<Status> {
        x.AddRW(t, k);
        Status e = co_await x.Execute();
        if (!e.ok()) co_return e;
        std::byte v[40] = {};
        co_return x.Write(t, k, v);
      });
    }
  });
  c.ResetSimStats();
  c.Run(2, [&](Session& s) -> Task<void> {
    for (int i = 0; i < 100; i++) {
      uint64_t k = s.rng().Uniform(1000);
      co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& x) -> Task<Status> {
        x.AddRW(t, k);
        Status e = co_await x.Execute();
        if (!e.ok()) co_return e;
        std::byte v[40] = {};
        co_return x.Write(t, k, v);
      });
    }
  });
  SimStats sim = c.GetSimStats();
  uint64_t atomics = 0, writes = 0;
  for (const auto& n : sim.mn_nics) {
    atomics += n.ops[2] + n.ops[3];
    writes += n.ops[1];
  }
  EXPECT_GT(writes, 0u);
  EXPECT_EQ(atomics, 0u) << "lotus locks on CNs: no CAS or FAA reaches a memory node";
}

// A reply procedure reads an account and answers its balance, or fails with NotFound and its
// own message for an account that does not exist. Read-write hints route each call to the CN
// that manages the key's shard, so most calls cross CNs (with CN messages duplicated and
// delayed); wherever it ran, the caller must get exactly what the procedure answered.
TEST(SimClusterTest, CallWithReplyReturnsTheBytesOrTheCalleesStatus) {
  constexpr uint64_t kAccounts = 64, kMissing = 8;
  Testbed testbed;
  testbed.faults.duplicate_probability = 0.2;
  testbed.faults.delay_probability = 0.2;
  testbed.faults.delay_ns_max = 20'000;
  auto cluster = Cluster::StartSimulated(SimConfig(5), testbed);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  Cluster& c = **cluster;
  uint16_t t = *c.CreateTable({.name = "bank", .value_bytes = 8, .capacity = 100});
  ASSERT_TRUE(c.Load(t, kAccounts, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                 *key = i;
                 uint64_t b = 1000 + i;
                 std::memcpy(v.data(), &b, 8);
               }).ok());
  ProcedureId balance = c.RegisterProcedure(
      [t](Session& s, std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
        uint64_t key = AsU64(args);
        if (key >= kAccounts) co_return NotFound("no account " + std::to_string(key));
        std::vector<std::byte> out;
        Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& x) -> Task<Status> {
          x.AddRO(t, key);
          POND_CO_RETURN_IF_ERROR(co_await x.Execute());
          std::span<const std::byte> v = *x.Read(t, key);
          out.assign(v.begin(), v.end());
          co_return Status::Ok();
        });
        if (!st.ok()) co_return st;
        co_return out;
      });
  int right = 0, wrong = 0;
  c.Run(1, [&](Session& s) -> Task<void> {
    for (uint64_t key = s.cn() * 2 + s.worker(); key < kAccounts + kMissing; key += 8) {
      std::byte arg[8];
      std::memcpy(arg, &key, 8);
      RouteHint hint{TxnKind::kReadWrite, t, key};
      Result<std::vector<std::byte>> r = co_await s.CallWithReply(balance, arg, hint);
      // The Status-only Call of the same procedure: its code, and no bytes.
      Status plain = co_await s.Call(balance, arg, hint);
      bool ok;
      if (key < kAccounts) {
        ok = r.ok() && r->size() == 8 && AsU64(*r) == 1000 + key && plain.ok();
      } else {
        ok = r.status().code() == Code::kNotFound &&
             r.status().message() == "no account " + std::to_string(key) &&
             plain.code() == Code::kNotFound;
      }
      (ok ? right : wrong)++;
    }
  });
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(right, static_cast<int>(kAccounts + kMissing));
  EXPECT_GT(c.Stats().remote_calls, 0u) << "some calls must cross CNs";
  EXPECT_GT(c.GetSimStats().fault_duplicates, 0u) << "some requests or answers came twice";
}

}  // namespace
}  // namespace pond
