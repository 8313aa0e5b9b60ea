#include "pond/server/cluster_spec.h"

#include <gtest/gtest.h>

#include "pond/cluster/directory.h"

namespace pond::server {
namespace {

TEST(ClusterSpecTest, RoundTripsThroughJson) {
  ClusterSpec s;
  s.config.mns = 4;
  s.config.cns = 2;
  s.config.replication = 2;
  s.config.region_mib = 64;
  s.config.protocol = ProtocolByName("motor").value();
  s.config.isolation = Isolation::kSnapshot;
  s.config.transport.ucx_tls = "tcp";
  s.config.transport.ucx_net_devices = "lo";
  Result<ClusterSpec> back = ClusterSpec::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->config.mns, 4);
  EXPECT_EQ(back->config.cns, 2);
  EXPECT_EQ(back->config.replication, 2);
  EXPECT_EQ(back->config.region_mib, 64u);
  EXPECT_EQ(back->config.protocol.name, "motor");
  EXPECT_FALSE(back->config.protocol.cn_locks);
  EXPECT_EQ(back->config.isolation, Isolation::kSnapshot);
  EXPECT_EQ(back->config.transport.kind, "ucx");
  EXPECT_EQ(back->config.transport.ucx_tls, "tcp");
  EXPECT_EQ(back->config.transport.ucx_net_devices, "lo");
}

// Resharding's settings reach every CN daemon through the spec; a spec without them reads as
// before (no field written).
TEST(ClusterSpecTest, CarriesResharding) {
  ClusterSpec s;
  EXPECT_EQ(s.ToJson().find("reshard"), std::string::npos);
  s.config.reshard = ReshardConfig{.policy = ReshardConfig::Policy::kLoad,
                                   .interval_ns = 50'000'000,
                                   .over = 1.25,
                                   .intervals = 2,
                                   .drain_ns = 3'000'000};
  Result<ClusterSpec> back = ClusterSpec::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const ReshardConfig& r = back->config.reshard;
  EXPECT_EQ(r.policy, ReshardConfig::Policy::kLoad);
  EXPECT_EQ(r.interval_ns, 50'000'000u);
  EXPECT_EQ(r.over, 1.25);
  EXPECT_EQ(r.intervals, 2);
  EXPECT_EQ(r.drain_ns, 3'000'000u);
  for (auto p : {ReshardConfig::Policy::kLocality, ReshardConfig::Policy::kBoth}) {
    s.config.reshard.policy = p;
    back = ClusterSpec::FromJson(s.ToJson());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->config.reshard.policy, p) << ReshardPolicyName(p);
  }
}

TEST(ClusterSpecTest, RefusesWhatIsNotASpecWithOneLine) {
  for (const char* bad : {
           "", "[]", "{\"mns\": \"three\"}", "{\"mns\": 0}", "{\"mns\": 65}", "{\"colour\": 1}",
           "{\"protocol\": \"paxos\"}", "{\"isolation\": \"rc\"}", "{\"seed\": -1}",
           "{\"mns\": 2, \"replication\": 3}",  // ValidateConfig: R above the MNs
           "{\"region_mib\": 8}", "{\"mns\": 3", "{\"reshard\": \"zeus\"}",
           "{\"reshard\": \"load\", \"reshard_over\": 1}", "{\"reshard_interval_us\": 5}",
           "{\"reshard\": \"load\", \"protocol\": \"ford\"}",  // its locks are on MNs
       }) {
    Result<ClusterSpec> s = ClusterSpec::FromJson(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(s.status().message().find('\n'), std::string::npos) << bad;
  }
}

TEST(ClusterDirectoryTest, NamesAreCheckedAndKeysLieUnderTheCluster) {
  EXPECT_TRUE(cluster::CheckClusterName("pond-1.test_a").ok());
  for (const char* bad : {"", ".", "..", "a/b", "a b", "ü"}) {
    EXPECT_FALSE(cluster::CheckClusterName(bad).ok()) << bad;
  }
  EXPECT_EQ(cluster::SpecKey("c"), "/pond/c/spec");
  EXPECT_EQ(cluster::MnKey("c", 12), "/pond/c/mns/12");
}

}  // namespace
}  // namespace pond::server
