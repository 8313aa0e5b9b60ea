// Resharding on the simulated cluster (docs/resharding.md): a load that routes most calls to one
// CN makes it hand its hottest shards away, by the membership machine's epochs, while the calls
// go on — and every transfer still adds up.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/lock/lock_key.h"

namespace pond {
namespace {

constexpr int64_t kStart = 1000;
// The hot shards: CN 0's (shard s starts on CN s * 3 / 4096), each with many accounts, so that
// the hot calls load CN 0 more than they conflict; and their partners, as many of CN 1's, that
// the calls apart (below) pay into.
constexpr uint32_t kHotShards = 8, kPartner = 1366;
constexpr uint64_t kHotPerShard = 256, kColdPerShard = 2;
constexpr uint64_t kAccounts =
    2 * kHotShards * kHotPerShard + (4096 - 2 * kHotShards) * kColdPerShard;
bool Partner(uint32_t shard) { return shard >= kPartner && shard < kPartner + kHotShards; }
uint64_t PerShard(uint32_t shard) {
  return shard < kHotShards || Partner(shard) ? kHotPerShard : kColdPerShard;
}

uint64_t Key(uint32_t shard, uint64_t i) { return (i << 12) | shard; }

ClusterConfig Config(uint64_t seed, ReshardConfig::Policy policy) {
  ClusterConfig c;
  c.mns = 3;
  c.cns = 3;
  c.workers_per_cn = 2;
  c.versions = 2;
  c.region_mib = 64;
  c.lock_buckets = 1 << 12;
  c.vt_cache_entries = 1 << 12;
  c.addr_cache_entries = 1 << 12;
  c.seed = seed;
  c.reshard = ReshardConfig{
      .policy = policy, .interval_ns = 500'000, .over = 1.5, .intervals = 3, .drain_ns = 2'000'000};
  return c;
}

struct Outcome {
  uint64_t committed = 0;
  FailoverStats failover;
  std::set<uint32_t> moved;     // shards not on the CN they started on, at the end
  std::vector<uint16_t> owner;  // by shard, the CN managing it at the end
  int64_t total = 0;
};

// Transfers between accounts, 90% of them from an account of the hot shards, routed to the CN
// that manages it, to another there, or `apart`, to one of its shard's partner; for
// `virtual_ms`.
Outcome RunTransfers(uint64_t seed, ReshardConfig::Policy policy, uint64_t virtual_ms,
                     bool apart = false) {
  auto started = Cluster::StartSimulated(Config(seed, policy), Testbed{});
  POND_CHECK_MSG(started.ok(), started.status().ToString().c_str());
  Cluster& c = **started;
  const uint16_t t = *c.CreateTable(
      {.name = "acct", .value_bytes = 8, .capacity = kAccounts, .critical_field = true});
  // Every shard's first kColdPerShard accounts, then the hot shards' others.
  POND_CHECK(c.Load(t, kAccounts, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                const uint64_t cold = 4096 * kColdPerShard;
                const uint64_t hot = (i - cold) % (2 * kHotShards);
                *key = i < cold ? Key(static_cast<uint32_t>(i % 4096), i / 4096)
                                : Key(static_cast<uint32_t>(
                                          hot < kHotShards ? hot : kPartner + hot - kHotShards),
                                      kColdPerShard + (i - cold) / (2 * kHotShards));
                std::memcpy(v.data(), &kStart, 8);
              }).ok());
  const ProcedureId transfer =
      c.RegisterProcedure([t](Session& s, std::span<const std::byte> args) -> Task<Status> {
        uint64_t from = 0, to = 0;
        std::memcpy(&from, args.data(), 8);
        std::memcpy(&to, args.data() + 8, 8);
        co_return co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& x) -> Task<Status> {
          x.AddRW(t, from);
          x.AddRW(t, to);
          Status e = co_await x.Execute();
          if (!e.ok()) co_return e;
          int64_t a = 0, b = 0;
          std::memcpy(&a, x.Read(t, from)->data(), 8);
          std::memcpy(&b, x.Read(t, to)->data(), 8);
          a--;
          b++;
          if (Status w = x.Write(t, from, std::as_bytes(std::span(&a, 1))); !w.ok()) co_return w;
          co_return x.Write(t, to, std::as_bytes(std::span(&b, 1)));
        });
      });
  const uint64_t deadline = c.clock().NowNs() + virtual_ms * 1'000'000;
  uint64_t committed = 0;
  c.Run(16, [&](Session& s) -> Task<void> {
    while (s.clock().NowNs() < deadline) {
      const bool hot = s.rng().Uniform(10) != 0;
      const auto shard = [&] {
        return static_cast<uint32_t>(hot ? s.rng().Uniform(kHotShards) : s.rng().Uniform(4096));
      };
      const auto account = [&] {
        const uint32_t sh = shard();
        return Key(sh, s.rng().Uniform(PerShard(sh)));
      };
      const uint64_t from = account();
      uint64_t to = from;
      while (to == from) to = account();
      if (hot && apart) to = Key(kPartner + (from & 0xfff), s.rng().Uniform(kHotPerShard));
      uint64_t args[2] = {from, to};
      Status st = co_await s.Call(transfer, std::as_bytes(std::span(args)),
                                  RouteHint{TxnKind::kReadWrite, t, from});
      if (st.ok()) committed++;
    }
  });
  Outcome out;
  out.committed = committed;
  out.failover = c.GetFailoverStats();
  for (uint32_t s = 0; s < 4096; s++) {
    out.owner.push_back(c.ShardOwner(s));
    if (out.owner[s] != s * 3 / 4096) out.moved.insert(s);
  }
  // Every balance read back, a shard at a time, by one client (nothing else runs).
  c.Run(1, [&](Session& s) -> Task<void> {
    if (s.cn() != 0 || s.worker() != 0) co_return;
    for (uint32_t shard = 0; shard < 4096; shard++) {
      Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& x) -> Task<Status> {
        for (uint64_t i = 0; i < PerShard(shard); i++) x.AddRO(t, Key(shard, i));
        Status e = co_await x.Execute();
        if (!e.ok()) co_return e;
        for (uint64_t i = 0; i < PerShard(shard); i++) {
          int64_t b = 0;
          std::memcpy(&b, x.Read(t, Key(shard, i))->data(), 8);
          out.total += b;
        }
        co_return Status::Ok();
      });
      POND_CHECK_MSG(st.ok(), st.ToString().c_str());
    }
  });
  return out;
}

TEST(ReshardSimTest, AnOverloadedCnHandsItsHotShardsAwayAndEveryTransferAddsUp) {
  const Outcome off = RunTransfers(1, ReshardConfig::Policy::kNone, 12);
  const Outcome on = RunTransfers(1, ReshardConfig::Policy::kLoad, 12);
  EXPECT_EQ(off.failover.shard_moves, 0u);
  EXPECT_TRUE(off.moved.empty());
  EXPECT_GE(on.failover.shard_moves, 2u);
  EXPECT_GE(on.moved.size(), 2u);
  for (uint32_t s : on.moved) EXPECT_LT(s, kHotShards) << "a cold shard moved";
  EXPECT_GT(on.failover.move_closed_ns_max, 0u);
  EXPECT_EQ(on.failover.moves_called_off, 0u);
  for (const Outcome* o : {&off, &on}) {
    EXPECT_EQ(o->total, int64_t{kAccounts} * kStart) << "money made or lost";
    EXPECT_GT(o->committed, 1000u);
  }
  // Spread over three CNs, the hot shards commit more than on one.
  EXPECT_GT(on.committed, off.committed);
  std::printf("committed: off %lu, on %lu; %lu moves, closed %.3f ms at most\n",
              static_cast<unsigned long>(off.committed), static_cast<unsigned long>(on.committed),
              static_cast<unsigned long>(on.failover.shard_moves),
              static_cast<double>(on.failover.move_closed_ns_max) / 1e6);
}

// Zeus's locality: calls routed to CN 0 that lock a partner shard on CN 1 each make CN 1's
// lock table hear mostly from CN 0 about those shards, which then move to CN 0 — and only they.
TEST(ReshardSimTest, ShardsRequestedMostlyFromAnotherCnMoveThereAndEveryTransferAddsUp) {
  const Outcome off = RunTransfers(2, ReshardConfig::Policy::kNone, 12, /*apart=*/true);
  const Outcome on = RunTransfers(2, ReshardConfig::Policy::kLocality, 12, /*apart=*/true);
  EXPECT_EQ(off.failover.shard_moves, 0u);
  EXPECT_GE(on.failover.shard_moves, 1u);
  int partners = 0;
  for (uint32_t s : on.moved) partners += Partner(s);
  EXPECT_EQ(partners, static_cast<int>(kHotShards)) << "not every partner shard moved to CN 0";
  for (uint32_t s = kPartner; s < kPartner + kHotShards; s++) {
    EXPECT_EQ(on.owner[s], 0) << "partner shard " << s << " is not on CN 0";
  }
  for (uint32_t s = 0; s < kHotShards; s++) EXPECT_EQ(on.moved.count(s), 0u) << "hot shard moved";
  EXPECT_EQ(on.failover.moves_called_off, 0u);
  for (const Outcome* o : {&off, &on}) {
    EXPECT_EQ(o->total, int64_t{kAccounts} * kStart) << "money made or lost";
    EXPECT_GT(o->committed, 1000u);
  }
  std::printf("committed apart: off %lu, locality %lu; %lu moves (%zu shards moved, %d partners)\n",
              static_cast<unsigned long>(off.committed), static_cast<unsigned long>(on.committed),
              static_cast<unsigned long>(on.failover.shard_moves), on.moved.size(), partners);
}

TEST(ReshardSimTest, ARunWithResharingReplaysExactly) {
  const Outcome a = RunTransfers(3, ReshardConfig::Policy::kLoad, 6);
  const Outcome b = RunTransfers(3, ReshardConfig::Policy::kLoad, 6);
  EXPECT_EQ(a.committed, b.committed);
  EXPECT_EQ(a.failover.shard_moves, b.failover.shard_moves);
  EXPECT_EQ(a.failover.move_closed_ns_total, b.failover.move_closed_ns_total);
  EXPECT_EQ(a.moved, b.moved);
}

TEST(ReshardSimTest, ConfigsThatCannotReshardAreRefused) {
  ClusterConfig c = Config(1, ReshardConfig::Policy::kLoad);
  c.protocol = *ProtocolByName("motor");
  EXPECT_EQ(Cluster::StartSimulated(c, Testbed{}).status().code(), Code::kInvalidArgument);
  c = Config(1, ReshardConfig::Policy::kLoad);
  c.reshard.over = 1.0;
  EXPECT_EQ(ValidateConfig(c).code(), Code::kInvalidArgument);
  c = Config(1, ReshardConfig::Policy::kLoad);
  c.reshard.interval_ns = 10;
  EXPECT_EQ(ValidateConfig(c).code(), Code::kInvalidArgument);
  c = Config(1, ReshardConfig::Policy::kLoad);
  EXPECT_EQ(Cluster::Start(c).status().code(), Code::kInvalidArgument)
      << "an embedded cluster runs no membership machine";
}

}  // namespace
}  // namespace pond
