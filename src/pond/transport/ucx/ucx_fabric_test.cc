// The `ucx` transport over shared memory and over TCP on loopback: the Endpoint contract every
// transport keeps (endpoint_contract.h), then what is UCX's own — packets sent eagerly whatever
// their size, a clear error for transports UCX lacks, and MN descriptors.
#include "pond/transport/ucx/ucx_fabric.h"

#include <gtest/gtest.h>

#include <iostream>

#include <cstring>
#include <thread>

#include "pond/transport/endpoint_contract.h"
#include "pond/transport/ucx/batch_message.h"
#include "pond/transport/ucx/memory_node.h"

namespace pond::ucx {
namespace {

UcxOptions OptionsFor(const std::string& tls) {
  UcxOptions o;
  o.tls = tls;
  o.net_devices = "lo";  // tests stay on loopback
  return o;
}

// MNs as daemons would serve them, each on a thread of its own, and their descriptors.
void StartMns(MnId n, const UcxOptions& o, std::vector<MnDescriptor>* mns,
              std::vector<std::unique_ptr<UcxMemoryNode>>* nodes) {
  for (MnId i = 0; i < n; i++) {
    auto mn = UcxMemoryNode::Start(i, 1 << 20, o);
    ASSERT_TRUE(mn.ok()) << mn.status().ToString();
    mns->push_back((*mn)->descriptor());
    nodes->push_back(std::move(mn).value());
  }
}

class UcxFabricTest : public ::testing::TestWithParam<std::string> {
 protected:
  contract::MakeFabric Make() {
    return [tls = GetParam()](uint16_t mns, uint64_t bytes) -> std::unique_ptr<Fabric> {
      auto f = UcxFabric::CreateWithLocalMns(mns, bytes, OptionsFor(tls));
      EXPECT_TRUE(f.ok()) << f.status().ToString();
      return std::move(f).value();
    };
  }
};

TEST_P(UcxFabricTest, ReadsBackWhatItWrote) { contract::ReadsBackWhatItWrote(Make()); }
TEST_P(UcxFabricTest, BatchAppliesInPostingOrder) { contract::BatchAppliesInPostingOrder(Make()); }
TEST_P(UcxFabricTest, FailedCasReturnsCurrentValue) {
  contract::FailedCasReturnsCurrentValue(Make());
}
TEST_P(UcxFabricTest, OutOfRegionAccessFailsTheBatch) {
  contract::OutOfRegionAccessFailsTheBatch(Make());
}
TEST_P(UcxFabricTest, MessagesToOneWorkerInOneRoundShareAPacket) {
  contract::MessagesToOneWorkerInOneRoundShareAPacket(Make());
}
// Fewer updates than on the local transport: over TCP each is a few round trips.
TEST_P(UcxFabricTest, ConcurrentFaaAndCasAreAtomic) {
  contract::ConcurrentFaaAndCasAreAtomic(Make(), 3, 3000);
}

// Over TCP the MN's worker does one verb at a time, so copies are never torn there: fewer writes.
TEST_P(UcxFabricTest, AReadThatSawPartOfAWriteSeesItsHead) {
  const int writes = GetParam() == std::string("shm") ? 200000 : 10000;
  std::cout << contract::AReadThatSawPartOfAWriteSeesItsHead(Make(), writes) << " torn copies\n";
}

TEST_P(UcxFabricTest, ALargePacketArrivesWhole) {
  // Packets are sent eagerly whatever their size, so the handler always has all of one.
  auto f = Make()(1, 1 << 20);
  contract::Worker a(*f, {0, 0});
  contract::Worker b(*f, {1, 0});
  std::vector<std::byte> payload(kMessageLenMax);
  for (size_t i = 0; i < payload.size(); i++) payload[i] = std::byte(i * 13);
  bool same = false;
  b.ep->OnMessage(3, [&](const Message& m) {
    same = m.payload.size() == payload.size() &&
           std::memcmp(m.payload.data(), payload.data(), payload.size()) == 0;
  });
  a.ep->Send({1, 0}, 3, payload);
  a.ep->EndRound();
  ASSERT_TRUE(b.RunUntil([&] {
    a.sched.RunOnce();
    return same;
  }));
}

// Sends to a peer that never takes them (a process that exited, or stopped) fill its queue, and
// closing the sender then must neither hang nor abort the process: over TCP the forced close
// cancels them; over shared memory nothing can, and the sender's UCX worker is left behind.
TEST_P(UcxFabricTest, ClosingAWorkerWhosePeerStoppedTakingItsSendsEndsInSeconds) {
  auto f = Make()(1, 1 << 20);
  auto a = std::make_unique<contract::Worker>(*f, WorkerAddr{0, 0});
  contract::Worker b(*f, {1, 0});  // never run: takes nothing
  const std::vector<std::byte> payload(8000);
  for (int i = 0; i < 2000; i++) {
    a->ep->Send({1, 0}, 3, payload);
    a->ep->EndRound();
    a->sched.RunOnce();
  }
  const auto t0 = std::chrono::steady_clock::now();
  a.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  // The fabric goes on: a new worker reaches the MN.
  contract::Worker c(*f, {2, 0});
  c.Run([](Endpoint* ep) -> Task<void> {
    char out[5] = "fine", in[5] = {};
    ep->Write(GAddr::Make(0, 64), out, sizeof(out));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    ep->Read(GAddr::Make(0, 64), in, sizeof(in));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_STREQ(in, "fine");
  }(c.ep.get()));
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxFabricTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

// An MN the configuration declared down is given up at once: its batches fail as unreachable
// without being sent (over TCP, one to a host beyond a cut would wait for the kernel's
// retransmits), and once it is let back in they reach it again.
TEST_P(UcxFabricTest, AnMnDeclaredDownFailsAtOnceUntilLetBackIn) {
  std::unique_ptr<Fabric> f = Make()(2, 1 << 20);
  auto* fabric = static_cast<UcxFabric*>(f.get());
  contract::Worker w(*f, {0, 0});
  w.Run([](UcxFabric* fabric, Endpoint* ep) -> Task<void> {
    uint64_t v = 7, back = 0;
    ep->Write(GAddr::Make(1, 64), &v, sizeof(v));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    fabric->SetMnDown(1, true);
    for (int i = 0; i < 2; i++) {
      ep->Read(GAddr::Make(0, 64), &back, sizeof(back));
      ep->Read(GAddr::Make(1, 64), &back, sizeof(back));
      Endpoint::FlushResult r = co_await ep->FlushReporting();
      EXPECT_EQ(r.status.code(), Code::kUnavailable) << r.status.ToString();
      EXPECT_EQ(r.unreachable, uint64_t{1} << 1) << "MN 0 answers; only MN 1 is down";
    }
    fabric->SetMnDown(1, false);
    back = 0;
    ep->Read(GAddr::Make(1, 64), &back, sizeof(back));
    Status st = co_await ep->Flush();
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(back, 7u) << "let back in, MN 1 is reached again";
  }(fabric, w.ep.get()));
}

// A CN process that starts while an MN's daemon is dead (a CN restarted after an MN was killed)
// must come up and use the MNs it can reach; the dead one's batches fail as a down MN's do.
TEST(UcxFabricTest, AnMnDeadAtStartIsDownNotFatal) {
  const UcxOptions o = OptionsFor("tcp");
  std::vector<MnDescriptor> mns;
  std::vector<std::unique_ptr<UcxMemoryNode>> nodes;
  ASSERT_NO_FATAL_FAILURE(StartMns(2, o, &mns, &nodes));
  nodes[1].reset();  // MN 1's daemon dies before the CN starts
  auto f = UcxFabric::Connect(mns, o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  contract::Worker w(**f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t v = 42, back = 0;
    ep->Write(GAddr::Make(0, 64), &v, sizeof(v));
    ep->Read(GAddr::Make(0, 64), &back, sizeof(back));
    Status r0 = co_await ep->Flush();
    EXPECT_TRUE(r0.ok()) << r0.ToString();
    EXPECT_EQ(back, 42u);
    for (int i = 0; i < 3; i++) {  // and every later batch too, retried or not
      ep->Read(GAddr::Make(1, 64), &back, sizeof(back));
      Endpoint::FlushResult r1 = co_await ep->FlushReporting();
      EXPECT_EQ(r1.status.code(), Code::kUnavailable) << r1.status.ToString();
      EXPECT_EQ(r1.unreachable, uint64_t{1} << 1);
    }
  }(w.ep.get()));
}

// Over TCP a batch goes to its MN as one message the MN answers (batch_message.h), so an MN that
// dies after the message left must still end the batch: as unreachable, never by waiting for an
// answer that cannot come.
TEST(UcxFabricTest, AnMnThatDiesFailsItsBatchesAsUnreachable) {
  const UcxOptions o = OptionsFor("tcp");
  std::vector<MnDescriptor> mns;
  std::vector<std::unique_ptr<UcxMemoryNode>> nodes;
  ASSERT_NO_FATAL_FAILURE(StartMns(2, o, &mns, &nodes));
  auto f = UcxFabric::Connect(mns, o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  contract::Worker w(**f, {0, 0});
  w.Run([](std::vector<std::unique_ptr<UcxMemoryNode>>* nodes, Endpoint* ep) -> Task<void> {
    uint64_t v = 42, back = 0;
    ep->Write(GAddr::Make(1, 64), &v, sizeof(v));
    ep->Read(GAddr::Make(1, 64), &back, sizeof(back));
    Status st = co_await ep->Flush();
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(back, 42u) << "answered in one message";
    (*nodes)[1].reset();  // MN 1's process dies, its connections with it
    for (int i = 0; i < 3; i++) {
      ep->Read(GAddr::Make(0, 64), &back, sizeof(back));
      ep->Read(GAddr::Make(1, 64), &back, sizeof(back));
      Endpoint::FlushResult r = co_await ep->FlushReporting();
      EXPECT_EQ(r.status.code(), Code::kUnavailable) << r.status.ToString();
      EXPECT_EQ(r.unreachable, uint64_t{1} << 1) << "MN 0 answers; only MN 1 is gone";
    }
  }(&nodes, w.ep.get()));
}

// A batch larger than one message (a bulk load's large WRITEs), with ops longer than a message
// may hold, goes over TCP as several messages in posting order — never as UCX RMA, whose
// emulation would act on any address a peer names.
TEST(UcxFabricTest, ABatchTooLargeForOneMessageGoesAsSeveralInOrder) {
  auto made = UcxFabric::CreateWithLocalMns(1, 4 << 20, OptionsFor("tcp"));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<UcxFabric> f = std::move(made).value();
  contract::Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    std::vector<uint8_t> big(3 * kBatchMessageMax + 4096), back(big.size()), again(24);
    for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<uint8_t>(i * 7 + 1);
    uint64_t old = 0;
    ep->Write(GAddr::Make(0, 4096), big.data(), static_cast<uint32_t>(big.size()));
    ep->Faa(GAddr::Make(0, 4096), 1, &old);
    ep->Read(GAddr::Make(0, 4096), back.data(), static_cast<uint32_t>(back.size()));
    // Beyond the region: the ops before it apply, and the batch fails (as on the local fabric).
    ep->Write(GAddr::Make(0, (4 << 20) - 8), again.data(), static_cast<uint32_t>(again.size()));
    Status st = co_await ep->Flush();
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
    uint64_t first = 0;
    std::memcpy(&first, big.data(), 8);
    EXPECT_EQ(old, first) << "the FAA comes after the WRITE";
    big[0] = static_cast<uint8_t>(big[0] + 1);  // what the FAA added to the low byte
    EXPECT_EQ(back, big) << "and the READ after both";
  }(w.ep.get()));
  // Three messages' worth and a page each way, in messages of at most kBatchMessageMax: the
  // WRITE's three full pieces, its last with the FAA and the READ's first, two more, the last.
  EXPECT_EQ(f->local_mn(0)->batches_answered(), 7u);
}

TEST(UcxOptionsTest, AnUnknownTransportIsAClearError) {
  auto f = UcxFabric::CreateWithLocalMns(1, 1 << 20, OptionsFor("no-such-transport"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().ToString().find("no-such-transport"), std::string::npos)
      << f.status().ToString();
}

TEST(MnDescriptorTest, RoundTripsAndRefusesWhatIsNotOne) {
  MnDescriptor d;
  d.mn = 2;
  d.base = 0x7f0000001000;
  d.bytes = 1 << 30;
  d.worker_address = {std::byte{1}, std::byte{2}, std::byte{3}};
  d.rkey = {std::byte{9}, std::byte{8}};
  std::vector<std::byte> e = d.Encode();
  EXPECT_EQ(e.size(), sizeof(MnDescriptorHeader) + 5);
  auto back = MnDescriptor::Decode(e);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->mn, 2);
  EXPECT_EQ(back->base, d.base);
  EXPECT_EQ(back->bytes, d.bytes);
  EXPECT_EQ(back->worker_address, d.worker_address);
  EXPECT_EQ(back->rkey, d.rkey);
  EXPECT_FALSE(MnDescriptor::Decode(std::span(e).first(10)).ok()) << "short";
  std::vector<std::byte> longer = e;
  longer.push_back(std::byte{0});
  EXPECT_FALSE(MnDescriptor::Decode(longer).ok()) << "trailing bytes";
  std::vector<std::byte> bad = e;
  bad[0] = std::byte{0};
  EXPECT_FALSE(MnDescriptor::Decode(bad).ok()) << "magic";
  MnDescriptor empty = d;
  empty.rkey.clear();
  Result<MnDescriptor> sealed = MnDescriptor::Decode(empty.Encode());
  ASSERT_TRUE(sealed.ok()) << "a sealed descriptor (no rkey) reads: " << sealed.status().ToString();
  EXPECT_TRUE(sealed->rkey.empty());
}

TEST(CnDescriptorTest, RoundTripsAndRefusesWhatIsNotOne) {
  CnDescriptor d;
  d.cn = 3;
  d.incarnation = 1;
  d.workers = {{std::byte{1}, std::byte{2}}, {std::byte{7}}};
  std::vector<std::byte> e = d.Encode();
  EXPECT_EQ(e.size(), sizeof(CnDescriptorHeader) + 2 * 4 + 3);
  auto back = CnDescriptor::Decode(e);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cn, 3);
  EXPECT_EQ(back->incarnation, 1);
  EXPECT_EQ(back->workers, d.workers);
  // Every cut of it is refused, as is anything after it.
  for (size_t n = 0; n < e.size(); n++) {
    EXPECT_FALSE(CnDescriptor::Decode(std::span(e).first(n)).ok()) << n << " bytes";
  }
  std::vector<std::byte> longer = e;
  longer.push_back(std::byte{0});
  EXPECT_FALSE(CnDescriptor::Decode(longer).ok()) << "trailing bytes";
  std::vector<std::byte> bad = e;
  bad[0] = std::byte{0};
  EXPECT_FALSE(CnDescriptor::Decode(bad).ok()) << "magic";
  CnDescriptor none = d;
  none.workers.clear();
  EXPECT_FALSE(CnDescriptor::Decode(none.Encode()).ok()) << "no workers";
  CnDescriptor blank = d;
  blank.workers[1].clear();
  EXPECT_FALSE(CnDescriptor::Decode(blank.Encode()).ok()) << "an empty address";
  // A MN descriptor is not a CN descriptor.
  MnDescriptor mn;
  mn.worker_address = {std::byte{1}};
  mn.rkey = {std::byte{1}};
  mn.bytes = 1;
  EXPECT_FALSE(CnDescriptor::Decode(mn.Encode()).ok());
}

}  // namespace
}  // namespace pond::ucx
