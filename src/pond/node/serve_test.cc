// A cluster served by threads of its own: calls submitted from outside threads run on the CN
// asked for, every one finishes before StopServing returns, and their effects are exactly the
// committed ones; a pinned worker runs every step of one transaction and keeps the cluster
// serving until it is unpinned.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "pond/cluster.h"
#include "pond/txn/test_cluster.h"

namespace pond {
namespace {

using testing_cluster::AsU64;
using testing_cluster::U64Value;

constexpr uint64_t kKeys = 20;
// Lotus aborts on a lock conflict; on an oversubscribed machine (a sanitizer build, ctest -j2) a
// holder descheduled for a time slice outlasted RunTxn's default 32 attempts for half the calls.
constexpr int kAttempts = 1000;

// Adds 1 to `key`; the outcome goes to `done`.
std::function<Task<void>(Session&)> Increment(uint16_t table, uint64_t key, uint16_t want_cn,
                                              std::promise<Status>* done,
                                              std::atomic<int>* wrong_cn) {
  return [=](Session& s) -> Task<void> {
    if (s.cn() != want_cn) (*wrong_cn)++;
    Status st = co_await s.RunTxn(
        TxnKind::kReadWrite,
        [&](Txn& t) -> Task<Status> {
          t.AddRW(table, key);
          Status e = co_await t.Execute();
          if (!e.ok()) co_return e;
          co_return t.Write(table, key, U64Value(AsU64(*t.Read(table, key)) + 1));
        },
        kAttempts);
    done->set_value(st);
  };
}

uint64_t Sum(Cluster& c, uint16_t table) {
  uint64_t sum = 0;
  c.Run(1, [&](Session& s) -> Task<void> {
    if (s.cn() != 0 || s.worker() != 0) co_return;  // once
    Txn t = s.Begin(TxnKind::kReadOnly);
    for (uint64_t k = 0; k < kKeys; k++) t.AddRO(table, k);
    EXPECT_TRUE((co_await t.Execute()).ok());
    for (uint64_t k = 0; k < kKeys; k++) sum += AsU64(*t.Read(table, k));
    EXPECT_TRUE((co_await t.Commit()).ok());
  });
  return sum;
}

void ServeFromThreads(ClusterConfig config) {
  config.workers_per_cn = 2;
  uint16_t table = 0;
  testing_cluster::TestCluster c = testing_cluster::StartLoaded(config, &table, kKeys, 1);
  ASSERT_TRUE(c->StartServing().ok());
  EXPECT_TRUE(c->serving());
  EXPECT_FALSE(c->StartServing().ok()) << "twice";
  constexpr int kThreads = 3, kCalls = 300;
  std::vector<std::promise<Status>> outcomes(kThreads * kCalls);
  std::atomic<int> wrong_cn{0};
  std::vector<std::thread> submitters;
  for (int t = 0; t < kThreads; t++) {
    submitters.emplace_back([&, t] {
      for (int i = 0; i < kCalls; i++) {
        const int n = t * kCalls + i;
        const auto cn = static_cast<uint16_t>(n % config.cns);
        EXPECT_TRUE(c->Submit(cn, Increment(table, n % kKeys, cn, &outcomes[n], &wrong_cn)));
      }
    });
  }
  for (auto& th : submitters) th.join();
  EXPECT_FALSE(c->Submit(static_cast<uint16_t>(config.cns), [](Session&) -> Task<void> {
    co_return;
  })) << "no such CN";
  // StopServing waits for every call submitted before it. Its grace is longer than any run of
  // this test: past the grace a worker fails its peers' locks, and the calls still queued then
  // abort (a sanitizer build on two busy cores took 11 s for these 900 calls, 2 s being the
  // default grace).
  c->StopServing(/*grace_ms=*/600'000);
  EXPECT_FALSE(c->serving());
  uint64_t committed = 0;
  for (auto& o : outcomes) {
    auto f = o.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    if (f.get().ok()) committed++;
  }
  EXPECT_GT(committed, uint64_t{kThreads * kCalls / 2});
  EXPECT_EQ(wrong_cn.load(), 0) << "a call ran on a CN it was not submitted to";
  // Every committed increment, and nothing else, is in the table.
  EXPECT_EQ(Sum(*c, table), kKeys + committed);
  EXPECT_FALSE(c->Submit(0, [](Session&) -> Task<void> { co_return; })) << "after StopServing";
}

TEST(ServeTest, CallsFromOtherThreadsRunAndAllFinishLotus) {
  ServeFromThreads(testing_cluster::Config("lotus"));
}

TEST(ServeTest, CallsFromOtherThreadsRunAndAllFinishFord) {
  ServeFromThreads(testing_cluster::Config("ford"));
}

// A daemon's metrics read the counts while the workers count (server/metrics.h): no data race
// (the ThreadSanitizer build runs this), counts that only grow, and at the end exactly the
// commits the calls saw, each with its latency, and every lock released.
TEST(ServeTest, StatsAreReadFromAnotherThreadWhileServing) {
  ClusterConfig config = testing_cluster::Config("lotus");
  config.workers_per_cn = 2;
  uint16_t table = 0;
  testing_cluster::TestCluster c = testing_cluster::StartLoaded(config, &table, kKeys, 1);
  ASSERT_TRUE(c->StartServing().ok());
  std::atomic<bool> done{false};
  std::atomic<int> scrapes{0};
  std::thread scraper([&] {
    uint64_t last = 0;
    while (!done.load()) {
      ClusterStats s = c->Stats();
      EXPECT_GE(s.committed, last) << "a count went back";
      last = s.committed;
      for (uint16_t cn = 0; cn < config.cns; cn++) (void)c->GetCnStats(cn);
      scrapes++;
    }
  });
  constexpr int kCalls = 300;
  std::vector<std::promise<Status>> outcomes(kCalls);
  std::atomic<int> wrong_cn{0};
  for (int i = 0; i < kCalls; i++) {
    const auto cn = static_cast<uint16_t>(i % config.cns);
    ASSERT_TRUE(c->Submit(cn, Increment(table, i % kKeys, cn, &outcomes[i], &wrong_cn)));
  }
  uint64_t committed = 0;
  for (auto& o : outcomes) committed += o.get_future().get().ok() ? 1 : 0;
  // At least one scrape overlapped the calls, and one more follows them.
  while (scrapes.load() < 2) std::this_thread::yield();
  done = true;
  scraper.join();
  c->StopServing();
  const ClusterStats s = c->Stats();
  EXPECT_EQ(s.committed, committed);
  EXPECT_EQ(s.commit_latency.count(), s.committed + s.committed_read_only);
  EXPECT_GT(s.commit_latency.sum_ns, 0u);
  EXPECT_GT(s.reads, 0u);
  uint64_t granted = 0;
  for (uint16_t cn = 0; cn < config.cns; cn++) {
    const CnStats l = c->GetCnStats(cn);
    EXPECT_EQ(l.locks_held, 0u) << "CN " << cn;
    EXPECT_EQ(l.lock_slots, uint64_t{config.lock_buckets} * 8);
    granted += l.lock_acquired;
  }
  EXPECT_GE(granted, committed) << "every increment locked its key";
}

TEST(ServeTest, ASimulatedClusterDoesNotServe) {
  uint16_t table = 0;
  Testbed tb;
  testing_cluster::TestCluster c =
      testing_cluster::StartLoaded(testing_cluster::Config("lotus"), &table, 4, 1, &tb);
  EXPECT_EQ(c->StartServing().code(), Code::kInvalidArgument);
  EXPECT_FALSE(c->Submit(0, [](Session&) -> Task<void> { co_return; }));
}

TEST(ServeTest, TheDestructorStopsServing) {
  uint16_t table = 0;
  // A plain unique_ptr: the test deleter would stop serving itself before the destructor could.
  std::unique_ptr<Cluster> c(
      testing_cluster::StartLoaded(testing_cluster::Config("lotus"), &table, 4, 1).release());
  ASSERT_TRUE(c->StartServing().ok());
  std::promise<Status> done;
  std::atomic<int> wrong{0};
  ASSERT_TRUE(c->Submit(1, Increment(table, 0, 1, &done, &wrong)));
  c.reset();  // joins the workers after the call
  EXPECT_TRUE(done.get_future().get().ok());
}

// Runs `call` on the pinned worker and waits for it.
void RunOnPin(Cluster& c, const Cluster::WorkerPin& pin, std::function<Task<void>(Session&)> call) {
  std::promise<void> done;
  ASSERT_TRUE(c.SubmitTo(pin, [&](Session& s) -> Task<void> {
    co_await call(s);
    done.set_value();
  }));
  done.get_future().get();
}

// One transaction whose steps are separate calls, as a network client's interactive transaction
// runs: every step on the pinned worker, the Txn kept between them.
TEST(ServeTest, APinKeepsOneTransactionOnOneWorkerAcrossCalls) {
  ClusterConfig config = testing_cluster::Config("lotus");
  config.workers_per_cn = 2;
  uint16_t table = 0;
  testing_cluster::TestCluster c = testing_cluster::StartLoaded(config, &table, kKeys, 1);
  ASSERT_TRUE(c->StartServing().ok());
  EXPECT_FALSE(c->Pin(static_cast<uint16_t>(config.cns)).has_value()) << "no such CN";
  std::optional<Cluster::WorkerPin> pin = c->Pin(2);
  ASSERT_TRUE(pin.has_value());
  EXPECT_EQ(pin->cn, 2);
  EXPECT_FALSE(c->SubmitTo(Cluster::WorkerPin{2, 7}, [](Session&) -> Task<void> { co_return; }))
      << "no such worker";

  std::optional<Txn> t;
  int wrong_worker = 0;
  auto on_pin = [&](Session& s) {
    if (s.cn() != pin->cn || s.worker() != pin->worker) wrong_worker++;
  };
  RunOnPin(*c, *pin, [&](Session& s) -> Task<void> {
    on_pin(s);
    t.emplace(s.Begin(TxnKind::kReadWrite));
    t->AddRW(table, 3);
    EXPECT_TRUE((co_await t->Execute()).ok());
  });
  // Another call on the same worker meanwhile: the transaction's lock on key 3 holds.
  RunOnPin(*c, *pin, [&](Session& s) -> Task<void> {
    on_pin(s);
    Txn other = s.Begin(TxnKind::kReadWrite);
    other.AddRW(table, 3);
    EXPECT_EQ((co_await other.Execute()).code(), Code::kAborted);
  });
  RunOnPin(*c, *pin, [&](Session& s) -> Task<void> {
    on_pin(s);
    EXPECT_TRUE(t->Write(table, 3, U64Value(AsU64(*t->Read(table, 3)) + 41)).ok());
    EXPECT_TRUE((co_await t->Commit()).ok());
    t.reset();  // on its worker, as every Txn must end
  });
  c->Unpin(*pin);
  EXPECT_EQ(wrong_worker, 0);
  c->StopServing();
  EXPECT_EQ(Sum(*c, table), kKeys + 41);
}

// StopServing waits for a held pin as for a running call, and the pin still takes calls while
// the cluster stops: a transaction open when StopServing begins can end cleanly.
TEST(ServeTest, StopServingWaitsForPinsThatStillTakeCalls) {
  uint16_t table = 0;
  testing_cluster::TestCluster c =
      testing_cluster::StartLoaded(testing_cluster::Config("lotus"), &table, kKeys, 1);
  ASSERT_TRUE(c->StartServing().ok());
  std::optional<Cluster::WorkerPin> pin = c->Pin(0);
  ASSERT_TRUE(pin.has_value());
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    c->StopServing();
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(stopped.load()) << "StopServing returned with a pin held";
  EXPECT_FALSE(c->Pin(0).has_value()) << "a new pin while stopping";
  EXPECT_FALSE(c->Submit(0, [](Session&) -> Task<void> { co_return; })) << "a new call";
  std::promise<Status> done;
  std::atomic<int> wrong{0};
  ASSERT_TRUE(c->SubmitTo(*pin, Increment(table, 5, 0, &done, &wrong)));
  EXPECT_TRUE(done.get_future().get().ok());
  c->Unpin(*pin);
  stopper.join();
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(Sum(*c, table), kKeys + 1);
}

// A front end's source polled by one worker on its own thread: what it takes, submitted to that
// worker, runs there (Cluster::AttachSource, SubmitToWorker); once detached it is polled no more.
class CountingSource : public Cluster::WorkerSource {
 public:
  CountingSource(Cluster& c, uint16_t table) : c_(c), table_(table) {}
  bool Poll() override {
    polls_++;
    if (submitted_) return false;
    submitted_ = true;
    poller_ = std::this_thread::get_id();
    // Taken from "the network": run it on this very worker.
    EXPECT_TRUE(c_.SubmitToWorker(1, 1, [this](Session& s) -> Task<void> {
      ran_on_ = std::this_thread::get_id();
      ran_cn_ = s.cn();
      ran_worker_ = s.worker();
      co_await Increment(table_, 2, 1, &done_, &wrong_)(s);
    }));
    return true;
  }
  Cluster& c_;
  const uint16_t table_;
  std::atomic<uint64_t> polls_{0};
  bool submitted_ = false;
  std::thread::id poller_, ran_on_;
  uint16_t ran_cn_ = 99, ran_worker_ = 99;
  std::promise<Status> done_;
  std::atomic<int> wrong_{0};
};

TEST(ServeTest, AnAttachedSourceIsPolledByItsWorkerWhichRunsWhatItTakes) {
  ClusterConfig config = testing_cluster::Config("lotus");
  config.workers_per_cn = 2;
  uint16_t table = 0;
  testing_cluster::TestCluster c = testing_cluster::StartLoaded(config, &table, kKeys, 1);
  CountingSource source(*c, table);
  EXPECT_EQ(c->AttachSource(1, 1, &source).code(), Code::kInvalidArgument) << "not serving";
  ASSERT_TRUE(c->StartServing().ok());
  EXPECT_EQ(c->WorkersOf(1), 2);
  EXPECT_EQ(c->AttachSource(1, 2, &source).code(), Code::kInvalidArgument) << "no worker 2";
  ASSERT_TRUE(c->AttachSource(1, 1, &source).ok());
  EXPECT_EQ(c->AttachSource(1, 1, &source).code(), Code::kInvalidArgument) << "attached twice";
  std::future<Status> done = source.done_.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the worker never polled its source, or never ran what it took";
  EXPECT_TRUE(done.get().ok());
  EXPECT_EQ(source.poller_, source.ran_on_) << "what the source took ran on another thread";
  EXPECT_EQ(source.ran_cn_, 1);
  EXPECT_EQ(source.ran_worker_, 1);
  EXPECT_EQ(source.wrong_.load(), 0);

  c->DetachSource(1, 1, &source);
  const uint64_t polls = source.polls_.load();
  EXPECT_GT(polls, 1u) << "polled every round";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(source.polls_.load(), polls) << "polled after DetachSource returned";
  c->StopServing();
  EXPECT_EQ(Sum(*c, table), kKeys + 1);
}

}  // namespace
}  // namespace pond
