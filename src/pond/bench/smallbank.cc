#include "pond/bench/smallbank.h"
#include "pond/bench/report.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "pond/base/hash.h"
#include "pond/bench/build_info.h"
#include "pond/bench/smallbank_history.h"
#include "pond/check/recorder.h"
#include "pond/runtime/clocks.h"

namespace pond::bench {

namespace {

// Amounts are whole units (cents); balances are signed because WriteCheck may overdraw.
constexpr int64_t kAmountMax = 100;
// Initial balances: 10 000 to 49 999 units, a fixed function of the account, so the initial
// total needs no bookkeeping during the load.
constexpr int64_t kBalanceMin = 10'000, kBalanceSpread = 40'000;
constexpr uint64_t kAccountsMax = uint64_t{1} << 40;  // the key keeps 12 bits for the shard
// Accounts per read-only transaction of the final scan (two rows each).
constexpr uint64_t kScanBatch = 64;

int64_t InitialBalance(uint64_t account, bool checking) {
  return kBalanceMin +
         static_cast<int64_t>(Mix64(account * 2 + (checking ? 1 : 0)) % kBalanceSpread);
}

struct Args {
  uint64_t a0 = 0, a1 = 0;
  int64_t amount = 0;
  uint64_t tag = 0;  // recording: the history tag of this call ((client + 1) << 32 | call)
};

// The process a tag's call came from.
int64_t ProcessOf(uint64_t tag) { return static_cast<int64_t>(tag >> 32) - 1; }

// Per worker: what the workers committed. `net` and `declined` are written by the worker that
// ran the procedure (maybe another CN's, after routing), the rest by the calling client's
// worker; the monitor thread reads them.
struct alignas(64) WorkerCounters {
  std::atomic<uint64_t> declined{0};
  std::atomic<int64_t> net{0};
  std::array<std::atomic<uint64_t>, kSmallBankTxnCount> by_txn{};
  std::atomic<int64_t> scanned_total{0};
  std::atomic<uint64_t> scanned_rows{0};
  std::vector<SmallBankRecordedTxn> history;  // recording: written by this worker only
};

// A row's value: the balance, and while recording the tag of its last writer after it.
// docs/formats.md "Workload values".
constexpr uint32_t kValueBytes = 8, kRecordedValueBytes = 16;
static_assert(kValueBytes == sizeof(int64_t), "a balance is one i64");
static_assert(kRecordedValueBytes == kValueBytes + sizeof(uint64_t), "then the writer tag");

// The transaction being recorded, or none (h == nullptr) when the run is not recorded.
struct TxnHistory {
  SmallBankRecordedTxn txn;
  uint64_t tag = 0;  // what this transaction's writes carry
};

Result<int64_t> Get(const Txn& t, uint16_t table, uint64_t account, TxnHistory* h) {
  Result<std::span<const std::byte>> v = t.Read(table, SmallBankKey(account));
  if (!v.ok()) return v.status();
  int64_t x;
  std::memcpy(&x, v->data(), sizeof(x));
  if (h != nullptr) {
    uint64_t tag;
    std::memcpy(&tag, v->data() + kValueBytes, sizeof(tag));
    h->txn.ops.push_back({SmallBankHistoryKey(table, account), tag, /*write=*/false});
  }
  return x;
}

Status Put(Txn& t, uint16_t table, uint64_t account, int64_t balance, TxnHistory* h) {
  std::byte value[kRecordedValueBytes] = {};
  std::memcpy(value, &balance, sizeof(balance));
  if (h != nullptr) {
    std::memcpy(value + kValueBytes, &h->tag, sizeof(h->tag));
    h->txn.ops.push_back({SmallBankHistoryKey(table, account), h->tag, /*write=*/true});
  }
  return t.Write(table, SmallBankKey(account),
                 std::span(value, h != nullptr ? kRecordedValueBytes : kValueBytes));
}

// One account draw: the hot set (accounts 0 .. hot-1, whose low bits spread them over every
// shard) with probability hot_access, else any account.
uint64_t DrawAccount(Rng& rng, uint64_t accounts, uint64_t hot, double hot_access) {
  return rng.Chance(hot_access) ? rng.Uniform(hot) : rng.Uniform(accounts);
}

SmallBankTxn DrawTxn(Rng& rng) {
  int x = static_cast<int>(rng.Uniform(100));
  for (int i = 0; i < kSmallBankTxnCount; i++) {
    if (x < kSmallBankMixPct[static_cast<size_t>(i)]) return static_cast<SmallBankTxn>(i);
    x -= kSmallBankMixPct[static_cast<size_t>(i)];
  }
  return SmallBankTxn::kWriteCheck;
}

}  // namespace

const char* SmallBankTxnName(SmallBankTxn t) {
  switch (t) {
    case SmallBankTxn::kAmalgamate:
      return "Amalgamate";
    case SmallBankTxn::kBalance:
      return "Balance";
    case SmallBankTxn::kDepositChecking:
      return "DepositChecking";
    case SmallBankTxn::kSendPayment:
      return "SendPayment";
    case SmallBankTxn::kTransactSavings:
      return "TransactSavings";
    case SmallBankTxn::kWriteCheck:
      return "WriteCheck";
  }
  return "?";
}

Status ValidateSmallBankOptions(const SmallBankOptions& o) {
  POND_RETURN_IF_ERROR(ValidateConfig(o.cluster));
  if (o.coros < 1 || o.coros > 256) return InvalidArgument("--coros must be 1 to 256");
  if (o.accounts < 2 || o.accounts > kAccountsMax)
    return InvalidArgument("--accounts must be 2 to 2^40");
  if (!(o.seconds > 0) || o.seconds > 86400)
    return InvalidArgument("--seconds must be in (0, 86400]");
  if (!(o.hot_fraction > 0 && o.hot_fraction <= 1))
    return InvalidArgument("--hot-fraction must be in (0, 1]");
  if (!(o.hot_access >= 0 && o.hot_access <= 1))
    return InvalidArgument("--hot-access must be in [0, 1]");
  if (o.history_calls_max < 1 || o.history_calls_max > kSmallBankHistoryTxnsMax) {
    return InvalidArgument("a recorded SmallBank run takes 1 to " +
                           std::to_string(kSmallBankHistoryTxnsMax) + " calls");
  }
  return Status::Ok();
}

Result<SmallBankResult> RunSmallBank(const SmallBankOptions& o,
                                     const std::function<void(const KvsProgress&)>& progress) {
  POND_RETURN_IF_ERROR(ValidateSmallBankOptions(o));
  auto started = o.sim ? Cluster::StartSimulated(o.cluster, *o.sim) : Cluster::Start(o.cluster);
  if (!started.ok()) return started.status();
  Cluster& cluster = **started;
  const bool recording = !o.history_path.empty();
  const uint32_t value_bytes = recording ? kRecordedValueBytes : kValueBytes;
  // critical_field: the key's low 12 bits are the account's shard, so the savings and checking
  // rows of one account have their locks on one CN.
  Result<uint16_t> sav = cluster.CreateTable(TableOptions{.name = "savings",
                                                          .value_bytes = value_bytes,
                                                          .capacity = o.accounts,
                                                          .critical_field = true});
  if (!sav.ok()) return sav.status();
  Result<uint16_t> chk = cluster.CreateTable(TableOptions{.name = "checking",
                                                          .value_bytes = value_bytes,
                                                          .capacity = o.accounts,
                                                          .critical_field = true});
  if (!chk.ok()) return chk.status();
  const uint16_t ts = *sav, tc = *chk;

  SmallBankResult result;
  Clock& wall = SystemClock::Get();
  uint64_t load_start = wall.NowNs();
  for (uint16_t t : {ts, tc}) {
    const bool checking = t == tc;
    Status loaded =
        cluster.Load(t, o.accounts, [checking](uint64_t i, uint64_t* key, std::span<std::byte> v) {
          *key = SmallBankKey(i);
          int64_t b = InitialBalance(i, checking);
          std::memset(v.data(), 0, v.size());  // a recorded row starts with tag 0: loaded
          std::memcpy(v.data(), &b, sizeof(b));
        });
    if (!loaded.ok()) return loaded;
  }
  for (uint64_t a = 0; a < o.accounts; a++) {
    result.initial_total += InitialBalance(a, false) + InitialBalance(a, true);
  }
  result.load_s = static_cast<double>(wall.NowNs() - load_start) / 1e9;

  const int workers = o.cluster.cns * o.cluster.workers_per_cn;
  std::vector<WorkerCounters> counters(static_cast<size_t>(workers));
  const int wpc = o.cluster.workers_per_cn;
  auto mine = [&counters, wpc](Session& s) -> WorkerCounters& {
    return counters[static_cast<size_t>(s.cn() * wpc + s.worker())];
  };

  // The six procedures, registered in SmallBankTxn order. Each runs one transaction; after a
  // commit it adds its net deposit to the counters of the worker it ran on — only the procedure
  // knows it (WriteCheck's penalty depends on what it read), and a routed call returns only a
  // status.
  auto args_of = [](std::span<const std::byte> args) {
    Args a;
    std::memcpy(&a, args.data(), sizeof(a));
    return a;
  };
  // Recording: starts the history of the call `a` in `hist` and returns it; else nullptr.
  auto begin = [recording](Session& s, const Args& a, TxnHistory& hist) -> TxnHistory* {
    if (!recording) return nullptr;
    hist.txn.process = ProcessOf(a.tag);
    hist.txn.invoke_ns = s.clock().NowNs();
    hist.tag = a.tag;
    return &hist;
  };
  // Commits `t` and, if it committed, books `net` (and a decline) on this worker; keeps the
  // history, if recording, of a transaction that wrote or committed (an abort before any write
  // says nothing to the checker).
  auto finish = [mine](Session& s, Txn& t, int64_t net, bool declined,
                       TxnHistory* h) -> Task<Status> {
    Status st = co_await t.Commit();
    WorkerCounters& c = mine(s);
    if (st.ok()) {
      c.net.fetch_add(net, std::memory_order_relaxed);
      if (declined) c.declined.fetch_add(1, std::memory_order_relaxed);
    }
    if (h != nullptr) {
      h->txn.committed = st.ok();
      h->txn.complete_ns = s.clock().NowNs();
      c.history.push_back(std::move(h->txn));
    }
    co_return st;
  };
  // Amalgamate: all of a0's money goes to a1's checking account.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    TxnHistory hist;
    TxnHistory* h = begin(s, a, hist);
    Txn t = s.Begin(TxnKind::kReadWrite);
    t.AddRW(ts, SmallBankKey(a.a0));
    t.AddRW(tc, SmallBankKey(a.a0));
    t.AddRW(tc, SmallBankKey(a.a1));
    if (Status e = co_await t.Execute(); !e.ok()) co_return e;
    Result<int64_t> s0 = Get(t, ts, a.a0, h), c0 = Get(t, tc, a.a0, h), c1 = Get(t, tc, a.a1, h);
    if (!s0.ok()) co_return s0.status();
    if (!c0.ok()) co_return c0.status();
    if (!c1.ok()) co_return c1.status();
    POND_CO_RETURN_IF_ERROR(Put(t, ts, a.a0, 0, h));
    POND_CO_RETURN_IF_ERROR(Put(t, tc, a.a0, 0, h));
    POND_CO_RETURN_IF_ERROR(Put(t, tc, a.a1, *c1 + *s0 + *c0, h));
    co_return co_await finish(s, t, 0, false, h);
  });
  // Balance: the read-only one.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    TxnHistory hist;
    TxnHistory* h = begin(s, a, hist);
    Txn t = s.Begin(TxnKind::kReadOnly);
    t.AddRO(ts, SmallBankKey(a.a0));
    t.AddRO(tc, SmallBankKey(a.a0));
    if (Status e = co_await t.Execute(); !e.ok()) co_return e;
    Result<int64_t> s0 = Get(t, ts, a.a0, h), c0 = Get(t, tc, a.a0, h);
    if (!s0.ok()) co_return s0.status();
    if (!c0.ok()) co_return c0.status();
    co_return co_await finish(s, t, 0, false, h);
  });
  // DepositChecking: amount > 0 into checking.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    TxnHistory hist;
    TxnHistory* h = begin(s, a, hist);
    Txn t = s.Begin(TxnKind::kReadWrite);
    t.AddRW(tc, SmallBankKey(a.a0));
    if (Status e = co_await t.Execute(); !e.ok()) co_return e;
    Result<int64_t> c0 = Get(t, tc, a.a0, h);
    if (!c0.ok()) co_return c0.status();
    POND_CO_RETURN_IF_ERROR(Put(t, tc, a.a0, *c0 + a.amount, h));
    co_return co_await finish(s, t, a.amount, false, h);
  });
  // SendPayment: checking a0 -> checking a1, declined (committed, nothing written) if a0's
  // checking does not cover it.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    TxnHistory hist;
    TxnHistory* h = begin(s, a, hist);
    Txn t = s.Begin(TxnKind::kReadWrite);
    t.AddRW(tc, SmallBankKey(a.a0));
    t.AddRW(tc, SmallBankKey(a.a1));
    if (Status e = co_await t.Execute(); !e.ok()) co_return e;
    Result<int64_t> c0 = Get(t, tc, a.a0, h), c1 = Get(t, tc, a.a1, h);
    if (!c0.ok()) co_return c0.status();
    if (!c1.ok()) co_return c1.status();
    if (*c0 < a.amount) co_return co_await finish(s, t, 0, true, h);
    POND_CO_RETURN_IF_ERROR(Put(t, tc, a.a0, *c0 - a.amount, h));
    POND_CO_RETURN_IF_ERROR(Put(t, tc, a.a1, *c1 + a.amount, h));
    co_return co_await finish(s, t, 0, false, h);
  });
  // TransactSavings: a deposit (amount > 0) or withdrawal (< 0) on savings, declined if it
  // would overdraw.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    TxnHistory hist;
    TxnHistory* h = begin(s, a, hist);
    Txn t = s.Begin(TxnKind::kReadWrite);
    t.AddRW(ts, SmallBankKey(a.a0));
    if (Status e = co_await t.Execute(); !e.ok()) co_return e;
    Result<int64_t> s0 = Get(t, ts, a.a0, h);
    if (!s0.ok()) co_return s0.status();
    if (*s0 + a.amount < 0) co_return co_await finish(s, t, 0, true, h);
    POND_CO_RETURN_IF_ERROR(Put(t, ts, a.a0, *s0 + a.amount, h));
    co_return co_await finish(s, t, a.amount, false, h);
  });
  // WriteCheck: amount > 0 out of checking; one unit more as a penalty if savings + checking do
  // not cover it (checking may go negative). Savings is only read.
  cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
    Args a = args_of(args);
    TxnHistory hist;
    TxnHistory* h = begin(s, a, hist);
    Txn t = s.Begin(TxnKind::kReadWrite);
    t.AddRO(ts, SmallBankKey(a.a0));
    t.AddRW(tc, SmallBankKey(a.a0));
    if (Status e = co_await t.Execute(); !e.ok()) co_return e;
    Result<int64_t> s0 = Get(t, ts, a.a0, h), c0 = Get(t, tc, a.a0, h);
    if (!s0.ok()) co_return s0.status();
    if (!c0.ok()) co_return c0.status();
    int64_t out = *s0 + *c0 < a.amount ? a.amount + 1 : a.amount;
    POND_CO_RETURN_IF_ERROR(Put(t, tc, a.a0, *c0 - out, h));
    co_return co_await finish(s, t, -out, false, h);
  });

  const uint64_t hot = std::max<uint64_t>(
      1, static_cast<uint64_t>(static_cast<double>(o.accounts) * o.hot_fraction));
  MeasuredRun run(cluster, o.cluster, o.seconds, progress);
  // Recording: calls issued so far, to stop at history_calls_max.
  std::atomic<uint64_t> issued{0};
  auto client_of = [wpc, &o](Session& s) {
    return static_cast<uint64_t>(s.cn() * wpc + s.worker()) * static_cast<uint64_t>(o.coros) +
           static_cast<uint64_t>(s.client());
  };
  cluster.Run(o.coros, [&](Session& s) -> Task<void> {
    WorkerCounters& me = mine(s);
    Rng& rng = s.rng();
    const uint64_t client = client_of(s);
    uint64_t calls = 0;
    while (run.Running(s)) {
      if (recording && issued.fetch_add(1, std::memory_order_relaxed) >= o.history_calls_max) {
        break;
      }
      SmallBankTxn kind = DrawTxn(rng);
      Args a;
      a.tag = ((client + 1) << 32) | ++calls;
      a.a0 = DrawAccount(rng, o.accounts, hot, o.hot_access);
      if (kind == SmallBankTxn::kAmalgamate || kind == SmallBankTxn::kSendPayment) {
        // Two distinct accounts; redrawing keeps both under the skew (bounded: a hot set of
        // one account with hot_access 1 could repeat forever).
        for (int i = 0; i < 8 && (i == 0 || a.a1 == a.a0); i++) {
          a.a1 = DrawAccount(rng, o.accounts, hot, o.hot_access);
        }
        if (a.a1 == a.a0) a.a1 = (a.a0 + 1) % o.accounts;
      }
      if (kind == SmallBankTxn::kTransactSavings) {
        a.amount = static_cast<int64_t>(rng.Uniform(2 * kAmountMax + 1)) - kAmountMax;
      } else {
        a.amount = 1 + static_cast<int64_t>(rng.Uniform(kAmountMax));
      }
      const bool ro = kind == SmallBankTxn::kBalance;
      // Both rows of a0 share a shard, so either table names the same lock CN.
      RouteHint hint{ro ? TxnKind::kReadOnly : TxnKind::kReadWrite, tc, SmallBankKey(a.a0)};
      uint64_t t0 = s.clock().NowNs();
      Status st =
          co_await s.Call(static_cast<ProcedureId>(kind), std::as_bytes(std::span(&a, 1)), hint);
      if (!run.Book(s, st, t0, s.clock().NowNs(), !ro)) break;
      if (st.ok()) me.by_txn[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
    }
  });
  if (Status st = run.Finish(&result); !st.ok()) {
    return Internal("a SmallBank transaction failed unexpectedly: " + st.ToString());
  }

  // The money check: every client reads a stride of the accounts in read-only transactions.
  // Nothing else runs now, so the batches add up to one consistent total.
  const uint64_t clients = static_cast<uint64_t>(workers) * static_cast<uint64_t>(o.coros);
  const uint64_t batches = (o.accounts + kScanBatch - 1) / kScanBatch;
  std::atomic<bool> scan_failed{false};
  std::mutex scan_mu;
  Status scan_status;  // guarded by scan_mu: why the scan failed
  cluster.Run(o.coros, [&](Session& s) -> Task<void> {
    WorkerCounters& me = mine(s);
    const uint64_t self = client_of(s);
    for (uint64_t b = self; b < batches && !scan_failed; b += clients) {
      const uint64_t lo = b * kScanBatch, hi = std::min(o.accounts, lo + kScanBatch);
      int64_t sum = 0;
      TxnHistory hist;
      TxnHistory* h = recording ? &hist : nullptr;
      hist.txn.process = static_cast<int64_t>(self);
      hist.txn.invoke_ns = s.clock().NowNs();
      Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
        for (uint64_t acc = lo; acc < hi; acc++) {
          t.AddRO(ts, SmallBankKey(acc));
          t.AddRO(tc, SmallBankKey(acc));
        }
        if (Status e = co_await t.Execute(); !e.ok()) co_return e;
        sum = 0;
        hist.txn.ops.clear();  // a retried attempt records only what it read
        for (uint64_t acc = lo; acc < hi; acc++) {
          Result<int64_t> x = Get(t, ts, acc, h), y = Get(t, tc, acc, h);
          if (!x.ok()) co_return x.status();
          if (!y.ok()) co_return y.status();
          sum += *x + *y;
        }
        co_return Status::Ok();
      });
      if (!st.ok()) {
        scan_failed = true;
        std::lock_guard lock(scan_mu);
        scan_status = st;
        break;
      }
      if (recording) {
        hist.txn.committed = true;
        hist.txn.complete_ns = s.clock().NowNs();
        me.history.push_back(std::move(hist.txn));
      }
      me.scanned_total.fetch_add(sum, std::memory_order_relaxed);
      me.scanned_rows.fetch_add(2 * (hi - lo), std::memory_order_relaxed);
    }
  });
  if (scan_failed) {
    return Internal("the SmallBank balance scan failed: " + scan_status.ToString());
  }

  uint64_t rows = 0;
  for (auto& c : counters) {
    result.declined += c.declined.load();
    result.net_deposits += c.net.load();
    for (size_t k = 0; k < c.by_txn.size(); k++) result.committed_by_txn[k] += c.by_txn[k].load();
    result.final_total += c.scanned_total.load();
    rows += c.scanned_rows.load();
  }
  if (rows != 2 * o.accounts) {
    result.check_detail =
        "the scan read " + std::to_string(rows) + " rows of " + std::to_string(2 * o.accounts);
  } else if (result.final_total != result.initial_total + result.net_deposits) {
    result.check_detail = "balances total " + std::to_string(result.final_total) + ", expected " +
                          std::to_string(result.initial_total) + " initial + " +
                          std::to_string(result.net_deposits) + " committed net deposits";
  } else {
    result.check_ok = true;
  }

  if (recording) {
    std::vector<SmallBankRecordedTxn> txns;
    for (auto& c : counters) {
      for (SmallBankRecordedTxn& t : c.history) txns.push_back(std::move(t));
    }
    auto recorder = check::Recorder::OpenFile(o.history_path);
    if (!recorder.ok()) return recorder.status();
    POND_RETURN_IF_ERROR(WriteSmallBankHistory(txns, **recorder));
    POND_RETURN_IF_ERROR((*recorder)->Close());
    result.history_txns = txns.size();
  }
  return result;
}

std::string SmallBankResultJson(const SmallBankOptions& o, const SmallBankResult& r) {
  nlohmann::json j;
  const ClusterStats& s = r.stats;
  double per_txn = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
  j["bench"] = "smallbank";
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
                   {"accounts", o.accounts},
                   {"hot_fraction", o.hot_fraction},
                   {"hot_access", o.hot_access},
                   {"seconds", o.seconds},
                   {"seed", o.cluster.seed}};
  nlohmann::json by_txn;
  for (int k = 0; k < kSmallBankTxnCount; k++) {
    by_txn[SmallBankTxnName(static_cast<SmallBankTxn>(k))] =
        r.committed_by_txn[static_cast<size_t>(k)];
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
        {"p999", r.latency_ns.Percentile(0.999)},
        {"mean", r.latency_ns.Mean()}}},
      {"per_committed_txn",
       {{"read", static_cast<double>(s.reads) * per_txn},
        {"write", static_cast<double>(s.writes) * per_txn},
        {"cas", static_cast<double>(s.cas) * per_txn},
        {"faa", static_cast<double>(s.faa) * per_txn},
        {"doorbell_batches", static_cast<double>(s.batches) * per_txn},
        {"messages", static_cast<double>(s.messages) * per_txn}}},
      {"remote_calls", s.remote_calls},
      {"money_check",
       {{"ok", r.check_ok},
        {"initial_total", r.initial_total},
        {"net_deposits", r.net_deposits},
        {"final_total", r.final_total},
        {"detail", r.check_detail}}},
      {"load_s", r.load_s},
      {"wall_s", r.wall_s}};
  if (r.sim) {
    nlohmann::json nics = NicsJson(*r.sim, r.elapsed_s * 1e9);
    j["simulation"] = {{"model", nlohmann::json::parse(o.sim->ToJson())},
                       {"virtual_s", r.elapsed_s},
                       {"events", r.sim->events},
                       {"mn_nics", nics}};
  }
  return j.dump(2) + "\n";
}

}  // namespace pond::bench
