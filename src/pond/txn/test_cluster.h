// Helpers of the transaction tests: small clusters of every protocol, loaded with 16-byte values
// whose first 8 bytes are a number.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pond/base/assert.h"
#include "pond/cluster.h"

namespace pond::testing_cluster {

// The four protocols, every ablation step (motor once) and each of Pond's steps on lotus alone.
inline std::vector<std::string> AllConfigurations() {
  std::vector<std::string> names = ProtocolNames();
  for (const auto& s : AblationSteps()) {
    if (s != "motor") names.push_back(s);
  }
  for (const auto& s : PondSteps()) names.push_back("lotus+" + s);
  return names;
}

// A protocol name as a test name: "+full-record" is "Pfull_record".
inline std::string ProtocolTestName(const ::testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  for (char& ch : n) {
    if (ch == '+') ch = 'P';
    if (ch == '-') ch = '_';
  }
  return n;
}

inline ClusterConfig Config(const std::string& protocol, Isolation iso = Isolation::kSerializable) {
  ClusterConfig c;
  c.protocol = ProtocolByName(protocol).value();
  c.mns = 3;
  c.cns = 3;
  c.workers_per_cn = 1;
  c.replication = 2;
  c.versions = 3;
  c.isolation = iso;
  c.region_mib = 64;
  c.lock_buckets = 1 << 12;
  c.vt_cache_entries = 1 << 12;
  c.addr_cache_entries = 1 << 12;
  return c;
}

inline std::vector<std::byte> U64Value(uint64_t x, uint32_t bytes = 16) {
  std::vector<std::byte> v(bytes);
  std::memcpy(v.data(), &x, 8);
  return v;
}

inline uint64_t AsU64(std::span<const std::byte> v) {
  uint64_t x;
  std::memcpy(&x, v.data(), 8);
  return x;
}

// Destroys a test's cluster after checking that every replica of every record agrees, no cell is
// left INVISIBLE and no lock word held (Cluster::CheckReplicas): every test that runs
// transactions through these helpers also checks replica agreement, so a commit that lets a
// backup fall behind its primary fails whichever test happens to race it.
struct CheckReplicasAtEnd {
  void operator()(Cluster* c) const {
    if (c == nullptr) return;
    if (c->serving()) c->StopServing();
    ReplicaCheck r = c->CheckReplicas();
    EXPECT_TRUE(r.ok()) << "replicas disagree after the test's runs: " << r.disagreements
                        << " disagreements, " << r.invisible << " cells left INVISIBLE, "
                        << r.locked << " lock words held, " << r.lost_commits
                        << " lost commits; first: "
                        << (r.problems.empty() ? std::string("-") : r.problems[0]);
    delete c;
  }
};
using TestCluster = std::unique_ptr<Cluster, CheckReplicasAtEnd>;

inline TestCluster Checked(std::unique_ptr<Cluster> c) { return TestCluster(c.release()); }

// A cluster (simulated if `model` is given) with one table of `keys` keys 0..keys-1, each
// holding start_value (or 1000 + key if start_value is 0).
inline TestCluster StartLoaded(const ClusterConfig& c, uint16_t* table, uint64_t keys,
                               uint64_t start_value, const Testbed* model = nullptr) {
  auto started = model != nullptr ? Cluster::StartSimulated(c, *model) : Cluster::Start(c);
  POND_CHECK_MSG(started.ok(), started.status().ToString().c_str());
  TestCluster cl = Checked(std::move(started).value());
  auto t = cl->CreateTable({.name = "t", .value_bytes = 16, .capacity = 1000});
  POND_CHECK(t.ok());
  *table = *t;
  Status s = cl->Load(*t, keys, [&](uint64_t i, uint64_t* key, std::span<std::byte> v) {
    *key = i;
    uint64_t val = start_value == 0 ? 1000 + i : start_value;
    std::memcpy(v.data(), &val, 8);
  });
  POND_CHECK_MSG(s.ok(), s.ToString().c_str());
  return cl;
}

// Runs `fn` once, on CN `cn`'s worker.
inline void RunOn(Cluster& c, uint16_t cn, const std::function<Task<void>(Session&)>& fn) {
  c.Run(1, [&](Session& s) -> Task<void> {
    if (s.cn() == cn) co_await fn(s);
  });
}

}  // namespace pond::testing_cluster
