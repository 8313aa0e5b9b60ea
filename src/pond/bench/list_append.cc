#include "pond/bench/list_append.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstring>
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

struct ListAppendShared {
  std::atomic<uint64_t> base{0};          // first active key (pair in write-skew mode)
  std::atomic<uint64_t> next_element{1};  // elements are unique over the whole run
  std::atomic<uint64_t> window_end{0};
  std::atomic<bool> exhausted{false};
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

Status ListAppendWorkload::Setup(Cluster& cluster, RunContext&) {
  const ListAppendOptions& o = o_;
  shared_ = std::make_unique<ListAppendShared>();
  // User mode: two rows per key, and room for slots claimed by inserts that then aborted.
  const uint64_t rows = o.user ? 4 * o.keys : o.keys;
  Result<uint16_t> t = cluster.CreateTable(
      TableOptions{.name = "lists", .value_bytes = ValueBytes(o), .capacity = rows});
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
};

// Records one attempt: its logged steps, then its outcome.
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

// The plain transaction: every key added up front (read-write if appended), one Execute.
Task<Status> RunSimple(Client& c, const std::vector<Mop>& mops, bool read_only, PlanLog* log) {
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
  Status st = co_await t.Execute();
  if (!st.ok()) co_return st;
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
  co_return co_await t.Commit();
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
    Status st = co_await s.Call(
        c.proc, args,
        RouteHint{.kind = kind, .table = c.table, .first_key = LiveRow(plan.mops[0].key)});
    Record(c, invoke, log, st.ok(), s.clock().NowNs());
    *full = log.full;
    co_return st.ok();
  }
  if (s.rng().Chance(o.retry_fraction)) {
    // Each attempt's log, with the time it began; all but the last attempt aborted.
    std::vector<std::pair<uint64_t, PlanLog>> attempts;
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
          co_return co_await RunPlan(t, c.table, o.max_appends, plan, &attempts.back().second);
        },
        4);
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
  if (st.ok()) st = co_await t.Commit();
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
  Client c{s, table_, proc_, o, *ctx.recorder(), shared, static_cast<int64_t>(ctx.Client(s))};
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
      Status st = co_await RunSimple(c, mops, read_only, &log);
      POND_CHECK_MSG(st.ok() || st.code() == Code::kAborted, st.ToString().c_str());
      committed = st.ok();
      Record(c, t0, log, committed, s.clock().NowNs());
      full = std::move(log.full);
    }
    // Every way a list-append transaction fails is an abort of it: the history says which.
    ctx.Book(s, committed ? Status::Ok() : Aborted("list-append transaction failed"), t0,
             s.clock().NowNs(), !read_only);
    if (!committed) continue;
    // Retire full keys: slide the window past them.
    for (uint64_t k : full) {
      uint64_t unit = o.write_skew ? k / 2 : k;
      uint64_t b = shared.base.load();
      while (unit >= b && !shared.base.compare_exchange_weak(b, unit + 1)) {
      }
    }
  }
}

Status ListAppendWorkload::Finish(Cluster&, RunContext&, RunResult* r) {
  if (shared_->exhausted) {
    return OutOfSpace("list-append ran past its " + std::to_string(o_.keys) +
                      " keys; load more keys");
  }
  r->loaded = fmt::format("{} lists", o_.keys);
  return Status::Ok();
}

}  // namespace pond::bench
