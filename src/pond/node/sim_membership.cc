#include "pond/node/sim_membership.h"
#include "pond/node/sim_membership_parts.h"

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

SimMembership::Node::~Node() {
  // Parked coroutines (a beat in flight at a crash) go before the machine they point into.
  if (sched) sched->DestroyUnfinished();
}

Status SimMembership::Validate(const std::vector<NodeFault>& faults) const {
  return ValidateNodeFaults(cl_.config(), faults);
}

bool SimMembership::IsCrashed(uint16_t cn) const {
  return nodes_[cn] != nullptr && nodes_[cn]->crashed;
}

void SimMembership::Arm(const std::vector<NodeFault>& faults) {
  base_ns_ = engine_.now();
  // The machines run for faults, and for resharding, which moves shards by their epochs.
  if (faults.empty() && !started_ && cl_.config().reshard.policy == ReshardConfig::Policy::kNone) {
    return;
  }
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
          const uint64_t seq = ++pair_seq_;
          queued_peers_[peer].push_back({node, seq});
          Enqueue(peer, kind);
          queued_peers_[node].push_back({peer, seq});
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
      .mn_lock_words = !c.protocol.cn_locks,
  };
  SetReshardOptions(c, &mo);
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
  s.cut_batches = c.cut_batches;
  s.lost_batches = c.lost_batches;
  s.cut_packets = c.cut_packets;
  for (const auto* list : {&nodes_, &retired_}) {
    for (const auto& n : *list) {
      if (n == nullptr) continue;
      const recovery::MoveCounts& m = n->machine->move_counts();
      s.shard_moves += m.made;
      s.shards_moved += m.shards;
      s.moves_given_up += m.given_up;
      s.moves_called_off += m.cancelled;
      s.move_closed_ns_total += m.closed_ns_total;
      s.move_closed_ns_max = std::max(s.move_closed_ns_max, m.closed_ns_max);
      s.move_made_ns.insert(s.move_made_ns.end(), m.made_ns.begin(), m.made_ns.end());
    }
  }
  std::sort(s.move_made_ns.begin(), s.move_made_ns.end());
  return s;
}

}  // namespace pond::node
