#include "pond/node/sim_membership.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>

#include "pond/base/assert.h"
#include "pond/cluster/directory.h"
#include "pond/lock/lock_key.h"
#include "pond/node/node_controls.h"
#include "pond/node/rereplication.h"
#include "pond/node/sim_driver.h"
#include "pond/node/worker_context.h"
#include "pond/store/catalog.h"
#include "pond/store/layout.h"

namespace pond::node {

namespace {

// The cluster's name in the simulated coordination service.
constexpr const char* kClusterName = "sim";
// How often a fault that must wait is tried again.
constexpr uint64_t kRetryNs = 10'000;

}  // namespace

// One incarnation of a CN's membership: the machine, the core and endpoint its beat half uses
// (a daemon's membership thread), and the controls it acts through.
struct SimMembership::Node {
  uint16_t cn = 0, incarnation = 0;
  std::unique_ptr<Scheduler> sched;  // first: destroyed last
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<Controls> controls;
  std::unique_ptr<CnStore> store;
  recovery::MembershipCounts counts;
  std::unique_ptr<recovery::CnMembership> machine;
  bool crashed = false;
  bool serving = false;  // let in: alive in an epoch it applied, its clients running

  ~Node() {
    // Parked coroutines (a beat in flight at a crash) go before the machine they point into.
    if (sched) sched->DestroyUnfinished();
  }
};

// The coordination service as every simulated CN reaches it; each configuration put is shown
// to the simulator, which knows the truth the machines can only infer.
class SimMembership::Store final : public cluster::ConfigStore {
 public:
  Store(SimMembership& m, cluster::InMemoryConfigStore& base) : m_(m), base_(base) {}
  Result<cluster::Versioned> Get(const std::string& key) const override {
    if (down) return Down();
    return base_.Get(key);
  }
  Result<uint64_t> PutIf(const std::string& key, std::span<const std::byte> value,
                         uint64_t expected) override {
    if (down) return Down();
    Result<uint64_t> v = base_.PutIf(key, value, expected);
    if (v.ok() && key == cluster::ConfigKey(kClusterName)) {
      Result<cluster::Configuration> c = cluster::Configuration::Decode(value);
      POND_CHECK_MSG(c.ok(), "a machine put a configuration it cannot read back");
      m_.OnConfig(*c);
    }
    return v;
  }
  void Watch(const std::string& key, std::function<void(const cluster::Versioned&)> fn) override {
    base_.Watch(key, std::move(fn));
  }

  // crash-coord to restart-coord: every call fails as a lost ZooKeeper session's do; what the
  // service held is kept.
  bool down = false;

 private:
  static Status Down() { return Unavailable("the coordination service is down"); }
  SimMembership& m_;
  cluster::InMemoryConfigStore& base_;
};

// The coordination service as simulated CN `cn` reaches it: not at all while it is partitioned
// (partition-cn cuts it off from the service as from the other CNs; its one-sided writes, its
// beats among them, still reach the memory pool).
class SimMembership::CnStore final : public cluster::ConfigStore {
 public:
  CnStore(SimMembership& m, uint16_t cn) : m_(m), cn_(cn) {}
  Result<cluster::Versioned> Get(const std::string& key) const override {
    if (m_.cut_[cn_]) return Cut();
    return m_.store_->Get(key);
  }
  Result<uint64_t> PutIf(const std::string& key, std::span<const std::byte> value,
                         uint64_t expected) override {
    if (m_.cut_[cn_]) return Cut();
    return m_.store_->PutIf(key, value, expected);
  }
  void Watch(const std::string& key, std::function<void(const cluster::Versioned&)> fn) override {
    m_.store_->Watch(key, std::move(fn));
  }

 private:
  static Status Cut() { return Unavailable("cut off from the coordination service"); }
  SimMembership& m_;
  const uint16_t cn_;
};

// What the machine of simulated CN `cn` acts through: its workers, lock table and caches, and
// the cluster's shard map and placement, which the simulated CNs share.
// A simulated CN's controls: NodeControls, as a `pond cn` process has them, reaching its workers
// at once (every CN runs on the engine's one thread) and checking what docs/recovery.md argues.
class SimMembership::Controls final : public NodeControls {
 public:
  Controls(SimMembership& m, uint16_t cn)
      : NodeControls(m.cl_, cn, /*cluster_follows=*/false), m_(m) {}

  Status ReachRestarted(uint16_t, uint16_t) override {
    return Status::Ok();  // the simulated fabric routes to a CN's newest incarnation
  }
  Status ReachRestartedMn(MnId, uint16_t) override {
    return Status::Ok();  // the simulated fabric serves an MN's memory where it always did
  }
  void LogRecovered(uint16_t dead, uint64_t epoch, uint16_t,
                    const cluster::LogRecoveryStats& stats) override {
    for (Failure& f : m_.failures_) {
      if (f.cn != dead || f.epoch != epoch) continue;
      f.stats.rolled_forward += stats.rolled_forward;
      f.stats.rolled_back += stats.rolled_back;
      f.stats.log_records += stats.records;
    }
  }
  void Event(const std::string& line) override {
    if (std::getenv("POND_SIM_EVENTS") != nullptr) {
      std::fprintf(stderr, "%.3f ms CN %u: %s\n", m_.engine_.now() / 1e6, cn_, line.c_str());
    }
    if (cl_.event_log_) cl_.event_log_("CN " + std::to_string(cn_) + ": " + line);
  }
  void Fence(const std::string& why) override {
    Event("fenced itself: " + why);
    // The machine acts no more; the CN stops as a daemon exits, once this call has returned.
    m_.engine_.At(m_.engine_.now(), [m = &m_, cn = cn_, inc = m_.nodes_[cn_]->incarnation] {
      const Node& n = *m->nodes_[cn];
      if (n.incarnation == inc && !n.crashed) m->Crash(cn, /*fenced=*/true);
    });
  }

 private:
  void Post(WorkerContext& w, std::function<void(WorkerContext&)> fn) override { fn(w); }
  std::optional<size_t> OnWorkers(const std::function<size_t(WorkerContext&)>& fn) override {
    size_t sum = 0;
    for (auto& w : Me().workers) sum += fn(*w);
    return sum;
  }
  void CallsUnknown(size_t calls) override { m_.unknown_calls_ += calls; }
  void OracleMade(const txn::TimestampOracle& o) override {
    // What docs/recovery.md argues, checked: the new oracle starts past the old one.
    POND_CHECK_MSG(m_.oracle_ == nullptr || o.NextAtLeast() > m_.oracle_->last(),
                   "a new timestamp oracle would grant below the old one");
    m_.oracle_ = &o;
  }
  void ShardMoving(uint32_t s, uint16_t from, uint16_t to) override {
    // What docs/recovery.md argues, checked: a shard leaves a CN still running only once that
    // CN has closed it (a return), so no two CNs ever grant its locks.
    POND_CHECK_MSG(from == to || m_.IsCrashed(from) || !cl_.cns_[from]->locks.Manages(s),
                   "a shard moved off a running CN that still serves it");
  }
  std::function<void(uint64_t)> CopyCounter(MnId mn) override {
    return [m = &m_, mn](uint64_t slots) { m->mn_slots_copied_[mn] += slots; };
  }

  SimMembership& m_;
};

SimMembership::SimMembership(ClusterImpl& cl)
    : cl_(cl),
      engine_(*cl.engine_),
      store_(std::make_unique<Store>(*this, base_)),
      nodes_(cl.config().cns),
      cut_(cl.config().cns, false),
      mn_crashed_(cl.config().mns, false),
      host_cut_(std::min(cl.config().cns, cl.config().mns), false),
      host_healed_(host_cut_.size(), 0),
      cut_from_(host_cut_.size(), -1),
      mn_slots_copied_(cl.config().mns, 0),
      cut_waiting_since_(cl.config().cns, 0),
      crash_waiting_since_(cl.config().cns, 0),
      mn_crash_waiting_since_(cl.config().mns, 0),
      cut_given_up_(cl.config().cns, false),
      crash_given_up_(cl.config().cns, false),
      mn_crash_given_up_(cl.config().mns, false),
      mn_crash_pending_(cl.config().mns, false),
      queued_(cl.config().cns),
      queued_peers_(cl.config().cns),
      step_aims_(cl.config().cns) {}

SimMembership::~SimMembership() = default;

Status SimMembership::Validate(const std::vector<NodeFault>& faults) const {
  return ValidateNodeFaults(cl_.config(), faults);
}

bool SimMembership::IsCrashed(uint16_t cn) const {
  return nodes_[cn] != nullptr && nodes_[cn]->crashed;
}

void SimMembership::Arm(const std::vector<NodeFault>& faults) {
  base_ns_ = engine_.now();
  if (faults.empty() && !started_) return;
  if (!started_) {
    Start();
  } else {
    for (auto& n : nodes_) {
      if (!n->crashed) n->machine->Resumed();
    }
  }
  const uint64_t gen = generation_;
  faults_not_reached_ += faults.size();
  for (const NodeFault& f : faults) {
    if (f.step != CommitStep::kNone && !cl_.step_probe_) {
      cl_.step_probe_ = [this](uint16_t cn, CommitStep step) { OnStep(cn, step); };
    }
  }
  for (const NodeFault& f : faults) {
    engine_.At(base_ns_ + f.at_ns, [this, gen, kind = f.kind, node = f.node, step = f.step,
                                    peer = f.peer] {
      if (gen != generation_) return;
      faults_not_reached_--;
      if (step != CommitStep::kNone) AimCrash(node, step);
      if (kind == NodeFaultKind::kCrashMn) {
        CrashMn(node);
      } else if (kind == NodeFaultKind::kRestartMn) {
        RestartMn(node);
      } else if (kind == NodeFaultKind::kCrashCoord || kind == NodeFaultKind::kRestartCoord) {
        SetCoordinationDown(kind == NodeFaultKind::kCrashCoord);
      } else {
        // crash-cn, restart-cn, partition-cn, heal-cn, partition-host and heal-host, which take
        // their turn among the faults of their CN; cut-hosts and heal-hosts among the lower
        // host's.
        if (kind == NodeFaultKind::kCutHosts || kind == NodeFaultKind::kHealHosts) {
          queued_peers_[node].push_back(peer);
        }
        Enqueue(node, kind);
      }
    });
  }
  const uint64_t period = kSimLeaseNs / 10;
  engine_.At(engine_.now() + period, [this, tg = tick_generation_] { Tick(tg); });
  // Each CN's machine on a phase of its own, as daemons' threads are: no two apply an epoch at
  // one instant unless the seed makes them.
  for (uint16_t cn = 0; cn < nodes_.size(); cn++) {
    const uint64_t mix =
        (cl_.config().seed + 1) * 0x9E3779B97F4A7C15ull + (cn + 1) * 0xBF58476D1CE4E5B9ull;
    const uint64_t phase = (mix >> 33) % period;
    engine_.At(engine_.now() + period + phase,
               [this, cn, tg = tick_generation_] { TickCn(cn, tg); });
  }
}

void SimMembership::Disarm() {
  generation_++;
  tick_generation_++;
}

void SimMembership::Start() {
  started_ = true;
  const ClusterConfig& c = cl_.config();
  recovery::StartOptions o{.cluster = kClusterName,
                           .cns = static_cast<uint16_t>(c.cns),
                           .mns = static_cast<uint16_t>(c.mns),
                           .shards = lock::kShards};
  for (uint32_t s = 0; s < lock::kShards; s++) o.home.push_back(cl_.shard_map_.CnOf(s));
  for (uint16_t cn = 0; cn < c.cns; cn++) {
    o.cn = cn;
    Result<std::optional<recovery::CnStart>> start = recovery::TryStart(*store_, o);
    POND_CHECK_MSG(start.ok() && start->has_value(), "a simulated CN could not start");
    StartNode(cn, **start);
    nodes_[cn]->serving = true;
  }
  oracle_ = cl_.cns_[config_.tso_host]->oracle.get();
}

void SimMembership::StartNode(uint16_t cn, const recovery::CnStart& start) {
  const ClusterConfig& c = cl_.config();
  CnContext& ctx = *cl_.cns_[cn];
  ctx.view = start.config;
  ctx.GoneBelowView();
  cluster::LogAreas logs;
  for (auto& w : ctx.workers) {
    w->SetView(start.config);
    logs.bytes = w->log().bytes();
    logs.areas.push_back(w->log().areas());
  }
  // Where its logs are, before it may be let in (and so fail and be recovered).
  Status published = recovery::PublishLogs(*store_, kClusterName, cn, start.incarnation, logs);
  POND_CHECK_MSG(published.ok(), published.ToString().c_str());
  auto n = std::make_unique<Node>();
  n->cn = cn;
  n->incarnation = start.incarnation;
  n->sched = std::make_unique<Scheduler>(cl_.clock());
  // The core after the workers' is the membership's: a daemon's membership thread.
  const WorkerAddr addr{cn, static_cast<uint16_t>(c.workers_per_cn)};
  n->ep = cl_.sim_fabric_->CreateControlEndpoint(addr, *n->sched);
  if (nodes_[cn] == nullptr) {
    cl_.driver_->AddCore(*n->sched, *n->ep);
  } else {
    cl_.driver_->RestartCore(*n->sched, *n->ep);
  }
  n->controls = std::make_unique<Controls>(*this, cn);
  n->store = std::make_unique<CnStore>(*this, cn);
  recovery::MembershipOptions mo{
      .cluster = kClusterName,
      .cn = cn,
      .incarnation = start.incarnation,
      .cns = static_cast<uint16_t>(c.cns),
      .mns = static_cast<uint16_t>(c.mns),
      .workers_per_cn = static_cast<uint16_t>(c.workers_per_cn),
      .replication = c.replication,
      .lease_ns = kSimLeaseNs,
      .shards = lock::kShards,
  };
  n->machine = std::make_unique<recovery::CnMembership>(mo, start.config, start.shards, *n->store,
                                                        cl_.clock(), *n->controls, n->counts,
                                                        *n->sched, *n->ep);
  if (nodes_[cn] != nullptr) retired_.push_back(std::move(nodes_[cn]));
  nodes_[cn] = std::move(n);
  if (start.restarted) {
    Status asked = recovery::AskToRejoin(*store_, kClusterName, cn, start.incarnation);
    POND_CHECK_MSG(asked.ok(), asked.ToString().c_str());
  }
}

void SimMembership::Tick(uint64_t generation) {
  if (generation != tick_generation_) return;
  // Each MN's CPU counts its beat up, as an MN daemon does.
  for (MnId mn = 0; mn < mn_crashed_.size(); mn++) {
    if (!mn_crashed_[mn]) store::BeatMn(cl_.fabric_->region(mn));
  }
  PollFailures();
  engine_.At(engine_.now() + kSimLeaseNs / 10, [this, generation] { Tick(generation); });
}

void SimMembership::TickCn(uint16_t cn, uint64_t generation) {
  if (generation != tick_generation_) return;
  const uint64_t now = engine_.now();
  engine_.At(now + kSimLeaseNs / 10, [this, cn, generation] { TickCn(cn, generation); });
  Node* n = nodes_[cn].get();
  if (n == nullptr || n->crashed) return;
  recovery::CnMembership& m = *n->machine;
  m.BeatTick();
  m.RunQueued();
  if (m.fenced()) return;
  m.CoordTick();
  m.RunQueued();
  if (!n->serving && m.alive()) {
    // Let back in: its clients start, as a restarted daemon's clients reach it.
    n->serving = true;
    for (auto& w : cl_.cns_[n->cn]->workers) cl_.StartClients(*w);
    for (auto it = failures_.rbegin(); it != failures_.rend(); ++it) {
      if (it->cn != n->cn) continue;
      it->stats.restart_ns = now - base_ns_;
      break;
    }
  }
  PollFailures();
}

void SimMembership::OnConfig(const cluster::Configuration& next) {
  const cluster::Configuration before = config_;
  config_ = next;
  // The cluster's own view follows the newest epoch (what loads and the checks after a run
  // read); each CN's follows as it applies it. The CM wrote the epoch's map first.
  Result<std::vector<uint16_t>> map =
      cluster::ReadShardMap(base_, kClusterName, next.epoch, lock::kShards);
  POND_CHECK_MSG(map.ok(), "a configuration put before its shard map");
  cl_.shard_map_.AssignAll(*map);
  cluster::ApplyMnStates(next, cl_.placement_);
  if (before.cns.empty()) return;  // the first configuration
  const uint64_t now = engine_.now() - base_ns_;
  for (uint16_t cn = 0; cn < next.cns.size(); cn++) {
    if (!before.cns[cn].alive || next.cns[cn].alive) continue;
    // The fencing rule, checked: a CN the configuration manager gives up has stopped serving
    // (docs/recovery.md "Partitions and fencing").
    POND_CHECK_MSG(IsCrashed(cn), "the membership machine declared a CN that is still serving");
    for (Failure& f : failures_) {
      if (f.cn == cn && f.incarnation == before.cns[cn].incarnation && f.epoch == 0) {
        f.epoch = next.epoch;
        f.stats.detected_ns = now;
      }
    }
  }
  using Rejoin = cluster::MnStatus::Rejoin;
  for (uint16_t mn = 0; mn < next.mns.size(); mn++) {
    const cluster::MnStatus& was = before.mns[mn];
    const cluster::MnStatus& is = next.mns[mn];
    // A rejoin's milestones, on the MN's latest failure.
    FailoverStats::MnFailure* latest = nullptr;
    for (FailoverStats::MnFailure& m : mn_failures_) {
      if (m.mn == mn) latest = &m;
    }
    if (latest != nullptr && is.alive) {
      if (!was.alive && is.rejoin == Rejoin::kCopying) latest->copy_start_ns = now;
      if (was.rejoin == Rejoin::kCopying && is.rejoin == Rejoin::kFrozen) latest->copied_ns = now;
      if (was.rejoin != Rejoin::kNone && is.rejoin == Rejoin::kNone && !is.leaving) {
        latest->readable_ns = now;
        latest->slots_copied = mn_slots_copied_[mn];
        // What docs/recovery.md argues, checked: the machines laid its superblock and catalog
        // out as before (LayOutRestarted), so a CN that starts now loads every table from it.
        const store::PoolLayout& l = cl_.layout();
        std::vector<std::byte> image(l.heap_begin);
        store::RestoreRegion(image.data(), cl_.catalog_, static_cast<MnId>(mn));
        const std::byte* region = cl_.fabric_->region(static_cast<MnId>(mn));
        POND_CHECK_MSG(
            std::memcmp(region + store::kCatalogOffset, image.data() + store::kCatalogOffset,
                        l.heap_begin - store::kCatalogOffset) == 0 &&
                std::memcmp(region, image.data(), offsetof(store::Superblock, heap_end)) == 0,
            "a restarted MN is read again without its catalog laid out");
      }
    }
    if (!was.alive || (was.leaving == is.leaving && is.alive)) continue;
    if (!mn_crashed_[mn]) {
      // Only an MN cut off with its host may be declared running: nobody else could read its
      // beat. A read that left before the heal may fail after it, so the CM may declare it a
      // little after the heal too — never a lease after, by when its beat was read moving.
      // Or one on a host cut apart from another: the CM may be on the other host, or most CNs
      // may not reach it.
      const bool cut = mn < host_cut_.size() &&
                       (host_cut_[mn] || InHostsCut(mn) ||
                        (host_healed_[mn] != 0 && engine_.now() - host_healed_[mn] < kSimLeaseNs));
      POND_CHECK_MSG(cut, "the membership machine declared an MN that is running");
      if (was.alive && !was.leaving) {  // the first epoch of this declaration
        uint64_t cut_ns = now;
        for (const FailoverStats::Partition& p : partitions_) {
          if ((p.host || p.apart_from >= 0) && p.cn == mn) cut_ns = p.cut_ns;
        }
        mn_failures_.push_back(FailoverStats::MnFailure{.mn = mn, .crash_ns = cut_ns, .cut = true});
        latest = &mn_failures_.back();
      }
      // Healed already: it loses its place now (not from inside the machine's put).
      if (!host_cut_[mn] && !InHostsCut(mn)) {
        engine_.At(engine_.now(), [this, mn, gen = generation_] {
          if (gen == generation_) LoseMnPlace(static_cast<MnId>(mn));
        });
      }
    }
    if (latest->detected_ns == 0) latest->detected_ns = now;
    if (!is.alive) latest->down_ns = now;
  }
  if (next.tso_host != before.tso_host) tso_moves_++;
}

void SimMembership::PollFailures() {
  // As the machines see it: a failure is recovered once every CN alive has released its locks,
  // and open once every one has opened its shards — each CN that has applied the epoch that
  // declared it, those let in since included (they take part too: CnMembership::Adopt).
  const uint64_t now = engine_.now() - base_ns_;
  for (Failure& f : failures_) {
    if (f.epoch == 0 || f.stats.open_ns != 0) continue;
    bool released = true, opened = true;
    for (const auto& n : nodes_) {
      if (n->crashed || !n->serving) continue;
      const recovery::CnMembership::Part p = n->counts.epoch.load() < f.epoch
                                                 ? recovery::CnMembership::Part::kNone
                                                 : n->machine->PartIn(f.cn, f.epoch);
      released &= p == recovery::CnMembership::Part::kReleased ||
                  p == recovery::CnMembership::Part::kOpened;
      opened &= p == recovery::CnMembership::Part::kOpened;
    }
    if (released && f.stats.recovered_ns == 0) f.stats.recovered_ns = now;
    if (opened) f.stats.open_ns = now;
  }
  // A restarted CN's shards are home once it manages every one whose home it is, each opened in
  // its lock table. Only its newest failure counts: an older one's return was cut short.
  for (const auto& n : nodes_) {
    if (n == nullptr || n->crashed || !n->serving) continue;
    Failure* last = nullptr;
    for (Failure& f : failures_) {
      if (f.cn == n->cn) last = &f;
    }
    if (last == nullptr || last->stats.restart_ns == 0 || last->stats.returned_ns != 0) continue;
    const CnContext& me = *cl_.cns_[n->cn];
    bool home = true;
    for (uint32_t s = 0; s < lock::kShards && home; s++) {
      home =
          me.shard_map.HomeOf(s) != n->cn || (me.shard_map.CnOf(s) == n->cn && me.locks.Manages(s));
    }
    if (home) last->stats.returned_ns = now;
  }
}

bool SimMembership::Idle() const {
  if (queued_count_ > 0) return false;
  // A cut-off CN is waited for until it heals or fences itself: its clients and what the others
  // ask of it cannot finish before.
  for (uint16_t cn = 0; cn < cut_.size(); cn++) {
    if (cut_[cn] && nodes_[cn] != nullptr && !nodes_[cn]->crashed) return false;
  }
  // And one cut from another host, until it fences or the other host's MN is taken out (a CM on
  // its host declared it): till then its commits to that MN wait.
  for (uint16_t h = 0; h < cut_from_.size(); h++) {
    const int other = cut_from_[h];
    if (other < 0 || nodes_[h] == nullptr || nodes_[h]->crashed || config_.mns.empty()) continue;
    const cluster::MnStatus& m = config_.mns[static_cast<size_t>(other)];
    if (m.alive && !m.leaving) return false;
  }
  for (const auto& n : nodes_) {
    if (n != nullptr && !n->crashed && !n->serving) return false;  // waiting to be let in
  }
  for (const Failure& f : failures_) {
    if (f.stats.open_ns == 0) return false;
  }
  // Every CN running has applied the newest epoch, and a return under way ends first: its shards
  // are closed until their home opens them.
  for (const auto& n : nodes_) {
    if (n == nullptr || n->crashed) continue;
    if (n->counts.epoch.load() != config_.epoch || n->machine->Returning()) return false;
  }
  for (uint32_t s = 0; s < lock::kShards; s++) {
    const Node* owner = nodes_[cl_.shard_map_.CnOf(s)].get();
    if (owner != nullptr && !owner->crashed && !cl_.cns_[owner->cn]->locks.Manages(s)) return false;
  }
  if (mn_faults_waiting_ > 0) return false;
  for (MnId mn = 0; mn < mn_crashed_.size(); mn++) {
    if (config_.mns.empty()) break;
    const cluster::MnStatus& m = config_.mns[mn];
    if (mn_crashed_[mn] && m.alive) return false;
    // Restarted: until it is let in and read like any replica. (One cut off with its host and
    // declared stays out until the heal brings it back, as a crashed one until its restart.)
    const bool cut = mn < host_cut_.size() && (host_cut_[mn] || InHostsCut(mn));
    if (!mn_crashed_[mn] && !cut && (!m.alive || m.rejoin != cluster::MnStatus::Rejoin::kNone)) {
      return false;
    }
  }
  return true;
}

void SimMembership::Enqueue(uint16_t cn, NodeFaultKind kind, bool first) {
  std::vector<NodeFaultKind>& q = queued_[cn];
  q.insert(first ? q.begin() : q.end(), kind);
  queued_count_++;
  if (q.size() == 1) RunQueue(cn);
}

void SimMembership::RunQueue(uint16_t cn) {
  std::vector<NodeFaultKind>& q = queued_[cn];
  while (!q.empty()) {
    bool done = false;
    if (q.front() == NodeFaultKind::kCrashCn) {
      // A crash aimed at a step waits for OnStep (or its deadline); one that would leave no CN
      // serving waits for one to be back, and a CN is crashed only once it is let in.
      if (step_aims_[cn].step != CommitStep::kNone) return;
      const Node& n = *nodes_[cn];
      done = ServingBesides(cn) > 0 && n.serving && !n.crashed && CrashSurvived(cn);
      if (done && !crash_given_up_[cn]) Crash(cn, /*fenced=*/false);
    } else if (q.front() == NodeFaultKind::kPartitionCn ||
               q.front() == NodeFaultKind::kPartitionHost) {
      done = Cut(cn, q.front() == NodeFaultKind::kPartitionHost);
    } else if (q.front() == NodeFaultKind::kHealCn || q.front() == NodeFaultKind::kHealHost) {
      done = Heal(cn, q.front() == NodeFaultKind::kHealHost);
    } else if (q.front() == NodeFaultKind::kCutHosts || q.front() == NodeFaultKind::kHealHosts) {
      const uint16_t peer = queued_peers_[cn].front();
      done = q.front() == NodeFaultKind::kCutHosts ? CutHosts(cn, peer) : HealHosts(cn, peer);
      if (done) queued_peers_[cn].erase(queued_peers_[cn].begin());
    } else if (crash_given_up_[cn]) {  // its crash never happened
      crash_given_up_[cn] = false;
      done = true;
    } else {
      done = Restart(cn);
    }
    if (!done) {
      engine_.At(engine_.now() + kRetryNs, [this, cn, gen = generation_] {
        if (gen == generation_) RunQueue(cn);
      });
      return;
    }
    q.erase(q.begin());
    queued_count_--;
  }
}

void SimMembership::AimCrash(uint16_t cn, CommitStep step) {
  StepAim& a = step_aims_[cn];
  a.step = step;
  const uint64_t token = ++a.token;
  // Bounded: a CN whose transactions never reach the step crashes at the deadline anyway.
  engine_.At(engine_.now() + kStepCrashWaitNsMax, [this, cn, token, gen = generation_] {
    StepAim& aim = step_aims_[cn];
    if (gen != generation_ || aim.token != token || aim.step == CommitStep::kNone) return;
    aim.step = CommitStep::kNone;
    step_crashes_unaimed_++;
    RunQueue(cn);
  });
}

void SimMembership::OnStep(uint16_t cn, CommitStep step) {
  StepAim& a = step_aims_[cn];
  if (a.step != step || IsCrashed(cn)) return;
  // Only once the crash is next in the CN's queue and would go ahead now.
  const std::vector<NodeFaultKind>& q = queued_[cn];
  if (q.empty() || q.front() != NodeFaultKind::kCrashCn || ServingBesides(cn) == 0 ||
      !nodes_[cn]->serving) {
    return;
  }
  a.step = CommitStep::kNone;
  step_crashes_[static_cast<size_t>(step)]++;
  // Called from inside the transaction: the crash is the next event at this instant.
  engine_.At(engine_.now(), [this, cn, gen = generation_] {
    if (gen == generation_) RunQueue(cn);
  });
}

bool SimMembership::CrashSurvived(uint16_t cn) {
  // As a cut waits (Cut): the CN must be declared, which needs the CM to read enough MNs, and a
  // restarted MN counts up for the schedule's check from its restart-mn but is read only once
  // its copy ends.
  if (Survives(MnsOut(), /*cn_away=*/true)) {
    crash_waiting_since_[cn] = 0;
    return true;
  }
  if (!GiveUp(&crash_waiting_since_[cn])) return false;
  crash_given_up_[cn] = true;  // and its restart-cn comes to nothing
  return true;
}

int SimMembership::ServingBesides(uint16_t cn) const {
  int serving = 0;
  for (uint16_t other = 0; other < nodes_.size(); other++) {
    const Node* n = nodes_[other].get();
    serving += other != cn && n != nullptr && !n->crashed && n->serving && !cut_[other];
  }
  return serving;
}

bool SimMembership::Cut(uint16_t cn, bool host) {
  // As a crash waits (RunQueue): not the last CN serving, and only once it serves.
  const Node& n = *nodes_[cn];
  if (ServingBesides(cn) == 0 || !n.serving || n.crashed) return false;
  // A host's MN is cut only once it is read like any replica: a restart-mn before it waits for
  // its declaration and copy, as a crash of another MN waits (CrashMn).
  if (host &&
      (mn_crashed_[cn] || config_.mns.empty() || !config_.mns[cn].alive ||
       config_.mns[cn].leaving || config_.mns[cn].rejoin != cluster::MnStatus::Rejoin::kNone)) {
    return false;
  }
  // The cut leaves CN `cn` away until it fences and is declared, and a CM declares a CN only
  // once it has read enough MNs (CnMembership::Declarable): it waits until the MNs out — its own
  // MN too, for a host — are few enough for that. A schedule's check counts an MN up from its
  // restart-mn, but here it stays unread until its copy ends: cut then, with another MN out too,
  // no CN down would ever be declared, nor its locks released (fault seeds 73, 142 and 166).
  if (!Survives(MnsOut() + (host ? 1 : 0), /*cn_away=*/true)) {
    if (!GiveUp(&cut_waiting_since_[cn])) return false;
    cut_given_up_[cn] = true;  // and its heal comes to nothing
    return true;
  }
  cut_waiting_since_[cn] = 0;
  cut_[cn] = true;
  FailoverStats::Partition p{cn, engine_.now() - base_ns_};
  if (host) {
    // Its MN keeps running, its CPU beating into a lease page that nobody else can read now; its
    // memory stays, and only CN `cn` reaches it.
    POND_CHECK(!mn_crashed_[cn]);
    host_cut_[cn] = true;
    cl_.sim_fabric_->PartitionHost(cn);
    p.host = true;
  } else {
    cl_.sim_fabric_->PartitionCn(cn);
  }
  partitions_.push_back(p);
  return true;
}

bool SimMembership::Heal(uint16_t cn, bool host) {
  if (cut_given_up_[cn]) {  // its partition never happened
    cut_given_up_[cn] = false;
    return true;
  }
  if (host && host_cut_[cn]) {
    host_cut_[cn] = false;
    host_healed_[cn] = engine_.now();
    cl_.sim_fabric_->HealHost(cn);
    // Declared meanwhile (its beat unread for a lease): the cluster has given its place up, and
    // its memory is what its replicas held when nobody could write it any more. It comes back as
    // a restarted MN, blank, rejoining. Never declared: it goes on as if nothing happened.
    if (!config_.mns.empty() && (!config_.mns[cn].alive || config_.mns[cn].leaving)) {
      LoseMnPlace(static_cast<MnId>(cn));
    }
  }
  if (cut_[cn]) {
    cut_[cn] = false;
    if (!host) cl_.sim_fabric_->HealCn(cn);
    for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
      if (it->cn != cn) continue;
      it->healed_ns = engine_.now() - base_ns_;
      break;
    }
  }
  // Healed before it fenced: it goes on (what waited on either side is sent again). After: it
  // comes back as a daemon's supervisor restarts it, once its failure is recovered.
  if (!nodes_[cn]->crashed) return true;
  return Restart(cn);
}

bool SimMembership::CutHosts(uint16_t x, uint16_t y) {
  // As Cut waits: both CNs serving, a CN besides them serving, both MNs read like any replica,
  // and the cluster surviving both CNs away and one of the MNs out (a CM on one host declares
  // the other's MN).
  int serving = 0;
  for (uint16_t other = 0; other < nodes_.size(); other++) {
    const Node* n = nodes_[other].get();
    serving +=
        other != x && other != y && n != nullptr && !n->crashed && n->serving && !cut_[other];
  }
  for (uint16_t h : {x, y}) {
    const Node& n = *nodes_[h];
    if (!n.serving || n.crashed || mn_crashed_[h] || config_.mns.empty() || !config_.mns[h].alive ||
        config_.mns[h].leaving || config_.mns[h].rejoin != cluster::MnStatus::Rejoin::kNone) {
      return false;
    }
  }
  if (serving == 0) return false;
  if (!Survives(MnsOut() + 1, /*cn_away=*/true)) {
    if (!GiveUp(&cut_waiting_since_[x])) return false;
    cut_given_up_[x] = true;  // and its heal comes to nothing
    return true;
  }
  cut_waiting_since_[x] = 0;
  cut_from_[x] = y;
  cut_from_[y] = x;
  cl_.sim_fabric_->CutHosts(x, y);
  for (auto [h, other] : {std::pair{x, y}, std::pair{y, x}}) {
    FailoverStats::Partition p{h, engine_.now() - base_ns_};
    p.apart_from = other;
    partitions_.push_back(p);
  }
  return true;
}

bool SimMembership::HealHosts(uint16_t x, uint16_t y) {
  if (cut_given_up_[x]) {  // the cut never happened
    cut_given_up_[x] = false;
    return true;
  }
  if (cut_from_[x] == y) {
    cut_from_[x] = cut_from_[y] = -1;
    cl_.sim_fabric_->HealHosts(x, y);
    for (uint16_t h : {x, y}) {
      host_healed_[h] = engine_.now();
      // Declared meanwhile, its MN comes back as a restarted one (as after heal-host).
      if (!config_.mns.empty() && (!config_.mns[h].alive || config_.mns[h].leaving)) {
        LoseMnPlace(static_cast<MnId>(h));
      }
      for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
        if (it->cn != h) continue;
        it->healed_ns = engine_.now() - base_ns_;
        break;
      }
    }
  }
  // A CN that fenced comes back as a daemon's supervisor restarts it; one of the two may have
  // to wait (its failure not recovered yet), and the heal waits with it.
  bool done = true;
  for (uint16_t h : {x, y}) {
    if (nodes_[h]->crashed && !Restart(h)) done = false;
  }
  return done;
}

void SimMembership::Crash(uint16_t cn, bool fenced) {
  Node& n = *nodes_[cn];
  POND_CHECK(!n.crashed);
  n.crashed = true;
  cl_.sim_fabric_->CrashCn(cn);
  cl_.driver_->StopCn(cn);
  for (auto& w : cl_.cns_[cn]->workers) {
    cl_.clients_running_ -= w->clients_running();
    w->clients_running() = 0;
  }
  Failure f;
  f.cn = cn;
  f.incarnation = n.incarnation;
  f.stats.cn = cn;
  f.stats.crash_ns = engine_.now() - base_ns_;
  f.stats.fenced = fenced;
  failures_.push_back(f);
  if (fenced) {
    for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
      if (it->cn != cn) continue;
      if (it->healed_ns == 0 && (cut_[cn] || InHostsCut(cn))) {
        it->fenced_ns = engine_.now() - base_ns_;
      }
      break;
    }
  }
  // A daemon that fenced itself exits, and its supervisor starts it again — once it can reach
  // the service: a CN still cut off comes back when it heals (Heal).
  // One on a host cut apart from another comes back at heal-hosts, too.
  if (fenced && !cut_[cn] && !InHostsCut(cn)) {
    Enqueue(cn, NodeFaultKind::kRestartCn, /*first=*/true);
  }
}

bool SimMembership::Restart(uint16_t cn) {
  // The oracle moved away when it was declared; the survivors heard so first.
  if (cl_.tso_cn_ == cn) return false;
  // A daemon starting then waits for the service (deploy/cn_process.cc's ReadStart loops on
  // TryStart).
  if (store_->down || cut_[cn] || InHostsCut(cn)) return false;
  const ClusterConfig& c = cl_.config();
  recovery::StartOptions o{.cluster = kClusterName,
                           .cn = cn,
                           .cns = static_cast<uint16_t>(c.cns),
                           .mns = static_cast<uint16_t>(c.mns),
                           .shards = lock::kShards};
  Result<std::optional<recovery::CnStart>> start = recovery::TryStart(*store_, o);
  POND_CHECK_MSG(start.ok(), start.status().ToString().c_str());
  if (!start->has_value()) return false;  // its old incarnation is not declared failed yet

  const recovery::CnStart& s = **start;
  POND_CHECK(s.restarted);
  cl_.RestartCn(cn, s.incarnation, s.config);
  // It starts from the epoch it read, as a daemon does (cluster.cc, process_start_).
  CnContext& me = *cl_.cns_[cn];
  me.shard_map.AssignAll(s.shards);
  me.placement = store::Placement(cl_.layout().num_mns, cl_.layout().replication);
  cluster::ApplyMnStates(s.config, me.placement);
  for (auto& w : cl_.cns_[cn]->workers) {
    w->tso().SetHost(WorkerAddr{s.config.tso_host, w->index()}, nullptr);
  }
  StartNode(cn, s);
  return true;
}

void SimMembership::SetCoordinationDown(bool down) {
  POND_CHECK(store_->down != down);
  store_->down = down;
  const uint64_t now = engine_.now() - base_ns_;
  if (down) {
    coord_outages_.push_back(FailoverStats::CoordOutage{now, 0});
  } else {
    coord_outages_.back().up_ns = now;
  }
}

void SimMembership::CrashMn(MnId mn) {
  // One whose place a host cut lost waits for that restart first, and then to be let back in:
  // crashed before that, blank and asking to rejoin, it would restart unseen by any CN, and no
  // epoch would ever declare the crash (SmallBank fault seed 441: a crash-mn that had waited out
  // MN 2's host cut crashed it 1 us after its restart and 0.4 ms before its rejoin epoch).
  if (mn_crashed_[mn] || (!config_.mns.empty() && !config_.mns[mn].alive)) {
    mn_crash_pending_[mn] = true;
    RetryMnFault(mn, &SimMembership::CrashMn);
    return;
  }
  // One that would leave more MNs out than the cluster survives — more than R - 1 (a group with
  // no full copy), or, with a CN down or cut off or the service down, more than a CM can declare
  // a CN or a CN renew its lease without — waits until a rejoining MN is read like any replica
  // (the schedule's check, node_faults.cc, counts only crashes and restarts; a restart's copy
  // takes the time it takes), or a CN is back. Bounded as a cut's wait is (Cut).
  if (!Survives(MnsOut() + 1, CnAway())) {
    if (GiveUp(&mn_crash_waiting_since_[mn])) {
      mn_crash_given_up_[mn] = true;  // and its restart-mn comes to nothing
      mn_crash_pending_[mn] = false;
    } else {
      mn_crash_pending_[mn] = true;
      RetryMnFault(mn, &SimMembership::CrashMn);
    }
    return;
  }
  mn_crash_pending_[mn] = false;
  mn_crash_waiting_since_[mn] = 0;
  mn_crashed_[mn] = true;
  cl_.sim_fabric_->CrashMn(mn);
  mn_failures_.push_back(FailoverStats::MnFailure{mn, engine_.now() - base_ns_});
}

void SimMembership::LoseMnPlace(MnId mn) {
  if (mn_crashed_[mn]) return;
  mn_crash_given_up_[mn] = false;  // an older crash-mn's, whose restart-mn never came
  // As a crash: nothing reaches it any more, and its memory is gone (it has no place to keep).
  mn_crashed_[mn] = true;
  cl_.sim_fabric_->CrashMn(mn);
  RebootMn(mn);
}

void SimMembership::RestartMn(MnId mn) {
  // Its crash-mn may still wait (CrashMn); this restart is that crash's, not an earlier one's.
  if (mn_crash_pending_[mn]) {
    RetryMnFault(mn, &SimMembership::RestartMn);
    return;
  }
  RebootMn(mn);
}

void SimMembership::RebootMn(MnId mn) {
  // As an MN daemon does: not before its failure is declared (the configuration names it down,
  // so no CN writes its memory any more), then blank memory laid out from the catalog, its beat,
  // and its request to rejoin as the next incarnation — tried again while the coordination
  // service is down. One whose crash-mn was given up (CrashMn) is running: nothing to do.
  if (mn_crash_given_up_[mn] && !mn_crashed_[mn]) {
    mn_crash_given_up_[mn] = false;
    return;
  }
  const bool declared = !config_.mns.empty() && !config_.mns[mn].alive;
  Status asked = Status::Ok();
  if (declared) {
    if (mn_crashed_[mn]) {
      mn_crashed_[mn] = false;
      cl_.sim_fabric_->RestartMn(mn);
      // As its daemon formats it: a superblock that knows no table. The machines lay out the
      // catalog before they read it (LayOutRestarted).
      store::FormatRegion(cl_.fabric_->region(mn), cl_.layout(), mn);
      for (auto it = mn_failures_.rbegin(); it != mn_failures_.rend(); ++it) {
        if (it->mn != mn) continue;
        it->restart_ns = engine_.now() - base_ns_;  // its latest failure's
        break;
      }
    }
    const std::string inc = std::to_string(config_.mns[mn].incarnation + 1);
    asked =
        cluster::PutOwned(*store_, cluster::MnJoinKey(kClusterName, mn),
                          std::span(reinterpret_cast<const std::byte*>(inc.data()), inc.size()));
  }
  if (declared && asked.ok()) return;
  RetryMnFault(mn, &SimMembership::RebootMn);
}

int SimMembership::MnsOut() const {
  int out = 0;
  for (MnId m = 0; m < mn_crashed_.size(); m++) {
    const bool cut = m < host_cut_.size() && host_cut_[m];
    const bool readable =
        !mn_crashed_[m] && !cut &&
        (config_.mns.empty() || (config_.mns[m].alive && !config_.mns[m].leaving &&
                                 config_.mns[m].rejoin == cluster::MnStatus::Rejoin::kNone));
    out += !readable;
  }
  // Two hosts cut apart count one MN out until one of theirs is declared (then it counts above):
  // a CM on one host may declare the other's.
  for (uint16_t x = 0; x < cut_from_.size(); x++) {
    const int y = cut_from_[x];
    if (y <= x || config_.mns.empty()) continue;
    const cluster::MnStatus &a = config_.mns[x], &b = config_.mns[static_cast<size_t>(y)];
    if (a.alive && !a.leaving && b.alive && !b.leaving) out++;
  }
  return out;
}

bool SimMembership::Survives(int mns_out, bool cn_away) const {
  // The limits a schedule is checked against (ValidateNodeFaults, sim::FaultLimits): R - 1 MNs
  // out, each group keeping a copy; and with a CN to declare, or without the service, MNs less
  // LeaseQuorum: a CM declares a CN only once it has read mns - LeaseQuorum + 1 MNs, and a CN
  // renews its lease without the service only on LeaseQuorum MNs' beats (docs/recovery.md
  // "Fencing").
  const ClusterConfig& c = cl_.config();
  int most = c.replication - 1;
  if (cn_away || store_->down) {
    most = std::min(most, std::max(0, c.mns - cluster::LeaseQuorum(c.mns, c.replication)));
  }
  return mns_out <= most;
}

bool SimMembership::CnAway() const {
  for (uint16_t cn = 0; cn < nodes_.size(); cn++) {
    if (cut_[cn] || IsCrashed(cn) || InHostsCut(cn)) return true;
  }
  return false;
}

bool SimMembership::GiveUp(uint64_t* since) {
  // Bounded: an MN whose copy never ends, or a CN never back, must not hold the run (and the
  // faults queued behind it) for good; given up, the fault never happens, and is counted.
  const uint64_t now = std::max<uint64_t>(engine_.now(), 1);
  if (*since == 0) *since = now;
  if (now - *since < kMnsOutWaitNsMax) return false;
  *since = 0;
  faults_given_up_++;
  return true;
}

void SimMembership::RetryMnFault(MnId mn, void (SimMembership::*fault)(MnId)) {
  // Counted while it waits, so that a run does not end with a fault of its schedule not done.
  mn_faults_waiting_++;
  engine_.At(engine_.now() + kRetryNs, [this, mn, fault, gen = generation_] {
    mn_faults_waiting_--;
    if (gen == generation_) (this->*fault)(mn);
  });
}

FailoverStats SimMembership::Stats() const {
  FailoverStats s;
  for (const Failure& f : failures_) s.failures.push_back(f.stats);
  s.mn_failures = mn_failures_;
  s.coord_outages = coord_outages_;
  s.partitions = partitions_;
  s.epoch = config_.epoch;
  s.faults_not_reached = faults_not_reached_;
  for (int i = 0; i < kCommitSteps; i++) s.step_crashes[i] = step_crashes_[i];
  s.step_crashes_unaimed = step_crashes_unaimed_;
  s.faults_given_up = faults_given_up_;
  s.config_puts = base_.puts();
  s.unknown_calls = unknown_calls_;
  s.tso_host = config_.tso_host;
  s.tso_moves = tso_moves_;
  SimFabric::CrashStats c = cl_.sim_fabric_->crash_stats();
  s.lost_packets = c.dropped_packets;
  s.landed_batches = c.landed_batches;
  s.lost_batches = c.lost_batches;
  s.cut_packets = c.cut_packets;
  return s;
}

}  // namespace pond::node
