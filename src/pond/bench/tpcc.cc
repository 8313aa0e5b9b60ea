#include "pond/bench/tpcc.h"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>

#include "pond/base/hash.h"
#include "pond/bench/tpcc_check.h"
#include "pond/bench/tpcc_schema.h"
#include "pond/bench/tpcc_txns.h"

namespace pond::bench {

using namespace tpcc;  // NOLINT: the schema's names are this file's vocabulary

namespace {

// A history key holds the client (+ 1) in 16 bits above a 32-bit call number.
constexpr uint64_t kClientsMax = (uint64_t{1} << 16) - 2;

// Backoff before a terminal's next attempt at an input: uniform up to 1 us doubling per attempt,
// at most 1 ms (what Session::RunTxn does), so hot rows are not hammered in lockstep.
uint64_t BackoffNs(Rng& rng, int attempt) {
  const uint64_t cap = std::min<uint64_t>(uint64_t{1000} << std::min(attempt, 10), 1'000'000);
  return rng.Uniform(cap + 1);
}

// Clause 2.1.6.1: C_LAST at run time differs from the load's by 65..119, but not 96 or 112.
TpccNuRand DrawNuRand(uint64_t seed, const TpccParams& p) {
  Rng rng(Mix64(seed ^ 0x7470'6363));  // "tpcc"
  TpccNuRand nu;
  nu.c_last_load = static_cast<uint32_t>(rng.Uniform(256));
  uint32_t delta = 65 + static_cast<uint32_t>(rng.Uniform(119 - 65 + 1));
  if (delta == 96 || delta == 112) delta++;
  nu.c_last = (nu.c_last_load + delta) % 256;
  nu.c_id = static_cast<uint32_t>(rng.Uniform(ScaledNuRandA(1023, 3000, p.customers) + 1));
  nu.i_id = static_cast<uint32_t>(rng.Uniform(ScaledNuRandA(8191, 100'000, p.items) + 1));
  return nu;
}

}  // namespace

TpccWorkload::TpccWorkload(const TpccParams& p) : p_(p) {}
TpccWorkload::~TpccWorkload() = default;

Status TpccWorkload::Validate(const RunOptions& o) const {
  if (o.record) return InvalidArgument("the TPC-C workload records no history");
  int mix_sum = 0;
  for (int pct : p_.mix) {
    if (pct < 0 || pct > 100) return InvalidArgument("--mix percentages must be 0 to 100");
    mix_sum += pct;
  }
  if (mix_sum != 100) {
    return InvalidArgument(fmt::format("--mix percentages must sum to 100, not {}", mix_sum));
  }
  if (p_.warehouses < 1 || p_.warehouses > kWarehousesMax) {
    return InvalidArgument(fmt::format("--warehouses must be 1 to {}", kWarehousesMax));
  }
  if (p_.items < 1 || p_.items > kItemsMax) {
    return InvalidArgument(fmt::format("--items must be 1 to {}", kItemsMax));
  }
  if (p_.customers < 1 || p_.customers > kCustomersMax) {
    return InvalidArgument(fmt::format("--customers must be 1 to {}", kCustomersMax));
  }
  if (uint64_t{p_.customers} + TpccOrderRoom(p_) >= kOrderIdsMax) {
    return InvalidArgument(
        fmt::format("--customers + --order-room must be below {}", kOrderIdsMax));
  }
  const uint64_t clients = static_cast<uint64_t>(o.cluster.cns) *
                           static_cast<uint64_t>(o.cluster.workers_per_cn) *
                           static_cast<uint64_t>(o.coros);
  if (clients > kClientsMax) {
    return InvalidArgument(
        fmt::format("TPC-C takes at most {} clients (cns x workers x coros)", kClientsMax));
  }
  return Status::Ok();
}

std::string TpccWorkload::Settings() const {
  std::string s =
      fmt::format("{} warehouses, {} items, {} customers per district, room for {} orders",
                  p_.warehouses, p_.items, p_.customers, TpccOrderRoom(p_));
  if (p_.mix != kTpccMixPct) {
    s += fmt::format(", mix {}", fmt::join(p_.mix, "/"));
  }
  if (p_.keep_deleted_entries) s += ", deleted new orders' tree entries kept";
  if (p_.keep_empty_leaves) s += ", emptied new_order leaves kept";
  return s;
}

nlohmann::json TpccWorkload::SettingsJson() const {
  return {{"warehouses", p_.warehouses},
          {"items", p_.items},
          {"customers", p_.customers},
          {"order_room", TpccOrderRoom(p_)},
          {"mix", p_.mix},
          {"keep_deleted_entries", p_.keep_deleted_entries},
          {"keep_empty_leaves", p_.keep_empty_leaves}};
}

Status TpccWorkload::Setup(Cluster& cluster, RunContext& ctx) {
  nu_ = DrawNuRand(cluster.config().seed, p_);
  POND_RETURN_IF_ERROR(CreateTables(cluster));
  POND_RETURN_IF_ERROR(LoadTables(cluster));
  counters_ = std::vector<TpccCounters>(ctx.workers());
  calls_ = std::make_unique<std::atomic<uint32_t>[]>(ctx.clients());
  env_ = std::make_unique<TpccEnv>();
  env_->t = t_;
  env_->p = p_;
  env_->nu = nu_;
  env_->ctx = &ctx;
  env_->counters = &counters_;

  using Body = Task<Status> (*)(Session&, TpccEnv&, const TpccArgs&);
  static constexpr std::array<Body, kTpccTxnCount> kBodies = {
      TpccNewOrder, TpccPayment, TpccOrderStatus, TpccDelivery, TpccStockLevel};
  procs_.clear();
  for (Body body : kBodies) {
    TpccEnv* env = env_.get();
    procs_.push_back(cluster.RegisterProcedure(
        [env, body](Session& s, std::span<const std::byte> args) -> Task<Status> {
          TpccArgs a;
          std::memcpy(&a, args.data(), std::min(args.size(), sizeof(a)));
          co_return co_await body(s, *env, a);
        }));
  }
  return Status::Ok();
}

Task<void> TpccWorkload::RunClient(Session& s, RunContext& ctx) {
  TpccCounters& me = counters_[ctx.Worker(s)];
  Rng& rng = s.rng();
  const uint64_t client = ctx.Client(s);
  // The terminal's warehouse and district (clause 2.8.1.1 uses the district): clients spread
  // over warehouses first, so every warehouse has a terminal before any has two.
  const auto w = static_cast<uint32_t>(client % p_.warehouses + 1);
  const auto d = static_cast<uint32_t>(client / p_.warehouses % kDistrictsPerWarehouse + 1);
  while (ctx.NextCall(s)) {
    const auto kind = static_cast<TpccTxn>(DrawFromMix(rng, p_.mix));
    const uint64_t call = calls_[client].fetch_add(1, std::memory_order_relaxed) + 1;
    const TpccArgs a = DrawTpccArgs(rng, *env_, kind, w, d, (client + 1) << 32 | call);
    const bool ro = kind == TpccTxn::kOrderStatus || kind == TpccTxn::kStockLevel;
    // Read-write calls run where the home warehouse's locks are (Lotus §4.3).
    const RouteHint hint{ro ? TxnKind::kReadOnly : TxnKind::kReadWrite, t_.district,
                         DistrictKey(a.w, a.d)};
    const auto k = static_cast<size_t>(kind);
    for (int attempt = 1;; attempt++) {
      const uint64_t t0 = s.clock().NowNs();
      Status st = co_await s.Call(procs_[k], TpccArgsBytes(a), hint);
      const uint64_t t1 = s.clock().NowNs();
      if (st.code() == Code::kOutOfSpace) {
        st =
            OutOfSpace(fmt::format("{} (the run outgrew --order-room {}: raise it, and "
                                   "--region-mib if need be)",
                                   st.message(), TpccOrderRoom(p_)));
      }
      if (kind == TpccTxn::kNewOrder && st.code() == Code::kNotFound) {
        // The 1% the spec rolls back on purpose: not a failure, not a commit.
        me.rolled_back.fetch_add(1, std::memory_order_relaxed);
        ctx.Publish(t1);
        break;
      }
      if (!ctx.Book(s, st, t0, t1, !ro)) co_return;
      if (st.ok()) {
        me.committed[k].fetch_add(1, std::memory_order_relaxed);
        if (kind == TpccTxn::kNewOrder) {
          uint64_t remote = 0;
          for (uint32_t i = 0; i < a.ol_cnt; i++) remote += a.lines[i].supply_w != a.w ? 1 : 0;
          me.remote_lines.fetch_add(remote, std::memory_order_relaxed);
        }
        if (kind == TpccTxn::kPayment && a.c_w != a.w) {
          me.remote_payments.fetch_add(1, std::memory_order_relaxed);
        }
        if ((kind == TpccTxn::kPayment || kind == TpccTxn::kOrderStatus) && a.c_id == 0) {
          me.by_name.fetch_add(1, std::memory_order_relaxed);
        }
        break;
      }
      me.aborted[k].fetch_add(1, std::memory_order_relaxed);
      // Unknown: its CN failed under it, and it may have committed; the terminal moves on.
      if (st.code() == Code::kUnknown) break;
      if (attempt >= kTpccAttemptsMax) {
        me.gave_up.fetch_add(1, std::memory_order_relaxed);
        break;
      }
      co_await s.SleepFor(BackoffNs(rng, attempt));
      if (!ctx.NextCall(s)) co_return;
    }
  }
}

Status TpccWorkload::Finish(Cluster& cluster, RunContext& ctx, RunResult* r) {
  const TpccCheckResult check =
      CheckTpccConsistency(cluster, t_, p_.warehouses, ctx.options().coros);
  std::array<uint64_t, kTpccTxnCount> committed{}, aborted{};
  uint64_t rolled_back = 0, gave_up = 0, empty = 0, remote_lines = 0, remote_payments = 0,
           by_name = 0;
  for (const TpccCounters& c : counters_) {
    for (size_t k = 0; k < kTpccTxnCount; k++) {
      committed[k] += c.committed[k].load();
      aborted[k] += c.aborted[k].load();
    }
    rolled_back += c.rolled_back.load();
    gave_up += c.gave_up.load();
    empty += c.empty_districts.load();
    remote_lines += c.remote_lines.load();
    remote_payments += c.remote_payments.load();
    by_name += c.by_name.load();
  }
  r->loaded = fmt::format("{} warehouses ({} rows)", p_.warehouses, rows_loaded_);
  // Rolled-back New-Orders are TPC-C's expected failures, reported as declined.
  r->declined = rolled_back;
  for (size_t k = 0; k < kTpccTxnCount; k++) {
    r->committed_by_txn.emplace_back(kTpccTxnNames[k], committed[k]);
  }
  r->headline = HeadlineRate{.name = "New-Order",
                             .json_key = "new_orders",
                             .committed = committed[static_cast<size_t>(TpccTxn::kNewOrder)]};
  WorkloadCheck wc = TpccWorkloadCheck(check);
  nlohmann::json by_kind;
  for (size_t k = 0; k < kTpccTxnCount; k++) {
    by_kind[kTpccTxnNames[k]] = {{"committed", committed[k]}, {"aborted", aborted[k]}};
  }
  wc.json["by_txn"] = by_kind;
  wc.json["rolled_back"] = rolled_back;
  wc.json["gave_up"] = gave_up;
  wc.json["delivery_empty_districts"] = empty;
  wc.json["remote_new_order_lines"] = remote_lines;
  wc.json["remote_payments"] = remote_payments;
  wc.json["by_last_name"] = by_name;
  r->check = std::move(wc);
  return Status::Ok();
}

}  // namespace pond::bench
