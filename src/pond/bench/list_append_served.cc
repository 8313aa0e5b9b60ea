// List-append as a service and its remote driver (served.h): the user-mode plans of
// list_append_plan.h served as two procedures that reply with each step's reads, and a driver in
// another process that draws plans, sends them, and records every call in a history for the
// checker — so the isolation checker judges what client processes saw, through the network,
// across failures (a call whose CN died is recorded as info).
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "pond/bench/list_append.h"
#include "pond/bench/list_append_plan.h"
#include "pond/server/service_directory.h"

namespace pond::bench {

namespace {

constexpr const char* kReadProcedure = "list-append.read";
constexpr const char* kTxnProcedure = "list-append.txn";
// Rows per logical key in the served table: live and graveyard, and room for slots claimed by
// inserts that then aborted (as in Setup's user mode).
constexpr uint64_t kRowsPerKey = 4;

}  // namespace

Status ListAppendWorkload::Serve(Cluster& cluster, server::ServiceDirectory* dir) {
  if (o_.keys < 1 || o_.max_appends < 1) return InvalidArgument("list-append: no lists to serve");
  o_.user = true;  // served plans insert and delete rows
  POND_RETURN_IF_ERROR(Setup(cluster, ServingContext(cluster)));
  POND_RETURN_IF_ERROR(
      dir->AddTable({"lists", table_, ListValueBytes(o_.max_appends), kRowsPerKey * o_.keys}));
  const uint16_t table = table_;
  const uint32_t max = o_.max_appends;
  const ProcedureId proc = cluster.RegisterProcedure(
      [table, max](Session& s,
                   std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
        Plan plan;
        POND_CO_RETURN_IF_ERROR(DecodePlan(args, &plan));
        PlanLog log;
        Txn t = s.Begin(plan.read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite);
        POND_CO_RETURN_IF_ERROR(co_await RunPlan(t, table, max, plan, &log));
        POND_CO_RETURN_IF_ERROR(co_await t.Commit());
        co_return EncodeLog(log);
      });
  const uint64_t keys = o_.keys;
  for (const bool read_only : {true, false}) {
    POND_RETURN_IF_ERROR(dir->AddProcedure(
        {read_only ? kReadProcedure : kTxnProcedure, proc, /*args_bytes=*/0, read_only,
         [read_only, keys, table](std::span<const std::byte> args) -> Result<RouteHint> {
           Plan plan;
           POND_RETURN_IF_ERROR(DecodePlan(args, &plan));
           if (plan.read_only != read_only) {
             return InvalidArgument(read_only ? "a read-write plan sent to list-append.read"
                                              : "a read-only plan sent to list-append.txn");
           }
           for (const PlanMop& m : plan.mops) {
             if (m.key >= keys) {
               return InvalidArgument(
                   fmt::format("list {} is past the {} lists served", m.key, keys));
             }
             if (read_only && m.kind != PlanMop::kRead) {
               return InvalidArgument("a read-only plan that writes");
             }
           }
           // Hybrid routing, as the embedded clients route: where the first key is managed.
           return RouteHint{read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite, table,
                            LiveRow(plan.mops[0].key)};
         }}));
  }
  return Status::Ok();
}

namespace {

class ListAppendRemote final : public RemoteDriver {
 public:
  ListAppendRemote(const ListAppendOptions& o, uint64_t keys, uint32_t max_appends)
      : o_(o), zipf_(o.window, o.theta), recorder_(&text_) {
    o_.keys = keys;
    o_.max_appends = max_appends;
    o_.user = true;
  }

  std::string Settings() const override {
    return fmt::format("{} lists (the server's), {} active, zipf({}), user transactions", o_.keys,
                       o_.window, o_.theta);
  }

  std::vector<std::string> TxnNames() const override { return {"read", "read-write"}; }

  // Starts past every list an earlier run touched: a list holding elements this run did not
  // append would read as garbage to the checker.
  Status Start(const RemoteStore& store) override {
    constexpr uint64_t kKeysPerRead = kRemoteReadKeysMax / 2;
    uint64_t first_untouched = 0;
    for (uint64_t from = 0; from < o_.keys; from += kKeysPerRead) {
      const uint64_t to = std::min(o_.keys, from + kKeysPerRead);
      std::vector<uint64_t> rows;
      for (uint64_t k = from; k < to; k++) {
        rows.push_back(LiveRow(k));
        rows.push_back(GraveRow(k));
      }
      Result<std::vector<std::optional<std::string>>> got = store.read("lists", rows);
      if (!got.ok()) return got.status();
      for (uint64_t k = from; k < to; k++) {
        const std::optional<std::string>& live = (*got)[2 * (k - from)];
        const std::optional<std::string>& grave = (*got)[2 * (k - from) + 1];
        // As loaded: even lists live and empty, odd ones absent, no graveyard rows.
        const bool as_loaded =
            !grave && (k % 2 == 0 ? live && IsEmptyList(*live) : !live.has_value());
        if (!as_loaded) first_untouched = k + 1;
      }
    }
    base_ = first_untouched;
    start_ = first_untouched;
    if (base_ + o_.window > o_.keys) exhausted_ = true;
    return Status::Ok();
  }

  RemoteCall Next(Rng& rng, uint64_t client, uint64_t) override {
    const uint64_t base = base_.load();
    Plan plan = DrawPlan(rng, zipf_, base, o_, &next_element_);
    uint64_t top = 0;
    for (const PlanMop& m : plan.mops) top = std::max(top, m.key);
    if (top >= o_.keys) {
      // The window ran past the lists: read the last one instead, and stop.
      exhausted_ = true;
      plan = Plan{.read_only = true, .mops = {PlanMop{.key = o_.keys - 1}}};
    }
    uint64_t hw = window_end_.load();
    while (top > hw && !window_end_.compare_exchange_weak(hw, top)) {
    }
    RemoteCall call;
    call.kind = plan.read_only ? 0 : 1;
    call.procedure = plan.read_only ? kReadProcedure : kTxnProcedure;
    const std::vector<std::byte> args = EncodePlan(plan);
    call.args.assign(reinterpret_cast<const char*>(args.data()), args.size());
    call.read_write = !plan.read_only;
    // Where Serve's route sends it: the first list's row.
    if (!plan.read_only) call.route_key = LiveRow(plan.mops[0].key);
    call.client = client;
    return call;
  }

  bool Book(const RemoteCall& call, RemoteOutcome outcome, std::string_view reply) override {
    Plan plan;
    POND_CHECK(DecodePlan(AsBytes(call.args), &plan).ok());  // Next made it
    check::TxnRecorder t = recorder_.Begin(Process(call.client), call.invoke_ns);
    if (outcome == RemoteOutcome::kCommitted) {
      PlanLog log;
      if (Status d = DecodeLog(AsBytes(reply), &log); !d.ok()) {
        NoteBadReply(d.message());
        t.Finish(check::Outcome::kInfo, call.done_ns);
        NewProcess(call.client);
        return true;
      }
      for (const LoggedMop& m : log.mops) {
        if (m.append) {
          t.Append(m.key, m.element);
        } else {
          t.Read(m.key, m.list);
        }
      }
      t.Finish(check::Outcome::kOk, call.done_ns);
      by_kind_[call.kind].fetch_add(1, std::memory_order_relaxed);
      // Retire full lists: slide the window past them.
      for (uint64_t k : log.full) {
        uint64_t b = base_.load();
        while (k >= b && !base_.compare_exchange_weak(b, k + 1)) {
        }
      }
      return true;
    }
    // What it appended if it committed (exactly: list_append_plan.h); its reads are not known.
    for (const auto& [key, element] : PlanAppends(plan)) t.Append(key, element);
    if (outcome == RemoteOutcome::kUnknown) {
      t.Finish(check::Outcome::kInfo, call.done_ns);
      NewProcess(call.client);  // as Jepsen does: an info ends the process
    } else {
      t.Finish(check::Outcome::kFail, call.done_ns);
    }
    return true;
  }

  Status Finish(const RemoteStore&, RunResult* r) override {
    r->loaded = fmt::format("{} lists, served; this run used lists {} to {}", o_.keys, start_,
                            window_end_.load());
    r->committed_by_txn = {{"read", by_kind_[0].load()}, {"read-write", by_kind_[1].load()}};
    {
      std::lock_guard lock(mu_);
      if (!bad_reply_.empty()) return Internal("a committed call's reply: " + bad_reply_);
    }
    if (exhausted_) {
      return OutOfSpace(fmt::format(
          "list-append ran out of the server's {} lists; serve more (--lists) or a fresh cluster",
          o_.keys));
    }
    return Status::Ok();
  }

  bool Done() const override { return exhausted_.load(); }

  std::optional<std::string> TakeHistory() override {
    if (Status s = recorder_.Close(); !s.ok()) NoteBadReply(s.ToString());
    return std::move(text_).str();
  }

 private:
  static std::span<const std::byte> AsBytes(std::string_view s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
  }

  static bool IsEmptyList(const std::string& v) {
    Result<std::vector<uint64_t>> l = DecodeList(AsBytes(v));
    return l.ok() && l->empty();
  }

  // Client c's process id: c while its calls had known outcomes, a fresh one after each info.
  int64_t Process(uint64_t client) {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>((infos_[client] << 16) | client);
  }
  void NewProcess(uint64_t client) {
    std::lock_guard lock(mu_);
    infos_[client]++;
  }
  void NoteBadReply(const std::string& why) {
    std::lock_guard lock(mu_);
    if (bad_reply_.empty()) bad_reply_ = why;
  }

  ListAppendOptions o_;
  const Zipf zipf_;
  std::ostringstream text_;
  check::Recorder recorder_;
  std::atomic<uint64_t> base_{0}, window_end_{0}, next_element_{1};
  std::atomic<bool> exhausted_{false};
  std::array<std::atomic<uint64_t>, 2> by_kind_{};
  uint64_t start_ = 0;
  std::mutex mu_;
  std::unordered_map<uint64_t, uint64_t> infos_;  // guarded by mu_: infos by client
  std::string bad_reply_;                         // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<RemoteDriver>> ListAppendWorkload::Remote(
    const std::vector<RemoteTable>& tables) const {
  Result<RemoteTable> t = FindRemoteTable(tables, "lists", 0);
  if (!t.ok()) return t.status();
  if (t->value_bytes < 16 || t->value_bytes % 8 != 0 || t->capacity < kRowsPerKey) {
    return InvalidArgument(
        fmt::format("the server's table \"lists\" ({} B x {}) is not list-append's", t->value_bytes,
                    t->capacity));
  }
  const uint64_t keys = t->capacity / kRowsPerKey;
  if (o_.window < 1 || o_.mops_max < 1 || o_.mops_max > kPlanMopsMax || keys < o_.window) {
    return InvalidArgument(
        fmt::format("list-append: --window must be 1 to the server's {} lists, --mops-max 1 to {}",
                    keys, kPlanMopsMax));
  }
  std::unique_ptr<RemoteDriver> d =
      std::make_unique<ListAppendRemote>(o_, keys, t->value_bytes / 8 - 1);
  return d;
}

}  // namespace pond::bench
