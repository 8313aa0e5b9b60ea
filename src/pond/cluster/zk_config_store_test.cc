// The ConfigStore contract, held by the simulator's stand-in and by ZooKeeper alike — the latter
// against a real server this test starts on loopback (LocalZooKeeper) and stops again.
#include "pond/cluster/zk_config_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "pond/base/assert.h"
#include "pond/base/temp_dir.h"
#include "pond/cluster/local_zookeeper.h"

namespace pond::cluster {
namespace {

std::vector<std::byte> Bytes(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string Text(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// What every ConfigStore must do: versions from 1, conditional puts that only the writer of the
// current version wins, values read back exactly, watches that see newer versions.
void ExpectTheContract(ConfigStore& store, const std::function<void()>& settle) {
  const std::string key = "/pond/test/configuration";
  Result<Versioned> absent = store.Get(key);
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_EQ(absent->version, 0u);
  EXPECT_TRUE(absent->value.empty());

  std::mutex mu;
  std::vector<uint64_t> seen;
  std::string last;
  store.Watch(key, [&](const Versioned& v) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(v.version);
    last = Text(v.value);
  });

  Result<uint64_t> first = store.PutIf(key, Bytes("epoch 1"), 0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, 1u);
  EXPECT_EQ(store.PutIf(key, Bytes("again"), 0).status().code(), Code::kConflict)
      << "a create of a key that exists";
  // Two would-be configuration managers read version 1: the first to put wins.
  Result<uint64_t> winner = store.PutIf(key, Bytes("epoch 2"), 1);
  ASSERT_TRUE(winner.ok()) << winner.status().ToString();
  EXPECT_EQ(*winner, 2u);
  EXPECT_EQ(store.PutIf(key, Bytes("loser"), 1).status().code(), Code::kConflict);
  EXPECT_EQ(store.PutIf(key, Bytes("ahead"), 7).status().code(), Code::kConflict);
  EXPECT_EQ(store.PutIf("/pond/test/other", Bytes("x"), 3).status().code(), Code::kConflict)
      << "a key that does not exist has version 0";

  // Bytes come back exactly, zeros included.
  std::vector<std::byte> binary = {std::byte{0}, std::byte{0xff}, std::byte{0}, std::byte{7}};
  ASSERT_TRUE(store.PutIf(key, binary, 2).ok());
  Result<Versioned> got = store.Get(key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->version, 3u);
  EXPECT_EQ(got->value, binary);
  ASSERT_TRUE(store.PutIf(key, Bytes("epoch 4"), 3).ok());

  settle();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(seen.empty()) << "the watch saw no put";
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), 4u) << "the watch ends on the newest version";
  EXPECT_EQ(last, "epoch 4");

  EXPECT_EQ(store.Get("no-slash").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store.PutIf("/trailing/", Bytes("x"), 0).status().code(), Code::kInvalidArgument);
}

TEST(InMemoryConfigStoreTest, HoldsTheContract) {
  InMemoryConfigStore store;
  ExpectTheContract(store, [] {});
}

class ZkConfigStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<LocalZooKeeper>> zk = LocalZooKeeper::Start(dir_.path() + "/zk");
    ASSERT_TRUE(zk.ok()) << zk.status().ToString();
    zk_ = std::move(zk).value();
  }
  std::unique_ptr<ZkConfigStore> MustConnect() {
    Result<std::unique_ptr<ZkConfigStore>> s = ZkConfigStore::Connect(zk_->address(), 4000, 10000);
    POND_CHECK_MSG(s.ok(), s.status().ToString().c_str());
    return std::move(s).value();
  }
  // Watch callbacks come on the client's thread: wait (bounded) for them to catch up.
  static void Settle(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  TempDir dir_{"pond-zk"};
  std::unique_ptr<LocalZooKeeper> zk_;
};

TEST_F(ZkConfigStoreTest, HoldsTheContract) {
  std::unique_ptr<ZkConfigStore> store = MustConnect();
  // A parent the first put makes holds no data at all: it reads as empty, not as an error.
  ASSERT_TRUE(store->PutIf("/pond/parent/child", Bytes("x"), 0).ok());
  Result<Versioned> parent = store->Get("/pond/parent");
  ASSERT_TRUE(parent.ok()) << parent.status().ToString();
  EXPECT_EQ(parent->version, 1u);
  EXPECT_TRUE(parent->value.empty());
  // A second session watches too: a configuration change reaches every CN.
  std::unique_ptr<ZkConfigStore> other = MustConnect();
  std::atomic<uint64_t> other_seen{0};
  other->Watch("/pond/test/configuration",
               [&other_seen](const Versioned& v) { other_seen = v.version; });
  ExpectTheContract(*store, [] {
    // The last put's watch event may still be on its way.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  Settle([&] { return other_seen.load() == 4; });
  EXPECT_EQ(other_seen.load(), 4u) << "the other session's watch saw the newest version";
}

// Of several would-be configuration managers racing to write the next epoch from the same
// version, exactly one wins, whichever session it is in.
TEST_F(ZkConfigStoreTest, ExactlyOneOfRacingManagersWins) {
  std::unique_ptr<ZkConfigStore> setup = MustConnect();
  ASSERT_TRUE(setup->PutIf(kConfigKey, Bytes("epoch 1"), 0).ok());
  constexpr int kManagers = 4;
  std::vector<std::unique_ptr<ZkConfigStore>> stores;
  for (int i = 0; i < kManagers; i++) stores.push_back(MustConnect());
  std::atomic<int> wins{0}, conflicts{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kManagers; i++) {
    threads.emplace_back([&, i] {
      Result<uint64_t> r =
          stores[i]->PutIf(kConfigKey, Bytes("epoch 2 by " + std::to_string(i)), 1);
      if (r.ok()) {
        wins++;
      } else if (r.status().code() == Code::kConflict) {
        conflicts++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(conflicts.load(), kManagers - 1);
  Result<Versioned> v = setup->Get(kConfigKey);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->version, 2u);
  EXPECT_EQ(Text(v->value).rfind("epoch 2 by ", 0), 0u);
}

// With the server gone, calls fail in bounded time — Unavailable, or Unknown for a put whose
// fate the lost connection hides — and never hang.
TEST_F(ZkConfigStoreTest, ALostServerFailsCallsInsteadOfHanging) {
  std::unique_ptr<ZkConfigStore> store = MustConnect();
  ASSERT_TRUE(store->PutIf(kConfigKey, Bytes("epoch 1"), 0).ok());
  zk_->Stop();
  const auto start = std::chrono::steady_clock::now();
  Result<uint64_t> put = store->PutIf(kConfigKey, Bytes("epoch 2"), 1);
  EXPECT_TRUE(put.status().code() == Code::kUnavailable || put.status().code() == Code::kUnknown)
      << put.status().ToString();
  Result<Versioned> get = store->Get(kConfigKey);
  EXPECT_EQ(get.status().code(), Code::kUnavailable) << get.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// A session of the C client with no credential at all: what anyone who reaches ZooKeeper has.
class Stranger {
 public:
  explicit Stranger(const std::string& hosts) {
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 4000, nullptr, nullptr, 0);
    POND_CHECK(zh_ != nullptr);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (zoo_state(zh_) != ZOO_CONNECTED_STATE && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Stranger() { zookeeper_close(zh_); }
  zhandle_t* zh() { return zh_; }

 private:
  zhandle_t* zh_;
};

constexpr const char* kSecret = "0123456789abcdef0123456789abcdef";
constexpr const char* kOtherSecret = "fedcba9876543210fedcba9876543210";

// Issue 34's "a configuration write without the ZooKeeper secret is refused": the cluster's
// znodes are its daemons' to change; anyone may read them; a stranger, a session without the
// secret and a session with another cluster's secret can change nothing, and a daemon refuses
// to start against a root that is open or another secret's.
TEST_F(ZkConfigStoreTest, TheClustersSecretGuardsItsZnodes) {
  Result<std::unique_ptr<ZkConfigStore>> guarded =
      ZkConfigStore::Connect(zk_->address(), ZkGuard{"/pond/test", kSecret}, 4000, 10000);
  ASSERT_TRUE(guarded.ok()) << guarded.status().ToString();
  ExpectTheContract(**guarded, [] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  const std::string key = "/pond/test/configuration";

  // Without the secret: it reads, and every write is refused, the value unchanged.
  std::unique_ptr<ZkConfigStore> open = MustConnect();
  Result<Versioned> read = open->Get(key);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->version, 4u);
  Result<uint64_t> put = open->PutIf(key, Bytes("epoch 5 by a stranger"), 4);
  EXPECT_EQ(put.status().code(), Code::kPermissionDenied) << put.status().ToString();
  EXPECT_EQ(open->PutIf("/pond/test/shards/9", Bytes("x"), 0).status().code(),
            Code::kPermissionDenied);
  Stranger stranger(zk_->address());
  EXPECT_EQ(zoo_set(stranger.zh(), key.c_str(), "x", 1, -1), ZNOAUTH);
  EXPECT_EQ(zoo_delete(stranger.zh(), key.c_str(), -1), ZNOAUTH);
  EXPECT_EQ(zoo_create(stranger.zh(), "/pond/test/spec", "x", 1, &ZOO_OPEN_ACL_UNSAFE,
                       ZOO_PERSISTENT, nullptr, 0),
            ZNOAUTH);
  EXPECT_EQ(zoo_set_acl(stranger.zh(), "/pond/test", -1, &ZOO_OPEN_ACL_UNSAFE), ZNOAUTH);
  EXPECT_EQ(zoo_set_acl(stranger.zh(), key.c_str(), -1, &ZOO_OPEN_ACL_UNSAFE), ZNOAUTH);
  EXPECT_EQ(zoo_set_acl(stranger.zh(), "/pond", -1, &ZOO_OPEN_ACL_UNSAFE), ZNOAUTH)
      << "nor open the parent clusters share";
  EXPECT_EQ(zoo_delete(stranger.zh(), "/pond/test", -1), ZNOAUTH) << "nor delete the root";
  Result<Versioned> after = (*guarded)->Get(key);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->version, 4u);
  EXPECT_EQ(Text(after->value), "epoch 4");

  // Another cluster's secret: refused at the start, as a daemon with the wrong certs directory.
  Result<std::unique_ptr<ZkConfigStore>> wrong =
      ZkConfigStore::Connect(zk_->address(), ZkGuard{"/pond/test", kOtherSecret}, 4000, 10000);
  EXPECT_EQ(wrong.status().code(), Code::kPermissionDenied) << wrong.status().ToString();
  EXPECT_NE(wrong.status().message().find("another secret"), std::string::npos);
  // An --insecure daemon against this closed cluster is told so at the start.
  Result<std::unique_ptr<ZkConfigStore>> insecure =
      ZkConfigStore::Connect(zk_->address(), ZkGuard{"/pond/test", ""}, 4000, 10000);
  EXPECT_EQ(insecure.status().code(), Code::kPermissionDenied) << insecure.status().ToString();

  // Another cluster beside it, with its own secret, under the same shared parent.
  Result<std::unique_ptr<ZkConfigStore>> beside =
      ZkConfigStore::Connect(zk_->address(), ZkGuard{"/pond/beside", kOtherSecret}, 4000, 10000);
  ASSERT_TRUE(beside.ok()) << beside.status().ToString();
  EXPECT_TRUE((*beside)->PutIf("/pond/beside/spec", Bytes("{}"), 0).ok());
  EXPECT_EQ((*beside)->PutIf(key, Bytes("epoch 5 by a neighbour"), 4).status().code(),
            Code::kPermissionDenied);

  // A cluster whose znodes were made open (a stranger got there first, or it ran --insecure):
  // a daemon with a secret refuses it, naming who else could change it.
  ASSERT_TRUE(open->PutIf("/pond/made-open/spec", Bytes("{}"), 0).ok());
  Result<std::unique_ptr<ZkConfigStore>> refused =
      ZkConfigStore::Connect(zk_->address(), ZkGuard{"/pond/made-open", kSecret}, 4000, 10000);
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("world:anyone"), std::string::npos)
      << refused.status().message();
  // Also when only a znode deep below a guarded root is open.
  ASSERT_EQ(zoo_create(stranger.zh(), "/pond/beside/x", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                       nullptr, 0),
            ZNOAUTH)
      << "a stranger cannot plant one";
}

TEST(ZkConfigStoreConnectTest, NoServerIsUnavailableWithinTheTimeout) {
  // Port 1 on loopback: privileged, and nothing listens there.
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<ZkConfigStore>> s = ZkConfigStore::Connect("127.0.0.1:1", 2000, 1000);
  EXPECT_EQ(s.status().code(), Code::kUnavailable) << s.status().ToString();
  EXPECT_NE(s.status().message().find("127.0.0.1:1"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(ZkConfigStore::Connect("", 2000, 1000).status().code(), Code::kInvalidArgument);
}

TEST(LocalZooKeeperTest, StopsAndLeavesNoProcessBehind) {
  TempDir dir("pond-zk");
  Result<std::unique_ptr<LocalZooKeeper>> zk = LocalZooKeeper::Start(dir.path() + "/zk");
  ASSERT_TRUE(zk.ok()) << zk.status().ToString();
  const pid_t group = (*zk)->pid();
  ASSERT_GT(group, 0);
  (*zk)->Stop();
  (*zk)->Stop();  // harmless
  EXPECT_EQ(kill(-group, 0), -1) << "a process of the server's group is still alive";
}

}  // namespace
}  // namespace pond::cluster
