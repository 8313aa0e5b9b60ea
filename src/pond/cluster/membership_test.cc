// The configuration's encoding, the shard list's, and the coordination service stand-in's
// conditional puts.
#include "pond/cluster/membership.h"

#include <gtest/gtest.h>

#include <cstring>

#include "pond/cluster/directory.h"

namespace pond::cluster {
namespace {

Configuration Three() {
  Configuration c;
  c.epoch = 4;
  c.cns = {CnStatus{true, 0}, CnStatus{false, 2, 3, 7},
           CnStatus{true, 1, 0, 2}};  // CN 1: failed by epoch 3
  c.mns = {MnStatus{true}, MnStatus{false}, MnStatus{true, MnStatus::Rejoin::kFrozen},
           MnStatus{.alive = true, .rejoin = MnStatus::Rejoin::kSwitched, .incarnation = 3}};
  c.tso_host = 2;  // CN 0 failed and came back; the oracle moved to CN 2
  return c;
}

TEST(ConfigurationTest, EncodesAndDecodesExactly) {
  Configuration c = Three();
  Result<Configuration> d = Configuration::Decode(c.Encode());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, c);
  EXPECT_EQ(d->Alive(), (std::vector<uint16_t>{0, 2}));
}

// The packet filter every worker applies, packet by packet. In the simulator a crashed CN's
// packets die on the wire anyway, so only this test sees the filter on its own.
TEST(ConfigurationTest, PacketsOfDeadOrOldIncarnationsAreRefused) {
  Configuration c = Three();  // CN 0 alive at 0, CN 1 dead (was at 2), CN 2 alive at 1
  // The current incarnation of a live CN: taken.
  EXPECT_TRUE(c.AcceptsPacketFrom(0, 0));
  EXPECT_TRUE(c.AcceptsPacketFrom(2, 1));
  // An older incarnation of a live CN (it restarted; this packet is from before): refused.
  EXPECT_FALSE(c.AcceptsPacketFrom(2, 0));
  // A later one than the view knows (it restarted; this CN has not heard yet): refused until
  // the epoch arrives, as the restarted CN's requests are resent.
  EXPECT_FALSE(c.AcceptsPacketFrom(0, 1));
  // A CN declared dead, at the incarnation it died in: refused.
  EXPECT_FALSE(c.AcceptsPacketFrom(1, 2));
  EXPECT_FALSE(c.AcceptsPacketFrom(1, 3));
  // A CN beyond the view (none yet: every packet is taken).
  EXPECT_TRUE(c.AcceptsPacketFrom(7, 0));
  EXPECT_TRUE(Configuration{}.AcceptsPacketFrom(0, 5));
}

TEST(ConfigurationTest, MalformedBytesAreCorruptionNotACrash) {
  std::vector<std::byte> b = Three().Encode();
  EXPECT_EQ(Configuration::Decode(std::span(b).first(10)).status().code(), Code::kCorruption);
  std::vector<std::byte> longer = b;
  longer.push_back(std::byte{0});
  EXPECT_EQ(Configuration::Decode(longer).status().code(), Code::kCorruption);
  std::vector<std::byte> magic = b;
  magic[0] = std::byte{0};
  EXPECT_EQ(Configuration::Decode(magic).status().code(), Code::kCorruption);
  std::vector<std::byte> alive = b;
  alive[16] = std::byte{7};  // the first CN's alive flag
  EXPECT_EQ(Configuration::Decode(alive).status().code(), Code::kCorruption);
  std::vector<std::byte> mn_alive = b;
  mn_alive[16 + 3 * 16] = std::byte{2};  // the first MN's alive flag, after three CN entries
  EXPECT_EQ(Configuration::Decode(mn_alive).status().code(), Code::kCorruption);
  std::vector<std::byte> rejoin = b;
  rejoin[16 + 3 * 16 + 1] = std::byte{5};  // the first MN's rejoin state: 0 to 4 only
  EXPECT_EQ(Configuration::Decode(rejoin).status().code(), Code::kCorruption);
  std::vector<std::byte> dead_rejoining = b;
  dead_rejoining[16 + 3 * 16 + 8 + 1] = std::byte{1};  // MN 1 is down: it cannot be rejoining
  EXPECT_EQ(Configuration::Decode(dead_rejoining).status().code(), Code::kCorruption);
  std::vector<std::byte> reserved = b;
  reserved[16 + 3 * 16 + 2 * 8 + 3] = std::byte{1};
  EXPECT_EQ(Configuration::Decode(reserved).status().code(), Code::kCorruption);
  std::vector<std::byte> reserved2 = b;
  reserved2[16 + 3 * 16 + 2 * 8 + 7] = std::byte{1};  // past the MN's incarnation
  EXPECT_EQ(Configuration::Decode(reserved2).status().code(), Code::kCorruption);
  std::vector<std::byte> moved = b;
  moved[16 + 4] = std::byte{3};  // the first CN's moves: any count is well formed
  ASSERT_TRUE(Configuration::Decode(moved).ok());
  EXPECT_EQ(Configuration::Decode(moved)->cns[0].moves, 3u);
  std::vector<std::byte> live_failed = b;
  live_failed[16 + 8] = std::byte{1};  // CN 0 is alive: it has no failed epoch
  EXPECT_EQ(Configuration::Decode(live_failed).status().code(), Code::kCorruption);
  std::vector<std::byte> future = b;
  future[16 + 16 + 8] = std::byte{5};  // CN 1 failed by epoch 5, in a configuration of epoch 4
  EXPECT_EQ(Configuration::Decode(future).status().code(), Code::kCorruption);
  std::vector<std::byte> flags = b;
  flags[17] = std::byte{2};  // the first CN's flags: only bit 0 (hosts the oracle) means anything
  EXPECT_EQ(Configuration::Decode(flags).status().code(), Code::kCorruption);
  std::vector<std::byte> two_hosts = b;
  two_hosts[17] = std::byte{1};  // CN 0 hosts the oracle too, beside CN 2
  Result<Configuration> two = Configuration::Decode(two_hosts);
  EXPECT_EQ(two.status().code(), Code::kCorruption);
  EXPECT_NE(two.status().message().find("2 timestamp oracle hosts"), std::string::npos);
  std::vector<std::byte> no_host = b;
  no_host[16 + 2 * 16 + 1] = std::byte{0};  // CN 2's flags
  EXPECT_EQ(Configuration::Decode(no_host).status().code(), Code::kCorruption);
}

TEST(ShardListTest, RoundTripsAndRefusesWhatIsNotAnAscendingListOfShards) {
  const std::vector<uint32_t> ids = {0, 5, 4095};
  std::vector<std::byte> bytes = EncodeShardList(ids);
  EXPECT_EQ(bytes.size(), 16u);
  EXPECT_EQ(DecodeShardList(bytes, 4096).value(), ids);
  EXPECT_TRUE(DecodeShardList(EncodeShardList({}), 4096).value().empty());
  EXPECT_EQ(DecodeShardList(bytes, 4095).status().code(), Code::kCorruption) << "past the map";
  EXPECT_EQ(DecodeShardList(EncodeShardList({5, 5}), 4096).status().code(), Code::kCorruption);
  EXPECT_EQ(DecodeShardList(EncodeShardList({6, 5}), 4096).status().code(), Code::kCorruption);
  bytes.pop_back();
  EXPECT_EQ(DecodeShardList(bytes, 4096).status().code(), Code::kCorruption) << "cut short";
  EXPECT_EQ(DecodeShardList({}, 4096).status().code(), Code::kCorruption) << "no count";
  std::vector<std::byte> huge(4);
  const uint32_t count = 0xffffffffu;
  std::memcpy(huge.data(), &count, 4);
  EXPECT_EQ(DecodeShardList(huge, 4096).status().code(), Code::kCorruption) << "a lying count";
}

TEST(InMemoryConfigStoreTest, OnlyThePutThatReadTheCurrentVersionWins) {
  InMemoryConfigStore store;
  std::vector<uint64_t> seen;
  store.Watch(kConfigKey, [&seen](const Versioned& v) { seen.push_back(v.version); });
  EXPECT_EQ(store.Get(kConfigKey)->version, 0u);
  std::vector<std::byte> a = Three().Encode();
  ASSERT_EQ(store.PutIf(kConfigKey, a, 0).value(), 1u);
  // Two would-be managers read version 1; the first to put wins, the second is refused.
  Configuration next = Three();
  next.epoch = 5;
  ASSERT_EQ(store.PutIf(kConfigKey, next.Encode(), 1).value(), 2u);
  Result<uint64_t> loser = store.PutIf(kConfigKey, a, 1);
  EXPECT_EQ(loser.status().code(), Code::kConflict);
  EXPECT_EQ(Configuration::Decode(store.Get(kConfigKey)->value)->epoch, 5u);
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2})) << "watchers see every successful put only";
  EXPECT_EQ(store.PutIf("/other", a, 3).status().code(), Code::kConflict)
      << "a key that does not exist has version 0";
  EXPECT_EQ(store.puts(), 2u);
}

}  // namespace
}  // namespace pond::cluster
