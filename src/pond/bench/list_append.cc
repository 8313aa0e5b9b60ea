#include "pond/bench/list_append.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "pond/bench/list_append_plan.h"
#include "pond/bench/zipf.h"

namespace pond::bench {

namespace {

uint32_t ValueBytes(const ListAppendOptions& o) { return ListValueBytes(o.max_appends); }

struct Mop {
  bool append;
  uint64_t key;
};

}  // namespace

namespace {

// A transaction that may commit and that its client has not recorded yet: what it appends if it
// commits. Kept from before its commit, so that one whose CN crashes under it (its client goes
// with the CN) still reaches the history, as info.
struct InFlight {
  uint64_t invoke_ns = 0;
  std::vector<std::pair<uint64_t, uint64_t>> appends;  // key, element
};

// One worker's, touched by that worker's thread only; a restarted CN's workers go on with the
// same, so a crashed incarnation's transactions stay until the run ends.
struct alignas(64) WorkerInFlight {
  uint64_t next = 0;
  std::map<uint64_t, InFlight> open;
};

}  // namespace

struct ListAppendShared {
  std::atomic<uint64_t> base{0};          // first active key (pair in write-skew mode)
  std::atomic<uint64_t> next_element{1};  // elements are unique over the whole run
  std::atomic<uint64_t> window_end{0};
  std::atomic<bool> exhausted{false};
  std::vector<WorkerInFlight> in_flight;  // per worker
  std::atomic<int64_t> infos{0};          // info transactions recorded, each its own process
};

ListAppendWorkload::ListAppendWorkload(const ListAppendOptions& o) : o_(o) {}
ListAppendWorkload::~ListAppendWorkload() = default;

uint64_t ListAppendWorkload::window_end() const {
  return shared_ != nullptr ? shared_->window_end.load() : 0;
}

Status ListAppendWorkload::Validate(const RunOptions& ro) const {
  if (!ro.record) return InvalidArgument("a list-append run is recorded: it exists to be checked");
  if (o_.max_appends < 1 || o_.mops_max < 1 || o_.window < 1 || o_.keys < 2 * o_.window ||
      o_.txns_per_client < 1) {
    return InvalidArgument("list-append options out of range");
  }
  return Status::Ok();
}

std::string ListAppendWorkload::Settings() const {
  return fmt::format("{} keys, {} active, zipf({}), {} transactions per client{}", o_.keys,
                     o_.window, o_.theta, o_.txns_per_client,
                     o_.write_skew ? ", write skew"
                     : o_.user     ? ", user transactions"
                                   : "");
}

nlohmann::json ListAppendWorkload::SettingsJson() const {
  return {{"keys", o_.keys},
          {"window", o_.window},
          {"theta", o_.theta},
          {"txns_per_client", o_.txns_per_client},
          {"mode", o_.write_skew ? "write-skew"
                   : o_.user     ? "user"
                                 : "plain"}};
}

namespace {

// User mode: two rows per key, and room for slots claimed by inserts that then aborted; every
// slot may come to hold a record.
TableNeed ListsTable(const ListAppendOptions& o) {
  const uint64_t rows = o.user ? 4 * o.keys : o.keys;
  return {TableOptions{.name = "lists", .value_bytes = ValueBytes(o), .capacity = rows}, rows};
}

}  // namespace

std::vector<TableNeed> ListAppendWorkload::ServedTables() const {
  ListAppendOptions served = o_;
  served.user = true;  // as Serve sets it
  return {ListsTable(served)};
}

Status ListAppendWorkload::Setup(Cluster& cluster, RunContext& ctx) {
  const ListAppendOptions& o = o_;
  shared_ = std::make_unique<ListAppendShared>();
  shared_->in_flight = std::vector<WorkerInFlight>(ctx.workers());
  Result<uint16_t> t = cluster.CreateTable(ListsTable(o).options);
  if (!t.ok()) return t.status();
  table_ = *t;
  const bool user = o.user;
  POND_RETURN_IF_ERROR(cluster.Load(*t, user ? o.keys / 2 : o.keys,
                                    [user](uint64_t i, uint64_t* key, std::span<std::byte>) {
                                      // value all zero: an empty list
                                      *key = user ? LiveRow(2 * i) : i;
                                    }));
  if (user) {
    const uint16_t table = *t;
    const uint32_t max = o.max_appends;
    proc_ = cluster.RegisterProcedure(
        [table, max](Session& s, std::span<const std::byte> args) -> Task<Status> {
          Plan plan;
          PlanLog* log = nullptr;
          if (Status d = DecodeCall(args, &plan, &log); !d.ok()) co_return d;
          *log = PlanLog{};
          Txn t = s.Begin(plan.read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite);
          Status st = co_await RunPlan(t, table, max, plan, log);
          if (st.ok()) st = co_await t.Commit();
          co_return st;
        });
  }
  return Status::Ok();
}

namespace {

// What one client needs to run and record its transactions.
struct Client {
  Session& s;
  uint16_t table;
  ProcedureId proc;
  const ListAppendOptions& o;
  check::Recorder& recorder;
  ListAppendShared& shared;
  int64_t process;
  WorkerInFlight& in_flight;
};

// An info transaction: the appends it made if it committed; its reads are not known. A process
// of its own (recorder.h).
void RecordInfo(check::Recorder& recorder, ListAppendShared& shared, const InFlight& t,
                uint64_t done_ns) {
  check::TxnRecorder tr =
      recorder.Begin(check::kInfoProcessBase + shared.infos.fetch_add(1), t.invoke_ns);
  for (const auto& [key, element] : t.appends) tr.Append(key, element);
  tr.Finish(check::Outcome::kInfo, done_ns);
}

// Records one attempt: its logged steps, then its outcome. Committed or certainly not: an
// unknown outcome goes through RecordInfo.
void Record(Client& c, uint64_t invoke_ns, const PlanLog& log, bool committed, uint64_t done_ns) {
  check::TxnRecorder tr = c.recorder.Begin(c.process, invoke_ns);
  for (const LoggedMop& m : log.mops) {
    if (m.append) {
      tr.Append(m.key, m.element);
    } else {
      tr.Read(m.key, m.list);
    }
  }
  tr.Finish(committed ? check::Outcome::kOk : check::Outcome::kFail, done_ns);
}

// Notes a transaction about to commit (InFlight); Done once its client knows the outcome.
uint64_t Open(Client& c, uint64_t invoke_ns, std::vector<std::pair<uint64_t, uint64_t>> appends) {
  const uint64_t id = c.in_flight.next++;
  c.in_flight.open[id] = InFlight{invoke_ns, std::move(appends)};
  return id;
}
void Done(Client& c, uint64_t id) { c.in_flight.open.erase(id); }

std::vector<std::pair<uint64_t, uint64_t>> LoggedAppends(const PlanLog& log) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const LoggedMop& m : log.mops) {
    if (m.append) out.emplace_back(m.key, m.element);
  }
  return out;
}

// The plain transaction: every key added up front (read-write if appended), one Execute.
Task<Status> RunSimple(Client& c, const std::vector<Mop>& mops, bool read_only, uint64_t invoke_ns,
                       PlanLog* log) {
  Txn t = c.s.Begin(read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite);
  for (auto& m : mops) {
    bool writes = false;
    for (auto& m2 : mops) writes |= m2.key == m.key && m2.append;
    if (writes) {
      t.AddRW(c.table, m.key);
    } else {
      t.AddRO(c.table, m.key);
    }
  }
  if (Status st = co_await t.Execute(); !st.ok()) co_return st;
  std::vector<std::byte> value(ValueBytes(c.o));
  for (auto& m : mops) {
    Result<std::span<const std::byte>> v = t.Read(c.table, m.key);
    POND_CHECK_MSG(v.ok(), v.status().ToString().c_str());
    Result<std::vector<uint64_t>> decoded = DecodeList(*v);
    POND_CHECK_MSG(decoded.ok(), decoded.status().ToString().c_str());
    std::vector<uint64_t> list = std::move(*decoded);
    if (!m.append || list.size() >= c.o.max_appends) {
      if (list.size() >= c.o.max_appends) log->full.push_back(m.key);
      log->mops.push_back(LoggedMop{.append = false, .key = m.key, .element = 0, .list = list});
      continue;
    }
    uint64_t e = c.shared.next_element.fetch_add(1);
    list.push_back(e);
    EncodeList(list, &value);
    Status ws = t.Write(c.table, m.key, value);
    POND_CHECK_MSG(ws.ok(), ws.ToString().c_str());
    log->mops.push_back(LoggedMop{.append = true, .key = m.key, .element = e, .list = {}});
  }
  const uint64_t open = Open(c, invoke_ns, LoggedAppends(*log));
  Status st = co_await t.Commit();
  Done(c, open);
  co_return st;
}

// One user-mode plan, run directly, through RunTxn or through Call; records every attempt.
// Returns whether it committed, and the keys it found full.
Task<bool> RunUser(Client& c, Plan plan, std::vector<uint64_t>* full) {
  Session& s = c.s;
  const ListAppendOptions& o = c.o;
  const TxnKind kind = plan.read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite;
  const uint64_t invoke = s.clock().NowNs();
  if (!plan.read_only && s.rng().Chance(o.call_fraction)) {
    PlanLog log;
    std::vector<std::byte> args = EncodeCall(plan, &log);
    // The callee commits: from the call on, this CN's crash leaves the outcome unknown.
    const uint64_t open = Open(c, invoke, PlanAppends(plan));
    Status st = co_await s.Call(
        c.proc, args,
        RouteHint{.kind = kind, .table = c.table, .first_key = LiveRow(plan.mops[0].key)});
    Done(c, open);
    if (st.code() == Code::kUnknown) {
      // The callee's CN failed while running it.
      RecordInfo(c.recorder, c.shared, InFlight{invoke, PlanAppends(plan)}, s.clock().NowNs());
    } else {
      Record(c, invoke, log, st.ok(), s.clock().NowNs());
    }
    *full = log.full;
    co_return st.ok();
  }
  if (s.rng().Chance(o.retry_fraction)) {
    // Each attempt's log, with the time it began; all but the last attempt aborted.
    std::vector<std::pair<uint64_t, PlanLog>> attempts;
    // The attempt RunTxn may be committing (an earlier one aborted before this began).
    std::optional<uint64_t> open;
    Status st = co_await s.RunTxn(
        kind,
        [&](Txn& t) -> Task<Status> {
          attempts.emplace_back(s.clock().NowNs(), PlanLog{});
          if (attempts.size() > 1) {
            // Elements are unique over the run, failed attempts included.
            for (PlanMop& m : plan.mops) {
              if (m.kind != PlanMop::kRead) m.element = c.shared.next_element.fetch_add(1);
            }
          }
          Status ran = co_await RunPlan(t, c.table, o.max_appends, plan, &attempts.back().second);
          if (open) Done(c, *open);
          open.reset();
          if (ran.ok()) open = Open(c, attempts.back().first, PlanAppends(plan));
          co_return ran;
        },
        4);
    if (open) Done(c, *open);
    const uint64_t done = s.clock().NowNs();
    for (size_t i = 0; i < attempts.size(); i++) {
      const bool last = i + 1 == attempts.size();
      Record(c, attempts[i].first, attempts[i].second, last && st.ok(),
             last ? done : attempts[i + 1].first);
    }
    if (!attempts.empty()) *full = attempts.back().second.full;
    co_return st.ok();
  }
  PlanLog log;
  Txn t = s.Begin(kind);
  Status st = co_await RunPlan(t, c.table, o.max_appends, plan, &log);
  if (st.ok()) {
    const uint64_t open = Open(c, invoke, PlanAppends(plan));
    st = co_await t.Commit();
    Done(c, open);
  }
  Record(c, invoke, log, st.ok(), s.clock().NowNs());
  *full = log.full;
  co_return st.ok();
}

}  // namespace

Task<void> ListAppendWorkload::RunClient(Session& s, RunContext& ctx) {
  const ListAppendOptions& o = o_;
  ListAppendShared& shared = *shared_;
  const Zipf zipf(o.window, o.theta);
  // Its own generator, not the session's: the draws depend on the workload's seed alone.
  Rng rng(o.seed * 1000003 + (uint64_t{s.cn()} << 32) + (uint64_t{s.worker()} << 16) +
          static_cast<uint64_t>(s.client()));
  Client c{s,
           table_,
           proc_,
           o,
           *ctx.recorder(),
           shared,
           static_cast<int64_t>(ctx.Client(s)),
           shared.in_flight[ctx.Worker(s)]};
  for (uint32_t n = 0; n < o.txns_per_client && !shared.exhausted.load() && ctx.NextCall(s); n++) {
    uint64_t base = shared.base.load();
    std::vector<Mop> mops;
    Plan plan;
    bool read_only = false;
    if (o.user) {
      plan = DrawPlan(rng, zipf, base, o, &shared.next_element);
      read_only = plan.read_only;
      for (const PlanMop& m : plan.mops) mops.push_back({m.kind != PlanMop::kRead, m.key});
    } else if (o.write_skew) {
      uint64_t pair = base + zipf.Next(rng);
      uint64_t a = 2 * pair, b = 2 * pair + 1;
      mops = {{false, a}, {false, b}, {true, rng.Chance(0.5) ? a : b}};
    } else {
      read_only = rng.Chance(o.read_only_fraction);
      uint32_t count = 1 + static_cast<uint32_t>(rng.Uniform(o.mops_max));
      for (uint32_t i = 0; i < count; i++) {
        mops.push_back({!read_only && rng.Chance(0.5), base + zipf.Next(rng)});
      }
    }
    uint64_t top = 0;
    for (auto& m : mops) top = std::max(top, m.key);
    if (top >= o.keys) {
      shared.exhausted = true;  // the window ran past the loaded keys
      break;
    }
    uint64_t hw = shared.window_end.load();
    while (top > hw && !shared.window_end.compare_exchange_weak(hw, top)) {
    }

    bool committed;
    std::vector<uint64_t> full;
    const uint64_t t0 = s.clock().NowNs();
    if (o.user) {
      committed = co_await RunUser(c, std::move(plan), &full);
    } else {
      PlanLog log;
      Status st = co_await RunSimple(c, mops, read_only, t0, &log);
      POND_CHECK_MSG(st.ok() || st.code() == Code::kAborted, st.ToString().c_str());
      committed = st.ok();
      Record(c, t0, log, committed, s.clock().NowNs());
      full = std::move(log.full);
    }
    // Every way a list-append transaction fails is an abort of it: the history says which.
    ctx.Book(s, committed ? Status::Ok() : Aborted("list-append transaction failed"), t0,
             s.clock().NowNs(), !read_only);
    // Retire full keys, whether or not the transaction committed (a list never shrinks): slide
    // the window past them.
    for (uint64_t k : full) {
      uint64_t unit = o.write_skew ? k / 2 : k;
      uint64_t b = shared.base.load();
      while (unit >= b && !shared.base.compare_exchange_weak(b, unit + 1)) {
      }
    }
  }
}

Status ListAppendWorkload::Finish(Cluster&, RunContext& ctx, RunResult* r) {
  // Caught by their CN's crash: recovery finished or undid each, and no client was told which.
  // An info line's time orders nothing after it; the last invocation is as good as any.
  uint64_t end_ns = 0;
  for (const WorkerInFlight& w : shared_->in_flight) {
    for (const auto& [id, t] : w.open) end_ns = std::max(end_ns, t.invoke_ns);
  }
  for (const WorkerInFlight& w : shared_->in_flight) {
    for (const auto& [id, t] : w.open) RecordInfo(*ctx.recorder(), *shared_, t, end_ns);
  }
  if (shared_->exhausted) {
    return OutOfSpace("list-append ran past its " + std::to_string(o_.keys) +
                      " keys; load more keys");
  }
  r->loaded = fmt::format("{} lists", o_.keys);
  return Status::Ok();
}

}  // namespace pond::bench
