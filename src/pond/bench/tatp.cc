#include "pond/bench/tatp.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "pond/base/hash.h"
#include "pond/server/service_directory.h"

namespace pond::bench {

namespace {

constexpr uint64_t kSubscribersMax = uint64_t{1} << 40;
constexpr uint64_t kScanBatch = 16;  // subscribers per read-only transaction of the check
constexpr uint32_t kSubBytes = 40, kRowBytes = 24;
constexpr uint64_t kStartTimes[3] = {0, 8, 16};

// Every row's first 8 bytes are its subscriber's id: the check verifies rows name their owner.
// subscriber: s_id, vlr_location, bits. special_facility: s_id, is_active (byte 8), data_a.
// call_forwarding: s_id, end_time, numberx. access_info: s_id, data.
uint64_t CfSub(uint64_t sf_type, uint64_t start_time) { return sf_type * 4 + start_time / 8; }

// Which of the four types a subscriber has (TATP: 1 to 4 distinct types), a fixed function of
// the subscriber so the load needs no table of its own.
bool HasType(uint64_t s, uint64_t salt, uint64_t type) {
  uint64_t n = 1 + Mix64(s * 16 + salt) % 4, first = Mix64(s * 16 + salt + 1) % 4;
  return (type - 1 + 4 - first) % 4 < n;
}
// The call_forwarding rows a special_facility row starts with: 0 to 3 of the start times.
bool HasCf(uint64_t s, uint64_t sf_type, uint64_t start_index) {
  uint64_t n = Mix64(s * 16 + 8 + sf_type) % 4;
  return start_index < n;
}

struct Args {
  uint64_t s = 0;
  uint64_t type = 0;        // ai_type or sf_type, 1..4
  uint64_t start_time = 0;  // 0, 8 or 16
  uint64_t end_time = 0;    // 1..24
  uint64_t data = 0;        // vlr_location, bit or data_a
};

}  // namespace

// Per worker: declines are booked by the worker that ran the procedure, the rest by the calling
// client's worker.
struct alignas(64) TatpCounters {
  std::atomic<uint64_t> declined{0};
  std::array<std::atomic<uint64_t>, kTatpTxnCount> by_txn{};
  std::atomic<uint64_t> rows{0};
};

namespace {

std::array<std::byte, kRowBytes> Row(uint64_t a, uint64_t b, uint64_t c) {
  std::array<std::byte, kRowBytes> v{};
  std::memcpy(v.data(), &a, 8);
  std::memcpy(v.data() + 8, &b, 8);
  std::memcpy(v.data() + 16, &c, 8);
  return v;
}

uint64_t Word(std::span<const std::byte> v, int i) {
  uint64_t x;
  std::memcpy(&x, v.data() + 8 * i, 8);
  return x;
}

// TATP's non-uniform subscriber draw: NURand(A, 1, N) with A by the table size.
uint64_t DrawSubscriber(Rng& rng, uint64_t n) {
  uint64_t a = n <= 1'000'000 ? 65535 : n <= 10'000'000 ? 1048575 : 2097151;
  return (rng.Uniform(a + 1) | rng.Uniform(n)) % n;
}

struct TatpCall {
  TatpTxn kind;
  Args a;
  bool ro;
};

// One call as a client draws it.
TatpCall DrawCall(Rng& rng, uint64_t subscribers) {
  TatpCall c;
  c.kind = static_cast<TatpTxn>(DrawFromMix(rng, kTatpMixPct));
  c.a.s = DrawSubscriber(rng, subscribers);
  c.a.type = 1 + rng.Uniform(4);
  c.a.start_time = kStartTimes[rng.Uniform(3)];
  c.a.end_time = 1 + rng.Uniform(24);
  c.a.data = rng.Next();
  c.ro = c.kind == TatpTxn::kGetSubscriberData || c.kind == TatpTxn::kGetNewDestination ||
         c.kind == TatpTxn::kGetAccessData;
  return c;
}

// The served procedures' names, in TatpTxn order.
constexpr std::array<const char*, kTatpTxnCount> kProcedureNames = {
    "tatp.get_subscriber_data",    "tatp.get_new_destination", "tatp.get_access_data",
    "tatp.update_subscriber_data", "tatp.update_location",     "tatp.insert_call_forwarding",
    "tatp.delete_call_forwarding"};

}  // namespace

TatpWorkload::TatpWorkload(const TatpParams& p) : p_(p) {}
TatpWorkload::~TatpWorkload() = default;

Status TatpWorkload::Validate(const RunOptions& o) const {
  if (o.record) return InvalidArgument("the TATP workload records no history");
  if (p_.subscribers < 1 || p_.subscribers > kSubscribersMax)
    return InvalidArgument("--subscribers must be 1 to 2^40");
  return Status::Ok();
}

std::string TatpWorkload::Settings() const { return fmt::format("{} subscribers", p_.subscribers); }

nlohmann::json TatpWorkload::SettingsJson() const { return {{"subscribers", p_.subscribers}}; }

namespace {

// Subscriber, access_info, special_facility and call_forwarding, for `n` subscribers of whom the
// load gives `ai` access_info and `sf` special_facility rows.
std::vector<TableNeed> TatpTables(uint64_t n, uint64_t ai, uint64_t sf) {
  // The load puts 3.75 call_forwarding rows per subscriber on average, and inserts and deletes
  // of random rows keep it there (each possible row is present half the time); room for every
  // possible row (12 per subscriber) would make the index of a 100 000-subscriber run overflow a
  // 1 GiB MN. 6 per subscriber, or all 12 for small runs, where chance swings are large. A full
  // table would fail the run loudly (OutOfSpace), not silently.
  const uint64_t cf = std::min(12 * n, 6 * n + 4096);
  return {
      {{.name = "subscriber", .value_bytes = kSubBytes, .capacity = n, .critical_field = true}, n},
      {{.name = "access_info", .value_bytes = kRowBytes, .capacity = ai, .critical_field = true},
       ai},
      {{.name = "special_facility",
        .value_bytes = kRowBytes,
        .capacity = sf,
        .critical_field = true},
       sf},
      {{.name = "call_forwarding",
        .value_bytes = kRowBytes,
        .capacity = cf,
        .critical_field = true},
       cf},
  };
}

// The access_info and special_facility rows the load gives `n` subscribers.
std::pair<uint64_t, uint64_t> TatpLoadedRows(uint64_t n) {
  uint64_t ai = 0, sf = 0;
  for (uint64_t s = 0; s < n; s++) {
    for (uint64_t t = 1; t <= 4; t++) {
      ai += HasType(s, 0, t) ? 1 : 0;
      sf += HasType(s, 4, t) ? 1 : 0;
    }
  }
  return {ai, sf};
}

}  // namespace

std::vector<TableNeed> TatpWorkload::ServedTables() const {
  const auto [ai, sf] = TatpLoadedRows(p_.subscribers);
  return TatpTables(p_.subscribers, ai, sf);
}

Status TatpWorkload::Setup(Cluster& cluster, RunContext& ctx) {
  const uint64_t n = p_.subscribers;
  // The rows of the other tables, listed first: Load wants a count and an index, and
  // access_info and special_facility (never inserted into) are sized to exactly their rows.
  std::vector<uint64_t> ai, sf, cf;  // (s, sub) packed as keys
  for (uint64_t s = 0; s < n; s++) {
    for (uint64_t t = 1; t <= 4; t++) {
      if (HasType(s, 0, t)) ai.push_back(TatpKey(s, t));
      if (HasType(s, 4, t)) {
        sf.push_back(TatpKey(s, t));
        for (uint64_t k = 0; k < 3; k++) {
          if (HasCf(s, t, k)) cf.push_back(TatpKey(s, CfSub(t, kStartTimes[k])));
        }
      }
    }
  }
  const std::vector<TableNeed> specs = TatpTables(n, ai.size(), sf.size());
  uint16_t tid[4];
  for (int i = 0; i < 4; i++) {
    Result<uint16_t> t = cluster.CreateTable(specs[static_cast<size_t>(i)].options);
    if (!t.ok()) return t.status();
    tid[i] = *t;
    capacities_[static_cast<size_t>(i)] = specs[static_cast<size_t>(i)].options.capacity;
  }
  const uint16_t tsub = tsub_ = tid[0], tai = tai_ = tid[1], tsf = tsf_ = tid[2],
                 tcf = tcf_ = tid[3];

  POND_RETURN_IF_ERROR(cluster.Load(tsub, n, [](uint64_t s, uint64_t* key, std::span<std::byte> v) {
    *key = TatpKey(s, 0);
    uint64_t words[3] = {s, Mix64(s) & 0xffffffff, Mix64(s + 1)};
    std::memcpy(v.data(), words, sizeof(words));
  }));
  auto load = [&](uint16_t table, const std::vector<uint64_t>& keys, bool facility) {
    return cluster.Load(
        table, keys.size(), [&keys, facility](uint64_t i, uint64_t* key, std::span<std::byte> v) {
          *key = keys[i];
          uint64_t s = keys[i] >> 20;
          // is_active: 85% of special facilities (TATP).
          uint64_t second =
              facility ? (Mix64(keys[i]) % 100 < 85 ? 1 : 0) : 1 + Mix64(keys[i]) % 24;
          auto row = Row(s, second, Mix64(keys[i] + 1));
          std::memcpy(v.data(), row.data(), row.size());
        });
  };
  POND_RETURN_IF_ERROR(load(tai, ai, false));
  POND_RETURN_IF_ERROR(load(tsf, sf, true));
  POND_RETURN_IF_ERROR(load(tcf, cf, false));
  rows_loaded_ = n + ai.size() + sf.size() + cf.size();
  counters_ = std::vector<TatpCounters>(ctx.workers());

  RunContext* c = &ctx;
  std::vector<TatpCounters>* counters = &counters_;
  // Commits; a declined transaction (committed without effect) is booked on this worker.
  auto finish = [c, counters](Session& s, Txn& t, bool declined) -> Task<Status> {
    Status st = co_await t.Commit();
    if (st.ok() && declined) {
      (*counters)[c->Worker(s)].declined.fetch_add(1, std::memory_order_relaxed);
    }
    co_return st;
  };
  // A read whose row may be absent: NotFound is an answer, anything else an error.
  auto absent_ok = [](const Result<std::span<const std::byte>>& r) {
    return r.ok() || r.status().code() == Code::kNotFound;
  };
  // Registers a procedure: reads its arguments, opens a transaction of `kind` and runs `body`.
  procs_.clear();
  auto add = [&](TxnKind kind, std::function<Task<Status>(Session&, Txn&, const Args&)> body) {
    procs_.push_back(
        cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
          Args a;
          std::memcpy(&a, args.data(), sizeof(a));
          Txn t = s.Begin(kind);
          co_return co_await body(s, t, a);
        }));
  };

  // Registered in TatpTxn order.
  // GetSubscriberData: the subscriber's row, which must name it.
  add(TxnKind::kReadOnly, [=](Session& s, Txn& t, const Args& a) -> Task<Status> {
    t.AddRO(tsub, TatpKey(a.s, 0));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    Result<std::span<const std::byte>> v = t.Read(tsub, TatpKey(a.s, 0));
    if (!v.ok()) co_return v.status();
    if (Word(*v, 0) != a.s) co_return Internal("subscriber row names another subscriber");
    co_return co_await finish(s, t, false);
  });
  // GetNewDestination: the facility and its forwardings that start by start_time.
  add(TxnKind::kReadOnly, [=](Session& s, Txn& t, const Args& a) -> Task<Status> {
    t.AddRO(tsf, TatpKey(a.s, a.type));
    for (uint64_t st : kStartTimes) {
      if (st <= a.start_time) t.AddRO(tcf, TatpKey(a.s, CfSub(a.type, st)));
    }
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    if (!absent_ok(t.Read(tsf, TatpKey(a.s, a.type)))) co_return Internal("facility read failed");
    for (uint64_t st : kStartTimes) {
      if (st <= a.start_time && !absent_ok(t.Read(tcf, TatpKey(a.s, CfSub(a.type, st))))) {
        co_return Internal("forwarding read failed");
      }
    }
    co_return co_await finish(s, t, false);
  });
  // GetAccessData.
  add(TxnKind::kReadOnly, [=](Session& s, Txn& t, const Args& a) -> Task<Status> {
    t.AddRO(tai, TatpKey(a.s, a.type));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    if (!absent_ok(t.Read(tai, TatpKey(a.s, a.type)))) co_return Internal("access read failed");
    co_return co_await finish(s, t, false);
  });
  // UpdateSubscriberData: a bit of the subscriber and data_a of one facility; declined (nothing
  // written) if the subscriber lacks that facility, as TATP's rollback.
  add(TxnKind::kReadWrite, [=](Session& s, Txn& t, const Args& a) -> Task<Status> {
    t.AddRW(tsub, TatpKey(a.s, 0));
    t.AddRW(tsf, TatpKey(a.s, a.type));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    Result<std::span<const std::byte>> sub = t.Read(tsub, TatpKey(a.s, 0));
    if (!sub.ok()) co_return sub.status();
    Result<std::span<const std::byte>> sfr = t.Read(tsf, TatpKey(a.s, a.type));
    if (!sfr.ok()) {
      if (sfr.status().code() != Code::kNotFound) co_return sfr.status();
      co_return co_await finish(s, t, true);
    }
    std::array<std::byte, kSubBytes> nsub;
    std::memcpy(nsub.data(), sub->data(), kSubBytes);
    uint64_t bits = Word(*sub, 2);
    bits = (bits & ~uint64_t{1}) | (a.data & 1);
    std::memcpy(nsub.data() + 16, &bits, 8);
    POND_CO_RETURN_IF_ERROR(t.Write(tsub, TatpKey(a.s, 0), nsub));
    POND_CO_RETURN_IF_ERROR(
        t.Write(tsf, TatpKey(a.s, a.type), Row(Word(*sfr, 0), Word(*sfr, 1), a.data)));
    co_return co_await finish(s, t, false);
  });
  // UpdateLocation: the subscriber's vlr_location.
  add(TxnKind::kReadWrite, [=](Session& s, Txn& t, const Args& a) -> Task<Status> {
    t.AddRW(tsub, TatpKey(a.s, 0));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    Result<std::span<const std::byte>> sub = t.Read(tsub, TatpKey(a.s, 0));
    if (!sub.ok()) co_return sub.status();
    std::array<std::byte, kSubBytes> nsub;
    std::memcpy(nsub.data(), sub->data(), kSubBytes);
    std::memcpy(nsub.data() + 8, &a.data, 8);
    POND_CO_RETURN_IF_ERROR(t.Write(tsub, TatpKey(a.s, 0), nsub));
    co_return co_await finish(s, t, false);
  });
  // InsertCallForwarding: reads the subscriber and the facility, then inserts the forwarding;
  // declined without the facility. A present row fails the insert with kAlreadyExists, which
  // the caller counts as declined.
  add(TxnKind::kReadWrite, [=](Session& s, Txn& t, const Args& a) -> Task<Status> {
    t.AddRO(tsub, TatpKey(a.s, 0));
    t.AddRO(tsf, TatpKey(a.s, a.type));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    Result<std::span<const std::byte>> sfr = t.Read(tsf, TatpKey(a.s, a.type));
    if (!sfr.ok()) {
      if (sfr.status().code() != Code::kNotFound) co_return sfr.status();
      co_return co_await finish(s, t, true);
    }
    t.Insert(tcf, TatpKey(a.s, CfSub(a.type, a.start_time)), Row(a.s, a.end_time, a.data));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    co_return co_await finish(s, t, false);
  });
  // DeleteCallForwarding: reads the subscriber, deletes the forwarding (a no-op if absent).
  add(TxnKind::kReadWrite, [=](Session& s, Txn& t, const Args& a) -> Task<Status> {
    t.AddRO(tsub, TatpKey(a.s, 0));
    t.Delete(tcf, TatpKey(a.s, CfSub(a.type, a.start_time)));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    co_return co_await finish(s, t, false);
  });
  return Status::Ok();
}

Task<void> TatpWorkload::RunClient(Session& s, RunContext& ctx) {
  TatpCounters& me = counters_[ctx.Worker(s)];
  Rng& rng = s.rng();
  while (ctx.NextCall(s)) {
    const TatpCall c = DrawCall(rng, p_.subscribers);
    const TatpTxn kind = c.kind;
    const Args& a = c.a;
    const bool ro = c.ro;
    RouteHint hint{ro ? TxnKind::kReadOnly : TxnKind::kReadWrite, tsub_, TatpKey(a.s, 0)};
    uint64_t t0 = s.clock().NowNs();
    Status st =
        co_await s.Call(procs_[static_cast<size_t>(kind)], std::as_bytes(std::span(&a, 1)), hint);
    uint64_t t1 = s.clock().NowNs();
    if (st.code() == Code::kAlreadyExists) {
      // TATP expects this failure of InsertCallForwarding: nothing was written.
      me.declined.fetch_add(1, std::memory_order_relaxed);
      ctx.Publish(t1);
      continue;
    }
    if (!ctx.Book(s, st, t0, t1, !ro)) break;
    if (st.ok()) me.by_txn[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
  }
}

Status TatpWorkload::Finish(Cluster& cluster, RunContext& ctx, RunResult* r) {
  // The referential check: every client reads every possible row of a stride of subscribers.
  const uint64_t n = p_.subscribers;
  const uint64_t clients = ctx.clients();
  const uint64_t batches = (n + kScanBatch - 1) / kScanBatch;
  std::atomic<bool> failed{false};
  std::mutex detail_mu;
  std::string detail;  // guarded by detail_mu: why the check failed
  cluster.Run(ctx.options().coros, [&](Session& s) -> Task<void> {
    TatpCounters& me = counters_[ctx.Worker(s)];
    const uint64_t self = ctx.Client(s);
    for (uint64_t b = self; b < batches && !failed; b += clients) {
      const uint64_t lo = b * kScanBatch, hi = std::min(n, lo + kScanBatch);
      uint64_t rows = 0;
      std::string bad;
      Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
        for (uint64_t x = lo; x < hi; x++) {
          t.AddRO(tsub_, TatpKey(x, 0));
          for (uint64_t ty = 1; ty <= 4; ty++) {
            t.AddRO(tai_, TatpKey(x, ty));
            t.AddRO(tsf_, TatpKey(x, ty));
            for (uint64_t k : kStartTimes) t.AddRO(tcf_, TatpKey(x, CfSub(ty, k)));
          }
        }
        POND_CO_RETURN_IF_ERROR(co_await t.Execute());
        rows = 0;
        bad.clear();
        // Present: the row exists; its first word must be its subscriber's id.
        auto present = [&](uint16_t table, uint64_t key, uint64_t x, const char* what) -> bool {
          Result<std::span<const std::byte>> row = t.Read(table, key);
          if (!row.ok()) {
            if (row.status().code() != Code::kNotFound && bad.empty()) {
              bad = std::string(what) + " read failed: " + row.status().ToString();
            }
            return false;
          }
          rows++;
          if (Word(*row, 0) != x && bad.empty()) {
            bad = fmt::format("{} row {:#x} names subscriber {}, not {}", what, key, Word(*row, 0),
                              x);
          }
          return true;
        };
        for (uint64_t x = lo; x < hi; x++) {
          if (!present(tsub_, TatpKey(x, 0), x, "subscriber") && bad.empty()) {
            bad = fmt::format("subscriber {} is missing", x);
          }
          for (uint64_t ty = 1; ty <= 4; ty++) {
            present(tai_, TatpKey(x, ty), x, "access_info");
            bool has_sf = present(tsf_, TatpKey(x, ty), x, "special_facility");
            for (uint64_t k : kStartTimes) {
              bool has_cf = present(tcf_, TatpKey(x, CfSub(ty, k)), x, "call_forwarding");
              if (has_cf && !has_sf && bad.empty()) {
                bad = fmt::format("call_forwarding ({}, {}, {}) has no special_facility ({}, {})",
                                  x, ty, k, x, ty);
              }
            }
          }
        }
        co_return Status::Ok();
      });
      if (!st.ok() || !bad.empty()) {
        failed = true;
        std::lock_guard lock(detail_mu);
        if (detail.empty()) detail = !st.ok() ? "check read failed: " + st.ToString() : bad;
        break;
      }
      me.rows.fetch_add(rows, std::memory_order_relaxed);
    }
  });

  uint64_t declined = 0, rows_after = 0;
  std::array<uint64_t, kTatpTxnCount> by_txn{};
  for (TatpCounters& c : counters_) {
    declined += c.declined.load();
    for (size_t k = 0; k < c.by_txn.size(); k++) by_txn[k] += c.by_txn[k].load();
    rows_after += c.rows.load();
  }
  r->loaded = fmt::format("{} subscribers ({} rows)", n, rows_loaded_);
  r->declined = declined;
  for (int k = 0; k < kTatpTxnCount; k++) {
    r->committed_by_txn.emplace_back(kTatpTxnNames[static_cast<size_t>(k)],
                                     by_txn[static_cast<size_t>(k)]);
  }
  WorkloadCheck check;
  check.name = "referential check";
  check.label = "ref. check";
  check.json_key = "referential_check";
  check.ok = !failed;
  check.detail = failed ? detail : "";
  check.summary = fmt::format("{} rows after the run ({} loaded)", rows_after, rows_loaded_);
  check.brief = fmt::format("{} rows after the run, {} loaded", rows_after, rows_loaded_);
  check.json = {{"ok", check.ok},
                {"rows_loaded", rows_loaded_},
                {"rows_after", rows_after},
                {"detail", check.detail}};
  r->check = std::move(check);
  return Status::Ok();
}

}  // namespace pond::bench

namespace pond::bench {

Status TatpWorkload::Serve(Cluster& cluster, server::ServiceDirectory* dir) {
  RunContext& ctx = ServingContext(cluster);
  POND_RETURN_IF_ERROR(Validate(ctx.options()));
  POND_RETURN_IF_ERROR(Setup(cluster, ctx));
  const uint64_t n = p_.subscribers;
  POND_RETURN_IF_ERROR(dir->AddTable({"subscriber", tsub_, kSubBytes, capacities_[0]}));
  POND_RETURN_IF_ERROR(dir->AddTable({"access_info", tai_, kRowBytes, capacities_[1]}));
  POND_RETURN_IF_ERROR(dir->AddTable({"special_facility", tsf_, kRowBytes, capacities_[2]}));
  POND_RETURN_IF_ERROR(dir->AddTable({"call_forwarding", tcf_, kRowBytes, capacities_[3]}));
  for (int k = 0; k < kTatpTxnCount; k++) {
    const auto kind = static_cast<TatpTxn>(k);
    const bool ro = k <= static_cast<int>(TatpTxn::kGetAccessData);
    const uint16_t tsub = tsub_;
    POND_RETURN_IF_ERROR(dir->AddProcedure(
        {kProcedureNames[static_cast<size_t>(k)], procs_[static_cast<size_t>(k)], sizeof(Args), ro,
         [kind, ro, n, tsub](std::span<const std::byte> args) -> Result<RouteHint> {
           Args a;
           std::memcpy(&a, args.data(), sizeof(a));
           if (a.s >= n)
             return InvalidArgument(fmt::format("subscriber {} is not below {}", a.s, n));
           if (a.type < 1 || a.type > 4) return InvalidArgument("type must be 1 to 4");
           if (a.start_time != 0 && a.start_time != 8 && a.start_time != 16) {
             return InvalidArgument("start_time must be 0, 8 or 16");
           }
           if (kind == TatpTxn::kInsertCallForwarding && (a.end_time < 1 || a.end_time > 24)) {
             return InvalidArgument("end_time must be 1 to 24");
           }
           return RouteHint{ro ? TxnKind::kReadOnly : TxnKind::kReadWrite, tsub, TatpKey(a.s, 0)};
         }}));
  }
  return Status::Ok();
}

namespace {

class TatpRemote final : public RemoteDriver {
 public:
  explicit TatpRemote(const TatpParams& p) : p_(p) {}
  std::string Settings() const override {
    return fmt::format("{} subscribers (the server's)", p_.subscribers);
  }
  std::vector<std::string> TxnNames() const override {
    return {kTatpTxnNames.begin(), kTatpTxnNames.end()};
  }
  Status Start(const RemoteStore&) override { return Status::Ok(); }
  RemoteCall Next(Rng& rng, uint64_t, uint64_t) override {
    const TatpCall c = DrawCall(rng, p_.subscribers);
    RemoteCall call{static_cast<size_t>(c.kind), kProcedureNames[static_cast<size_t>(c.kind)],
                    std::string(reinterpret_cast<const char*>(&c.a), sizeof(c.a)), !c.ro};
    if (!c.ro) call.route_key = TatpKey(c.a.s, 0);  // where Serve's route sends it
    return call;
  }
  bool Book(const RemoteCall& call, RemoteOutcome outcome, std::string_view) override {
    if (outcome == RemoteOutcome::kDuplicateKey &&
        call.kind == static_cast<size_t>(TatpTxn::kInsertCallForwarding)) {
      // TATP expects this failure of InsertCallForwarding: nothing was written.
      declined_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (outcome == RemoteOutcome::kCommitted) by_txn_[call.kind].fetch_add(1);
    return true;
  }
  // The referential check reads the store whole; a remote run leaves it to `pond bench tatp`.
  Status Finish(const RemoteStore&, RunResult* r) override {
    r->loaded = fmt::format("{} subscribers, served", p_.subscribers);
    r->declined = declined_.load();
    for (int k = 0; k < kTatpTxnCount; k++) {
      r->committed_by_txn.emplace_back(kTatpTxnNames[static_cast<size_t>(k)],
                                       by_txn_[static_cast<size_t>(k)].load());
    }
    return Status::Ok();
  }

 private:
  const TatpParams p_;
  std::array<std::atomic<uint64_t>, kTatpTxnCount> by_txn_{};
  std::atomic<uint64_t> declined_{0};
};

}  // namespace

Result<std::unique_ptr<RemoteDriver>> TatpWorkload::Remote(
    const std::vector<RemoteTable>& tables) const {
  Result<RemoteTable> sub = FindRemoteTable(tables, "subscriber", kSubBytes);
  if (!sub.ok()) return sub.status();
  for (const char* t : {"access_info", "special_facility", "call_forwarding"}) {
    if (Result<RemoteTable> other = FindRemoteTable(tables, t, kRowBytes); !other.ok()) {
      return other.status();
    }
  }
  TatpParams p = p_;
  p.subscribers = sub->capacity;
  POND_RETURN_IF_ERROR(TatpWorkload(p).Validate(RunOptions{}));
  return std::unique_ptr<RemoteDriver>(std::make_unique<TatpRemote>(p));
}

}  // namespace pond::bench
