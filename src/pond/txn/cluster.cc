// The embedded cluster: setup, the worker threads' run loop, routed calls, and the public Txn and
// Session wrappers around TxnState.
#include <cstddef>
#include <cstring>
#include <optional>
#include <thread>

#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/store/sv_slot.h"
#include "pond/transport/local/local_fabric.h"
#include "pond/txn/sim_driver.h"
#include "pond/txn/txn_state.h"
#include "pond/txn/worker_context.h"

namespace pond {

using txn::ClusterImpl;
using txn::CnContext;
using txn::TxnState;
using txn::WorkerContext;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kChunkBytes = 1 << 20;
constexpr uint64_t kLogBytes = 1 << 20;  // per worker
constexpr int kLoadCoroutines = 32;

}  // namespace


namespace {

// Runs one coroutine to completion on a worker whose thread is not running (setup only).
template <typename T>
T RunOn(ClusterImpl& cl, WorkerContext& w, Task<T> task) {
  std::optional<T> out;
  w.sched.Spawn([](Task<T> t, std::optional<T>* o) -> Task<void> {
    o->emplace(co_await std::move(t));
  }(std::move(task), &out));
  cl.Drive(w, [&] { return out.has_value(); });
  return std::move(*out);
}

}  // namespace

const char* IsolationName(Isolation i) {
  return i == Isolation::kSerializable ? "serializable" : "snapshot-isolation";
}

Status ValidateConfig(const ClusterConfig& c) {
  if (c.mns < 1 || c.mns > 64) return InvalidArgument("--mns must be 1 to 64");
  if (c.cns < 1 || c.cns > 64) return InvalidArgument("--cns must be 1 to 64");
  if (c.workers_per_cn < 1 || c.workers_per_cn > 64) {
    return InvalidArgument("--workers must be 1 to 64");
  }
  if (c.replication < 1 || c.replication > c.mns || c.replication > store::kReplicationMax) {
    return InvalidArgument("--replication must be 1 to min(MNs, 8)");
  }
  if (c.versions < 1 || c.versions > store::kVersionsMax) {
    return InvalidArgument("--versions must be 1 to 16");
  }
  if (c.region_mib < 16 || c.region_mib > (uint64_t{1} << 20)) {
    return InvalidArgument("--region-mib must be 16 to 1048576");
  }
  if (c.lock_buckets < 1) return InvalidArgument("lock table needs at least one bucket");
  if (c.protocol.vt_cache && !c.protocol.cn_locks) {
    return InvalidArgument("the VT cache needs CN lock tables (protocol.cn_locks)");
  }
  if (c.protocol.cn_locks && !c.protocol.log_and_visible) {
    // Readers cannot see CN locks, so only INVISIBLE cells keep them from missing a version.
    return InvalidArgument("CN lock tables need the commit log and write-invisible steps");
  }
  if (c.protocol.single_version && c.isolation != Isolation::kSerializable) {
    return InvalidArgument("ford is single-version and runs only under SR");
  }
  return Status::Ok();
}

namespace txn {

WorkerContext::WorkerContext(ClusterImpl& cl, CnContext& c, uint16_t idx, uint64_t seed)
    : cluster(cl), cn(c), index(idx), sched(cl.clock), rng(seed) {}

uint16_t WorkerContext::cn_id() const { return cn.id; }

CnContext::CnContext(ClusterImpl& cl, uint16_t cn_id)
    : id(cn_id), locks(cl.config.lock_buckets, cn_id) {
  if (cl.config.vt_cache_entries > 0 && cl.config.protocol.vt_cache) {
    vt = std::make_unique<cache::VtCache>(cl.config.vt_cache_entries, 16);
  }
  if (cl.config.addr_cache_entries > 0) {
    addr = std::make_unique<cache::AddrCache>(cl.config.addr_cache_entries, 16);
  }
}

ClusterImpl::ClusterImpl(const ClusterConfig& c, std::unique_ptr<sim::Engine> e,
                         std::unique_ptr<Fabric> f, Clock& clk, store::PoolLayout l)
    : engine(std::move(e)),
      config(c),
      fabric(std::move(f)),
      clock(clk),
      layout(l),
      placement(l.num_mns, l.replication),
      shard_map(static_cast<uint16_t>(c.cns)),
      oracle(clk) {}

ClusterImpl::~ClusterImpl() = default;

void ClusterImpl::Drive(WorkerContext& w, const std::function<bool()>& done) {
  if (driver != nullptr) {
    POND_CHECK_MSG(driver->RunUntil(done), "simulation ran out of events before finishing");
    return;
  }
  while (!done()) w.sched.RunOnce();
}

Task<Status> WorkerContext::RunProcedure(ProcedureId proc, std::span<const std::byte> args) {
  if (proc >= cluster.procedures.size()) {
    co_return InvalidArgument("no procedure " + std::to_string(proc));
  }
  Session s(this, -1);
  co_return co_await cluster.procedures[proc](s, args);
}

}  // namespace txn

// ---- Txn ------------------------------------------------------------------------------------

Txn::Txn(std::unique_ptr<txn::TxnState> s) : s_(std::move(s)) {}
Txn::Txn(Txn&&) noexcept = default;
Txn& Txn::operator=(Txn&&) noexcept = default;
Txn::~Txn() = default;

void Txn::AddRO(uint16_t table, uint64_t key) { s_->Add(table, key, txn::AddOp::kReadOnly); }
void Txn::AddRW(uint16_t table, uint64_t key) {
  POND_CHECK_MSG(s_->kind() == TxnKind::kReadWrite, "AddRW in a read-only transaction");
  s_->Add(table, key, txn::AddOp::kReadWrite);
}
void Txn::Insert(uint16_t table, uint64_t key, std::span<const std::byte> value) {
  POND_CHECK_MSG(s_->kind() == TxnKind::kReadWrite, "Insert in a read-only transaction");
  s_->Add(table, key, txn::AddOp::kInsert, value);
}
void Txn::Delete(uint16_t table, uint64_t key) {
  POND_CHECK_MSG(s_->kind() == TxnKind::kReadWrite, "Delete in a read-only transaction");
  s_->Add(table, key, txn::AddOp::kDelete);
}
Task<Status> Txn::Execute() { return s_->Execute(); }
Result<std::span<const std::byte>> Txn::Read(uint16_t table, uint64_t key) const {
  return s_->Read(table, key);
}
Status Txn::Write(uint16_t table, uint64_t key, std::span<const std::byte> value) {
  return s_->Write(table, key, value);
}
Task<Status> Txn::Commit() { return s_->Commit(); }
void Txn::Abort() { s_->Abort(); }
uint64_t Txn::start_ts() const { return s_->start_ts(); }
uint64_t Txn::commit_ts() const { return s_->commit_ts(); }

// ---- Session --------------------------------------------------------------------------------

Txn Session::Begin(TxnKind kind) { return Txn(txn::NewTxnState(*w_, kind)); }

Task<Status> Session::RunTxn(TxnKind kind, std::function<Task<Status>(Txn&)> body, int attempts) {
  Status last = Aborted("no attempt");
  for (int a = 0; a < attempts; a++) {
    if (a > 0) {
      // Randomized exponential backoff: 1 µs, 2 µs, ... capped at 1 ms, times a random factor,
      // so that transactions that collided do not collide again in lockstep.
      uint64_t cap_ns = uint64_t{1000} << std::min(a - 1, 10);
      co_await w_->sched.SleepFor(1 + w_->rng.Uniform(cap_ns));
    }
    Txn t = Begin(kind);
    last = co_await body(t);
    if (last.ok()) last = co_await t.Commit();
    if (last.ok() || last.code() != Code::kAborted) co_return last;
  }
  co_return last;
}

Task<Status> Session::Call(ProcedureId proc, std::span<const std::byte> args,
                           const RouteHint& hint) {
  ClusterImpl& cl = w_->cluster;
  POND_CHECK(proc < cl.procedures.size());
  // Read-only calls need no locks and stay where they are made: Lotus's second level sends them
  // to any CN to spread load, and a client's own CN is such a CN when clients are spread over
  // CNs evenly, as in every Pond workload — without a message hop that would buy nothing.
  // Without hybrid routing (motor, ford, the first ablation steps) every call stays.
  uint16_t target = !cl.config.protocol.hybrid_routing || hint.kind == TxnKind::kReadOnly
                        ? w_->cn_id()
                        : cl.shard_map.CnOf(lock::LockKey::Record(hint.table, hint.first_key));
  if (target == w_->cn_id()) co_return co_await cl.procedures[proc](*this, args);

  w_->stats.remote_calls++;
  co_return co_await w_->calls->Call(WorkerAddr{target, w_->index}, proc, args);
}

uint16_t Session::cn() const { return w_->cn_id(); }
uint16_t Session::worker() const { return w_->index; }
Rng& Session::rng() { return w_->rng; }
Clock& Session::clock() { return w_->clock(); }
Scheduler& Session::scheduler() { return w_->sched; }

// ---- Cluster --------------------------------------------------------------------------------

Cluster::Cluster(std::unique_ptr<txn::ClusterImpl> impl) : impl_(std::move(impl)) {}
Cluster::~Cluster() = default;

namespace {

// Everything but the transport: CNs, workers, lock tables, caches, clients of the services.
Status Build(ClusterImpl& cl) {
  const ClusterConfig& config = cl.config;
  for (int mn = 0; mn < config.mns; mn++) {
    store::FormatRegion(cl.fabric->region(static_cast<MnId>(mn)), cl.layout, static_cast<MnId>(mn));
  }
  Rng seeds(config.seed);
  for (int c = 0; c < config.cns; c++) {
    cl.cns.push_back(std::make_unique<CnContext>(cl, static_cast<uint16_t>(c)));
    CnContext& cn = *cl.cns.back();
    for (uint32_t s = 0; s < lock::kShards; s++) {
      cn.locks.SetManaged(s, cl.shard_map.CnOf(s) == cn.id);
    }
  }
  for (auto& cnp : cl.cns) {
    CnContext& cn = *cnp;
    for (int i = 0; i < config.workers_per_cn; i++) {
      auto w = std::make_unique<WorkerContext>(cl, cn, static_cast<uint16_t>(i), seeds.Next());
      WorkerContext* wp = w.get();
      w->ep = cl.fabric->CreateEndpoint(WorkerAddr{cn.id, wp->index}, w->sched);
      if (cl.driver != nullptr) cl.driver->AddWorker(wp);
      w->locks = std::make_unique<lock::LockClient>(cn.id, *w->ep, cn.locks, cl.shard_map);
      w->lock_server = std::make_unique<lock::LockServer>(*w->ep, cn.locks);
      if (cn.vt != nullptr) {
        cache::VtCache* vt = cn.vt.get();
        // VT cache rule 3: a remote writer is about to change the CVT in memory.
        w->lock_server->SetRemoteWriteHook([vt](const lock::LockKey& k) { vt->Invalidate(k); });
      }
      bool host = cn.id == cl.TsoHost(wp->index).cn;
      w->tso = std::make_unique<txn::TsoClient>(*w->ep, cl.TsoHost(wp->index),
                                                host ? &cl.oracle : nullptr);
      if (host) w->tso_server = std::make_unique<txn::TsoServer>(*w->ep, cl.oracle);
      w->alloc = std::make_unique<store::Allocator>(cl.layout);
      w->calls = std::make_unique<txn::RoutedCalls>(
          *w->ep, w->sched,
          [wp](ProcedureId p, std::span<const std::byte> args) { return wp->RunProcedure(p, args); });
      // Each worker's commit log sits on one MN, spread over the MNs.
      MnId log_mn = static_cast<MnId>((cn.id * config.workers_per_cn + i) % config.mns);
      Result<uint64_t> area = RunOn(cl, *w, store::CarveHeap(*w->ep, cl.layout, log_mn, kLogBytes));
      if (!area.ok()) return area.status();
      w->log = std::make_unique<txn::CommitLog>(GAddr::Make(log_mn, *area), kLogBytes);
      cn.workers.push_back(std::move(w));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Cluster>> Cluster::Start(const ClusterConfig& config) {
  POND_RETURN_IF_ERROR(ValidateConfig(config));
  uint64_t region_bytes = config.region_mib * kMiB;
  auto layout = store::MakeLayout(static_cast<uint16_t>(config.mns), config.replication,
                                  region_bytes, kChunkBytes);
  if (!layout.ok()) return layout.status();
  auto fabric = LocalFabric::Create(static_cast<uint16_t>(config.mns), region_bytes);
  if (!fabric.ok()) return fabric.status();
  auto impl = std::make_unique<ClusterImpl>(config, nullptr, std::move(fabric).value(),
                                            SystemClock::Get(), *layout);
  POND_RETURN_IF_ERROR(Build(*impl));
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

Result<std::unique_ptr<Cluster>> Cluster::StartSimulated(const ClusterConfig& config,
                                                         const SimModel& model) {
  POND_RETURN_IF_ERROR(ValidateConfig(config));
  POND_RETURN_IF_ERROR(model.Validate());
  uint64_t region_bytes = config.region_mib * kMiB;
  auto layout = store::MakeLayout(static_cast<uint16_t>(config.mns), config.replication,
                                  region_bytes, kChunkBytes);
  if (!layout.ok()) return layout.status();
  auto engine = std::make_unique<sim::Engine>(config.seed);
  sim::Engine* e = engine.get();
  auto fabric = SimFabric::Create(*e, model, static_cast<uint16_t>(config.mns), region_bytes);
  if (!fabric.ok()) return fabric.status();
  SimFabric* sf = fabric->get();
  auto impl = std::make_unique<ClusterImpl>(config, std::move(engine), std::move(fabric).value(),
                                            e->clock(), *layout);
  impl->sim_fabric = sf;
  impl->driver = std::make_unique<txn::SimDriver>(*e, *sf);
  POND_RETURN_IF_ERROR(Build(*impl));
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

Result<uint16_t> Cluster::CreateTable(const TableOptions& options) {
  ClusterImpl& cl = *impl_;
  WorkerContext& w = *cl.cns[0]->workers[0];
  store::TableSpec spec;
  spec.id = static_cast<uint16_t>(cl.catalog.tables().size());
  spec.name = options.name;
  spec.value_bytes = options.value_bytes;
  spec.versions = cl.config.versions;
  spec.critical_field = options.critical_field;
  spec.single_version = cl.config.protocol.single_version;
  // FORD's hash buckets hold 22 slots; a bucket READ (a key whose address is not cached) then
  // moves 22 whole records, the bandwidth cost Lotus §2.2 names.
  if (spec.single_version) spec.slots_per_bucket = 22;
  spec.capacity = options.capacity;
  Status s = RunOn(cl, w, store::CreateTable(*w.ep, cl.layout, spec));
  if (!s.ok()) return s;
  Result<store::Catalog> cat = RunOn(cl, w, store::LoadCatalog(*w.ep));
  if (!cat.ok()) return cat.status();
  cl.catalog = std::move(cat).value();
  return spec.id;
}

Status Cluster::Load(
    uint16_t table, uint64_t count,
    const std::function<void(uint64_t i, uint64_t* key, std::span<std::byte> value)>& gen) {
  ClusterImpl& cl = *impl_;
  const store::TableInfo* t = cl.Table(table);
  if (t == nullptr) return InvalidArgument("no table " + std::to_string(table));
  WorkerContext& w = *cl.cns[0]->workers[0];
  // Loaded data is committed "before time": every timestamp granted later is larger.
  uint64_t ts = cl.oracle.Grant(1);
  Status first_error;
  uint64_t next = 0;
  for (int c = 0; c < kLoadCoroutines; c++) {
    w.sched.Spawn([](ClusterImpl* cl, WorkerContext* w, const store::TableInfo* t, uint64_t ts,
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
          r = co_await store::SvInsert(*w->ep, *t, cl->placement, key, value);
        } else {
          r = co_await store::Insert(*w->ep, *t, cl->layout, cl->placement, *w->alloc, key, value,
                                     ts);
        }
        if (!r.ok() && err->ok()) *err = r.status();
      }
    }(&cl, &w, t, ts, count, &next, &first_error, &gen));
  }
  cl.Drive(w, [&] { return w.sched.live() == 0; });
  return first_error;
}

ProcedureId Cluster::RegisterProcedure(Procedure p) {
  impl_->procedures.push_back(std::move(p));
  return static_cast<ProcedureId>(impl_->procedures.size() - 1);
}

void Cluster::Run(int clients, const std::function<Task<void>(Session&)>& client) {
  ClusterImpl& cl = *impl_;
  std::vector<WorkerContext*> workers;
  for (auto& cn : cl.cns) {
    for (auto& w : cn->workers) workers.push_back(w.get());
  }
  cl.clients_running = static_cast<int64_t>(workers.size()) * clients;
  if (cl.driver != nullptr) {
    // One thread, virtual time: every worker's rounds are engine events.
    std::vector<std::unique_ptr<Session>> sessions;
    for (WorkerContext* w : workers) {
      for (int c = 0; c < clients; c++) {
        sessions.push_back(std::unique_ptr<Session>(new Session(w, c)));
        w->sched.Spawn([](const std::function<Task<void>(Session&)>* fn, Session* s,
                          std::atomic<int64_t>* running) -> Task<void> {
          co_await (*fn)(*s);
          (*running)--;
        }(&client, sessions.back().get(), &cl.clients_running));
      }
    }
    auto finished = [&] {
      if (cl.clients_running.load() != 0 || cl.fabric->packets_in_flight() != 0) return false;
      for (WorkerContext* w : workers) {
        if (w->sched.live() != 0) return false;
      }
      return true;
    };
    POND_CHECK_MSG(cl.driver->RunUntil(finished), "simulation ran out of events before finishing");
    return;
  }
  std::vector<std::thread> threads;
  for (WorkerContext* w : workers) {
    threads.emplace_back([&cl, w, clients, &client] {
      int done = 0;
      std::vector<std::unique_ptr<Session>> sessions;
      for (int c = 0; c < clients; c++) {
        sessions.push_back(std::unique_ptr<Session>(new Session(w, c)));
        w->sched.Spawn(
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
      for (;;) {
        // An idle round gives the core away: workers may outnumber cores (4 CNs on 2 cores in
        // the tests), and the peer a worker waits for may need this core to answer.
        if (!w->sched.RunOnce()) std::this_thread::yield();
        if (!published && done == clients) {
          published = true;
          cl.clients_running -= clients;
        }
        if (published && cl.clients_running.load() == 0 && w->sched.live() == 0 &&
            cl.fabric->packets_in_flight() == 0) {
          break;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

ClusterStats ClusterStats::Since(const ClusterStats& b) const {
  ClusterStats d = *this;
  d.committed -= b.committed;
  d.committed_read_only -= b.committed_read_only;
  d.aborts.lock_conflict -= b.aborts.lock_conflict;
  d.aborts.newer_version -= b.aborts.newer_version;
  d.aborts.snapshot_too_old -= b.aborts.snapshot_too_old;
  d.aborts.torn_read -= b.aborts.torn_read;
  d.aborts.invisible_wait -= b.aborts.invisible_wait;
  d.aborts.duplicate_key -= b.aborts.duplicate_key;
  d.aborts.validation -= b.aborts.validation;
  d.aborts.user -= b.aborts.user;
  d.remote_calls -= b.remote_calls;
  d.reads -= b.reads;
  d.writes -= b.writes;
  d.cas -= b.cas;
  d.faa -= b.faa;
  d.batches -= b.batches;
  d.messages -= b.messages;
  d.packets -= b.packets;
  d.vt_hits -= b.vt_hits;
  d.vt_misses -= b.vt_misses;
  d.vt_invalidations -= b.vt_invalidations;
  d.addr_hits -= b.addr_hits;
  d.addr_misses -= b.addr_misses;
  return d;
}

ClusterStats Cluster::Stats() const {
  ClusterStats s;
  for (auto& cn : impl_->cns) {
    for (auto& w : cn->workers) {
      s.committed += w->stats.committed;
      s.committed_read_only += w->stats.committed_read_only;
      const AbortCounts& a = w->stats.aborts;
      s.aborts.lock_conflict += a.lock_conflict;
      s.aborts.newer_version += a.newer_version;
      s.aborts.snapshot_too_old += a.snapshot_too_old;
      s.aborts.torn_read += a.torn_read;
      s.aborts.invisible_wait += a.invisible_wait;
      s.aborts.duplicate_key += a.duplicate_key;
      s.aborts.validation += a.validation;
      s.aborts.user += a.user;
      s.remote_calls += w->stats.remote_calls;
      const EndpointStats& e = w->ep->stats();
      s.reads += e.ops[static_cast<int>(Verb::kRead)];
      s.writes += e.ops[static_cast<int>(Verb::kWrite)];
      s.cas += e.ops[static_cast<int>(Verb::kCas)];
      s.faa += e.ops[static_cast<int>(Verb::kFaa)];
      s.batches += e.batches;
      s.messages += e.messages_sent;
      s.packets += e.packets_sent;
    }
    if (cn->vt) {
      cache::CacheStats v = cn->vt->stats();
      s.vt_hits += v.hits;
      s.vt_misses += v.misses;
      s.vt_invalidations += v.invalidations;
    }
    if (cn->addr) {
      cache::CacheStats a = cn->addr->stats();
      s.addr_hits += a.hits;
      s.addr_misses += a.misses;
    }
  }
  return s;
}

const ClusterConfig& Cluster::config() const { return impl_->config; }
bool Cluster::simulated() const { return impl_->driver != nullptr; }
Clock& Cluster::clock() { return impl_->clock; }

SimStats Cluster::GetSimStats() const {
  const ClusterImpl& cl = *impl_;
  POND_CHECK_MSG(cl.sim_fabric != nullptr, "sim stats of a cluster that is not simulated");
  SimStats s;
  s.virtual_ns = cl.engine->now();
  s.events = cl.engine->stats().events_run;
  for (MnId mn = 0; mn < cl.sim_fabric->num_mns(); mn++) {
    SimStats::Nic n;
    for (int k = 0; k < kNumVerbs; k++) {
      n.busy_ns[k] = cl.sim_fabric->nic(mn).BusyNs(k);
      n.ops[k] = cl.sim_fabric->nic(mn).ServedCount(k);
    }
    s.mn_nics.push_back(n);
  }
  s.cpu_busy_ns = cl.driver->cpu_stats().busy_ns;
  s.cpu_rounds = cl.driver->cpu_stats().rounds;
  sim::FaultStats f = cl.sim_fabric->fault_stats();
  s.fault_drops = f.drop_count;
  s.fault_duplicates = f.duplicate_count;
  s.fault_delays = f.delay_count;
  return s;
}

void Cluster::ResetSimStats() {
  POND_CHECK(impl_->sim_fabric != nullptr);
  impl_->sim_fabric->ResetNicStats();
}

}  // namespace pond
