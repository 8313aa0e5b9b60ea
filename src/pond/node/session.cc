// The public Session: a client coroutine's handle on the worker it runs on — transactions begun
// there (txn/txn.cc wraps them), retries with backoff (RunTxn) and hybrid routing of calls (Call).
#include <algorithm>
#include <utility>

#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/node/routed_call.h"
#include "pond/node/worker_context.h"
#include "pond/txn/txn_state.h"

namespace pond {

using node::ClusterImpl;
using node::WorkerContext;

// ---- Session --------------------------------------------------------------------------------

Txn Session::Begin(TxnKind kind) {
  std::shared_ptr<txn::TxnState> t = txn::NewTxnState(*w_, kind);
  t->After(answered_early_);
  return Txn(std::move(t));
}

Task<Status> Session::RunTxn(TxnKind kind, std::function<Task<Status>(Txn&)> body, int attempts) {
  Status last = Aborted("no attempt");
  for (int a = 0; a < attempts; a++) {
    if (a > 0) {
      // Randomized exponential backoff: 1 µs, 2 µs, ... capped at 1 ms, times a random factor,
      // so that transactions that collided do not collide again in lockstep.
      uint64_t cap_ns = uint64_t{1000} << std::min(a - 1, 10);
      co_await w_->sched().SleepFor(1 + w_->rng().Uniform(cap_ns));
    }
    Txn t = Begin(kind);
    last = co_await body(t);
    if (last.ok()) last = co_await t.Commit();
    if (last.ok() || last.code() != Code::kAborted) co_return last;
  }
  co_return last;
}

namespace node {

// Read-only calls need no locks and stay where they are made: Lotus's second level sends them
// to any CN to spread load, and a client's own CN is such a CN when clients are spread over CNs
// evenly, as in every Pond workload — without a message hop that would buy nothing. Without
// hybrid routing (motor, ford, the first ablation steps) every call stays.
uint16_t CallTarget(const WorkerContext& w, const RouteHint& hint) {
  const ClusterImpl& cl = w.cluster();
  if (!cl.config().protocol.hybrid_routing || hint.kind == TxnKind::kReadOnly) return w.cn_id();
  return w.shard_map().CnOf(lock::LockKey::Record(hint.table, hint.first_key));
}

Task<Status> RunProcedureAs(Session& s, const ProcedureEntry& p, std::span<const std::byte> args,
                            std::vector<std::byte>* reply) {
  if (p.plain) co_return co_await p.plain(s, args);
  Result<std::vector<std::byte>> r = co_await p.replying(s, args);
  if (!r.ok()) co_return r.status();
  if (reply != nullptr) *reply = std::move(r).value();
  co_return Status::Ok();
}

}  // namespace node

Task<Status> Session::Call(ProcedureId proc, std::span<const std::byte> args,
                           const RouteHint& hint) {
  // An unknown procedure is refused here as the callee would refuse it.
  const node::ProcedureEntry* p = w_->cluster().Procedure(proc);
  if (p == nullptr) co_return InvalidArgument("no procedure " + std::to_string(proc));
  uint16_t target = node::CallTarget(*w_, hint);
  if (target == w_->cn_id()) co_return co_await node::RunProcedureAs(*this, *p, args, nullptr);
  w_->stats().remote_calls++;
  co_return co_await w_->calls().Call(WorkerAddr{target, w_->index()}, proc, args);
}

Task<Result<std::vector<std::byte>>> Session::CallWithReply(ProcedureId proc,
                                                            std::span<const std::byte> args,
                                                            const RouteHint& hint) {
  const node::ProcedureEntry* p = w_->cluster().Procedure(proc);
  if (p == nullptr) co_return InvalidArgument("no procedure " + std::to_string(proc));
  uint16_t target = node::CallTarget(*w_, hint);
  if (target == w_->cn_id()) {
    std::vector<std::byte> reply;
    Status st = co_await node::RunProcedureAs(*this, *p, args, &reply);
    if (st.ok()) st = node::CheckReplyBytes(reply.size());
    if (!st.ok()) co_return st;
    co_return std::move(reply);
  }
  w_->stats().remote_calls++;
  co_return co_await w_->calls().CallWithReply(WorkerAddr{target, w_->index()}, proc, args);
}

Task<void> Session::SleepFor(uint64_t ns) { co_await w_->sched().SleepFor(ns); }
Task<void> Session::Yield() { co_await w_->sched().Yield(); }
void Session::AtRoundEnd(std::function<void()> fn) { w_->sched().AtRoundEnd(std::move(fn)); }

uint16_t Session::cn() const { return w_->cn_id(); }
uint16_t Session::worker() const { return w_->index(); }
Rng& Session::rng() { return w_->rng(); }
Clock& Session::clock() { return w_->clock(); }

}  // namespace pond
