#include "pond/bench/list_append.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "pond/bench/list_append_plan.h"
#include "pond/bench/zipf.h"

namespace pond::bench {

namespace {

uint32_t ValueBytes(const ListAppendOptions& o) { return 8 * (1 + o.max_appends); }

struct Shared {
  std::atomic<uint64_t> base{0};          // first active key (pair in write-skew mode)
  std::atomic<uint64_t> next_element{1};  // elements are unique over the whole run
  std::atomic<uint64_t> committed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> window_end{0};
  std::atomic<bool> exhausted{false};
};

struct Mop {
  bool append;
  uint64_t key;
};

}  // namespace

Result<ListAppendTable> SetupListAppend(Cluster& cluster, const ListAppendOptions& o) {
  if (o.max_appends < 1 || o.mops_max < 1 || o.window < 1 || o.keys < 2 * o.window) {
    return InvalidArgument("list-append options out of range");
  }
  // User mode: two rows per key, and room for slots claimed by inserts that then aborted.
  const uint64_t rows = o.user ? 4 * o.keys : o.keys;
  Result<uint16_t> t = cluster.CreateTable(
      TableOptions{.name = "lists", .value_bytes = ValueBytes(o), .capacity = rows});
  if (!t.ok()) return t.status();
  ListAppendTable out{.table = *t, .proc = 0};
  const bool user = o.user;
  Status s = cluster.Load(*t, user ? o.keys / 2 : o.keys,
                          [user](uint64_t i, uint64_t* key, std::span<std::byte>) {
                            *key = user ? LiveRow(2 * i) : i;  // value all zero: an empty list
                          });
  if (!s.ok()) return s;
  if (user) {
    const uint16_t table = *t;
    const uint32_t max = o.max_appends;
    out.proc = cluster.RegisterProcedure(
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
  return out;
}

namespace {

// What one client needs to run and record its transactions.
struct Client {
  Session& s;
  const ListAppendTable& table;
  const ListAppendOptions& o;
  check::Recorder& recorder;
  Shared& shared;
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
      t.AddRW(c.table.table, m.key);
    } else {
      t.AddRO(c.table.table, m.key);
    }
  }
  Status st = co_await t.Execute();
  if (!st.ok()) co_return st;
  std::vector<std::byte> value(ValueBytes(c.o));
  for (auto& m : mops) {
    Result<std::span<const std::byte>> v = t.Read(c.table.table, m.key);
    POND_CHECK_MSG(v.ok(), v.status().ToString().c_str());
    std::vector<uint64_t> list = DecodeList(*v);
    if (!m.append || list.size() >= c.o.max_appends) {
      if (list.size() >= c.o.max_appends) log->full.push_back(m.key);
      log->mops.push_back(LoggedMop{.append = false, .key = m.key, .element = 0, .list = list});
      continue;
    }
    uint64_t e = c.shared.next_element.fetch_add(1);
    list.push_back(e);
    EncodeList(list, &value);
    Status ws = t.Write(c.table.table, m.key, value);
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
        c.table.proc, args,
        RouteHint{.kind = kind, .table = c.table.table, .first_key = LiveRow(plan.mops[0].key)});
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
          co_return co_await RunPlan(t, c.table.table, o.max_appends, plan,
                                     &attempts.back().second);
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
  Status st = co_await RunPlan(t, c.table.table, o.max_appends, plan, &log);
  if (st.ok()) st = co_await t.Commit();
  Record(c, invoke, log, st.ok(), s.clock().NowNs());
  *full = log.full;
  co_return st.ok();
}

Plan DrawPlan(Rng& rng, const Zipf& zipf, uint64_t base, const ListAppendOptions& o,
              Shared& shared) {
  Plan p;
  p.read_only = rng.Chance(o.read_only_fraction);
  p.upfront = rng.Chance(o.upfront_fraction);
  p.promote = p.upfront && rng.Chance(o.promote_fraction);
  uint32_t count = 1 + static_cast<uint32_t>(rng.Uniform(o.mops_max));
  for (uint32_t i = 0; i < count; i++) {
    PlanMop m;
    m.key = base + zipf.Next(rng);
    if (!p.read_only && rng.Chance(0.5)) {
      m.kind = rng.Chance(o.delete_fraction) ? PlanMop::kDelete : PlanMop::kAppend;
      m.element = shared.next_element.fetch_add(1);
    }
    p.mops.push_back(m);
  }
  return p;
}

}  // namespace

Result<ListAppendResult> RunListAppend(Cluster& cluster, const ListAppendTable& table,
                                       const ListAppendOptions& o, check::Recorder& recorder,
                                       int clients) {
  Shared shared;
  Zipf zipf(o.window, o.theta);
  const int workers = cluster.config().workers_per_cn;
  cluster.Run(clients, [&](Session& s) -> Task<void> {
    Rng rng(o.seed * 1000003 + (uint64_t{s.cn()} << 32) + (uint64_t{s.worker()} << 16) +
            static_cast<uint64_t>(s.client()));
    Client c{s,      table,
             o,      recorder,
             shared, (static_cast<int64_t>(s.cn()) * workers + s.worker()) * clients + s.client()};
    for (uint32_t n = 0; n < o.txns_per_client && !shared.exhausted.load(); n++) {
      uint64_t base = shared.base.load();
      std::vector<Mop> mops;
      Plan plan;
      bool read_only = false;
      if (o.user) {
        plan = DrawPlan(rng, zipf, base, o, shared);
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
      if (o.user) {
        committed = co_await RunUser(c, std::move(plan), &full);
      } else {
        PlanLog log;
        const uint64_t invoke = s.clock().NowNs();
        Status st = co_await RunSimple(c, mops, read_only, &log);
        POND_CHECK_MSG(st.ok() || st.code() == Code::kAborted, st.ToString().c_str());
        committed = st.ok();
        Record(c, invoke, log, committed, s.clock().NowNs());
        full = std::move(log.full);
      }
      if (!committed) {
        shared.failed++;
        continue;
      }
      shared.committed++;
      // Retire full keys: slide the window past them.
      for (uint64_t k : full) {
        uint64_t unit = o.write_skew ? k / 2 : k;
        uint64_t b = shared.base.load();
        while (unit >= b && !shared.base.compare_exchange_weak(b, unit + 1)) {
        }
      }
    }
  });
  if (shared.exhausted) {
    return OutOfSpace("list-append ran past its " + std::to_string(o.keys) +
                      " keys; load more keys");
  }
  return ListAppendResult{shared.committed.load(), shared.failed.load(), shared.window_end.load()};
}

}  // namespace pond::bench
