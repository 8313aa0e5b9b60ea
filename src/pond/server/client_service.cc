// The client service's one-shot requests — Describe, Execute, Call — its watchdog over open
// interactive streams, and how a request waits for the cluster. Interactive transactions are in
// client_service_stream.cc.
#include "pond/server/client_service.h"

#include <fmt/core.h>
#include <malloc.h>

#include <algorithm>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "pond/runtime/clocks.h"
#include "pond/server/outcome.h"
#include "pond/server/request_check.h"

namespace pond::server {

namespace {

// How often the watchdog looks for idle interactive transactions.
constexpr uint64_t kWatchdogPeriodMs = 100;
// How often it gives the C library's free memory back to the system (malloc_trim).
constexpr uint64_t kTrimPeriodMs = 1000;

uint64_t NowMs() { return SystemClock::Get().NowNs() / 1'000'000; }

constexpr const char* kStoppingNothingRan = "the server is stopping; nothing ran";

// Why condition `c` does not hold in `t` ("orders 4097 has another value"), or "" if it holds.
// REQUIRES: the condition's key was added and executed in `t`.
std::string FailedCondition(const Txn& t, const PlannedCondition& c) {
  Result<std::span<const std::byte>> v = t.Read(c.key.table->id, c.key.key);
  const std::string where = fmt::format("{} {}", c.key.table->name, c.key.key);
  if (!v.ok() && v.status().code() != Code::kNotFound) {
    return where + ": " + v.status().message();
  }
  if (c.absent) return v.ok() ? where + " exists" : "";
  if (!v.ok()) return where + " does not exist";
  const bool same = v->size() == c.equals.size() &&
                    std::equal(v->begin(), v->end(), c.equals.begin(), c.equals.end());
  return same ? "" : where + " has another value";
}

}  // namespace

Status ValidateServiceOptions(const ClientServiceOptions& o, int cns) {
  if (o.cns.empty()) return InvalidArgument("a client service fronts at least one CN");
  for (uint16_t cn : o.cns) {
    if (cn >= cns) {
      return InvalidArgument(
          fmt::format("the service fronts CN {}, but the cluster has CNs 0 to {}", cn, cns - 1));
    }
  }
  if (o.keys_per_request_max < 1 || o.keys_per_request_max > (1u << 20))
    return InvalidArgument("keys_per_request_max must be 1 to 2^20");
  if (o.interactive_keys_max < o.keys_per_request_max)
    return InvalidArgument("interactive_keys_max must be at least keys_per_request_max");
  if (o.interactive_streams_max < 1) return InvalidArgument("interactive_streams_max must be >= 1");
  if (o.interactive_idle_ms < 1) return InvalidArgument("interactive_idle_ms must be >= 1");
  if (o.interactive_lifetime_ms < o.interactive_idle_ms)
    return InvalidArgument("interactive_lifetime_ms must be at least interactive_idle_ms");
  if (o.pipeline_batch_max < 1 || o.pipeline_batch_max > (1u << 16))
    return InvalidArgument("pipeline_batch_max must be 1 to 65536");
  if (o.pipeline_in_flight_max < o.pipeline_batch_max || o.pipeline_in_flight_max > (1u << 20))
    return InvalidArgument("pipeline_in_flight_max must be pipeline_batch_max to 2^20");
  if (o.message_bytes_max < 64 * 1024 || o.message_bytes_max > (256u << 20))
    return InvalidArgument("message_bytes_max must be 64 KiB to 256 MiB");
  if (o.buffer_bytes_max < 8ull * o.message_bytes_max || o.buffer_bytes_max > (64ull << 30))
    return InvalidArgument("buffer_bytes_max must be 8 x message_bytes_max to 64 GiB");
  if (o.threads_max < 2) return InvalidArgument("threads_max must be >= 2");
  if (static_cast<uint64_t>(o.threads_max) <= o.interactive_streams_max)
    return InvalidArgument("threads_max must exceed interactive_streams_max");
  return Status::Ok();
}

ClientService::ClientService(Cluster& cluster, ServiceDirectory directory,
                             ClientServiceOptions options)
    : cluster_(cluster),
      dir_(std::move(directory)),
      o_(std::move(options)),
      cn_addresses_(dir_.cn_addresses),
      watchdog_([this] { Watchdog(); }) {}

ClientService::~ClientService() {
  StopPipelines();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  watchdog_cv_.notify_all();
  watchdog_.join();
}

void ClientService::SetSelfAddress(std::string address) {
  std::lock_guard lock(mu_);
  self_address_ = std::move(address);
}

void ClientService::SetCnAddresses(std::vector<std::string> addresses) {
  std::lock_guard lock(mu_);
  cn_addresses_ = std::move(addresses);
}

void ClientService::SetCnAddressSource(std::function<std::vector<std::string>()> source) {
  std::lock_guard lock(mu_);
  cn_address_source_ = std::move(source);
}

ServiceCounters ClientService::counters() const {
  const AtomicCounters& c = counters_;
  return ServiceCounters{
      c.requests.load(),          c.committed.load(),       c.aborted.load(),
      c.unknown.load(),           c.rejected.load(),        c.streams.load(),
      c.streams_abandoned.load(), c.streams_refused.load(), c.refused_unauthenticated.load(),
      c.refused_role.load()};
}

Grant ClientService::Authorize(const grpc::ServerContext& ctx) const {
  Caller c;
  if (const std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context(); auth) {
    // Mutual TLS verified the certificate against the cluster's CA before this runs.
    const std::vector<grpc::string_ref> cn = auth->FindPropertyValues("x509_common_name");
    if (!cn.empty()) c.certificate_identity.assign(cn.front().data(), cn.front().size());
  }
  const auto& md = ctx.client_metadata();
  if (const auto it = md.find("authorization"); it != md.end()) {
    const std::string value(it->second.data(), it->second.size());
    constexpr std::string_view kBearer = "Bearer ";
    if (value.starts_with(kBearer)) c.bearer_token = value.substr(kBearer.size());
  }
  return o_.access.Identify(c, static_cast<int64_t>(std::time(nullptr)));
}

bool ClientService::RefuseBeyondRole(const Grant& g, bool writes, v1::Answer* answer) {
  if (g.role == Role::kNone) {
    counters_.refused_unauthenticated.fetch_add(1, std::memory_order_relaxed);
    Reject("not authenticated: " + g.why_not, answer);
    return true;
  }
  if (writes && g.role < Role::kReadWrite) {
    counters_.refused_role.fetch_add(1, std::memory_order_relaxed);
    Reject(g.identity + " is " + RoleName(g.role) + ": it may only read", answer);
    return true;
  }
  return false;
}

void ClientService::Count(const v1::Answer& a) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  switch (a.outcome()) {
    case v1::COMMITTED:
      counters_.committed.fetch_add(1, std::memory_order_relaxed);
      break;
    case v1::ABORTED:
      counters_.aborted.fetch_add(1, std::memory_order_relaxed);
      break;
    case v1::UNKNOWN:
      counters_.unknown.fetch_add(1, std::memory_order_relaxed);
      break;
    case v1::REJECTED:
      counters_.rejected.fetch_add(1, std::memory_order_relaxed);
      break;
    default:
      break;
  }
}

uint16_t ClientService::NextCn() {
  return o_.cns[next_cn_.fetch_add(1, std::memory_order_relaxed) % o_.cns.size()];
}

// The promise belongs to the call, not to this thread's stack: set_value may still be returning
// on the worker when the future wakes this thread up.
bool ClientService::RunOn(uint16_t cn, const Body& body) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  if (!cluster_.Submit(cn, [&body, done](Session& s) -> Task<void> {
        co_await body(s);
        done->set_value();
      })) {
    return false;
  }
  f.wait();
  return true;
}

bool ClientService::RunOnPin(const Cluster::WorkerPin& pin, const Body& body) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  if (!cluster_.SubmitTo(pin, [&body, done](Session& s) -> Task<void> {
        co_await body(s);
        done->set_value();
      })) {
    return false;
  }
  f.wait();
  return true;
}

grpc::Status ClientService::Describe(grpc::ServerContext* ctx, const v1::DescribeRequest*,
                                     v1::DescribeResponse* resp) {
  // Every role may Describe: a client needs the CNs' addresses and the limits to connect at all.
  if (const Grant g = Authorize(*ctx); g.role == Role::kNone) {
    counters_.refused_unauthenticated.fetch_add(1, std::memory_order_relaxed);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, g.why_not);
  }
  resp->set_cluster(dir_.cluster);
  resp->set_isolation(cluster_.config().isolation == Isolation::kSnapshot ? "si" : "sr");
  std::function<std::vector<std::string>()> source;
  {
    std::lock_guard lock(mu_);
    source = cn_address_source_;
  }
  const std::vector<std::string> by_id = source ? source() : std::vector<std::string>{};
  const bool any =
      std::any_of(by_id.begin(), by_id.end(), [](const std::string& a) { return !a.empty(); });
  if (any) {
    for (const std::string& a : by_id) {
      if (!a.empty()) resp->add_cn_addresses(a);
    }
    // Calls are routed by the map of the CN this service fronts; a client that reached another
    // CN gets that CN's, which agrees but for changes on their way.
    const Cluster::CallShards shards = cluster_.CallShardMap(o_.cns.front());
    if (!shards.owners.empty()) {
      v1::Routing* r = resp->mutable_routing();
      r->set_shard_bits(static_cast<uint32_t>(shards.shard_bits));
      r->set_version(shards.version);
      for (uint16_t cn : shards.owners) r->add_shard_cns(cn);
      for (const std::string& a : by_id) r->add_cn_address_by_id(a);
    }
  } else {
    std::lock_guard lock(mu_);
    if (cn_addresses_.empty()) {
      if (!self_address_.empty()) resp->add_cn_addresses(self_address_);
    } else {
      for (const std::string& a : cn_addresses_) resp->add_cn_addresses(a);
    }
  }
  for (const ServedTable& t : dir_.tables()) {
    v1::TableInfo* ti = resp->add_tables();
    ti->set_name(t.name);
    ti->set_id(t.id);
    ti->set_value_bytes(t.value_bytes);
    ti->set_capacity(t.capacity);
  }
  for (const ServedProcedure& p : dir_.procedures()) {
    v1::ProcedureInfo* pi = resp->add_procedures();
    pi->set_name(p.name);
    pi->set_read_only(p.read_only);
    pi->set_args_bytes(p.args_bytes);
  }
  resp->set_keys_per_request_max(o_.keys_per_request_max);
  resp->set_message_bytes_max(o_.message_bytes_max);
  resp->set_pipeline_batch_max(o_.pipeline_batch_max);
  resp->set_pipeline_in_flight_max(o_.pipeline_in_flight_max);
  return grpc::Status::OK;
}

namespace {

// The one-shot transaction of an Execute, on its worker. Writes go to keys added read-write and
// read first, so that PUT can choose between Write and Insert, INSERT can tell a present key,
// and the values answered are those before this request's writes.
Task<void> RunExecute(Session& s, const ExecutePlan& plan, v1::ExecuteResponse* resp) {
  v1::Answer* answer = resp->mutable_answer();
  Txn t = s.Begin(plan.read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite);
  for (const PlannedKey& k : plan.reads) t.AddRO(k.table->id, k.key);
  for (const PlannedCondition& c : plan.conditions) t.AddRO(c.key.table->id, c.key.key);
  for (const PlannedWrite& w : plan.writes) t.AddRW(w.key.table->id, w.key.key);
  if (Status st = co_await t.Execute(); !st.ok()) {
    SetAnswer(st, Phase::kBeforeCommit, answer);
    co_return;
  }
  for (const PlannedKey& k : plan.reads) {
    if (Status st = FillValue(t.Read(k.table->id, k.key), k, resp->add_values()); !st.ok()) {
      SetAnswer(st, Phase::kBeforeCommit, answer);
      co_return;
    }
  }
  for (const PlannedCondition& c : plan.conditions) {
    if (std::string why = FailedCondition(t, c); !why.empty()) {
      t.Abort();
      Abort(v1::CONDITION_FAILED, why, answer);
      co_return;
    }
  }
  bool inserted = false;
  for (const PlannedWrite& w : plan.writes) {
    const uint16_t table = w.key.table->id;
    const bool present = t.Read(table, w.key.key).ok();
    Status st;
    switch (w.kind) {
      case v1::Write::PUT:
        if (present) {
          st = t.Write(table, w.key.key, w.value);
        } else {
          t.Insert(table, w.key.key, w.value);
          inserted = true;
        }
        break;
      case v1::Write::INSERT:
        if (present) {
          t.Abort();
          Abort(v1::DUPLICATE_KEY,
                fmt::format("insert of {} {}, which exists", w.key.table->name, w.key.key), answer);
          co_return;
        }
        t.Insert(table, w.key.key, w.value);
        inserted = true;
        break;
      default:
        if (present) t.Delete(table, w.key.key);
        break;
    }
    if (!st.ok()) {
      SetAnswer(st, Phase::kBeforeCommit, answer);
      co_return;
    }
  }
  // An insert takes the key's insert lock, which the next Execute asks for.
  if (inserted) {
    if (Status st = co_await t.Execute(); !st.ok()) {
      SetAnswer(st, Phase::kBeforeCommit, answer);
      co_return;
    }
  }
  SetAnswer(co_await t.Commit(), Phase::kCommit, answer);
}

}  // namespace

ClientService::Body ClientService::PrepareExecute(const v1::ExecuteRequest& req,
                                                  v1::ExecuteResponse* resp, uint16_t* cn,
                                                  const Grant& g) {
  *cn = NextCn();
  if (RefuseBeyondRole(g, !req.read_only(), resp->mutable_answer())) return {};
  Result<ExecutePlan> plan = PlanExecute(req, dir_, o_);
  if (!plan.ok()) {
    Reject(plan.status().message(), resp->mutable_answer());
    return {};
  }
  return [plan = std::make_shared<const ExecutePlan>(std::move(plan).value()), resp](Session& s) {
    return RunExecute(s, *plan, resp);
  };
}

void ClientService::FinishExecute(v1::ExecuteResponse* resp) {
  // Values read are an answer only of a transaction that committed, or that a condition on
  // them stopped.
  const v1::Answer& a = resp->answer();
  if (a.outcome() != v1::COMMITTED &&
      !(a.outcome() == v1::ABORTED && a.reason() == v1::CONDITION_FAILED)) {
    resp->clear_values();
  }
  Count(a);
}

ClientService::Body ClientService::PrepareCall(const v1::CallRequest& req, v1::CallResponse* resp,
                                               uint16_t* cn, const Grant& g) {
  *cn = NextCn();
  v1::Answer* answer = resp->mutable_answer();
  // A stranger learns nothing, not even which procedures there are.
  if (g.role == Role::kNone && RefuseBeyondRole(g, false, answer)) return {};
  const ServedProcedure* p = dir_.Procedure(req.procedure());
  const auto args = std::as_bytes(std::span(req.args().data(), req.args().size()));
  if (p == nullptr) {
    Reject(fmt::format("no procedure \"{}\" (Describe lists them)", Printable(req.procedure())),
           answer);
    return {};
  }
  if (RefuseBeyondRole(g, !p->read_only, answer)) return {};
  if (p->args_bytes != 0 && args.size() != p->args_bytes) {
    Reject(
        fmt::format("{} takes {} bytes of arguments, not {}", p->name, p->args_bytes, args.size()),
        answer);
    return {};
  }
  if (args.size() > kReplyBytesMax) {
    Reject(fmt::format("{} bytes of arguments; at most {}", args.size(), kReplyBytesMax), answer);
    return {};
  }
  Result<RouteHint> hint = p->route(args);
  if (!hint.ok()) {
    Reject(fmt::format("{}: {}", p->name, hint.status().message()), answer);
    return {};
  }
  if (req.has_route_key()) hint->first_key = req.route_key();
  if (const uint16_t home = cluster_.CallCn(*cn, *hint);
      home != *cn && std::find(o_.cns.begin(), o_.cns.end(), home) != o_.cns.end()) {
    *cn = home;
  }
  // `args` points into `req`, which the caller keeps until the body has run.
  return [id = p->id, args, hint = *hint, resp](Session& s) -> Task<void> {
    Result<std::vector<std::byte>> r = co_await s.CallWithReply(id, args, hint);
    SetAnswer(r.status(), Phase::kProcedure, resp->mutable_answer());
    if (r.ok()) resp->set_reply(reinterpret_cast<const char*>(r->data()), r->size());
  };
}

grpc::Status ClientService::Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                                    v1::ExecuteResponse* resp) {
  uint16_t cn = 0;
  if (Body run = PrepareExecute(*req, resp, &cn, Authorize(*ctx)); run && !RunOn(cn, run)) {
    // Said in the answer, not as a gRPC error: the client may then send it elsewhere.
    Abort(v1::STOPPING, kStoppingNothingRan, resp->mutable_answer());
  }
  FinishExecute(resp);
  return grpc::Status::OK;
}

grpc::Status ClientService::Call(grpc::ServerContext* ctx, const v1::CallRequest* req,
                                 v1::CallResponse* resp) {
  uint16_t cn = 0;
  if (Body run = PrepareCall(*req, resp, &cn, Authorize(*ctx)); run && !RunOn(cn, run)) {
    Abort(v1::STOPPING, kStoppingNothingRan, resp->mutable_answer());
  }
  Count(resp->answer());
  return grpc::Status::OK;
}

// ---- Open streams and the idle watchdog ------------------------------------------------------

bool ClientService::Register(grpc::ServerContext* ctx, uint64_t* id) {
  std::lock_guard lock(mu_);
  if (stopping_ || streams_.size() >= o_.interactive_streams_max) return false;
  *id = next_stream_id_++;
  const uint64_t now = NowMs();
  streams_.emplace(*id, OpenStream{ctx, now, now, false});
  return true;
}

void ClientService::Touch(uint64_t id) {
  std::lock_guard lock(mu_);
  streams_.at(id).last_active_ms = NowMs();
}

void ClientService::Deregister(uint64_t id) {
  std::lock_guard lock(mu_);
  streams_.erase(id);
}

void ClientService::CancelStreams() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  // A cancelled stream's pending Read returns false; its handler then aborts the transaction.
  for (auto& [id, s] : streams_) s.ctx->TryCancel();
  // A pipeline ends once it owes no answer.
  for (PipelineStream* p : pipelines_) StopPipeline(p);
}

void ClientService::Watchdog() {
  std::unique_lock lock(mu_);
  uint64_t trimmed_ms = NowMs();
  while (!stopping_) {
    watchdog_cv_.wait_for(lock, std::chrono::milliseconds(kWatchdogPeriodMs));
    const uint64_t now = NowMs();
    if (now - trimmed_ms >= kTrimPeriodMs) {
      // gRPC's buffers for a refused request are many small pieces on the threads' malloc
      // arenas: freed, they stay in the process (tens of MiB a request) until trimmed. Outside
      // the lock: a trim takes the arenas' locks, not the streams'.
      trimmed_ms = now;
      lock.unlock();
      malloc_trim(0);
      lock.lock();
      if (stopping_) break;
    }
    for (auto& [id, s] : streams_) {
      // Once: the handler deregisters the stream when it has aborted the transaction.
      if (!s.cancelled && (now - s.last_active_ms > o_.interactive_idle_ms ||
                           now - s.opened_ms > o_.interactive_lifetime_ms)) {
        s.ctx->TryCancel();
        s.cancelled = true;
      }
    }
  }
}

}  // namespace pond::server
