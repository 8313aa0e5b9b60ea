#include "pond/bench/smallbank.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "pond/base/hash.h"
#include "pond/bench/smallbank_history.h"

namespace pond::bench {

namespace {

// Amounts are whole units (cents); balances are signed because WriteCheck may overdraw.
constexpr int64_t kAmountMax = 100;
// What a served procedure takes (CheckSmallBankArgs): far above what clients draw, far below
// what could overflow a balance.
constexpr int64_t kServedAmountMax = int64_t{1} << 40;
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

using Args = SmallBankArgs;

// The process a tag's call came from.
int64_t ProcessOf(uint64_t tag) { return static_cast<int64_t>(tag >> 32) - 1; }

// `a + b` into `sum`, false if it leaves int64's range. A served client may deposit up to
// kServedAmountMax again and again; a balance that would wrap is declined like an overdraft.
bool Add(int64_t a, int64_t b, int64_t* sum) { return !__builtin_add_overflow(a, b, sum); }

}  // namespace

struct alignas(64) SmallBankCounters {
  std::atomic<uint64_t> declined{0};
  std::atomic<int64_t> net{0};
  std::array<std::atomic<uint64_t>, kSmallBankTxnCount> by_txn{};
  std::atomic<int64_t> scanned_total{0};
  std::atomic<uint64_t> scanned_rows{0};
  std::vector<SmallBankRecordedTxn> history;  // recording: written by this worker only
  // Net deposits of transactions committing on this worker whose Commit has not returned; what
  // is left after the run is in doubt — its CN crashed mid-commit, and recovery decided (written
  // by this worker only).
  std::map<uint64_t, int64_t> committing;
  // Recording: the histories of those same transactions, kept from before their Commit; what is
  // left after the run becomes an `info` transaction (its outcome is unknown to every client).
  std::map<uint64_t, SmallBankRecordedTxn> committing_history;
  // Calls made so far by each client of this worker, over every incarnation of its CN: a
  // restarted CN's client goes on numbering where the dead one stopped, so no tag recurs.
  std::vector<uint64_t> calls;
};

namespace {

// Whether `diff` is the sum of some of the in-doubt nets: each transaction caught mid-commit by
// a crash was either finished or undone by recovery, so the balances may hold any subset of
// them. The sums reachable are built one transaction at a time; they are few (nets are small),
// and past a million the check says it cannot tell (false).
bool InDoubtExplains(int64_t diff, const std::vector<int64_t>& in_doubt) {
  std::set<int64_t> reachable = {0};
  for (int64_t n : in_doubt) {
    std::set<int64_t> next = reachable;
    for (int64_t r : reachable) next.insert(r + n);
    reachable = std::move(next);
    if (reachable.size() > 1'000'000) return false;
  }
  return reachable.contains(diff);
}

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
uint64_t DrawAccount(Rng& rng, const SmallBankParams& p, uint64_t hot, uint64_t place) {
  if (!rng.Chance(p.hot_access)) return rng.Uniform(p.accounts);
  const uint64_t k = rng.Uniform(hot);
  return p.moving_hotspot_ms > 0 ? SmallBankHotAccount(p.accounts, hot, k, place) : k;
}

}  // namespace

uint64_t SmallBankHotAccount(uint64_t accounts, uint64_t hot, uint64_t k, uint64_t place) {
  // Accounts a with a mod 4096 = s, below `accounts`: per_shard of them in every shard.
  const uint64_t per_shard = std::max<uint64_t>(1, accounts / 4096);
  const uint64_t width = std::min<uint64_t>(4096, (hot + per_shard - 1) / per_shard);
  const uint64_t shard = (place * 1553 + k % width) % 4096;
  const uint64_t a = shard + 4096 * (k / width % per_shard);
  return a < accounts ? a : shard % accounts;
}

SmallBankCall DrawSmallBankCall(Rng& rng, const SmallBankParams& p, uint64_t hot, uint64_t tag,
                                uint64_t place) {
  SmallBankCall c;
  c.kind = static_cast<SmallBankTxn>(DrawFromMix(rng, kSmallBankMixPct));
  Args& a = c.args;
  a.tag = tag;
  a.a0 = DrawAccount(rng, p, hot, place);
  if (c.kind == SmallBankTxn::kAmalgamate || c.kind == SmallBankTxn::kSendPayment) {
    // Two distinct accounts; redrawing keeps both under the skew (bounded: a hot set of one
    // account with hot_access 1 could repeat forever).
    for (int i = 0; i < 8 && (i == 0 || a.a1 == a.a0); i++) {
      a.a1 = DrawAccount(rng, p, hot, place);
    }
    if (a.a1 == a.a0) a.a1 = (a.a0 + 1) % p.accounts;
  }
  if (c.kind == SmallBankTxn::kTransactSavings) {
    a.amount = static_cast<int64_t>(rng.Uniform(2 * kAmountMax + 1)) - kAmountMax;
  } else {
    a.amount = 1 + static_cast<int64_t>(rng.Uniform(kAmountMax));
  }
  return c;
}

Status CheckSmallBankArgs(SmallBankTxn kind, const SmallBankArgs& a, uint64_t accounts) {
  if (a.a0 >= accounts) {
    return InvalidArgument(fmt::format("account {} is not below {}", a.a0, accounts));
  }
  if (kind == SmallBankTxn::kAmalgamate || kind == SmallBankTxn::kSendPayment) {
    // One account twice would be read once and written twice: money would appear.
    if (a.a1 >= accounts || a.a1 == a.a0) {
      return InvalidArgument(
          fmt::format("a1 must be an account below {} other than a0 ({})", accounts, a.a0));
    }
  }
  const bool any_sign = kind == SmallBankTxn::kTransactSavings;
  const bool needs_amount = kind == SmallBankTxn::kDepositChecking ||
                            kind == SmallBankTxn::kSendPayment ||
                            kind == SmallBankTxn::kWriteCheck || any_sign;
  if (needs_amount &&
      (a.amount > kServedAmountMax || a.amount < (any_sign ? -kServedAmountMax : 1))) {
    return InvalidArgument(fmt::format("amount {} is not in {} to {}", a.amount,
                                       any_sign ? -kServedAmountMax : 1, kServedAmountMax));
  }
  return Status::Ok();
}

int64_t SmallBankInitialTotal(uint64_t accounts) {
  int64_t total = 0;
  for (uint64_t a = 0; a < accounts; a++) {
    total += InitialBalance(a, false) + InitialBalance(a, true);
  }
  return total;
}

bool SmallBankInDoubtExplains(int64_t diff, const std::vector<int64_t>& in_doubt) {
  return InDoubtExplains(diff, in_doubt);
}

bool SmallBankInDoubtExplainsAny(int64_t diff, const std::vector<std::vector<int64_t>>& in_doubt) {
  std::set<int64_t> reachable = {0};
  for (const std::vector<int64_t>& effects : in_doubt) {
    std::set<int64_t> next = reachable;  // not taken
    for (int64_t r : reachable) {
      for (int64_t e : effects) next.insert(r + e);
    }
    reachable = std::move(next);
    if (reachable.size() > 1'000'000) return false;
  }
  return reachable.contains(diff);
}

SmallBankWorkload::SmallBankWorkload(const SmallBankParams& p) : p_(p) {}
SmallBankWorkload::~SmallBankWorkload() = default;

Status SmallBankWorkload::Validate(const RunOptions& o) const {
  if (p_.accounts < 2 || p_.accounts > kAccountsMax)
    return InvalidArgument("--accounts must be 2 to 2^40");
  if (!(p_.hot_fraction > 0 && p_.hot_fraction <= 1))
    return InvalidArgument("--hot-fraction must be in (0, 1]");
  if (!(p_.hot_access >= 0 && p_.hot_access <= 1))
    return InvalidArgument("--hot-access must be in [0, 1]");
  if (!(p_.moving_hotspot_ms >= 0 && p_.moving_hotspot_ms <= 3.6e6))
    return InvalidArgument("--moving-hotspot-ms must be 0 (the hot set stays) to 3600000");
  if (o.record && (o.calls_max < 1 || o.calls_max > kSmallBankHistoryTxnsMax)) {
    return InvalidArgument("a recorded SmallBank run takes 1 to " +
                           std::to_string(kSmallBankHistoryTxnsMax) + " calls");
  }
  return Status::Ok();
}

std::string SmallBankWorkload::Settings() const {
  std::string s = fmt::format("{} accounts, {:.0f}% of accesses to {:.1f}% hot", p_.accounts,
                              p_.hot_access * 100, p_.hot_fraction * 100);
  if (p_.moving_hotspot_ms > 0) s += fmt::format(" moving every {:g} ms", p_.moving_hotspot_ms);
  return s;
}

nlohmann::json SmallBankWorkload::SettingsJson() const {
  nlohmann::json j = {
      {"accounts", p_.accounts}, {"hot_fraction", p_.hot_fraction}, {"hot_access", p_.hot_access}};
  if (p_.moving_hotspot_ms > 0) j["moving_hotspot_ms"] = p_.moving_hotspot_ms;
  return j;
}

namespace {

// Savings, then checking. critical_field: the key's low 12 bits are the account's shard, so the
// savings and checking rows of one account have their locks on one CN.
std::vector<TableNeed> SmallBankTables(uint64_t accounts, uint32_t value_bytes) {
  std::vector<TableNeed> tables;
  for (const char* name : {"savings", "checking"}) {
    tables.push_back({TableOptions{.name = name,
                                   .value_bytes = value_bytes,
                                   .capacity = accounts,
                                   .critical_field = true},
                      accounts});
  }
  return tables;
}

}  // namespace

std::vector<TableNeed> SmallBankWorkload::ServedTables() const {
  return SmallBankTables(p_.accounts, kValueBytes);
}

Status SmallBankWorkload::Setup(Cluster& cluster, RunContext& ctx) {
  const bool recording = ctx.recorder() != nullptr;
  const std::vector<TableNeed> tables =
      SmallBankTables(p_.accounts, recording ? kRecordedValueBytes : kValueBytes);
  Result<uint16_t> sav = cluster.CreateTable(tables[0].options);
  if (!sav.ok()) return sav.status();
  Result<uint16_t> chk = cluster.CreateTable(tables[1].options);
  if (!chk.ok()) return chk.status();
  const uint16_t ts = ts_ = *sav, tc = tc_ = *chk;
  for (uint16_t t : {ts, tc}) {
    const bool checking = t == tc;
    POND_RETURN_IF_ERROR(
        cluster.Load(t, p_.accounts, [checking](uint64_t i, uint64_t* key, std::span<std::byte> v) {
          *key = SmallBankKey(i);
          int64_t b = InitialBalance(i, checking);
          std::memset(v.data(), 0, v.size());  // a recorded row starts with tag 0: loaded
          std::memcpy(v.data(), &b, sizeof(b));
        }));
  }
  initial_total_ = SmallBankInitialTotal(p_.accounts);
  counters_ = std::vector<SmallBankCounters>(ctx.workers());
  for (SmallBankCounters& c : counters_) c.calls.resize(static_cast<size_t>(ctx.options().coros));
  hot_ = std::max<uint64_t>(
      1, static_cast<uint64_t>(static_cast<double>(p_.accounts) * p_.hot_fraction));
  start_ns_ = cluster.clock().NowNs();

  // The six procedures, registered in SmallBankTxn order. Each runs one transaction; after a
  // commit it adds its net deposit to the counters of the worker it ran on — only the procedure
  // knows it (WriteCheck's penalty depends on what it read), and a routed call returns only a
  // status.
  RunContext* c = &ctx;
  std::vector<SmallBankCounters>* counters = &counters_;
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
  auto finish = [c, counters](Session& s, Txn& t, uint64_t tag, int64_t net, bool declined,
                              TxnHistory* h) -> Task<Status> {
    SmallBankCounters& mine = (*counters)[c->Worker(s)];
    mine.committing[tag] = net;
    // Every read and write is known before Commit: if this CN crashes inside it, the history
    // still has the transaction, as info.
    if (h != nullptr) mine.committing_history[tag] = h->txn;
    Status st = co_await t.Commit();
    mine.committing.erase(tag);
    mine.committing_history.erase(tag);
    if (st.ok()) {
      mine.net.fetch_add(net, std::memory_order_relaxed);
      if (declined) mine.declined.fetch_add(1, std::memory_order_relaxed);
    }
    if (h != nullptr) {
      h->txn.committed = st.ok();
      h->txn.complete_ns = s.clock().NowNs();
      mine.history.push_back(std::move(h->txn));
    }
    co_return st;
  };
  // Registers a procedure that opens one transaction of `kind` over the accounts in its
  // arguments, runs `body` on it and commits through `finish` with the net deposit and decline
  // that `body` returns.
  struct Outcome {
    int64_t net = 0;
    bool declined = false;
    // What a served call answers in place of its net deposit: Balance's total.
    std::optional<int64_t> answer;
  };
  using Body = std::function<Result<Outcome>(Txn&, const Args&, TxnHistory*)>;
  procs_.clear();
  auto add = [&](TxnKind kind, std::function<void(Txn&, const Args&)> keys, Body body) {
    // `reply`, if not null, gets the outcome of a call that committed.
    auto run = [=](Session& s, std::span<const std::byte> args, Outcome* reply) -> Task<Status> {
      Args a;
      std::memcpy(&a, args.data(), sizeof(a));
      TxnHistory hist;
      TxnHistory* h = begin(s, a, hist);
      Txn t = s.Begin(kind);
      keys(t, a);
      POND_CO_RETURN_IF_ERROR(co_await t.Execute());
      Result<Outcome> out = body(t, a, h);
      if (!out.ok()) co_return out.status();
      if (reply != nullptr) *reply = *out;
      co_return co_await finish(s, t, a.tag, out->net, out->declined, h);
    };
    if (!serving_) {
      // Not a coroutine itself: a benchmark's call costs no frame more than `run`'s.
      procs_.push_back(cluster.RegisterProcedure(
          [run](Session& s, std::span<const std::byte> args) { return run(s, args, nullptr); }));
      return;
    }
    // Served: the reply is what a remote client books, which only the procedure knows
    // (WriteCheck's penalty depends on what it read).
    procs_.push_back(cluster.RegisterProcedure(
        [run](Session& s, std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
          Outcome out;
          POND_CO_RETURN_IF_ERROR(co_await run(s, args, &out));
          std::vector<std::byte> reply(kSmallBankReplyBytes);
          const int64_t first = out.answer.value_or(out.net);
          std::memcpy(reply.data(), &first, sizeof(first));
          reply[8] = std::byte{out.declined ? uint8_t{1} : uint8_t{0}};
          co_return reply;
        }));
  };
  // Amalgamate: all of a0's money goes to a1's checking account.
  add(
      TxnKind::kReadWrite,
      [=](Txn& t, const Args& a) {
        t.AddRW(ts, SmallBankKey(a.a0));
        t.AddRW(tc, SmallBankKey(a.a0));
        t.AddRW(tc, SmallBankKey(a.a1));
      },
      [=](Txn& t, const Args& a, TxnHistory* h) -> Result<Outcome> {
        Result<int64_t> s0 = Get(t, ts, a.a0, h), c0 = Get(t, tc, a.a0, h),
                        c1 = Get(t, tc, a.a1, h);
        if (!s0.ok()) return s0.status();
        if (!c0.ok()) return c0.status();
        if (!c1.ok()) return c1.status();
        int64_t a0_total = 0, to = 0;
        if (!Add(*s0, *c0, &a0_total) || !Add(*c1, a0_total, &to)) {
          return Outcome{.declined = true};
        }
        POND_RETURN_IF_ERROR(Put(t, ts, a.a0, 0, h));
        POND_RETURN_IF_ERROR(Put(t, tc, a.a0, 0, h));
        POND_RETURN_IF_ERROR(Put(t, tc, a.a1, to, h));
        return Outcome{};
      });
  // Balance: the read-only one.
  add(
      TxnKind::kReadOnly,
      [=](Txn& t, const Args& a) {
        t.AddRO(ts, SmallBankKey(a.a0));
        t.AddRO(tc, SmallBankKey(a.a0));
      },
      [=](Txn& t, const Args& a, TxnHistory* h) -> Result<Outcome> {
        Result<int64_t> s0 = Get(t, ts, a.a0, h), c0 = Get(t, tc, a.a0, h);
        if (!s0.ok()) return s0.status();
        if (!c0.ok()) return c0.status();
        // The account's total, as the name promises; declined if no int64 holds it.
        int64_t total = 0;
        if (!Add(*s0, *c0, &total)) return Outcome{.declined = true};
        return Outcome{.answer = total};
      });
  // DepositChecking: amount > 0 into checking.
  add(
      TxnKind::kReadWrite, [=](Txn& t, const Args& a) { t.AddRW(tc, SmallBankKey(a.a0)); },
      [=](Txn& t, const Args& a, TxnHistory* h) -> Result<Outcome> {
        Result<int64_t> c0 = Get(t, tc, a.a0, h);
        if (!c0.ok()) return c0.status();
        int64_t c = 0;
        if (!Add(*c0, a.amount, &c)) return Outcome{.declined = true};
        POND_RETURN_IF_ERROR(Put(t, tc, a.a0, c, h));
        return Outcome{.net = a.amount};
      });
  // SendPayment: checking a0 -> checking a1, declined (committed, nothing written) if a0's
  // checking does not cover it.
  add(
      TxnKind::kReadWrite,
      [=](Txn& t, const Args& a) {
        t.AddRW(tc, SmallBankKey(a.a0));
        t.AddRW(tc, SmallBankKey(a.a1));
      },
      [=](Txn& t, const Args& a, TxnHistory* h) -> Result<Outcome> {
        Result<int64_t> c0 = Get(t, tc, a.a0, h), c1 = Get(t, tc, a.a1, h);
        if (!c0.ok()) return c0.status();
        if (!c1.ok()) return c1.status();
        int64_t to = 0;
        if (*c0 < a.amount || !Add(*c1, a.amount, &to)) return Outcome{.declined = true};
        POND_RETURN_IF_ERROR(Put(t, tc, a.a0, *c0 - a.amount, h));
        POND_RETURN_IF_ERROR(Put(t, tc, a.a1, to, h));
        return Outcome{};
      });
  // TransactSavings: a deposit (amount > 0) or withdrawal (< 0) on savings, declined if it
  // would overdraw.
  add(
      TxnKind::kReadWrite, [=](Txn& t, const Args& a) { t.AddRW(ts, SmallBankKey(a.a0)); },
      [=](Txn& t, const Args& a, TxnHistory* h) -> Result<Outcome> {
        Result<int64_t> s0 = Get(t, ts, a.a0, h);
        if (!s0.ok()) return s0.status();
        int64_t s = 0;
        if (!Add(*s0, a.amount, &s) || s < 0) return Outcome{.declined = true};
        POND_RETURN_IF_ERROR(Put(t, ts, a.a0, s, h));
        return Outcome{.net = a.amount};
      });
  // WriteCheck: amount > 0 out of checking; one unit more as a penalty if savings + checking do
  // not cover it (checking may go negative). Savings is only read.
  add(
      TxnKind::kReadWrite,
      [=](Txn& t, const Args& a) {
        t.AddRO(ts, SmallBankKey(a.a0));
        t.AddRW(tc, SmallBankKey(a.a0));
      },
      [=](Txn& t, const Args& a, TxnHistory* h) -> Result<Outcome> {
        Result<int64_t> s0 = Get(t, ts, a.a0, h), c0 = Get(t, tc, a.a0, h);
        if (!s0.ok()) return s0.status();
        if (!c0.ok()) return c0.status();
        int64_t total = 0, c = 0;
        if (!Add(*s0, *c0, &total)) return Outcome{.declined = true};
        const int64_t out = total < a.amount ? a.amount + 1 : a.amount;
        if (!Add(*c0, -out, &c)) return Outcome{.declined = true};
        POND_RETURN_IF_ERROR(Put(t, tc, a.a0, c, h));
        return Outcome{.net = -out};
      });
  return Status::Ok();
}

Task<void> SmallBankWorkload::RunClient(Session& s, RunContext& ctx) {
  SmallBankCounters& me = counters_[ctx.Worker(s)];
  Rng& rng = s.rng();
  const uint64_t client = ctx.Client(s);
  // Sized before any client runs: another client's growth must not move this one's counter.
  uint64_t& calls = me.calls.at(static_cast<size_t>(s.client()));
  while (ctx.NextCall(s)) {
    // A moving hot set's place: how many of its periods the run's clock has passed since Setup.
    const uint64_t place =
        p_.moving_hotspot_ms > 0
            ? static_cast<uint64_t>(static_cast<double>(s.clock().NowNs() - start_ns_) /
                                    (p_.moving_hotspot_ms * 1e6))
            : 0;
    const SmallBankCall call =
        DrawSmallBankCall(rng, p_, hot_, ((client + 1) << 32) | ++calls, place);
    const SmallBankTxn kind = call.kind;
    const Args& a = call.args;
    const bool ro = kind == SmallBankTxn::kBalance;
    // Both rows of a0 share a shard, so either table names the same lock CN.
    RouteHint hint{ro ? TxnKind::kReadOnly : TxnKind::kReadWrite, tc_, SmallBankKey(a.a0)};
    uint64_t t0 = s.clock().NowNs();
    Status st =
        co_await s.Call(procs_[static_cast<size_t>(kind)], std::as_bytes(std::span(&a, 1)), hint);
    if (!ctx.Book(s, st, t0, s.clock().NowNs(), !ro)) break;
    if (st.ok()) me.by_txn[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
  }
}

Status SmallBankWorkload::Finish(Cluster& cluster, RunContext& ctx, RunResult* r) {
  // The money check: every client reads a stride of the accounts in read-only transactions.
  // Nothing else runs now, so the batches add up to one consistent total.
  const bool recording = ctx.recorder() != nullptr;
  const uint64_t batches = (p_.accounts + kScanBatch - 1) / kScanBatch;
  // Batches are taken in turn rather than by client index: after a CN crash, its clients are
  // gone and the others scan its share.
  std::atomic<uint64_t> next_batch{0};
  std::atomic<bool> scan_failed{false};
  std::mutex scan_mu;
  Status scan_status;  // guarded by scan_mu: why the scan failed
  cluster.Run(ctx.options().coros, [&](Session& s) -> Task<void> {
    SmallBankCounters& me = counters_[ctx.Worker(s)];
    const uint64_t self = ctx.Client(s);
    for (uint64_t b = next_batch++; b < batches && !scan_failed; b = next_batch++) {
      const uint64_t lo = b * kScanBatch, hi = std::min(p_.accounts, lo + kScanBatch);
      int64_t sum = 0;
      TxnHistory hist;
      TxnHistory* h = recording ? &hist : nullptr;
      hist.txn.process = static_cast<int64_t>(self);
      hist.txn.invoke_ns = s.clock().NowNs();
      Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
        for (uint64_t acc = lo; acc < hi; acc++) {
          t.AddRO(ts_, SmallBankKey(acc));
          t.AddRO(tc_, SmallBankKey(acc));
        }
        POND_CO_RETURN_IF_ERROR(co_await t.Execute());
        sum = 0;
        hist.txn.ops.clear();  // a retried attempt records only what it read
        for (uint64_t acc = lo; acc < hi; acc++) {
          Result<int64_t> x = Get(t, ts_, acc, h), y = Get(t, tc_, acc, h);
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

  uint64_t rows = 0, declined = 0;
  int64_t net = 0, final_total = 0;
  std::array<uint64_t, kSmallBankTxnCount> by_txn{};
  std::vector<int64_t> in_doubt;  // nets of transactions caught mid-commit by a CN crash
  for (SmallBankCounters& c : counters_) {
    for (const auto& [tag, n] : c.committing) in_doubt.push_back(n);
    declined += c.declined.load();
    net += c.net.load();
    for (size_t k = 0; k < c.by_txn.size(); k++) by_txn[k] += c.by_txn[k].load();
    final_total += c.scanned_total.load();
    rows += c.scanned_rows.load();
  }
  r->loaded = fmt::format("{} accounts (2 rows each)", p_.accounts);
  r->declined = declined;
  for (int k = 0; k < kSmallBankTxnCount; k++) {
    r->committed_by_txn.emplace_back(kSmallBankTxnNames[static_cast<size_t>(k)],
                                     by_txn[static_cast<size_t>(k)]);
  }
  WorkloadCheck check;
  check.name = check.label = "money check";
  check.json_key = "money_check";
  check.summary = fmt::format(
      "total {} = initial {} + committed net deposits {}{}", final_total, initial_total_, net,
      in_doubt.empty() ? ""
                       : fmt::format(" (+ {} caught mid-commit by a crash, each "
                                     "finished or undone)",
                                     in_doubt.size()));
  check.brief =
      fmt::format("total {} = initial {} + net deposits {}", final_total, initial_total_, net);
  if (rows != 2 * p_.accounts) {
    check.detail = fmt::format("the scan read {} rows of {}", rows, 2 * p_.accounts);
  } else if (!InDoubtExplains(final_total - initial_total_ - net, in_doubt)) {
    check.detail = fmt::format(
        "balances total {}, expected {} initial + {} committed net deposits{}", final_total,
        initial_total_, net,
        in_doubt.empty()
            ? ""
            : fmt::format(" + any of {} in-doubt transactions' deposits", in_doubt.size()));
  } else {
    check.ok = true;
  }
  check.json = {{"ok", check.ok},
                {"initial_total", initial_total_},
                {"net_deposits", net},
                {"in_doubt", in_doubt.size()},
                {"final_total", final_total},
                {"detail", check.detail}};
  r->check = std::move(check);

  if (recording) {
    std::vector<SmallBankRecordedTxn> txns;
    for (SmallBankCounters& c : counters_) {
      for (SmallBankRecordedTxn& t : c.history) txns.push_back(std::move(t));
      // Caught mid-commit by a crash of their CN: finished or undone by recovery, nobody was
      // told which. Each gets a process of its own, as Jepsen gives a process after an info
      // (its client is gone, or heard Unknown and went on).
      for (auto& [tag, t] : c.committing_history) {
        t.unknown = true;
        t.process = check::kInfoProcessBase + static_cast<int64_t>(txns.size());
        txns.push_back(std::move(t));
      }
    }
    // An info line's time says nothing (the checker orders nothing after an info); the end of
    // the history is where its client stopped waiting.
    uint64_t end_ns = 0;
    for (const SmallBankRecordedTxn& t : txns)
      end_ns = std::max({end_ns, t.invoke_ns, t.complete_ns});
    for (SmallBankRecordedTxn& t : txns) {
      if (t.unknown) t.complete_ns = end_ns;
    }
    POND_RETURN_IF_ERROR(WriteSmallBankHistory(txns, *ctx.recorder()));
  }
  return Status::Ok();
}

}  // namespace pond::bench
