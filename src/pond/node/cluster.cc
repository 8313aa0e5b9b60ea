// The cluster: checking its config, building its CNs and workers on the fabric a deployment gives
// it (deploy/start.cc picks local threads or UCX; StartSimulated, below, the simulator), tables
// and loading, and the run loop of the worker threads. The public Txn and
// Session live in session.cc, routed calls in routed_call.cc, the counters in cluster_stats.cc.
#include <algorithm>
#include <optional>
#include <thread>

#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/cluster/directory.h"
#include "pond/lock/lock_table.h"
#include "pond/node/serving.h"
#include "pond/node/sim_driver.h"
#include "pond/node/sim_membership.h"
#include "pond/node/worker_context.h"
#include "pond/runtime/clocks.h"
#include "pond/sim/alloc_cache.h"
#include "pond/store/bulk_load.h"
#include "pond/store/sv_slot.h"
#include "pond/txn/ordered.h"

namespace pond {

using node::ClusterImpl;
using node::CnContext;
using node::WorkerContext;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr int kLoadCoroutines = 32;
// How long, in virtual time, a simulated run may take to recover from its faults once its
// clients ended (restarted MNs copied onto, failures recovered): far past any recovery a
// schedule needs, so a run still busy then is stuck.
constexpr uint64_t kSettleLimitNs = 30'000'000'000;

}  // namespace

namespace {

// Runs one coroutine to completion on a worker whose thread is not running (setup only).
template <typename T>
T RunOn(ClusterImpl& cl, WorkerContext& w, Task<T> task) {
  std::optional<T> out;
  w.sched().Spawn([](Task<T> t, std::optional<T>* o) -> Task<void> {
    o->emplace(co_await std::move(t));
  }(std::move(task), &out));
  cl.Drive(w, [&] { return out.has_value(); });
  return std::move(*out);
}

}  // namespace

const char* IsolationName(Isolation i) {
  return i == Isolation::kSerializable ? "serializable" : "snapshot-isolation";
}

const char* ReshardPolicyName(ReshardConfig::Policy p) {
  switch (p) {
    case ReshardConfig::Policy::kNone:
      return "none";
    case ReshardConfig::Policy::kLoad:
      return "load";
    case ReshardConfig::Policy::kLocality:
      return "locality";
    case ReshardConfig::Policy::kBoth:
      return "both";
  }
  return "?";
}

std::optional<ReshardConfig::Policy> ReshardPolicyByName(std::string_view name) {
  for (auto p : {ReshardConfig::Policy::kNone, ReshardConfig::Policy::kLoad,
                 ReshardConfig::Policy::kLocality, ReshardConfig::Policy::kBoth}) {
    if (name == ReshardPolicyName(p)) return p;
  }
  return std::nullopt;
}

namespace {

// The resharding settings (docs/resharding.md), where they are on.
Status ValidateReshard(const ClusterConfig& c) {
  const ReshardConfig& r = c.reshard;
  if (r.policy == ReshardConfig::Policy::kNone) return Status::Ok();
  if (std::string_view(ReshardPolicyName(r.policy)) == "?") {
    return InvalidArgument("ClusterConfig.reshard.policy is not a policy Pond knows");
  }
  if (!c.protocol.cn_locks) {
    return InvalidArgument(
        "resharding moves the lock management of CN lock tables; this "
        "protocol keeps its locks in the memory pool");
  }
  if (c.cns < 2) return InvalidArgument("resharding needs at least 2 CNs");
  POND_RETURN_IF_ERROR(CheckMembershipScale(c, "resharding moves"));
  if (r.interval_ns < 100'000 || r.interval_ns > 60'000'000'000) {
    return InvalidArgument("ClusterConfig.reshard.interval_ns must be 0.1 ms to 60 s");
  }
  if (!(r.over > 1.0 && r.over <= 100.0)) {
    return InvalidArgument("ClusterConfig.reshard.over must be above 1 and at most 100");
  }
  if (r.intervals < 1 || r.intervals > 1000) {
    return InvalidArgument("ClusterConfig.reshard.intervals must be 1 to 1000");
  }
  if (r.drain_ns < 100'000 || r.drain_ns > 60'000'000'000) {
    return InvalidArgument("ClusterConfig.reshard.drain_ns must be 0.1 ms to 60 s");
  }
  return Status::Ok();
}

}  // namespace

Status CheckMembershipScale(const ClusterConfig& c, const std::string& what) {
  if (c.cns <= kMembershipNodesMax && c.mns <= kMembershipNodesMax) return Status::Ok();
  return InvalidArgument(what + " need the membership machine, whose lease page holds at most " +
                         std::to_string(kMembershipNodesMax) + " CNs and " +
                         std::to_string(kMembershipNodesMax) + " MNs (--cns " +
                         std::to_string(c.cns) + ", --mns " + std::to_string(c.mns) + ")");
}

Status ValidateConfig(const ClusterConfig& c) {
  if (c.mns < 1 || c.mns > kMnsMax) {
    return InvalidArgument("ClusterConfig.mns (--mns) must be 1 to " + std::to_string(kMnsMax));
  }
  if (c.cns < 1 || c.cns > kCnsMax) {
    return InvalidArgument("ClusterConfig.cns (--cns) must be 1 to " + std::to_string(kCnsMax));
  }
  // A cluster of processes runs the membership machine in every CN (docs/recovery.md).
  if (!c.transport.coord.empty() || c.transport.cn >= 0) {
    POND_RETURN_IF_ERROR(CheckMembershipScale(c, "CN processes"));
  }
  if (c.workers_per_cn < 1 || c.workers_per_cn > 64) {
    return InvalidArgument("ClusterConfig.workers_per_cn must be 1 to 64");
  }
  if (c.replication < 1 || c.replication > c.mns || c.replication > store::kReplicationMax) {
    return InvalidArgument("ClusterConfig.replication must be 1 to min(mns, 8)");
  }
  if (c.versions < 1 || c.versions > store::kVersionsMax) {
    return InvalidArgument("ClusterConfig.versions must be 1 to 16");
  }
  if (c.region_mib < 16 || c.region_mib > (uint64_t{1} << 20)) {
    return InvalidArgument("ClusterConfig.region_mib must be 16 to 1048576");
  }
  if (c.lock_buckets < 1 || c.lock_buckets > lock::kLockBucketsMax) {
    return InvalidArgument("ClusterConfig.lock_buckets must be 1 to " +
                           std::to_string(lock::kLockBucketsMax));
  }
  // A cache's entries are allocated up front, per CN: bounded so a typo cannot ask for terabytes.
  constexpr uint32_t kCacheEntriesMax = 1u << 26;
  if (c.vt_cache_entries > kCacheEntriesMax || c.addr_cache_entries > kCacheEntriesMax) {
    return InvalidArgument(
        "ClusterConfig.vt_cache_entries and addr_cache_entries must be at most " +
        std::to_string(kCacheEntriesMax));
  }
  if (c.transport.kind != "local" && c.transport.kind != "ucx") {
    return InvalidArgument("ClusterConfig.transport.kind must be local or ucx, not \"" +
                           c.transport.kind + "\"");
  }
  if (c.transport.cn >= 0) {
    if (c.transport.kind != "ucx" || c.transport.coord.empty()) {
      return InvalidArgument("ClusterConfig.transport.cn needs the ucx transport and a coord");
    }
    if (c.transport.cn >= c.cns) {
      return InvalidArgument("ClusterConfig.transport.cn must be below cns");
    }
  }
  if (c.transport.cn < -1) return InvalidArgument("ClusterConfig.transport.cn must be -1 or a CN");
  if (c.transport.lease_ms < 20 || c.transport.lease_ms > 60'000) {
    return InvalidArgument("ClusterConfig.transport.lease_ms must be 20 to 60000");
  }
  if (c.protocol.vt_cache && !c.protocol.cn_locks) {
    return InvalidArgument("the VT cache needs CN lock tables (protocol.cn_locks)");
  }
  if (c.protocol.cn_locks && !c.protocol.log_and_visible) {
    // Readers cannot see CN locks, so only INVISIBLE cells keep them from missing a version.
    return InvalidArgument("CN lock tables need the commit log and write-invisible steps");
  }
  if ((c.protocol.latest_reads || c.protocol.early_ack) &&
      (!c.protocol.cn_locks || c.protocol.single_version)) {
    return InvalidArgument("latest-reads and early-ack need CN lock tables (protocol.cn_locks)");
  }
  if (c.protocol.value_cache && !c.protocol.vt_cache) {
    return InvalidArgument("the value cache needs the VT cache (protocol.vt_cache)");
  }
  if (c.protocol.single_version && c.isolation != Isolation::kSerializable) {
    return InvalidArgument("ford is single-version and runs only under SR");
  }
  return ValidateReshard(c);
}

namespace node {

Result<std::pair<store::PoolLayout, store::WorkerSpace>> OwnPoolLayout(const ClusterConfig& c) {
  const uint64_t workers = static_cast<uint64_t>(c.cns) * static_cast<uint64_t>(c.workers_per_cn);
  const bool sv = c.protocol.single_version;
  auto fits = [&](uint64_t mib, store::WorkerSpace* space) {
    const uint64_t bytes = mib * kMiB, heap = store::GeneralHeapBytes(bytes, sv);
    *space = store::WorkerSpaceFor(bytes, heap, c.replication, workers);
    return store::WorkerSpaceFits(bytes, heap, c.replication, workers, *space);
  };
  store::WorkerSpace space;
  if (!fits(c.region_mib, &space)) {
    uint64_t least = c.region_mib;
    store::WorkerSpace s;
    while (least < (uint64_t{1} << 20) && !fits(least, &s)) least *= 2;
    return InvalidArgument("--region-mib " + std::to_string(c.region_mib) + " is too small for " +
                           std::to_string(workers) +
                           " workers (--cns x --workers): each MN holds a record chunk per lane "
                           "and a log ring for every worker; give at least " +
                           std::to_string(least));
  }
  const uint64_t region_bytes = c.region_mib * kMiB;
  Result<store::PoolLayout> layout =
      store::MakeLayout(static_cast<uint16_t>(c.mns), c.replication, region_bytes,
                        space.chunk_bytes, store::GeneralHeapBytes(region_bytes, sv));
  if (!layout.ok()) return layout.status();
  return std::make_pair(*layout, space);
}

WorkerContext::WorkerContext(ClusterImpl& cl, CnContext& c, uint16_t idx, uint64_t seed,
                             uint16_t incarnation)
    : txn::TxnContext(cl.config_, cl.layout_, cl.catalog_, c.Parts(), idx, cl.clock_,
                      // The incarnation in the writer tag's sequence (docs/formats.md "Cell").
                      uint64_t{incarnation} << store::kSeqIncarnationShift | 1, cl.step_probe_),
      cluster_(cl),
      cn_ctx_(c),
      rng_(seed) {
  ep_ = cl.fabric_->CreateEndpoint(WorkerAddr{c.id, idx}, sched_);
  ep_->set_incarnation(incarnation);
  // Membership (docs/recovery.md): a packet of an incarnation this CN holds dead is dropped whole.
  // The worker keeps its own copy of the CN's view, so that its thread alone reads it.
  view_ = c.view;
  // A restarted CN not let back in yet (its view holds it dead) takes nothing from other CNs:
  // a request resent to its address since before its crash must not run here while its old
  // incarnation's logs — the ones it will write to — are still being recovered. (The simulated
  // fabric reuses a restarted CN's addresses at once; a daemon's new workers are reachable
  // only once let in.)
  ep_->SetPacketFilter([this, me = c.id](WorkerAddr from, uint16_t incarnation) {
    if (from.cn != me && me < view_.cns.size() && !view_.cns[me].alive) return false;
    return view_.AcceptsPacketFrom(from.cn, incarnation);
  });
  locks_ = std::make_unique<lock::LockClient>(c.id, *ep_, c.locks, c.shard_map);
  lock_server_ = std::make_unique<lock::LockServer>(*ep_, c.locks);
  if (c.vt != nullptr) {
    cache::VtCache* vt = c.vt.get();
    // VT cache rule 3: a remote writer is about to change the CVT in memory.
    lock_server_->SetRemoteWriteHook([vt](const lock::LockKey& k) { vt->Invalidate(k); });
  }
  const bool host = c.id == cl.tso_cn_;
  POND_CHECK(!host || c.oracle != nullptr);
  tso_ = std::make_unique<txn::TsoClient>(*ep_, cl.TsoAsk(c.id, idx, cl.tso_cn_),
                                          host ? c.oracle.get() : nullptr);
  tso_->SetOneInFlight(cl.config_.protocol.tso_combine);
  tso_server_ = std::make_unique<txn::TsoServer>(*ep_, host ? c.oracle.get() : nullptr,
                                                 cl.TsoRelays() ? tso_.get() : nullptr);
  alloc_ = std::make_unique<store::Allocator>(cl.layout_);
  calls_ = std::make_unique<RoutedCalls>(
      *ep_, sched_,
      [this](ProcedureId p, std::span<const std::byte> args, std::vector<std::byte>* reply) {
        return RunProcedure(p, args, reply);
      },
      uint64_t{incarnation} << kCallIdIncarnationShift | 1);
  // CNs this incarnation's view holds dead are not asked for anything.
  for (uint16_t peer = 0; peer < c.view.cns.size(); peer++) {
    if (c.view.cns[peer].alive || peer == c.id) continue;
    locks_->PeerFailed(peer);
    calls_->PeerFailed(peer);
  }
}

Status WorkerContext::Init() {
  const ClusterConfig& config = cluster_.config_;
  // A ring on every MN (store/commit_log.h: a record goes ahead of its cells on each MN).
  std::vector<GAddr> areas;
  for (int mn = 0; mn < config.mns; mn++) {
    Result<uint64_t> area = RunOn(
        cluster_, *this,
        store::CarveHeap(*ep_, cluster_.layout_, static_cast<MnId>(mn), cluster_.space_.log_bytes));
    if (!area.ok()) return area.status();
    areas.push_back(GAddr::Make(static_cast<MnId>(mn), *area));
  }
  log_ = std::make_unique<store::CommitLog>(std::move(areas), cluster_.space_.log_bytes);
  return Status::Ok();
}

namespace {

// TsoAsk's group size.
int TsoGroup(const ClusterConfig& c) {
  int g = 1;
  while (g * g < c.cns) g++;
  return std::min(g, c.workers_per_cn);
}

}  // namespace

bool ClusterImpl::TsoRelays() const {
  return config_.protocol.tso_combine && TsoGroup(config_) >= 2;
}

WorkerAddr ClusterImpl::TsoAsk(uint16_t cn, uint16_t worker, uint16_t host) const {
  if (!TsoRelays()) return WorkerAddr{host, worker};
  const int g = TsoGroup(config_);
  const int first = worker / g * g;
  const int size = std::min(g, config_.workers_per_cn - first);
  const auto relay = static_cast<uint16_t>(first + cn % size);
  return worker == relay ? WorkerAddr{host, relay} : WorkerAddr{cn, relay};
}

void WorkerContext::HostTso(txn::TimestampOracle& o) {
  tso_server_->SetOracle(&o);
  tso_->SetHost(ep_->self(), &o);
}

void WorkerContext::InitWithLog(const store::CommitLog& earlier) {
  log_ = std::make_unique<store::CommitLog>(earlier.areas(), earlier.bytes());
}

Task<Status> WorkerContext::RunProcedure(ProcedureId proc, std::span<const std::byte> args,
                                         std::vector<std::byte>* reply) {
  const ProcedureEntry* p = cluster_.Procedure(proc);
  if (p == nullptr) co_return InvalidArgument("no procedure " + std::to_string(proc));
  Session s(this, -1);
  co_return co_await RunProcedureAs(s, *p, args, reply);
}

CnContext::CnContext(ClusterImpl& cl, uint16_t cn_id)
    : id(cn_id),
      locks(cl.config().lock_buckets, cn_id),
      placement(cl.placement()),
      shard_map(static_cast<uint16_t>(cl.config().cns)) {
  shard_map.CopyFrom(cl.shard_map());
  const ClusterConfig& config = cl.config();
  if (config.vt_cache_entries > 0 && config.protocol.vt_cache) {
    vt = std::make_unique<cache::VtCache>(config.vt_cache_entries, 16);
  }
  if (config.addr_cache_entries > 0) {
    addr = std::make_unique<cache::AddrCache>(config.addr_cache_entries, 16);
  }
}

ClusterImpl::ClusterImpl(const ClusterConfig& c, std::unique_ptr<sim::Engine> e,
                         std::unique_ptr<Fabric> f, Clock& clk, store::PoolLayout l)
    : engine_(std::move(e)),
      config_(c),
      fabric_(std::move(f)),
      clock_(clk),
      layout_(l),
      placement_(l.num_mns, l.replication),
      shard_map_(static_cast<uint16_t>(c.cns)) {}

ClusterImpl::~ClusterImpl() = default;

Status ClusterImpl::Build() {
  // MNs served by daemons formatted their regions themselves; ours are formatted here.
  bool daemons = false;
  for (int mn = 0; mn < config_.mns; mn++) {
    std::byte* region = fabric_->region(static_cast<MnId>(mn));
    if (region == nullptr) {
      daemons = true;
    } else {
      store::FormatRegion(region, layout_, static_cast<MnId>(mn));
    }
  }
  Rng seeds(config_.seed);
  // A CN of a cluster of processes starts from the membership it read (deploy/cn_process.cc).
  uint16_t incarnation = 0;
  if (process_start_ != nullptr) {
    tso_cn_ = process_start_->config.tso_host;
    shard_map_.AssignAll(process_start_->shards);
    cluster::ApplyMnStates(process_start_->config, placement_);
    incarnation = process_start_->incarnation;
  }
  for (int c = 0; c < config_.cns; c++) {
    cns_.push_back(std::make_unique<CnContext>(*this, static_cast<uint16_t>(c)));
    CnContext& cn = *cns_.back();
    if (cn.id == tso_cn_) cn.oracle = std::make_unique<txn::TimestampOracle>(clock_);
    if (process_start_ != nullptr) {
      cn.view = process_start_->config;
      cn.GoneBelowView();
    }
    for (uint32_t s = 0; s < lock::kShards; s++) {
      cn.locks.SetManaged(s, shard_map_.CnOf(s) == cn.id);
    }
  }
  bool first = true;
  for (auto& cn : cns_) {
    // Every CN's seeds are drawn, hosted here or not, so that each CN's are the same however
    // the cluster is spread over processes.
    for (int i = 0; i < config_.workers_per_cn; i++) {
      const uint64_t seed = seeds.Next();
      if (!Hosts(cn->id)) continue;
      auto w =
          std::make_unique<WorkerContext>(*this, *cn, static_cast<uint16_t>(i), seed, incarnation);
      if (driver_ != nullptr) driver_->AddWorker(w.get());
      if (daemons && first) POND_RETURN_IF_ERROR(CheckDaemonsPool(*w));
      first = false;
      POND_RETURN_IF_ERROR(w->Init());
      cn->workers.push_back(std::move(w));
    }
  }
  return Status::Ok();
}

WorkerContext& ClusterImpl::SetupWorker() {
  for (auto& cn : cns_) {
    if (!cn->workers.empty()) return *cn->workers.front();
  }
  POND_CHECK_MSG(false, "a cluster without workers");
  __builtin_unreachable();
}

Status ClusterImpl::CheckDaemonsPool(WorkerContext& w) {
  Result<store::Catalog> cat = RunOn(*this, w, store::LoadCatalog(w.ep()));
  if (!cat.ok()) return cat.status();
  const store::PoolLayout& got = cat->layout();
  if (got.num_mns != layout_.num_mns || got.replication != layout_.replication ||
      got.region_bytes != layout_.region_bytes || got.chunk_bytes != layout_.chunk_bytes) {
    return InvalidArgument("the memory nodes were formatted for " + std::to_string(got.num_mns) +
                           " MNs, R=" + std::to_string(got.replication) + ", " +
                           std::to_string(got.region_bytes >> 20) + " MiB; this cluster wants " +
                           std::to_string(layout_.num_mns) +
                           " MNs, R=" + std::to_string(layout_.replication) + ", " +
                           std::to_string(layout_.region_bytes >> 20) + " MiB");
  }
  // A CN of a cluster of processes joins the tables CN 0's process made, if it made them yet.
  if (config_.transport.cn >= 0) {
    catalog_ = std::move(cat).value();
    joined_ = !catalog_.tables().empty();
    return Status::Ok();
  }
  // An embedded cluster creates and loads its tables: it needs memory nodes nobody used yet.
  if (!cat->tables().empty()) {
    return InvalidArgument("the memory nodes already hold " + std::to_string(cat->tables().size()) +
                           " table(s) from an earlier run; an embedded cluster needs fresh ones "
                           "(pond down, then pond up)");
  }
  return Status::Ok();
}

void ClusterImpl::RestartCn(uint16_t id, uint16_t incarnation, const cluster::Configuration& view) {
  POND_CHECK(driver_ != nullptr && incarnation > 0);
  POND_CHECK_MSG(id != tso_cn_, "the oracle moved away when the CN was declared failed");
  std::unique_ptr<CnContext>& slot = cns_[id];
  std::unique_ptr<CnContext> dead = std::move(slot);
  slot = std::make_unique<CnContext>(*this, id);
  CnContext& cn = *slot;
  cn.view = view;
  cn.GoneBelowView();
  sim_fabric_->RestartCn(id);
  // Seeds of their own, drawn from the cluster's seed: a restart replays exactly.
  Rng seeds(config_.seed ^ (0x7265737461727400ULL + (uint64_t{incarnation} << 16 | id)));
  std::vector<WorkerContext*> workers;
  for (auto& old : dead->workers) {
    auto w = std::make_unique<WorkerContext>(*this, cn, old->index(), seeds.Next(), incarnation);
    w->InitWithLog(old->log());
    w->TakeOverChunks(old->alloc());
    w->TrackAcknowledged(old->tracking_acknowledged());
    workers.push_back(w.get());
    cn.workers.push_back(std::move(w));
  }
  driver_->RestartCn(id, workers);
  retired_.push_back(std::move(dead));
}

void ClusterImpl::ChangePlacementEverywhere(const std::function<void(store::Placement&)>& change) {
  change(placement_);
  for (auto& cn : cns_) change(cn->placement);
}

void ClusterImpl::SetProcess(recovery::CnStart start, std::unique_ptr<CnProcess> process) {
  POND_CHECK_MSG(cns_.empty(), "a CN process's start is given before Build");
  process_start_ = std::make_unique<recovery::CnStart>(std::move(start));
  process_ = std::move(process);
}

void ClusterImpl::AssignShardEverywhere(uint32_t s, uint16_t cn) {
  shard_map_.Assign(s, cn);
  for (auto& c : cns_) c->shard_map.Assign(s, cn);
}

void ClusterImpl::StartClients(WorkerContext& w) {
  if (run_.client == nullptr) return;
  POND_CHECK_MSG(w.clients_running() == 0, "a worker's clients started twice");
  w.clients_running() += run_.per_worker;
  clients_running_ += run_.per_worker;
  for (int c = 0; c < run_.per_worker; c++) {
    run_.sessions.push_back(std::unique_ptr<Session>(new Session(&w, c)));
    w.sched().Spawn([](const std::function<Task<void>(Session&)>* fn, Session* s,
                       std::atomic<int64_t>* running, WorkerContext* w) -> Task<void> {
      co_await (*fn)(*s);
      (*running)--;
      w->clients_running()--;
    }(run_.client, run_.sessions.back().get(), &clients_running_, &w));
  }
}

void ClusterImpl::Drive(WorkerContext& w, const std::function<bool()>& done) {
  if (driver_ != nullptr) {
    POND_CHECK_MSG(driver_->RunUntil(done), "simulation ran out of events before finishing");
    return;
  }
  while (!done()) w.sched().RunOnce();
}

}  // namespace node

// ---- Cluster --------------------------------------------------------------------------------

Cluster::Cluster(std::unique_ptr<node::ClusterImpl> impl) : impl_(std::move(impl)) {}
Cluster::~Cluster() { StopServing(); }

Result<std::unique_ptr<Cluster>> Cluster::StartSimulated(const ClusterConfig& config,
                                                         const Testbed& testbed) {
  POND_RETURN_IF_ERROR(ValidateConfig(config));
  POND_RETURN_IF_ERROR(testbed.Validate());
  uint64_t region_bytes = config.region_mib * kMiB;
  auto own = node::OwnPoolLayout(config);
  if (!own.ok()) return own.status();
  auto [layout, space] = *own;
  auto engine = std::make_unique<sim::Engine>(config.seed);
  sim::Engine* e = engine.get();
  auto fabric = SimFabric::Create(*e, testbed, static_cast<uint16_t>(config.mns), region_bytes);
  if (!fabric.ok()) return fabric.status();
  SimFabric* sf = fabric->get();
  sf->set_cut_dying_batches(config.protocol.cn_locks);
  auto impl = std::make_unique<ClusterImpl>(config, std::move(engine), std::move(fabric).value(),
                                            e->clock(), layout);
  impl->space_ = space;
  impl->sim_fabric_ = sf;
  impl->driver_ = std::make_unique<node::SimDriver>(*e, *sf);
  POND_RETURN_IF_ERROR(impl->Build());
  impl->sim_faults_ = std::make_unique<node::SimMembership>(*impl);
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

Result<uint16_t> Cluster::CreateTable(const TableOptions& options) {
  ClusterImpl& cl = *impl_;
  if (cl.serving_ != nullptr) return InvalidArgument("tables are created before serving");
  // A CN of a cluster of processes that joined tables made before it started opens them by
  // name: every CN runs the same setup, and only the first start of CN 0 makes them.
  if (cl.joined_) {
    const store::TableInfo* t = cl.catalog_.FindByName(options.name);
    if (t == nullptr) {
      return InvalidArgument("no table \"" + options.name + "\" in the cluster this CN joined");
    }
    if (t->value_bytes != options.value_bytes || t->critical_field != options.critical_field ||
        t->ordered != options.ordered) {
      return InvalidArgument("table \"" + options.name +
                             "\" was made with other options than this CN asks for");
    }
    return t->id;
  }
  WorkerContext& w = cl.SetupWorker();
  store::TableSpec spec;
  if (options.ordered) {
    // The stripe rows first (docs/protocol.md "Ordered tables and range scans"): a table of
    // its own, in the same shards as the keys it covers.
    if (options.name.size() + 2 > store::kTableNameMax) {
      return InvalidArgument("an ordered table's name must have at most 21 characters");
    }
    if (options.stripe_bits < 0 || options.stripe_bits > 52) {
      return InvalidArgument("stripe_bits must be 0 to 52");
    }
    const uint64_t stripes =
        std::max<uint64_t>(4096, 2 * (options.capacity >> options.stripe_bits));
    Result<uint16_t> st = CreateTable({.name = options.name + ".s",
                                       .value_bytes = 8,
                                       .capacity = std::min(stripes, options.capacity + 4096),
                                       .critical_field = options.critical_field});
    if (!st.ok()) return st.status();
    spec.ordered = true;
    spec.keep_deleted_entries = options.keep_deleted_entries;
    spec.keep_empty_leaves = options.keep_empty_leaves;
    spec.stripe_bits = options.stripe_bits;
    spec.stripe_table = *st;
  }
  spec.id = static_cast<uint16_t>(cl.catalog_.tables().size());
  spec.name = options.name;
  spec.value_bytes = options.value_bytes;
  spec.versions = cl.config_.versions;
  spec.critical_field = options.critical_field;
  spec.single_version = cl.config_.protocol.single_version;
  // FORD's hash buckets hold 22 slots; a bucket READ (a key whose address is not cached) then
  // moves 22 whole records, the bandwidth cost Lotus §2.2 names.
  if (spec.single_version) spec.slots_per_bucket = 22;
  spec.capacity = options.capacity;
  Status s = RunOn(cl, w, store::CreateTable(w.ep(), cl.layout_, spec));
  if (!s.ok()) return s;
  Result<store::Catalog> cat = RunOn(cl, w, store::LoadCatalog(w.ep()));
  if (!cat.ok()) return cat.status();
  cl.catalog_ = std::move(cat).value();
  if (spec.ordered) {
    s = RunOn(cl, w, btree::CreateTree(w.ep(), txn::TreeSpaceOf(*cl.catalog_.Find(spec.id))));
    if (!s.ok()) return s;
  }
  return spec.id;
}

Status Cluster::Load(
    uint16_t table, uint64_t count,
    const std::function<void(uint64_t i, uint64_t* key, std::span<std::byte> value)>& gen) {
  ClusterImpl& cl = *impl_;
  const store::TableInfo* t = cl.Table(table);
  if (t == nullptr) return InvalidArgument("no table " + std::to_string(table));
  if (cl.serving_ != nullptr) return InvalidArgument("tables are loaded before serving");
  // Joined tables were loaded by the CN that made them.
  if (cl.joined_) return Status::Ok();
  WorkerContext& w = cl.SetupWorker();
  // Loaded data is committed "before time": every timestamp granted later is larger.
  uint64_t ts = cl.cns_[cl.tso_cn_]->oracle->Grant(1);
  if (!t->ordered) {
    // A few large ops per replica group (store/bulk_load.h): over TCP, where each op is a
    // message an MN's thread answers, key by key took a minute for SmallBank.
    std::vector<uint64_t> keys(count);
    std::vector<std::byte> values(count * t->value_bytes);
    for (uint64_t i = 0; i < count; i++) {
      gen(i, &keys[i], std::span<std::byte>(values.data() + i * t->value_bytes, t->value_bytes));
    }
    return RunOn(
        cl, w, store::BulkLoad(w.ep(), *t, cl.layout_, cl.placement_, w.alloc(), keys, values, ts));
  }
  Status first_error;
  uint64_t next = 0;
  for (int c = 0; c < kLoadCoroutines; c++) {
    w.sched().Spawn([](ClusterImpl* cl, WorkerContext* w, const store::TableInfo* t, uint64_t ts,
                       uint64_t count, uint64_t* next, Status* err,
                       const std::function<void(uint64_t, uint64_t*, std::span<std::byte>)>* gen)
                        -> Task<void> {
      std::vector<std::byte> value(t->value_bytes);
      while (*next < count && err->ok()) {
        uint64_t i = (*next)++;
        uint64_t key = 0;
        std::fill(value.begin(), value.end(), std::byte{0});
        (*gen)(i, &key, value);
        // (Two statements, not a conditional expression: GCC 12 mishandles the temporaries of
        // co_await inside ?:.)
        Result<store::SlotRef> r = OutOfSpace("unset");
        if (t->single_version) {
          r = co_await store::SvInsert(w->ep(), *t, cl->placement_, key, value);
        } else {
          r = co_await store::Insert(w->ep(), *t, cl->layout_, cl->placement_, w->alloc(), key,
                                     value, ts);
        }
        if (!r.ok() && err->ok()) *err = r.status();
        if (r.ok() && t->ordered) {
          if (!txn::OrderedKeyAllowed(key)) {
            if (err->ok()) *err = InvalidArgument("an ordered table's keys are 1 to 2^64-2");
          } else if (Status s = co_await w->Tree(*t).Insert(txn::TreeKeyOf(*t, key), 1);
                     !s.ok() && err->ok()) {
            *err = s;
          }
        }
      }
    }(&cl, &w, t, ts, count, &next, &first_error, &gen));
  }
  cl.Drive(w, [&] { return w.sched().live() == 0; });
  return first_error;
}

Result<uint16_t> Cluster::FindTable(std::string_view name) const {
  for (const store::TableInfo& t : impl_->catalog_.tables()) {
    if (t.name == name) return t.id;
  }
  return NotFound("no table named \"" + std::string(name) + "\"");
}

ProcedureId Cluster::RegisterProcedure(Procedure p) {
  impl_->procedures_.push_back({.plain = std::move(p)});
  return static_cast<ProcedureId>(impl_->procedures_.size() - 1);
}

ProcedureId Cluster::RegisterProcedure(ReplyProcedure p) {
  impl_->procedures_.push_back({.replying = std::move(p)});
  return static_cast<ProcedureId>(impl_->procedures_.size() - 1);
}

void Cluster::Run(int clients, const std::function<Task<void>(Session&)>& client) {
  ClusterImpl& cl = *impl_;
  POND_CHECK_MSG(cl.serving_ == nullptr, "Run while the cluster is serving");
  POND_CHECK_MSG(cl.config_.transport.cn < 0, "Run on one CN of a cluster of processes");
  std::vector<WorkerContext*> workers;
  for (auto& cn : cl.cns_) {
    for (auto& w : cn->workers) workers.push_back(w.get());
  }
  cl.clients_running_ = static_cast<int64_t>(workers.size()) * clients;
  cl.awaiting_ = 0;
  if (cl.driver_ != nullptr) {
    // One thread, virtual time: every worker's rounds are engine events.
    cl.clients_running_ = 0;
    cl.run_ = node::RunClients{&client, clients, {}};
    for (WorkerContext* w : workers) {
      w->clients_running() = 0;
      if (!cl.sim_faults_->IsCrashed(w->cn_id())) cl.StartClients(*w);
    }
    cl.sim_faults_->Arm(std::exchange(cl.scheduled_faults_, {}));
    // A crashed CN's workers are parked for good (a restart brings new ones, which run the
    // clients too); the run is over when the live ones are idle and every crash has been
    // recovered.
    // Recovery that never ends (a step retried forever) would spin in virtual time for good: the
    // run fails instead, kSettleLimitNs after its clients ended, with the time in its message.
    uint64_t clients_ended_ns = 0;
    auto finished = [&cl, &clients_ended_ns] {
      if (cl.clients_running_.load() != 0) return false;
      const uint64_t now = cl.engine_->now();
      if (clients_ended_ns == 0) clients_ended_ns = now;
      if (now - clients_ended_ns > kSettleLimitNs) {
        const std::string why = "the simulation did not settle: its clients ended at virtual " +
                                std::to_string(clients_ended_ns / 1000) +
                                " us and recovery had not finished " +
                                std::to_string(kSettleLimitNs / 1'000'000'000) +
                                " virtual s later (POND_SIM_EVENTS=1 shows its steps)";
        POND_CHECK_MSG(now - clients_ended_ns <= kSettleLimitNs, why.c_str());
      }
      if (cl.fabric_->packets_in_flight() != 0) return false;
      for (auto& cn : cl.cns_) {
        if (cl.sim_faults_->IsCrashed(cn->id)) continue;
        for (auto& w : cn->workers) {
          if (w->sched().live() != 0 || w->Awaiting() != 0) return false;
        }
      }
      return cl.sim_faults_->Idle();
    };
    POND_CHECK_MSG(cl.driver_->RunUntil(finished), "simulation ran out of events before finishing");
    cl.sim_faults_->Disarm();
    // The sessions go with the Run, as before restarts: a dead incarnation's parked coroutines
    // are never resumed.
    cl.run_ = node::RunClients{};
    return;
  }
  std::vector<std::thread> threads;
  for (WorkerContext* w : workers) {
    threads.emplace_back([&cl, w, clients, &client] {
      // Each transaction allocates and frees its small objects (coroutine frames, items,
      // buffers) at a high rate; glibc's malloc and free were a fifth of a read-only KVS
      // transaction's instructions here (docs/perf.md "The embedded path"). The simulator's
      // per-thread cache serves them on this thread too; a no-op where the program has no cache.
      const void* alloc_cache = sim::AllocCache::Enable();
      int done = 0;
      std::vector<std::unique_ptr<Session>> sessions;
      for (int c = 0; c < clients; c++) {
        sessions.push_back(std::unique_ptr<Session>(new Session(w, c)));
        w->sched().Spawn(
            [](const std::function<Task<void>(Session&)>* fn, Session* s, int* done) -> Task<void> {
              co_await (*fn)(*s);
              (*done)++;
            }(&client, sessions.back().get(), &done));
      }
      // A worker keeps serving other CNs' requests after its own clients are done. It publishes
      // that they are done only after the round's EndRound, so their last messages (e.g.
      // asynchronous unlocks) are already in the fabric; once every client is done, only such
      // one-way messages can still be in flight, and the fabric counts them.
      bool published = false;
      int64_t awaiting = 0;  // this worker's share of cl.awaiting_
      for (;;) {
        // An idle round gives the core away: workers may outnumber cores (4 CNs on 2 cores in
        // the tests), and the peer a worker waits for may need this core to answer.
        if (!w->sched().RunOnce()) std::this_thread::yield();
        // Published before the clients are: once no client runs, every worker's share is in.
        const auto now = static_cast<int64_t>(w->Awaiting());
        if (now != awaiting) {
          cl.awaiting_ += now - awaiting;
          awaiting = now;
        }
        if (!published && done == clients) {
          published = true;
          cl.clients_running_ -= clients;
        }
        if (published && cl.clients_running_.load() == 0 && w->sched().live() == 0 &&
            cl.fabric_->packets_in_flight() == 0 && cl.awaiting_.load() == 0) {
          break;
        }
      }
      sessions.clear();
      sim::AllocCache::Disable(alloc_cache);
    });
  }
  for (auto& t : threads) t.join();
}

const ClusterConfig& Cluster::config() const { return impl_->config_; }
uint16_t Cluster::ShardOwner(uint32_t shard) const { return impl_->shard_map_.CnOf(shard); }
bool Cluster::simulated() const { return impl_->driver_ != nullptr; }
Clock& Cluster::clock() { return impl_->clock_; }

}  // namespace pond
