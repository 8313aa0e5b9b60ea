#include "pond/bench/btree_bench.h"

#include <atomic>
#include <memory>
#include <thread>

#include "pond/base/assert.h"
#include "pond/bench/zipf.h"
#include "pond/btree/tree_check.h"
#include "pond/node/sim_driver.h"
#include "pond/rng.h"
#include "pond/runtime/clocks.h"
#include "pond/runtime/scheduler.h"
#include "pond/sim/engine.h"
#include "pond/transport/local/local_fabric.h"
#include "pond/transport/sim/sim_fabric.h"

namespace pond::bench {

namespace {

constexpr uint64_t kMiB = 1 << 20;
// Rank r is key 1 + (r * kKeyStride) mod space: a prime above every key space, so the map is a
// bijection onto 1 .. space.
constexpr uint64_t kKeyStride = 2'147'483'647;
constexpr uint64_t kKeysMax = uint64_t{1} << 28;
constexpr uint64_t kProgressNs = 1'000'000'000;

struct KeySpace {
  uint64_t space;
  Zipf zipf;
  KeySpace(uint64_t keys, double theta) : space(keys + keys / 2), zipf(space, theta) {}
  uint64_t KeyOf(uint64_t rank) const {
    return 1 + static_cast<uint64_t>(static_cast<unsigned __int128>(rank) * kKeyStride % space);
  }
};

// One worker: a core with its scheduler, endpoint and handle on the tree, and what its clients
// did in the measured run.
struct Worker {
  std::unique_ptr<Scheduler> sched;
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<btree::BTree> tree;
  std::atomic<uint64_t> ops{0};  // read by the progress printer on another thread
  uint64_t inserts = 0, lookups = 0, ranges = 0, found = 0, range_entries = 0;
  Histogram latency_ns;
  Status error;  // the first operation that failed
  // At the start of the measured run: what the load left in the counters.
  btree::TreeStats tree_before;
  EndpointStats ep_before;
  uint64_t handovers_before = 0, waits_before = 0;
};

Task<void> LoadKeys(Worker* w, const KeySpace* ks, uint64_t from, uint64_t to, uint64_t step) {
  for (uint64_t r = from; r < to && w->error.ok(); r += step) {
    const uint64_t key = ks->KeyOf(r);
    Status s = co_await w->tree->Insert(key, key);
    if (!s.ok()) w->error = s;
  }
}

Task<void> RunClient(Worker* w, const BtreeMix* mix, const KeySpace* ks, const BtreeBenchOptions* o,
                     uint64_t seed, uint64_t deadline_ns) {
  Rng rng(seed);
  Clock& clock = w->sched->clock();
  std::vector<btree::KeyValue> out;
  for (;;) {
    const uint64_t t0 = clock.NowNs();
    if (t0 >= deadline_ns || !w->error.ok()) break;
    const int x = static_cast<int>(rng.Uniform(100));
    const uint64_t key = ks->KeyOf(ks->zipf.Next(rng));
    Status s;
    uint64_t* kind = nullptr;
    bool found = false;
    size_t entries = 0;
    if (x < mix->insert_pct) {
      s = co_await w->tree->Insert(key, rng.Next() >> 1);
      kind = &w->inserts;
    } else if (x < mix->insert_pct + mix->lookup_pct) {
      Result<uint64_t> v = co_await w->tree->Lookup(key);
      found = v.ok();
      s = v.ok() || v.status().code() == Code::kNotFound ? Status::Ok() : v.status();
      kind = &w->lookups;
    } else {
      out.clear();
      s = co_await w->tree->Scan(key, btree::kKeyInfinity, o->range_size, &out);
      entries = out.size();
      kind = &w->ranges;
    }
    if (!s.ok()) {
      w->error = s;
      break;
    }
    const uint64_t t1 = clock.NowNs();
    if (t1 > deadline_ns) break;  // the measured window is o.seconds: later ends do not count
    (*kind)++;
    if (found) w->found++;
    w->range_entries += entries;
    w->latency_ns.Record(t1 - t0);
    w->ops.fetch_add(1, std::memory_order_relaxed);
  }
}

// The pool, the workers on it and how to run them: threads on the local transport, or one
// thread stepping the simulator's engine.
class Bench {
 public:
  explicit Bench(const BtreeBenchOptions& o) : o_(o), ks_(o.keys, o.theta) {}

  Status Start() {
    const uint64_t region = o_.region_mib * kMiB;
    Fabric* fabric = nullptr;
    if (o_.sim) {
      engine_ = std::make_unique<sim::Engine>(o_.seed);
      auto f = SimFabric::Create(*engine_, *o_.sim, o_.mns, region);
      if (!f.ok()) return f.status();
      sim_fabric_ = std::move(f).value();
      driver_ = std::make_unique<node::SimDriver>(*engine_, *sim_fabric_);
      fabric = sim_fabric_.get();
    } else {
      auto f = LocalFabric::Create(o_.mns, region);
      if (!f.ok()) return f.status();
      local_fabric_ = std::move(f).value();
      fabric = local_fabric_.get();
    }
    for (MnId m = 0; m < o_.mns; m++) space_.ranges.push_back({m, 4096, region});
    space_.lock_count = o_.lock_words;
    POND_RETURN_IF_ERROR(btree::Validate(space_));
    Clock& clock = o_.sim ? engine_->clock() : SystemClock::Get();
    for (uint16_t cn = 0; cn < o_.cns; cn++) {
      for (int i = 0; i < o_.workers; i++) {
        auto w = std::make_unique<Worker>();
        w->sched = std::make_unique<Scheduler>(clock);
        w->ep = fabric->CreateEndpoint(WorkerAddr{cn, static_cast<uint16_t>(i)}, *w->sched);
        if (driver_) driver_->AddCore(*w->sched, *w->ep);
        workers_.push_back(std::move(w));
      }
    }
    if (o_.sim && o_.device_locks) {
      const btree::SpaceLayout layout(space_);
      for (size_t r = 0; r < layout.num_ranges(); r++) {
        const GAddr base = layout.LockBase(r);
        sim_fabric_->MarkDeviceMemory(base.mn(), base.offset(),
                                      base.offset() + uint64_t{o_.lock_words} * 8);
      }
    }
    Status created = Internal("the tree was not created");
    workers_[0]->sched->Spawn([](Endpoint* ep, btree::TreeSpace s, Status* out) -> Task<void> {
      *out = co_await btree::CreateTree(*ep, s);
    }(workers_[0]->ep.get(), space_, &created));
    RunToEnd(nullptr);
    POND_RETURN_IF_ERROR(created);
    for (auto& w : workers_) w->tree = std::make_unique<btree::BTree>(*w->ep, space_, o_.tree);
    return Status::Ok();
  }

  // Every worker's coroutines load their share of the keys.
  Status Load() {
    const uint64_t n = workers_.size() * static_cast<uint64_t>(o_.coros);
    for (size_t i = 0; i < workers_.size(); i++) {
      for (int c = 0; c < o_.coros; c++) {
        const uint64_t k = i * static_cast<uint64_t>(o_.coros) + static_cast<uint64_t>(c);
        workers_[i]->sched->Spawn(LoadKeys(workers_[i].get(), &ks_, k, o_.keys, n));
      }
    }
    RunToEnd(nullptr);
    for (auto& w : workers_) POND_RETURN_IF_ERROR(w->error);
    return Status::Ok();
  }

  Result<BtreeBenchResult> Measure(const BtreeMix& mix,
                                   const std::function<void(double, uint64_t)>& progress) {
    for (auto& w : workers_) {
      w->tree_before = w->tree->stats();
      w->ep_before = w->ep->stats();
      w->handovers_before = w->tree->local_locks().handovers();
      w->waits_before = w->tree->local_locks().queued();
    }
    const uint64_t device_before = sim_fabric_ ? sim_fabric_->device_atomics() : 0;
    const uint64_t events_before = engine_ ? engine_->stats().events_run : 0;
    Clock& clock = workers_[0]->sched->clock();
    const uint64_t start = clock.NowNs();
    const uint64_t deadline = start + static_cast<uint64_t>(o_.seconds * 1e9);
    const uint64_t wall_start = SystemClock::Get().NowNs();
    Rng seeds(o_.seed * 7919 + 1);
    for (auto& w : workers_) {
      for (int c = 0; c < o_.coros; c++) {
        w->sched->Spawn(RunClient(w.get(), &mix, &ks_, &o_, seeds.Next(), deadline));
      }
    }
    RunToEnd([&](uint64_t now) {
      if (progress) progress(static_cast<double>(now - start) / 1e9, Ops());
    });
    BtreeBenchResult r;
    r.elapsed_s = o_.seconds;
    r.wall_s = static_cast<double>(SystemClock::Get().NowNs() - wall_start) / 1e9;
    for (auto& w : workers_) {
      POND_RETURN_IF_ERROR(w->error);
      r.ops += w->ops.load();
      r.inserts += w->inserts;
      r.lookups += w->lookups;
      r.ranges += w->ranges;
      r.found += w->found;
      r.range_entries += w->range_entries;
      r.latency_ns.Merge(w->latency_ns);
      AddStats(w->tree->stats(), w->tree_before, &r.tree);
      for (int v = 0; v < 4; v++) {
        r.verb_ops[v] += w->ep->stats().ops[v] - w->ep_before.ops[v];
        r.verb_bytes[v] += w->ep->stats().bytes[v] - w->ep_before.bytes[v];
      }
      r.handovers += w->tree->local_locks().handovers() - w->handovers_before;
      r.local_waits += w->tree->local_locks().queued() - w->waits_before;
    }
    if (sim_fabric_) r.device_atomics = sim_fabric_->device_atomics() - device_before;
    if (engine_) r.events = engine_->stats().events_run - events_before;
    return r;
  }

  Result<btree::TreeShape> Shape() {
    Result<btree::TreeShape> shape = Internal("not checked");
    workers_[0]->sched->Spawn(
        [](Endpoint* ep, btree::TreeSpace s, Result<btree::TreeShape>* out) -> Task<void> {
          *out = co_await btree::CheckTree(*ep, s);
        }(workers_[0]->ep.get(), space_, &shape));
    RunToEnd(nullptr);
    return shape;
  }

 private:
  uint64_t Ops() const {
    uint64_t n = 0;
    for (const auto& w : workers_) n += w->ops.load(std::memory_order_relaxed);
    return n;
  }

  static void AddStats(const btree::TreeStats& now, const btree::TreeStats& before,
                       btree::TreeStats* sum) {
    sum->lookups += now.lookups - before.lookups;
    sum->inserts += now.inserts - before.inserts;
    sum->updates += now.updates - before.updates;
    sum->scans += now.scans - before.scans;
    sum->torn_node_reads += now.torn_node_reads - before.torn_node_reads;
    sum->torn_entry_reads += now.torn_entry_reads - before.torn_entry_reads;
    sum->sibling_moves += now.sibling_moves - before.sibling_moves;
    sum->restarts += now.restarts - before.restarts;
    sum->leaf_splits += now.leaf_splits - before.leaf_splits;
    sum->internal_splits += now.internal_splits - before.internal_splits;
    sum->root_growths += now.root_growths - before.root_growths;
    sum->lock_cas_failed += now.lock_cas_failed - before.lock_cas_failed;
    sum->entry_writebacks += now.entry_writebacks - before.entry_writebacks;
    sum->node_writebacks += now.node_writebacks - before.node_writebacks;
  }

  // Runs every spawned coroutine to its end: the engine until it has no events, or a thread per
  // worker until its scheduler is idle. `tick` (may be null) gets the time about once a second.
  void RunToEnd(const std::function<void(uint64_t)>& tick) {
    if (engine_) {
      uint64_t next = engine_->now() + kProgressNs;
      while (engine_->Step()) {
        if (tick && engine_->now() >= next) {
          tick(engine_->now());
          next += kProgressNs;
        }
      }
      return;
    }
    std::atomic<size_t> running{workers_.size()};
    std::vector<std::thread> threads;
    for (auto& w : workers_) {
      threads.emplace_back([&running, s = w->sched.get()] {
        s->RunUntilIdle();
        running.fetch_sub(1);
      });
    }
    Clock& clock = SystemClock::Get();
    for (uint64_t next = clock.NowNs() + kProgressNs; running.load() > 0;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (tick && clock.NowNs() >= next) {
        tick(clock.NowNs());
        next += kProgressNs;
      }
    }
    for (auto& t : threads) t.join();
  }

  BtreeBenchOptions o_;
  KeySpace ks_;
  btree::TreeSpace space_;
  std::unique_ptr<sim::Engine> engine_;
  std::unique_ptr<SimFabric> sim_fabric_;
  std::unique_ptr<node::SimDriver> driver_;
  std::unique_ptr<LocalFabric> local_fabric_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

const BtreeMix* FindMix(const std::string& name) {
  for (const BtreeMix& m : BtreeMixes()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

}  // namespace

const std::vector<BtreeMix>& BtreeMixes() {
  static const std::vector<BtreeMix> mixes = {{"write-only", 100, 0, 0},
                                              {"write-intensive", 50, 50, 0},
                                              {"read-intensive", 5, 95, 0},
                                              {"range-only", 0, 0, 100},
                                              {"range-write", 50, 0, 50}};
  return mixes;
}

const std::vector<BtreeStep>& BtreeAblationSteps() {
  static const std::vector<BtreeStep> steps = {
      {"baseline",
       [](BtreeBenchOptions& o) {
         o.tree.combine = false;
         o.device_locks = false;
         o.tree.local_locks = false;
         o.tree.handover_max = 0;
         o.tree.entry_writeback = false;
       }},
      {"+combine", [](BtreeBenchOptions& o) { o.tree.combine = true; }},
      {"+on-chip", [](BtreeBenchOptions& o) { o.device_locks = true; }},
      {"+hierarchical",
       [](BtreeBenchOptions& o) {
         o.tree.local_locks = true;
         o.tree.handover_max = btree::TreeOptions{}.handover_max;
       }},
      {"+two-level", [](BtreeBenchOptions& o) { o.tree.entry_writeback = true; }},
  };
  return steps;
}

Status ValidateBtreeOptions(const BtreeBenchOptions& o) {
  if (FindMix(o.mix) == nullptr) {
    return InvalidArgument(
        "--mix must be write-only, write-intensive, read-intensive, range-only "
        "or range-write");
  }
  if (o.mns < 1 || o.mns > 64) return InvalidArgument("--mns must be 1 to 64");
  if (o.cns < 1 || o.cns > 64) return InvalidArgument("--cns must be 1 to 64");
  if (o.workers < 1 || o.workers > 64) return InvalidArgument("--workers must be 1 to 64");
  if (o.coros < 1 || o.coros > 256) return InvalidArgument("--coros must be 1 to 256");
  if (o.keys < 1 || o.keys > kKeysMax) {
    return InvalidArgument("--keys must be 1 to " + std::to_string(kKeysMax));
  }
  if (!(o.theta >= 0 && o.theta < 1)) return InvalidArgument("--theta must be in [0, 1)");
  if (o.range_size < 1 || o.range_size > 100'000) {
    return InvalidArgument("--range-size must be 1 to 100000");
  }
  if (!(o.seconds > 0) || o.seconds > 3600) {
    return InvalidArgument("--seconds must be in (0, 3600]");
  }
  if (o.region_mib < 1 || o.region_mib > (uint64_t{1} << 20)) {
    return InvalidArgument("--region-mib must be 1 to 1048576");
  }
  if (o.lock_words < 1 || o.lock_words > (1u << 24)) {
    return InvalidArgument("--lock-words must be 1 to 16777216");
  }
  // A loaded leaf is half full after splits: about 27 keys a KiB; room for twice that.
  const uint64_t need_mib = o.keys * 1.5 / 27 * 1024 * 2 / kMiB / o.mns + 2;
  if (o.region_mib < need_mib) {
    return InvalidArgument("--region-mib " + std::to_string(o.region_mib) + " is too small for " +
                           std::to_string(o.keys) + " keys on " + std::to_string(o.mns) +
                           " MN(s); give at least " + std::to_string(need_mib));
  }
  if (o.sim) return o.sim->Validate();
  return Status::Ok();
}

Result<BtreeBenchResult> RunBtreeBench(const BtreeBenchOptions& o,
                                       const std::function<void(double, uint64_t)>& progress) {
  POND_RETURN_IF_ERROR(ValidateBtreeOptions(o));
  const BtreeMix& mix = *FindMix(o.mix);
  Bench bench(o);
  POND_RETURN_IF_ERROR(bench.Start());
  const uint64_t load_start = SystemClock::Get().NowNs();
  POND_RETURN_IF_ERROR(bench.Load());
  const double load_wall_s = static_cast<double>(SystemClock::Get().NowNs() - load_start) / 1e9;
  Result<BtreeBenchResult> r = bench.Measure(mix, progress);
  if (!r.ok()) return r.status();
  r->load_wall_s = load_wall_s;
  Result<btree::TreeShape> shape = bench.Shape();
  if (!shape.ok()) {
    return Internal("the tree is broken after the run: " + shape.status().ToString());
  }
  r->levels = shape->levels;
  for (uint64_t n : shape->nodes_by_level) r->nodes += n;
  r->entries = shape->entries.size();
  return r;
}

}  // namespace pond::bench
