// A packet that does not parse is dropped whole and counted, never asserted on: packets come
// from other processes (docs/formats.md "CN packet").
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "pond/runtime/clocks.h"
#include "pond/transport/packet.h"
#include "pond/transport/raw_endpoint.h"

namespace pond {
namespace {

constexpr WorkerAddr kSelf{3, 1};

struct Msg {
  uint16_t kind;
  std::vector<std::byte> payload;
};

// A packet to kSelf from CN 0 worker 0, as Endpoint::EndRound lays it out.
std::vector<std::byte> Packet(const std::vector<Msg>& msgs, WorkerAddr to = kSelf) {
  PacketHeader h{kPacketMagic, 0, 0, to.cn, to.worker, static_cast<uint16_t>(msgs.size()), 0};
  std::vector<std::byte> p(sizeof(h));
  std::memcpy(p.data(), &h, sizeof(h));
  for (const Msg& m : msgs) {
    MessageHeader mh{m.kind, 0, static_cast<uint32_t>(m.payload.size())};
    const size_t at = p.size();
    p.resize(at + sizeof(mh) + PaddedLen(m.payload.size()));
    std::memcpy(p.data() + at, &mh, sizeof(mh));
    if (!m.payload.empty()) {
      std::memcpy(p.data() + at + sizeof(mh), m.payload.data(), m.payload.size());
    }
  }
  return p;
}

class MalformedPacketTest : public ::testing::Test {
 protected:
  MalformedPacketTest() {
    ep_.OnMessage(1, [this](const Message& m) { got_.push_back(m.payload.size()); });
  }
  uint64_t malformed() const { return ep_.stats().messages_malformed; }

  ManualClock clock_;
  Scheduler sched_{clock_};
  RawEndpoint ep_{kSelf, sched_};
  std::vector<size_t> got_;  // payload sizes of the kind-1 messages handled
};

TEST_F(MalformedPacketTest, AWellFormedPacketDeliversEveryMessage) {
  ep_.Deliver(Packet({{1, std::vector<std::byte>(5)}, {1, {}}, {1, std::vector<std::byte>(8)}}));
  EXPECT_EQ(got_, (std::vector<size_t>{5, 0, 8}));
  EXPECT_EQ(malformed(), 0u);
  EXPECT_EQ(ep_.stats().packets_received, 1u);
}

TEST_F(MalformedPacketTest, APacketThatDoesNotParseIsDroppedWhole) {
  const std::vector<std::byte> good = Packet({{1, std::vector<std::byte>(5)}, {1, {}}});
  std::vector<std::vector<std::byte>> bad;
  bad.emplace_back(good.begin(), good.begin() + sizeof(PacketHeader) - 1);  // short header
  bad.push_back(good);
  bad.back()[0] = std::byte{'X'};                      // bad magic
  bad.push_back(Packet({{1, {}}}, WorkerAddr{3, 2}));  // meant for another worker
  bad.push_back(Packet({{1, {}}}, WorkerAddr{4, 1}));  // ... of another CN
  // One message more than it holds: the first message must not be handled either.
  bad.push_back(good);
  bad.back()[offsetof(PacketHeader, count)] = std::byte{3};
  // The second message's header cut in half.
  bad.emplace_back(good.begin(), good.end() - 4);
  // The first message longer than the packet.
  bad.push_back(good);
  bad.back()[sizeof(PacketHeader) + offsetof(MessageHeader, len)] = std::byte{0xff};
  for (const auto& p : bad) ep_.Deliver(p);
  EXPECT_TRUE(got_.empty()) << "no message of a malformed packet was handled";
  EXPECT_EQ(malformed(), bad.size());
  EXPECT_EQ(ep_.stats().packets_received, 0u);
  // Expect: the endpoint goes on as before.
  ep_.Deliver(good);
  EXPECT_EQ(got_, (std::vector<size_t>{5, 0}));
}

TEST_F(MalformedPacketTest, TheLastMessagesPaddingMayBeCutOff) {
  std::vector<std::byte> p = Packet({{1, std::vector<std::byte>(5)}});
  p.resize(p.size() - 3);  // 5 bytes of payload, no padding
  ep_.Deliver(p);
  EXPECT_EQ(got_, (std::vector<size_t>{5}));
  EXPECT_EQ(malformed(), 0u);
}

TEST_F(MalformedPacketTest, AMessageOfAKindWithNoHandlerIsDroppedAndTheOthersDelivered) {
  ep_.Deliver(Packet({{1, std::vector<std::byte>(2)},
                      {0x7777, std::vector<std::byte>(9)},
                      {1, std::vector<std::byte>(3)}}));
  EXPECT_EQ(got_, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(malformed(), 1u);
}

TEST_F(MalformedPacketTest, AHandlerThatCannotReadAMessageCountsItOnTheEndpoint) {
  ep_.OnMessage(2, [this](const Message& m) {
    if (m.payload.size() != 8) ep_.CountMalformed();
  });
  ep_.Deliver(Packet({{2, std::vector<std::byte>(8)}, {2, std::vector<std::byte>(7)}}));
  EXPECT_EQ(malformed(), 1u);
}

}  // namespace
}  // namespace pond
