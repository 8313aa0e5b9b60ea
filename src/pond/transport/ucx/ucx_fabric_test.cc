// The Endpoint contract on the `ucx` transport, over shared memory and over TCP on loopback:
// the same properties the local fabric's tests check, since protocols rely on each of them.
#include "pond/transport/ucx/ucx_fabric.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "pond/runtime/clocks.h"

namespace pond::ucx {
namespace {

struct Worker {
  ManualClock clock;
  Scheduler sched{clock};
  std::unique_ptr<Endpoint> ep;
  Worker(Fabric& f, WorkerAddr a) { ep = f.CreateEndpoint(a, sched); }
  void Run(Task<void> t) {
    sched.Spawn(std::move(t));
    sched.RunUntilIdle();
  }
  // Runs rounds until `done` holds (a packet over TCP takes a few).
  template <typename F>
  void RunUntil(F done) {
    for (int i = 0; i < 1000000 && !done(); i++) sched.RunOnce();
    ASSERT_TRUE(done());
  }
};

UcxOptions OptionsFor(const std::string& tls) {
  UcxOptions o;
  o.tls = tls;
  o.net_devices = "lo";  // tests stay on loopback
  return o;
}

class UcxFabricTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<UcxFabric> MakeFabric(uint16_t mns = 2, uint64_t bytes = 1 << 20) {
    auto f = UcxFabric::CreateWithLocalMns(mns, bytes, OptionsFor(GetParam()));
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return std::move(f).value();
  }
};

TEST_P(UcxFabricTest, ReadsBackWhatItWrote) {
  auto f = MakeFabric();
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    char out[13] = "hello, pond!";
    char in[13] = {};
    ep->Write(GAddr::Make(1, 4099), out, sizeof(out));  // unaligned on purpose
    EXPECT_TRUE((co_await ep->Flush()).ok());
    ep->Read(GAddr::Make(1, 4099), in, sizeof(in));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_STREQ(in, "hello, pond!");
    // A READ of 64 KiB (past UCX's eager sizes) comes back whole.
    std::vector<uint8_t> big(64 << 10), back(64 << 10);
    for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<uint8_t>(i * 7);
    ep->Write(GAddr::Make(0, 8192), big.data(), static_cast<uint32_t>(big.size()));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    ep->Read(GAddr::Make(0, 8192), back.data(), static_cast<uint32_t>(back.size()));
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(big, back);
  }(w.ep.get()));
  EXPECT_EQ(std::memcmp(f->region(1) + 4099, "hello, pond!", 13), 0) << "it is in MN 1's region";
}

TEST_P(UcxFabricTest, BatchAppliesInPostingOrder) {
  // RC queue-pair order: a READ posted after a WRITE to the same address in one batch sees it,
  // and a CAS posted after a WRITE compares against the written value.
  auto f = MakeFabric();
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    for (uint64_t round = 1; round <= 50; round++) {
      uint64_t v = round * 10, got = 0, old = 0, after = 0;
      GAddr a = GAddr::Make(0, 4096);
      ep->Write(a, &v, 8);
      ep->Read(a, &got, 8);
      ep->Cas(a, v, v + 1, &old);
      ep->Faa(a, 2, &after);
      EXPECT_EQ(ep->pending(), 4u);
      EXPECT_TRUE((co_await ep->Flush()).ok());
      EXPECT_EQ(got, v);
      EXPECT_EQ(old, v);
      EXPECT_EQ(after, v + 1);
    }
    uint64_t now = 0;
    ep->Read(GAddr::Make(0, 4096), &now, 8);
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(now, 503u);
  }(w.ep.get()));
}

TEST_P(UcxFabricTest, FailedCasReturnsCurrentValue) {
  auto f = MakeFabric();
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t old = 123;
    GAddr a = GAddr::Make(0, 8192);
    ep->Cas(a, 5, 6, &old);  // memory holds 0, not 5
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(old, 0u);
    uint64_t prev = 0;
    ep->Faa(a, 10, &prev);
    ep->Faa(a, 10, &prev);
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(prev, 10u);
  }(w.ep.get()));
}

TEST_P(UcxFabricTest, OutOfRegionAccessFailsTheBatch) {
  auto f = MakeFabric(1, 1 << 20);
  Worker w(*f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t x = 0, y = 0;
    ep->Read(GAddr::Make(0, (1 << 20) - 4), &x, 8);
    Status s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    ep->Read(GAddr::Make(5, 0), &x, 8);  // no MN 5
    s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    ep->Cas(GAddr::Make(0, 4097), 0, 1, &x);
    s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "atomics need 8-byte alignment";
    // The ops before the bad one are done, those after it are not.
    uint64_t one = 1;
    ep->Write(GAddr::Make(0, 4096), &one, 8);
    ep->Read(GAddr::Make(0, 1 << 20), &x, 8);
    ep->Write(GAddr::Make(0, 4104), &one, 8);
    s = co_await ep->Flush();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    ep->Read(GAddr::Make(0, 4096), &x, 8);
    ep->Read(GAddr::Make(0, 4104), &y, 8);
    EXPECT_TRUE((co_await ep->Flush()).ok());
    EXPECT_EQ(x, 1u);
    EXPECT_EQ(y, 0u);
  }(w.ep.get()));
}

TEST_P(UcxFabricTest, MessagesToOneWorkerInOneRoundShareAPacket) {
  auto f = MakeFabric(1);
  Worker a(*f, {0, 0});
  Worker b(*f, {1, 0});
  std::vector<std::string> got;
  auto handler = [&](const Message& m) {
    EXPECT_EQ(m.from, (WorkerAddr{0, 0}));
    got.emplace_back(reinterpret_cast<const char*>(m.payload.data()), m.payload.size());
  };
  b.ep->OnMessage(1, handler);
  b.ep->OnMessage(2, handler);
  auto sender = [](Endpoint* ep, std::string text, uint16_t kind) -> Task<void> {
    ep->Send({1, 0}, kind, std::as_bytes(std::span(text.data(), text.size())));
    co_return;
  };
  a.sched.Spawn(sender(a.ep.get(), "lock k1", 1));
  a.sched.Spawn(sender(a.ep.get(), "lock k2 and k3", 2));
  a.sched.RunOnce();
  EXPECT_EQ(a.ep->stats().packets_sent, 1u);
  EXPECT_EQ(f->packets_in_flight(), 1u);
  b.RunUntil([&] {
    a.sched.RunOnce();  // over TCP the sender's worker must progress too
    return got.size() == 2;
  });
  EXPECT_EQ(got, (std::vector<std::string>{"lock k1", "lock k2 and k3"}));
  EXPECT_EQ(b.ep->stats().packets_received, 1u);
  EXPECT_EQ(f->packets_in_flight(), 0u);
}

TEST_P(UcxFabricTest, ALargePacketArrivesWhole) {
  // Packets are sent eagerly whatever their size, so the handler always has all of one.
  auto f = MakeFabric(1);
  Worker a(*f, {0, 0});
  Worker b(*f, {1, 0});
  std::vector<std::byte> payload(kMessageLenMax);
  for (size_t i = 0; i < payload.size(); i++) payload[i] = std::byte(i * 13);
  bool same = false;
  b.ep->OnMessage(3, [&](const Message& m) {
    same = m.payload.size() == payload.size() &&
           std::memcmp(m.payload.data(), payload.data(), payload.size()) == 0;
  });
  a.ep->Send({1, 0}, 3, payload);
  a.ep->EndRound();
  b.RunUntil([&] {
    a.sched.RunOnce();
    return same;
  });
}

TEST_P(UcxFabricTest, ConcurrentFaaAndCasAreAtomic) {
  // Three threads each add 1 to one word 3000 times by FAA and 3000 times by a CAS loop to
  // another; no update may be lost.
  auto f = MakeFabric(1);
  constexpr int kThreads = 3, kIters = 3000;
  std::vector<std::unique_ptr<Worker>> ws;
  for (int t = 0; t < kThreads; t++) {
    ws.push_back(std::make_unique<Worker>(*f, WorkerAddr{static_cast<uint16_t>(t), 0}));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      ws[t]->Run([](Endpoint* ep) -> Task<void> {
        GAddr faa = GAddr::Make(0, 4096), cas = GAddr::Make(0, 4104);
        for (int i = 0; i < kIters; i++) {
          uint64_t old;
          ep->Faa(faa, 1, &old);
          EXPECT_TRUE((co_await ep->Flush()).ok());
          uint64_t seen = 0;
          ep->Read(cas, &seen, 8);
          EXPECT_TRUE((co_await ep->Flush()).ok());
          for (;;) {
            ep->Cas(cas, seen, seen + 1, &old);
            EXPECT_TRUE((co_await ep->Flush()).ok());
            if (old == seen) break;
            seen = old;
          }
        }
      }(ws[t]->ep.get()));
    });
  }
  for (auto& th : threads) th.join();
  uint64_t faa, cas;
  std::memcpy(&faa, f->region(0) + 4096, 8);
  std::memcpy(&cas, f->region(0) + 4104, 8);
  EXPECT_EQ(faa, uint64_t{kThreads} * kIters);
  EXPECT_EQ(cas, uint64_t{kThreads} * kIters);
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxFabricTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

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
  EXPECT_FALSE(MnDescriptor::Decode(empty.Encode()).ok()) << "no rkey";
}

}  // namespace
}  // namespace pond::ucx
