// The harness of the membership machine's tests (cn_membership_test.cc, shard_move_test.cc):
// CNs' machines on one manual clock, beating into real lease pages (a local fabric's memory) and
// agreeing through an in-memory coordination service that can be taken down or raced. A test
// stops, pauses or restarts CNs between periods and checks what each machine put, applied and
// asked its CN to do. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pond/recovery/cn_membership.h"
#include "pond/runtime/clocks.h"
#include "pond/store/layout.h"
#include "pond/transport/local/local_fabric.h"

namespace pond::recovery::harness {

constexpr const char* kCluster = "t";
constexpr uint64_t kLeaseNs = 10'000'000;
constexpr uint32_t kShards = 16;
constexpr uint16_t kWorkers = 2;
constexpr uint64_t kLogBytes = 4096;
constexpr uint64_t kRegionBytes = 4 << 20;

// The coordination service, which a test can take down or race: `down` answers every call
// Unavailable; `before_put`, if set, runs once before the next put of a key starting with
// `race_prefix` (another CN's put landing first).
class TestStore final : public cluster::ConfigStore {
 public:
  Result<cluster::Versioned> Get(const std::string& key) const override {
    if (down) return Unavailable("the test took the service down");
    return mem.Get(key);
  }
  Result<uint64_t> PutIf(const std::string& key, std::span<const std::byte> value,
                         uint64_t expected) override {
    if (down) return Unavailable("the test took the service down");
    if (before_put && key.starts_with(race_prefix)) {
      auto fn = std::move(before_put);
      before_put = nullptr;
      fn();
    }
    return mem.PutIf(key, value, expected);
  }
  void Watch(const std::string& key, std::function<void(const cluster::Versioned&)> fn) override {
    mem.Watch(key, std::move(fn));
  }
  bool Has(const std::string& key) const {
    Result<cluster::Versioned> v = mem.Get(key);
    return v.ok() && v->version != 0;
  }
  cluster::Configuration Config() const {
    Result<cluster::Versioned> v = mem.Get(cluster::ConfigKey(kCluster));
    return cluster::Configuration::Decode(v->value).value();
  }

  cluster::InMemoryConfigStore mem;
  bool down = false;
  std::string race_prefix;
  std::function<void()> before_put;
};

// One CN's session to the service: the shared store, except that a test may make this CN
// `blind` to the configuration (its reads of it fail) while the others go on.
class NodeStore final : public cluster::ConfigStore {
 public:
  explicit NodeStore(TestStore& base) : base_(base) {}
  Result<cluster::Versioned> Get(const std::string& key) const override {
    if (blind && key == cluster::ConfigKey(kCluster))
      return Unavailable("this CN's session is lost");
    return base_.Get(key);
  }
  Result<uint64_t> PutIf(const std::string& key, std::span<const std::byte> value,
                         uint64_t expected) override {
    return base_.PutIf(key, value, expected);
  }
  void Watch(const std::string& key, std::function<void(const cluster::Versioned&)> fn) override {
    base_.Watch(key, std::move(fn));
  }
  bool blind = false;

 private:
  TestStore& base_;
};

// The beat endpoint of a CN on a host of its own, reaching the pool as the local transport does
// (this process's memory), except the MNs in `cut`, which do not answer it: a link down between
// its host and theirs.
class CutEndpoint final : public Endpoint {
 public:
  CutEndpoint(WorkerAddr self, Scheduler& sched, LocalFabric& fabric)
      : Endpoint(self, sched), fabric_(fabric) {}
  std::set<MnId> cut;

 protected:
  void SubmitBatch(MnId mn, std::vector<Op>& ops, Completion* done) override {
    if (cut.count(mn)) {
      CompleteUnreachable(done, uint64_t{1} << mn, 1);
      return;
    }
    for (const Op& op : ops) {
      std::byte* at = fabric_.region(mn) + op.addr.offset();
      uint64_t word = 0;
      switch (op.verb) {
        case Verb::kRead:
          std::memcpy(op.local, at, op.len);
          break;
        case Verb::kWrite:
          std::memcpy(at, op.local, op.len);
          break;
        case Verb::kCas:
          std::memcpy(&word, at, 8);
          std::memcpy(op.local, &word, 8);
          if (word == op.arg0) std::memcpy(at, &op.arg1, 8);
          break;
        case Verb::kFaa:
          std::memcpy(&word, at, 8);
          std::memcpy(op.local, &word, 8);
          word += op.arg0;
          std::memcpy(at, &word, 8);
          break;
      }
    }
    CompleteOk(done);
  }
  void SendPacket(WorkerAddr, PacketBuffer) override {
    ADD_FAILURE() << "the membership's endpoint sends no packets";
  }
  bool PollBackend() override { return false; }

 private:
  LocalFabric& fabric_;
};

// A CN as the machine sees it: every control recorded.
class TestControls final : public CnControls {
 public:
  TestControls(std::vector<uint16_t> owners, uint16_t mns)
      : owners(std::move(owners)), pool(mns, 1) {}

  bool ApplyOnWorkers(const cluster::Configuration& next, const std::vector<uint16_t>& f,
                      const std::vector<uint16_t>& r, bool) override {
    applied.push_back(next.epoch);
    failed.insert(f.begin(), f.end());
    restarted.insert(r.begin(), r.end());
    return true;
  }
  Status ReachRestarted(uint16_t cn, uint16_t incarnation) override {
    reached.emplace_back(cn, incarnation);
    return Status::Ok();
  }
  void MoveOracle(uint16_t host) override { oracle = host; }
  void AssignShard(uint32_t s, uint16_t cn) override { owners[s] = cn; }
  uint16_t ShardOwner(uint32_t s) const override { return owners[s]; }
  void OpenShard(uint32_t s) override {
    opened.insert(s);
    closed.erase(s);
  }
  void CloseShard(uint32_t s) override { closed.insert(s); }
  std::optional<size_t> LocksHeldIn(const std::vector<uint32_t>& shards) override {
    size_t n = 0;
    for (uint32_t s : shards) n += held_in.count(s);
    return n;
  }
  std::optional<CnLoad> Load() override { return load; }
  uint16_t ShardHome(uint32_t s) const override { return static_cast<uint16_t>(s % 3); }
  void StopReading(MnId mn) override { pool.SetJoining(mn); }
  void MarkDown(MnId mn) override { pool.SetDown(mn); }
  Status ReachRestartedMn(MnId mn, uint16_t incarnation) override {
    reached_mns.emplace_back(mn, incarnation);
    return Status::Ok();
  }
  void MnJoining(MnId mn) override { pool.SetJoining(mn); }
  void MnFrozen(MnId mn) override { pool.SetFrozen(mn); }
  void MnUp(MnId mn) override { pool.SetUp(mn); }
  std::vector<uint64_t> TxnMark() override { return {++marks}; }
  std::optional<bool> EndedSince(const std::vector<uint64_t>& mark) override {
    return mark.empty() || mark[0] <= ended_through;
  }
  void StartCopy(MnId mn, std::vector<CopyUnit> units) override {
    copies.push_back(units);
    copied_mns.push_back(mn);
    copy_result.reset();
    copy_results.erase(mn);
  }
  std::optional<Result<uint64_t>> CopyResult(MnId mn) override {
    auto it = copy_results.find(mn);
    return it != copy_results.end() ? it->second : copy_result;
  }
  void StartSync(MnId) override {
    syncs++;
    sync_result.reset();
  }
  std::optional<Status> SyncResult() override { return sync_result; }
  void SetVisibleGate(bool closed) override { gate_closed = closed; }
  std::optional<size_t> CommitsMidVisible() override { return mid_visible; }
  bool ReleaseLocksOf(uint16_t dead, uint16_t /*incarnation*/) override {
    released.insert(dead);
    return true;
  }
  std::optional<size_t> LiveContacting(uint16_t dead) override {
    auto it = live_contacting_of.find(dead);
    return it != live_contacting_of.end() ? it->second : live_contacting;
  }
  std::optional<uint64_t> CheckLinks(uint64_t probe, uint64_t, uint64_t) override {
    probed |= probe;
    return silent;
  }
  const store::Catalog& catalog() const override { return catalog_; }
  const store::Placement& placement() const override { return pool; }
  void Event(const std::string& line) override { events.push_back(line); }
  void Fence(const std::string& why) override { fenced = why; }

  size_t Said(const std::string& part) const {
    return std::count_if(events.begin(), events.end(),
                         [&](const std::string& e) { return e.find(part) != std::string::npos; });
  }

  std::vector<uint16_t> owners;
  store::Placement pool;
  std::vector<uint64_t> applied;
  std::set<uint16_t> failed, restarted, released;
  std::vector<std::pair<uint16_t, uint16_t>> reached;
  std::set<uint32_t> opened, closed;
  std::set<uint32_t> held_in;  // shards in which a lock is held here
  CnLoad load;                 // what Load answers: the test raises it as it likes
  size_t live_contacting = 0;
  std::map<uint16_t, size_t> live_contacting_of;  // by failed CN, before live_contacting
  uint64_t silent = 0;                            // the peers this CN says it cannot hear
  uint64_t probed = 0;                            // the peers it was asked to probe
  uint16_t oracle = 0;
  std::vector<std::string> events;
  std::string fenced;
  // MN rejoins: marks handed out, and through which one transactions have ended; the copies
  // started and what the current one answers; syncs started and their answer; the gate.
  std::vector<std::pair<MnId, uint16_t>> reached_mns;
  uint64_t marks = 0, ended_through = 0;
  std::vector<std::vector<CopyUnit>> copies;
  std::optional<Result<uint64_t>> copy_result;
  std::vector<MnId> copied_mns;                                  // the MN of each of `copies`
  std::map<MnId, std::optional<Result<uint64_t>>> copy_results;  // by MN, over copy_result
  int syncs = 0;
  std::optional<Status> sync_result;
  bool gate_closed = false;
  size_t mid_visible = 0;

 private:
  store::Catalog catalog_;
};

class CnMembershipTest : public ::testing::Test {
 protected:
  struct Node {
    uint16_t cn = 0;
    std::unique_ptr<NodeStore> store;
    std::unique_ptr<TestControls> controls;
    std::unique_ptr<Scheduler> sched;
    std::unique_ptr<Endpoint> ep;
    CutEndpoint* cut_ep = nullptr;  // ep, when the test places CNs on hosts (hosts_)
    MembershipCounts counts;
    std::unique_ptr<CnMembership> machine;
    bool running = true;       // ticked each period; a stopped or paused CN is not
    bool coordinating = true;  // its coordination half too (a stopping CN pauses it)
  };

  void SetUp() override {
    fabric_ = LocalFabric::Create(mns_, kRegionBytes).value();
    cluster::Configuration c;
    c.epoch = 1;
    c.cns.assign(3, cluster::CnStatus{});
    c.mns.assign(mns_, cluster::MnStatus{});
    for (uint16_t mn : mns_down_) c.mns[mn].alive = false;
    std::vector<uint16_t> owners(kShards);
    for (uint32_t s = 0; s < kShards; s++) owners[s] = static_cast<uint16_t>(s % 3);
    ASSERT_TRUE(cluster::WriteShardMap(store_, kCluster, 1, owners).ok());
    ASSERT_TRUE(store_.PutIf(cluster::ConfigKey(kCluster), c.Encode(), 0).ok());
    for (uint16_t cn = 0; cn < 3; cn++) Start(cn, 0);
  }

  // Starts CN `cn` as `incarnation` from the newest configuration, publishing its log areas
  // (zeroed memory: recovery finds nothing to do) and, for a restart, asking to come back.
  Node& Start(uint16_t cn, uint16_t incarnation) {
    cluster::LogAreas logs;
    logs.bytes = kLogBytes;
    for (uint16_t w = 0; w < kWorkers; w++) {
      const uint64_t at = (1 << 20) + ((uint64_t{cn} * 8 + incarnation) * kWorkers + w) * kLogBytes;
      logs.areas.push_back({GAddr::Make(0, at)});
    }
    EXPECT_TRUE(store_.PutIf(cluster::LogsKey(kCluster, cn, incarnation), logs.Encode(), 0).ok());
    const cluster::Configuration view = store_.Config();
    std::vector<uint16_t> owners =
        cluster::ReadShardMap(store_, kCluster, view.epoch, kShards).value();
    auto n = std::make_unique<Node>();
    n->cn = cn;
    n->controls = std::make_unique<TestControls>(owners, mns_);
    cluster::ApplyMnStates(view, n->controls->pool);
    n->sched = std::make_unique<Scheduler>(clock_);
    const WorkerAddr self{cn, static_cast<uint16_t>(1000 + incarnation)};
    if (hosts_) {
      auto ep = std::make_unique<CutEndpoint>(self, *n->sched, *fabric_);
      n->cut_ep = ep.get();
      n->ep = std::move(ep);
    } else {
      n->ep = fabric_->CreateEndpoint(self, *n->sched);
    }
    MembershipOptions o{.cluster = kCluster,
                        .cn = cn,
                        .incarnation = incarnation,
                        .cns = 3,
                        .mns = mns_,
                        .workers_per_cn = kWorkers,
                        .replication = replication_,
                        .lease_ns = kLeaseNs,
                        .shards = kShards,
                        .mn_lock_words = mn_lock_words_,
                        .move_drain_ns = move_drain_ns_,
                        .load = load_};
    n->store = std::make_unique<NodeStore>(store_);
    n->machine = std::make_unique<CnMembership>(o, view, owners, *n->store, clock_, *n->controls,
                                                n->counts, *n->sched, *n->ep);
    if (nodes_.size() <= cn) nodes_.resize(cn + 1);
    nodes_[cn] = std::move(n);
    return *nodes_[cn];
  }

  // A restarted CN asks to be let back in as `incarnation` (deploy/cn_process.cc does it at start).
  void AskToComeBack(uint16_t cn, uint16_t incarnation) {
    const std::string text = std::to_string(incarnation);
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()), text.size());
    EXPECT_TRUE(store_
                    .PutIf(cluster::JoinKey(kCluster, cn), bytes,
                           store_.mem.Get(cluster::JoinKey(kCluster, cn))->version)
                    .ok());
  }

  Node& node(uint16_t cn) { return *nodes_[cn]; }

  // One period: the MN beats, then every running CN's beat half and coordination half, each
  // run until it has nothing left to do (local transport: every batch completes at once).
  void Period() {
    clock_.Advance(kLeaseNs / 10);
    for (uint16_t mn = 0; mn < mns_; mn++) {
      if (mns_stopped_.count(mn)) continue;
      auto* page =
          reinterpret_cast<store::LeasePage*>(fabric_->region(mn) + store::kLeasePageOffset);
      page->mn_beat++;
    }
    for (auto& n : nodes_) {
      if (!n->running || n->machine->fenced()) continue;
      n->machine->BeatTick();
      Drain(*n);
    }
    for (auto& n : nodes_) {
      if (!n->running || !n->coordinating || n->machine->fenced()) continue;
      n->machine->CoordTick();
      Drain(*n);
    }
  }
  void Periods(int k) {
    for (int i = 0; i < k; i++) Period();
  }
  void Drain(Node& n) {
    for (int i = 0; i < 100; i++) {
      n.machine->RunQueued();
      if (!n.sched->RunOnce() && n.sched->live() == 0) return;
    }
  }
  // Runs periods until `done` holds, at most `max`; whether it did.
  template <typename F>
  bool Until(F done, int max = 200) {
    for (int i = 0; i < max; i++) {
      if (done()) return true;
      Period();
    }
    return done();
  }
  bool StepDone(uint64_t epoch, const std::string& step, uint16_t who, uint16_t failed = 2) const {
    return store_.Has(cluster::FailureStepKey(kCluster, epoch, failed, step, who));
  }

  // The pool: its MNs, those the first configuration names down, and those that beat no more.
  uint16_t mns_ = 1;
  int replication_ = 1;
  bool hosts_ = false;                 // each CN's beats go through a CutEndpoint
  bool mn_lock_words_ = false;         // the protocol keeps its lock words on MNs (motor, ford)
  uint64_t move_drain_ns_ = kLeaseNs;  // a shard move's drain bound: ten periods
  LoadPolicyOptions load_;             // the load policy, off unless a test turns it on
  std::set<uint16_t> mns_down_, mns_stopped_;
  ManualClock clock_{1'000'000'000};
  TestStore store_;
  std::unique_ptr<LocalFabric> fabric_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

}  // namespace pond::recovery::harness
