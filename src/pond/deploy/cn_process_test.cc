// A cluster whose CNs are separate processes (TransportConfig.cn), played here by two Cluster
// objects in one process, each with its own UCX context, over MNs that publish their descriptors
// in a real ZooKeeper on loopback — the path `pond cn` daemons take. CN 1 joins the tables CN 0
// made; transfers submitted to both, routed and locked across the two, keep the total; each
// refuses what only the other may do.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "pond/base/assert.h"
#include "pond/base/temp_dir.h"
#include "pond/cluster.h"
#include "pond/cluster/directory.h"
#include "pond/cluster/local_zookeeper.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/store/catalog.h"
#include "pond/store/layout.h"
#include "pond/transport/ucx/memory_node.h"
#include "pond/txn/test_cluster.h"

namespace pond {
namespace {

using testing_cluster::AsU64;
using testing_cluster::U64Value;

constexpr uint64_t kKeys = 16;  // few, so that transfers conflict
constexpr uint64_t kStart = 1000;

// Moves 1 from args[0] to args[1] (two u64 keys).
Task<Status> Transfer(Session& s, std::span<const std::byte> args, uint16_t table) {
  uint64_t from = 0, to = 0;
  std::memcpy(&from, args.data(), 8);
  std::memcpy(&to, args.data() + 8, 8);
  co_return co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& t) -> Task<Status> {
    t.AddRW(table, from);
    t.AddRW(table, to);
    Status e = co_await t.Execute();
    if (!e.ok()) co_return e;
    const uint64_t a = AsU64(*t.Read(table, from)), b = AsU64(*t.Read(table, to));
    Status w = t.Write(table, from, U64Value(a - 1));
    if (!w.ok()) co_return w;
    co_return t.Write(table, to, U64Value(b + 1));
  });
}

class CnProcessTest : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto zk = cluster::LocalZooKeeper::Start(dir_.path());
    ASSERT_TRUE(zk.ok()) << zk.status().ToString();
    zk_ = std::move(zk).value();
    config_.mns = 2;
    config_.cns = 2;
    config_.workers_per_cn = 2;
    config_.replication = 2;
    config_.region_mib = 32;
    config_.transport.kind = "ucx";
    config_.transport.ucx_tls = GetParam();
    config_.transport.ucx_net_devices = "lo";
    config_.transport.coord = zk_->address();
    config_.transport.cluster = "cnp";
    config_.transport.peers_wait_ms = 10'000;
    // Long enough that a loaded test machine does not make a CN miss its lease and stop itself.
    config_.transport.lease_ms = 2'000;
    auto store = cluster::ZkConfigStore::Connect(zk_->address());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    // What `pond mn` does: serve a formatted region and publish its descriptor.
    const uint64_t bytes = config_.region_mib << 20;
    auto layout = store::MakeLayout(2, 2, bytes, store::kChunkBytes);
    ASSERT_TRUE(layout.ok());
    for (uint16_t mn = 0; mn < 2; mn++) {
      auto m = ucx::UcxMemoryNode::Start(mn, bytes, {GetParam(), "lo"});
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      store::FormatRegion((*m)->region(), *layout, mn);
      ASSERT_TRUE(
          cluster::PutOwned(**store, cluster::MnKey("cnp", mn), (*m)->descriptor().Encode()).ok());
      mns_.push_back(std::move(m).value());
    }
    // ... and beat, as its daemon does: an MN whose beat stops is declared failed.
    beating_ = std::thread([this] {
      while (!stop_beating_.load()) {
        for (auto& m : mns_) store::BeatMn(m->region());
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }

  void TearDown() override {
    stop_beating_ = true;
    if (beating_.joinable()) beating_.join();
  }

  ClusterConfig ConfigOf(int cn) const {
    ClusterConfig c = config_;
    c.transport.cn = cn;
    return c;
  }

  TempDir dir_{"pond-cn"};
  std::unique_ptr<cluster::LocalZooKeeper> zk_;
  std::vector<std::unique_ptr<ucx::UcxMemoryNode>> mns_;  // outlive the clusters
  std::thread beating_;
  std::atomic<bool> stop_beating_{false};
  ClusterConfig config_;
};

TEST_P(CnProcessTest, TwoCnProcessesShareTablesLocksAndTimestamps) {
  auto cn0 = Cluster::Start(ConfigOf(0));
  ASSERT_TRUE(cn0.ok()) << cn0.status().ToString();
  auto table = (*cn0)->CreateTable({.name = "accounts", .value_bytes = 16, .capacity = 256});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_TRUE((*cn0)
                  ->Load(*table, kKeys,
                         [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                           *key = i;
                           const std::vector<std::byte> b = U64Value(kStart);
                           std::copy(b.begin(), b.end(), v.begin());
                         })
                  .ok());

  // CN 1 starts after CN 0 made the tables (the `ready` key orders the daemons).
  auto cn1 = Cluster::Start(ConfigOf(1));
  ASSERT_TRUE(cn1.ok()) << cn1.status().ToString();
  auto found = (*cn1)->FindTable("accounts");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, *table);
  EXPECT_EQ((*cn1)->FindTable("nothing").status().code(), Code::kNotFound);
  // It runs the same setup as CN 0: its CreateTable opens the table CN 0 made, and its Load
  // leaves what CN 0 loaded.
  auto opened = (*cn1)->CreateTable({.name = "accounts", .value_bytes = 16, .capacity = 256});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(*opened, *table);
  EXPECT_EQ((*cn1)->CreateTable({.name = "accounts", .value_bytes = 8}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ((*cn1)->CreateTable({.name = "x"}).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE((*cn1)->Load(*table, 1, [](uint64_t, uint64_t*, std::span<std::byte>) {}).ok());

  // The same procedures in the same order on every CN: their ids agree.
  const uint16_t t = *table;
  ProcedureId p0 = (*cn0)->RegisterProcedure(
      [t](Session& s, std::span<const std::byte> a) { return Transfer(s, a, t); });
  ProcedureId p1 = (*cn1)->RegisterProcedure(
      [t](Session& s, std::span<const std::byte> a) { return Transfer(s, a, t); });
  ASSERT_EQ(p0, p1);

  // Nothing fails here: neither CN declares anything, and neither loses its lease.
  std::mutex events_mu;
  std::vector<std::string> events;
  auto log = [&](const std::string& line) {
    std::lock_guard lock(events_mu);
    events.push_back(line);
  };
  (*cn0)->SetEventLog(log);
  (*cn1)->SetEventLog(log);
  ASSERT_TRUE((*cn0)->StartServing().ok());
  ASSERT_TRUE((*cn1)->StartServing().ok());
  EXPECT_FALSE((*cn0)->Submit(1, [](Session&) -> Task<void> { co_return; }));

  // Transfers submitted to both CNs, each routed by its first key: half of them run on the
  // other process's CN, and every one locks keys whose shards either CN manages.
  // They go in waves, as from a few clients: contended, but not all 400 on 16 keys at once.
  constexpr int kCalls = 200, kWave = 16;
  std::atomic<int> committed{0}, failed{0}, wrong_cn{0};
  std::vector<std::promise<void>> done(2 * kCalls);
  for (int i = 0; i < 2 * kCalls; i++) {
    if (i >= kWave) done[i - kWave].get_future().wait();
    Cluster& c = i % 2 == 0 ? **cn0 : **cn1;
    const uint16_t cn = i % 2 == 0 ? 0 : 1;
    const uint64_t from = (i * 7) % kKeys, to = (i * 7 + 1 + i % 5) % kKeys;
    ASSERT_TRUE(c.Submit(cn, [&, p0, from, to, cn, i](Session& s) -> Task<void> {
      if (s.cn() != cn) wrong_cn++;
      std::vector<std::byte> args(16);
      std::memcpy(args.data(), &from, 8);
      std::memcpy(args.data() + 8, &to, 8);
      Status st = co_await s.Call(p0, args, RouteHint{TxnKind::kReadWrite, t, from});
      (st.ok() ? committed : failed)++;
      if (!st.ok() && st.code() != Code::kAborted && st.code() != Code::kConflict) {
        ADD_FAILURE() << st.ToString();
      }
      done[i].set_value();
    }));
  }
  for (int i = 2 * kCalls - kWave; i < 2 * kCalls; i++) done[i].get_future().wait();
  EXPECT_EQ(wrong_cn.load(), 0);
  EXPECT_EQ(committed.load() + failed.load(), 2 * kCalls);
  EXPECT_GT(committed.load(), 3 * kCalls / 2) << failed.load() << " failed";

  // The total is what was loaded, read by a snapshot on CN 1 (its timestamp from CN 0).
  std::promise<uint64_t> sum;
  ASSERT_TRUE((*cn1)->Submit(1, [&](Session& s) -> Task<void> {
    Txn r = s.Begin(TxnKind::kReadOnly);
    for (uint64_t k = 0; k < kKeys; k++) r.AddRO(t, k);
    Status e = co_await r.Execute();
    uint64_t total = 0;
    for (uint64_t k = 0; e.ok() && k < kKeys; k++) total += AsU64(*r.Read(t, k));
    (void)co_await r.Commit();
    sum.set_value(e.ok() ? total : 0);
  }));
  EXPECT_EQ(sum.get_future().get(), kKeys * kStart);

  // Both stop at once, as `pond down` stops them: each serves the other until it is done.
  std::thread stop0([&] { (*cn0)->StopServing(); });
  (*cn1)->StopServing();
  stop0.join();
  {
    // Each says it left (docs/recovery.md "A clean stop"), and nothing else happens.
    std::lock_guard lock(events_mu);
    int left = 0;
    for (const std::string& e : events) {
      if (e.starts_with("left the cluster: ")) {
        left++;
      } else {
        ADD_FAILURE() << "unexpected event: " << e;
      }
    }
    EXPECT_EQ(left, 2);
  }
  // A stopped CN withdrew its workers' addresses.
  auto store = cluster::ZkConfigStore::Connect(zk_->address());
  ASSERT_TRUE(store.ok());
  for (uint16_t cn = 0; cn < 2; cn++) {
    auto v = (*store)->Get(cluster::CnKey("cnp", cn));
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->value.empty()) << "CN " << cn;
  }
}

TEST_P(CnProcessTest, ACnWaitsForItsPeersAndSaysWhichDidNotCome) {
  ClusterConfig c = ConfigOf(0);
  c.transport.peers_wait_ms = 300;
  auto cn0 = Cluster::Start(c);
  ASSERT_TRUE(cn0.ok()) << cn0.status().ToString();
  Status st = (*cn0)->StartServing();
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("CN 1 did not publish"), std::string::npos) << st.ToString();
  EXPECT_FALSE((*cn0)->serving());
}

TEST(CnProcessConfigTest, HostingOneCnNeedsUcxWithACoordinationService) {
  ClusterConfig c;
  c.transport.cn = 0;
  EXPECT_EQ(ValidateConfig(c).code(), Code::kInvalidArgument);
  c.transport.kind = "ucx";
  c.transport.coord = "127.0.0.1:1";
  c.transport.cn = c.cns;
  EXPECT_EQ(ValidateConfig(c).code(), Code::kInvalidArgument);
  c.transport.cn = -2;
  EXPECT_EQ(ValidateConfig(c).code(), Code::kInvalidArgument);
  c.transport.cn = 0;
  EXPECT_TRUE(ValidateConfig(c).ok());
}

INSTANTIATE_TEST_SUITE_P(Tls, CnProcessTest, testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace pond
