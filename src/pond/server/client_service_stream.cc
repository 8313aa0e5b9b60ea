// The client service's interactive transactions: one gRPC stream is one transaction, and each
// step a client sends is answered before the next is read. The Txn lives on one pinned worker
// (Cluster::Pin) and is touched only by calls submitted to that worker, one at a time, while this
// stream's gRPC thread waits; adds are checked at once and handed to the Txn at the next execute
// (or commit), which saves a trip to the worker per add.
//
// A stream that ends before commit or abort — the client closed it, was cancelled, went away,
// or idled past the limit (the watchdog cancels it) — has its transaction dropped on its worker,
// which aborts it and releases its locks, and its pin released.
#include <fmt/core.h>

#include <optional>
#include <vector>

#include "pond/base/assert.h"
#include "pond/server/client_service.h"
#include "pond/server/outcome.h"
#include "pond/server/request_check.h"

namespace pond::server {

struct ClientService::StreamState {
  Grant grant;  // the caller's, taken when the stream opened
  bool begun = false;
  bool read_only = false;
  std::optional<Cluster::WorkerPin> pin;
  std::optional<Txn> txn;           // created by the first step that reaches the worker
  std::vector<PlannedAdd> pending;  // adds since the last execute, not yet given to the Txn
  size_t keys = 0;                  // added over the whole transaction
};

namespace {

// Hands an add step to the transaction; returns the keys whose values the next execute answers.
void ApplyAdd(Txn& t, const PlannedAdd& a, std::vector<PlannedKey>* answered) {
  for (const PlannedKey& k : a.read_only) t.AddRO(k.table->id, k.key);
  for (const PlannedKey& k : a.read_write) t.AddRW(k.table->id, k.key);
  for (const PlannedWrite& w : a.inserts) t.Insert(w.key.table->id, w.key.key, w.value);
  for (const PlannedKey& k : a.deletes) t.Delete(k.table->id, k.key);
  answered->insert(answered->end(), a.read_only.begin(), a.read_only.end());
  answered->insert(answered->end(), a.read_write.begin(), a.read_write.end());
}

void SetOpen(v1::InteractiveResponse* resp) { resp->mutable_answer()->set_outcome(v1::OPEN); }

}  // namespace

grpc::Status ClientService::Interactive(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::InteractiveResponse, v1::InteractiveRequest>* stream) {
  uint64_t id = 0;
  if (!Register(ctx, &id)) {
    counters_.streams_refused.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mu_);
    if (stopping_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is stopping");
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        fmt::format("{} interactive transactions are open, the most this server "
                                    "allows; nothing ran",
                                    o_.interactive_streams_max));
  }
  StreamState st;
  st.grant = Authorize(*ctx);
  v1::InteractiveRequest req;
  bool ended = false;
  while (!ended && stream->Read(&req)) {
    Touch(id);
    v1::InteractiveResponse resp;
    switch (req.step_case()) {
      case v1::InteractiveRequest::kBegin:
        ended = StepBegin(st, req.begin(), &resp);
        break;
      case v1::InteractiveRequest::STEP_NOT_SET:
        Reject("a step with nothing in it (begin, add, execute, write, commit or abort)",
               resp.mutable_answer());
        ended = true;
        break;
      default:
        if (!st.begun) {
          Reject("the first step must be begin", resp.mutable_answer());
          ended = true;
        } else if (req.step_case() == v1::InteractiveRequest::kAdd) {
          ended = StepAdd(st, req.add(), &resp);
        } else if (req.step_case() == v1::InteractiveRequest::kExecute) {
          ended = StepExecute(st, &resp);
        } else if (req.step_case() == v1::InteractiveRequest::kWrite) {
          ended = StepWrite(st, req.write(), &resp);
        } else {
          ended = StepEnd(st, req.step_case() == v1::InteractiveRequest::kCommit, &resp);
        }
        break;
    }
    Count(resp.answer());
    if (!stream->Write(resp)) break;
    Touch(id);
  }
  if (st.begun && !ended) counters_.streams_abandoned.fetch_add(1, std::memory_order_relaxed);
  Release(st);
  Deregister(id);
  return grpc::Status::OK;
}

bool ClientService::StepBegin(StreamState& st, const v1::Begin& b, v1::InteractiveResponse* resp) {
  if (st.begun) {
    Reject("begin twice: one stream is one transaction", resp->mutable_answer());
    return true;
  }
  if (RefuseBeyondRole(st.grant, !b.read_only(), resp->mutable_answer())) return true;
  st.pin = cluster_.Pin(NextCn());
  if (!st.pin) {
    Abort(v1::STOPPING, "the server is stopping; nothing ran", resp->mutable_answer());
    return true;
  }
  st.begun = true;
  st.read_only = b.read_only();
  counters_.streams.fetch_add(1, std::memory_order_relaxed);
  SetOpen(resp);
  return false;
}

bool ClientService::StepAdd(StreamState& st, const v1::Add& add, v1::InteractiveResponse* resp) {
  Result<PlannedAdd> plan = PlanAdd(add, st.read_only, st.pending, dir_, o_);
  if (!plan.ok()) {
    Reject(plan.status().message(), resp->mutable_answer());
    return true;
  }
  if (st.keys + plan->keys() > o_.interactive_keys_max) {
    Reject(fmt::format("the transaction would add {} keys; at most {}", st.keys + plan->keys(),
                       o_.interactive_keys_max),
           resp->mutable_answer());
    return true;
  }
  st.keys += plan->keys();
  st.pending.push_back(std::move(plan).value());
  SetOpen(resp);
  return false;
}

bool ClientService::StepExecute(StreamState& st, v1::InteractiveResponse* resp) {
  v1::Answer* answer = resp->mutable_answer();
  bool ended = false;
  const bool ran = RunOnPin(*st.pin, [&](Session& s) -> Task<void> {
    if (!st.txn) st.txn.emplace(s.Begin(st.read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite));
    Txn& t = *st.txn;
    std::vector<PlannedKey> answered;
    for (const PlannedAdd& a : st.pending) ApplyAdd(t, a, &answered);
    st.pending.clear();
    Status e = co_await t.Execute();
    for (size_t i = 0; e.ok() && i < answered.size(); i++) {
      const PlannedKey& k = answered[i];
      e = FillValue(t.Read(k.table->id, k.key), k, resp->add_values());
    }
    if (e.ok()) {
      SetOpen(resp);
    } else {
      SetAnswer(e, Phase::kBeforeCommit, answer);
      resp->clear_values();
      st.txn.reset();  // aborted already; dropped here, on its worker
      ended = true;
    }
  });
  if (!ran) {
    Abort(v1::STOPPING, "the server is stopping", answer);
    return true;
  }
  return ended;
}

bool ClientService::StepWrite(StreamState& st, const v1::WriteStep& w,
                              v1::InteractiveResponse* resp) {
  v1::Answer* answer = resp->mutable_answer();
  Result<std::vector<PlannedWrite>> puts = PlanPuts(w, dir_, o_);
  if (!puts.ok()) {
    Reject(puts.status().message(), answer);
    return true;
  }
  bool ended = false;
  const bool ran = RunOnPin(*st.pin, [&](Session& s) -> Task<void> {
    if (!st.txn) st.txn.emplace(s.Begin(st.read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite));
    for (const PlannedWrite& p : *puts) {
      // A write of a key not added read-write and executed, or absent (an insert's job), is
      // misuse: the transaction ends REJECTED, having written nothing.
      if (Status e = st.txn->Write(p.key.table->id, p.key.key, p.value); !e.ok()) {
        Reject(fmt::format("write of {} {}: {}", p.key.table->name, p.key.key, e.message()),
               answer);
        st.txn.reset();
        ended = true;
        co_return;
      }
    }
    SetOpen(resp);
  });
  if (!ran) {
    Abort(v1::STOPPING, "the server is stopping", answer);
    return true;
  }
  return ended;
}

bool ClientService::StepEnd(StreamState& st, bool commit, v1::InteractiveResponse* resp) {
  v1::Answer* answer = resp->mutable_answer();
  const bool ran = RunOnPin(*st.pin, [&](Session& s) -> Task<void> {
    if (!st.txn) st.txn.emplace(s.Begin(st.read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite));
    if (commit) {
      // Adds never executed make Commit refuse (every key must be executed): REJECTED.
      std::vector<PlannedKey> unused;
      for (const PlannedAdd& a : st.pending) ApplyAdd(*st.txn, a, &unused);
      st.pending.clear();
      SetAnswer(co_await st.txn->Commit(), Phase::kCommit, answer);
    } else {
      st.txn->Abort();
      Abort(v1::USER, "aborted by the client", answer);
    }
    st.txn.reset();
  });
  if (!ran) Abort(v1::STOPPING, "the server is stopping", answer);
  return true;
}

void ClientService::Release(StreamState& st) {
  if (!st.pin) return;
  if (st.txn) {
    // Dropping an open Txn aborts it; it must happen on its worker.
    const bool ran = RunOnPin(*st.pin, [&](Session&) -> Task<void> {
      st.txn.reset();
      co_return;
    });
    POND_CHECK_MSG(ran, "a held pin refused a call");
  }
  cluster_.Unpin(*st.pin);
  st.pin.reset();
}

}  // namespace pond::server
