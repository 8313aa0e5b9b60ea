#include "pond/bench/tatp.h"
#include "pond/bench/report.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "pond/base/hash.h"
#include "pond/bench/build_info.h"
#include "pond/runtime/clocks.h"

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

struct alignas(64) WorkerCounters {
  std::atomic<uint64_t> declined{0};
  std::array<std::atomic<uint64_t>, kTatpTxnCount> by_txn{};
  std::atomic<uint64_t> rows{0};
};

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

TatpTxn DrawTxn(Rng& rng) {
  int x = static_cast<int>(rng.Uniform(100));
  for (int i = 0; i < kTatpTxnCount; i++) {
    if (x < kTatpMixPct[static_cast<size_t>(i)]) return static_cast<TatpTxn>(i);
    x -= kTatpMixPct[static_cast<size_t>(i)];
  }
  return TatpTxn::kDeleteCallForwarding;
}

}  // namespace

const char* TatpTxnName(TatpTxn t) {
  switch (t) {
    case TatpTxn::kGetSubscriberData:
      return "GetSubscriberData";
    case TatpTxn::kGetNewDestination:
      return "GetNewDestination";
    case TatpTxn::kGetAccessData:
      return "GetAccessData";
    case TatpTxn::kUpdateSubscriberData:
      return "UpdateSubscriberData";
    case TatpTxn::kUpdateLocation:
      return "UpdateLocation";
    case TatpTxn::kInsertCallForwarding:
      return "InsertCallForwarding";
    case TatpTxn::kDeleteCallForwarding:
      return "DeleteCallForwarding";
  }
  return "?";
}

Status ValidateTatpOptions(const TatpOptions& o) {
  POND_RETURN_IF_ERROR(ValidateConfig(o.cluster));
  if (o.coros < 1 || o.coros > 256) return InvalidArgument("--coros must be 1 to 256");
  if (o.subscribers < 1 || o.subscribers > kSubscribersMax)
    return InvalidArgument("--subscribers must be 1 to 2^40");
  if (!(o.seconds > 0) || o.seconds > 86400)
    return InvalidArgument("--seconds must be in (0, 86400]");
  return Status::Ok();
}

Result<TatpResult> RunTatp(const TatpOptions& o,
                           const std::function<void(const KvsProgress&)>& progress) {
  POND_RETURN_IF_ERROR(ValidateTatpOptions(o));
  auto started = o.sim ? Cluster::StartSimulated(o.cluster, *o.sim) : Cluster::Start(o.cluster);
  if (!started.ok()) return started.status();
  Cluster& cluster = **started;
  const uint64_t n = o.subscribers;
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
  uint16_t tid[4];
  const TableOptions specs[4] = {
      {.name = "subscriber", .value_bytes = kSubBytes, .capacity = n, .critical_field = true},
      {.name = "access_info",
       .value_bytes = kRowBytes,
       .capacity = ai.size(),
       .critical_field = true},
      {.name = "special_facility",
       .value_bytes = kRowBytes,
       .capacity = sf.size(),
       .critical_field = true},
      // The load puts 3.75 rows per subscriber on average, and inserts and deletes of random
      // rows keep it there (each possible row is present half the time); room for every
      // possible row (12 per subscriber) would make the index of a 100 000-subscriber run
      // overflow a 1 GiB MN. 6 per subscriber, or all 12 for small runs, where chance swings
      // are large. A full table would fail the run loudly (OutOfSpace), not silently.
      {.name = "call_forwarding",
       .value_bytes = kRowBytes,
       .capacity = std::min(12 * n, 6 * n + 4096),
       .critical_field = true},
  };
  for (int i = 0; i < 4; i++) {
    Result<uint16_t> t = cluster.CreateTable(specs[i]);
    if (!t.ok()) return t.status();
    tid[i] = *t;
  }
  const uint16_t tsub = tid[0], tai = tid[1], tsf = tid[2], tcf = tid[3];

  TatpResult result;
  Clock& wall = SystemClock::Get();
  uint64_t load_start = wall.NowNs();
  {
    Status loaded = cluster.Load(tsub, n, [](uint64_t s, uint64_t* key, std::span<std::byte> v) {
      *key = TatpKey(s, 0);
      uint64_t words[3] = {s, Mix64(s) & 0xffffffff, Mix64(s + 1)};
      std::memcpy(v.data(), words, sizeof(words));
    });
    if (!loaded.ok()) return loaded;
    result.rows_loaded += n;
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
    result.rows_loaded += ai.size() + sf.size() + cf.size();
  }
  result.load_s = static_cast<double>(wall.NowNs() - load_start) / 1e9;

  const int workers = o.cluster.cns * o.cluster.workers_per_cn;
  std::vector<WorkerCounters> counters(static_cast<size_t>(workers));
  const int wpc = o.cluster.workers_per_cn;
  auto mine = [&counters, wpc](Session& s) -> WorkerCounters& {
    return counters[static_cast<size_t>(s.cn() * wpc + s.worker())];
  };
  auto args_of = [](std::span<const std::byte> args) {
    Args a;
    std::memcpy(&a, args.data(), sizeof(a));
    return a;
  };
  // Commits; a declined transaction (committed without effect) is booked on this worker.
  auto finish = [mine](Session& s, Txn& t, bool declined) -> Task<Status> {
    Status st = co_await t.Commit();
    if (st.ok() && declined) mine(s).declined.fetch_add(1, std::memory_order_relaxed);
    co_return st;
  };
  // A read whose row may be absent: NotFound is an answer, anything else an error.
  auto absent_ok = [](const Result<std::span<const std::byte>>& r) {
    return r.ok() || r.status().code() == Code::kNotFound;
  };

  // Registered in TatpTxn order.
  // GetSubscriberData: the subscriber's row, which must name it.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    Txn t = s.Begin(TxnKind::kReadOnly);
    t.AddRO(tsub, TatpKey(a.s, 0));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    Result<std::span<const std::byte>> v = t.Read(tsub, TatpKey(a.s, 0));
    if (!v.ok()) co_return v.status();
    if (Word(*v, 0) != a.s) co_return Internal("subscriber row names another subscriber");
    co_return co_await finish(s, t, false);
  });
  // GetNewDestination: the facility and its forwardings that start by start_time.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    Txn t = s.Begin(TxnKind::kReadOnly);
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
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    Txn t = s.Begin(TxnKind::kReadOnly);
    t.AddRO(tai, TatpKey(a.s, a.type));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    if (!absent_ok(t.Read(tai, TatpKey(a.s, a.type)))) co_return Internal("access read failed");
    co_return co_await finish(s, t, false);
  });
  // UpdateSubscriberData: a bit of the subscriber and data_a of one facility; declined (nothing
  // written) if the subscriber lacks that facility, as TATP's rollback.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    Txn t = s.Begin(TxnKind::kReadWrite);
    t.AddRW(tsub, TatpKey(a.s, 0));
    t.AddRW(tsf, TatpKey(a.s, a.type));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    Result<std::span<const std::byte>> sub = t.Read(tsub, TatpKey(a.s, 0));
    if (!sub.ok()) co_return sub.status();
    Result<std::span<const std::byte>> sf = t.Read(tsf, TatpKey(a.s, a.type));
    if (!sf.ok()) {
      if (sf.status().code() != Code::kNotFound) co_return sf.status();
      co_return co_await finish(s, t, true);
    }
    std::array<std::byte, kSubBytes> nsub;
    std::memcpy(nsub.data(), sub->data(), kSubBytes);
    uint64_t bits = Word(*sub, 2);
    bits = (bits & ~uint64_t{1}) | (a.data & 1);
    std::memcpy(nsub.data() + 16, &bits, 8);
    POND_CO_RETURN_IF_ERROR(t.Write(tsub, TatpKey(a.s, 0), nsub));
    POND_CO_RETURN_IF_ERROR(
        t.Write(tsf, TatpKey(a.s, a.type), Row(Word(*sf, 0), Word(*sf, 1), a.data)));
    co_return co_await finish(s, t, false);
  });
  // UpdateLocation: the subscriber's vlr_location.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    Txn t = s.Begin(TxnKind::kReadWrite);
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
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    Txn t = s.Begin(TxnKind::kReadWrite);
    t.AddRO(tsub, TatpKey(a.s, 0));
    t.AddRO(tsf, TatpKey(a.s, a.type));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    Result<std::span<const std::byte>> sf = t.Read(tsf, TatpKey(a.s, a.type));
    if (!sf.ok()) {
      if (sf.status().code() != Code::kNotFound) co_return sf.status();
      co_return co_await finish(s, t, true);
    }
    t.Insert(tcf, TatpKey(a.s, CfSub(a.type, a.start_time)), Row(a.s, a.end_time, a.data));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    co_return co_await finish(s, t, false);
  });
  // DeleteCallForwarding: reads the subscriber, deletes the forwarding (a no-op if absent).
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    Txn t = s.Begin(TxnKind::kReadWrite);
    t.AddRO(tsub, TatpKey(a.s, 0));
    t.Delete(tcf, TatpKey(a.s, CfSub(a.type, a.start_time)));
    POND_CO_RETURN_IF_ERROR(co_await t.Execute());
    co_return co_await finish(s, t, false);
  });

  MeasuredRun run(cluster, o.cluster, o.seconds, progress);
  cluster.Run(o.coros, [&](Session& s) -> Task<void> {
    WorkerCounters& me = mine(s);
    Rng& rng = s.rng();
    while (run.Running(s)) {
      TatpTxn kind = DrawTxn(rng);
      Args a;
      a.s = DrawSubscriber(rng, n);
      a.type = 1 + rng.Uniform(4);
      a.start_time = kStartTimes[rng.Uniform(3)];
      a.end_time = 1 + rng.Uniform(24);
      a.data = rng.Next();
      const bool ro = kind == TatpTxn::kGetSubscriberData || kind == TatpTxn::kGetNewDestination ||
                      kind == TatpTxn::kGetAccessData;
      RouteHint hint{ro ? TxnKind::kReadOnly : TxnKind::kReadWrite, tsub, TatpKey(a.s, 0)};
      uint64_t t0 = s.clock().NowNs();
      Status st =
          co_await s.Call(static_cast<ProcedureId>(kind), std::as_bytes(std::span(&a, 1)), hint);
      uint64_t t1 = s.clock().NowNs();
      if (st.code() == Code::kAlreadyExists) {
        // TATP expects this failure of InsertCallForwarding: nothing was written.
        me.declined.fetch_add(1, std::memory_order_relaxed);
        run.Publish(t1);
        continue;
      }
      if (!run.Book(s, st, t0, t1, !ro)) break;
      if (st.ok()) me.by_txn[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
    }
  });
  if (Status st = run.Finish(&result); !st.ok()) {
    return Internal("a TATP transaction failed unexpectedly: " + st.ToString());
  }

  // The referential check: every client reads every possible row of a stride of subscribers.
  const uint64_t clients = static_cast<uint64_t>(workers) * static_cast<uint64_t>(o.coros);
  const uint64_t batches = (n + kScanBatch - 1) / kScanBatch;
  std::atomic<bool> failed{false};
  std::mutex detail_mu;
  std::string detail;  // guarded by detail_mu: why the check failed
  cluster.Run(o.coros, [&](Session& s) -> Task<void> {
    WorkerCounters& me = mine(s);
    const uint64_t self =
        static_cast<uint64_t>(s.cn() * wpc + s.worker()) * static_cast<uint64_t>(o.coros) +
        static_cast<uint64_t>(s.client());
    for (uint64_t b = self; b < batches && !failed; b += clients) {
      const uint64_t lo = b * kScanBatch, hi = std::min(n, lo + kScanBatch);
      uint64_t rows = 0;
      std::string bad;
      Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
        for (uint64_t x = lo; x < hi; x++) {
          t.AddRO(tsub, TatpKey(x, 0));
          for (uint64_t ty = 1; ty <= 4; ty++) {
            t.AddRO(tai, TatpKey(x, ty));
            t.AddRO(tsf, TatpKey(x, ty));
            for (uint64_t k : kStartTimes) t.AddRO(tcf, TatpKey(x, CfSub(ty, k)));
          }
        }
        POND_CO_RETURN_IF_ERROR(co_await t.Execute());
        rows = 0;
        bad.clear();
        // Present: the row exists; its first word must be its subscriber's id.
        auto present = [&](uint16_t table, uint64_t key, uint64_t x, const char* what) -> bool {
          Result<std::span<const std::byte>> r = t.Read(table, key);
          if (!r.ok()) {
            if (r.status().code() != Code::kNotFound && bad.empty()) {
              bad = std::string(what) + " read failed: " + r.status().ToString();
            }
            return false;
          }
          rows++;
          if (Word(*r, 0) != x && bad.empty()) {
            bad =
                fmt::format("{} row {:#x} names subscriber {}, not {}", what, key, Word(*r, 0), x);
          }
          return true;
        };
        for (uint64_t x = lo; x < hi; x++) {
          if (!present(tsub, TatpKey(x, 0), x, "subscriber") && bad.empty()) {
            bad = fmt::format("subscriber {} is missing", x);
          }
          for (uint64_t ty = 1; ty <= 4; ty++) {
            present(tai, TatpKey(x, ty), x, "access_info");
            bool has_sf = present(tsf, TatpKey(x, ty), x, "special_facility");
            for (uint64_t k : kStartTimes) {
              bool has_cf = present(tcf, TatpKey(x, CfSub(ty, k)), x, "call_forwarding");
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

  for (auto& c : counters) {
    result.declined += c.declined.load();
    for (size_t k = 0; k < c.by_txn.size(); k++) result.committed_by_txn[k] += c.by_txn[k].load();
    result.rows_after += c.rows.load();
  }
  if (failed) {
    result.check_detail = detail;
  } else {
    result.check_ok = true;
  }
  return result;
}

std::string TatpResultJson(const TatpOptions& o, const TatpResult& r) {
  nlohmann::json j;
  const ClusterStats& s = r.stats;
  double per_txn = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
  j["bench"] = "tatp";
  j["build_type"] = kBuildType;
  j["transport"] = o.sim ? "sim" : "local";
  j["protocol"] = o.cluster.protocol.name;
  j["settings"] = {{"mns", o.cluster.mns},
                   {"cns", o.cluster.cns},
                   {"workers_per_cn", o.cluster.workers_per_cn},
                   {"coros", o.coros},
                   {"replication", o.cluster.replication},
                   {"versions", o.cluster.versions},
                   {"isolation", IsolationName(o.cluster.isolation)},
                   {"subscribers", o.subscribers},
                   {"seconds", o.seconds},
                   {"seed", o.cluster.seed}};
  nlohmann::json by_txn;
  for (int k = 0; k < kTatpTxnCount; k++) {
    by_txn[TatpTxnName(static_cast<TatpTxn>(k))] = r.committed_by_txn[static_cast<size_t>(k)];
  }
  j["result"] = {
      {"elapsed_s", r.elapsed_s},
      {"committed", r.committed},
      {"committed_rw", r.committed_rw},
      {"committed_by_txn", by_txn},
      {"declined", r.declined},
      {"aborted", r.aborted},
      {"txn_per_sec", r.elapsed_s > 0 ? static_cast<double>(r.committed) / r.elapsed_s : 0.0},
      {"abort_rate", r.committed + r.aborted > 0 ? static_cast<double>(r.aborted) /
                                                       static_cast<double>(r.committed + r.aborted)
                                                 : 0.0},
      {"aborts", AbortsJson(s.aborts)},
      {"latency_ns",
       {{"p50", r.latency_ns.Percentile(0.50)},
        {"p99", r.latency_ns.Percentile(0.99)},
        {"mean", r.latency_ns.Mean()}}},
      {"per_committed_txn",
       {{"read", static_cast<double>(s.reads) * per_txn},
        {"write", static_cast<double>(s.writes) * per_txn},
        {"cas", static_cast<double>(s.cas) * per_txn},
        {"faa", static_cast<double>(s.faa) * per_txn},
        {"messages", static_cast<double>(s.messages) * per_txn}}},
      {"referential_check",
       {{"ok", r.check_ok},
        {"rows_loaded", r.rows_loaded},
        {"rows_after", r.rows_after},
        {"detail", r.check_detail}}},
      {"load_s", r.load_s},
      {"wall_s", r.wall_s}};
  if (r.sim) {
    j["simulation"] = {{"virtual_s", r.elapsed_s},
                       {"events", r.sim->events},
                       {"mn_nics", NicsJson(*r.sim, r.elapsed_s * 1e9)}};
  }
  return j.dump(2) + "\n";
}

}  // namespace pond::bench
