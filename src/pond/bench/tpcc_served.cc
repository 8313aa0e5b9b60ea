// TPC-C as a service and its remote driver (served.h): the five transactions served by name with
// the embedded terminals' inputs (tpcc_txns.h TpccArgs), checked field by field before they run;
// `tpcc.start`, which hands each driver run the server's scale, its NURand constants and a run
// number that keeps its Payments' history keys apart from every other run's; and the consistency
// conditions 1-4 read back through `tpcc.check_district` and `tpcc.check_warehouse`, which run
// the embedded check's reads (tpcc_check.h) on the server — the client API has no range scans.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <optional>

#include "pond/base/assert.h"
#include "pond/bench/tpcc.h"
#include "pond/bench/tpcc_check.h"
#include "pond/bench/tpcc_schema.h"
#include "pond/bench/tpcc_txns.h"
#include "pond/server/service_directory.h"

namespace pond::bench {

using namespace tpcc;  // NOLINT: the schema's names are this file's vocabulary

namespace {

constexpr std::array<const char*, kTpccTxnCount> kTpccProcedureNames = {
    "tpcc.new_order", "tpcc.payment", "tpcc.order_status", "tpcc.delivery", "tpcc.stock_level"};
constexpr const char* kStartProcedure = "tpcc.start";
constexpr const char* kCheckDistrictProcedure = "tpcc.check_district";
constexpr const char* kCheckWarehouseProcedure = "tpcc.check_warehouse";
// The table of driver runs: one row, key kRunsKey, the number of the last run started.
constexpr const char* kRunsTable = "tpcc_runs";
TableNeed RunsTable() { return {{.name = kRunsTable, .value_bytes = 8, .capacity = 1}, 1}; }
constexpr uint64_t kRunsKey = 1;

// A served call's history tag: run:12 client:12 call:24, below 2^48 as every tag is. Each run
// has its own number (tpcc.start), so no two runs' Payments share a history key.
constexpr int kTagCallBits = 24, kTagClientBits = 12, kTagRunBits = 12;
constexpr uint64_t kServedRunsMax = (uint64_t{1} << kTagRunBits) - 1;
constexpr uint64_t kServedClientsMax = uint64_t{1} << kTagClientBits;
constexpr uint64_t kServedCallsMax = (uint64_t{1} << kTagCallBits) - 1;

// tpcc.start's reply.
struct TpccServedInfo {
  uint64_t run = 0;  // from 1
  uint32_t warehouses = 0, items = 0, customers = 0, order_room = 0;
  uint32_t c_last_load = 0, c_last = 0, c_id = 0, i_id = 0;
};
static_assert(sizeof(TpccServedInfo) == 40 && std::is_trivially_copyable_v<TpccServedInfo>);

// tpcc.check_district's and tpcc.check_warehouse's arguments (d = 0 for a warehouse).
struct TpccWhere {
  uint32_t w = 0, d = 0;
};
static_assert(sizeof(TpccWhere) == 8);

// New-Order's reply: 1 if it rolled back on its unused item (clause 2.4.2.3), else 0.
constexpr size_t kNewOrderReplyBytes = 1;

template <typename T>
std::vector<std::byte> BytesOf(const T& v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  return std::vector<std::byte>(p, p + sizeof(T));
}

template <typename T>
Result<T> FromReply(std::string_view procedure, const std::string& reply) {
  if (reply.size() != sizeof(T)) {
    return Internal(fmt::format("{} replied {} bytes, not {}", procedure, reply.size(), sizeof(T)));
  }
  T v;
  std::memcpy(&v, reply.data(), sizeof(T));
  return v;
}

Status CheckWarehouse(const char* what, uint32_t w, const TpccParams& p) {
  if (w < 1 || w > p.warehouses) {
    return InvalidArgument(fmt::format("{} {} is not 1 to {}", what, w, p.warehouses));
  }
  return Status::Ok();
}

Status CheckDistrict(const char* what, uint32_t d) {
  if (d < 1 || d > kDistrictsPerWarehouse) {
    return InvalidArgument(fmt::format("{} {} is not 1 to {}", what, d, kDistrictsPerWarehouse));
  }
  return Status::Ok();
}

// A customer by id (1 .. customers) or, with c_id 0, by the number of a last name in use.
Status CheckCustomer(const TpccArgs& a, const TpccParams& p) {
  if (a.c_id > p.customers) {
    return InvalidArgument(
        fmt::format("c_id {} is not 0 (by last name) to {}", a.c_id, p.customers));
  }
  if (a.c_id == 0 && a.last >= TpccLastNames(p)) {
    return InvalidArgument(fmt::format("last {} is not below {}", a.last, TpccLastNames(p)));
  }
  return Status::Ok();
}

}  // namespace

Status CheckTpccArgs(TpccTxn kind, std::span<const std::byte> args, const TpccParams& p) {
  if (args.size() < kTpccArgsHeaderBytes) {
    return InvalidArgument(fmt::format("{} bytes of arguments; TPC-C's are at least {}",
                                       args.size(), kTpccArgsHeaderBytes));
  }
  TpccArgs a;
  std::memcpy(static_cast<void*>(&a), args.data(), kTpccArgsHeaderBytes);
  if (a.kind != static_cast<uint8_t>(kind)) {
    return InvalidArgument(
        fmt::format("kind {} is not this procedure's ({})", a.kind, static_cast<int>(kind)));
  }
  const size_t lines = kind == TpccTxn::kNewOrder ? a.ol_cnt : 0;
  if (kind == TpccTxn::kNewOrder && (a.ol_cnt < kOrderLinesMin || a.ol_cnt > kOrderLinesMax)) {
    return InvalidArgument(
        fmt::format("ol_cnt {} is not {} to {}", a.ol_cnt, kOrderLinesMin, kOrderLinesMax));
  }
  if (args.size() != kTpccArgsHeaderBytes + lines * sizeof(TpccLine)) {
    return InvalidArgument(fmt::format("{} bytes of arguments, not {} ({} order lines)",
                                       args.size(), kTpccArgsHeaderBytes + lines * sizeof(TpccLine),
                                       lines));
  }
  std::memcpy(&a, args.data(), args.size());
  POND_RETURN_IF_ERROR(CheckWarehouse("w", a.w, p));
  POND_RETURN_IF_ERROR(CheckDistrict("d", a.d));
  switch (kind) {
    case TpccTxn::kNewOrder:
      if (a.c_id < 1 || a.c_id > p.customers) {
        return InvalidArgument(fmt::format("c_id {} is not 1 to {}", a.c_id, p.customers));
      }
      for (size_t i = 0; i < lines; i++) {
        const TpccLine& l = a.lines[i];
        // items + 1 is the unused item a rolled-back order names (clause 2.4.1.4).
        if (l.i_id < 1 || l.i_id > p.items + 1) {
          return InvalidArgument(
              fmt::format("line {}: i_id {} is not 1 to {}", i + 1, l.i_id, p.items + 1));
        }
        POND_RETURN_IF_ERROR(CheckWarehouse("supply_w", l.supply_w, p));
        if (l.quantity < 1 || l.quantity > 10) {
          return InvalidArgument(
              fmt::format("line {}: quantity {} is not 1 to 10", i + 1, l.quantity));
        }
      }
      return Status::Ok();
    case TpccTxn::kPayment:
      POND_RETURN_IF_ERROR(CheckWarehouse("c_w", a.c_w, p));
      POND_RETURN_IF_ERROR(CheckDistrict("c_d", a.c_d));
      POND_RETURN_IF_ERROR(CheckCustomer(a, p));
      if (a.amount < 100 || a.amount > 500'000) {
        return InvalidArgument(fmt::format("amount {} is not 100 to 500000 cents", a.amount));
      }
      if (a.tag >= uint64_t{1} << 48) return InvalidArgument("tag is not below 2^48");
      return Status::Ok();
    case TpccTxn::kOrderStatus:
      return CheckCustomer(a, p);
    case TpccTxn::kDelivery:
      if (a.carrier < 1 || a.carrier > 10) {
        return InvalidArgument(fmt::format("carrier {} is not 1 to 10", a.carrier));
      }
      return Status::Ok();
    case TpccTxn::kStockLevel:
      if (a.threshold < 10 || a.threshold > 20) {
        return InvalidArgument(fmt::format("threshold {} is not 10 to 20", a.threshold));
      }
      return Status::Ok();
  }
  return InvalidArgument("no such TPC-C transaction");
}

std::vector<TableNeed> TpccWorkload::ServedTables() const {
  std::vector<TableNeed> tables = TpccTableNeeds(p_);
  tables.push_back(RunsTable());
  return tables;
}

Status TpccWorkload::Serve(Cluster& cluster, server::ServiceDirectory* dir) {
  RunContext& ctx = ServingContext(cluster);
  POND_RETURN_IF_ERROR(Validate(ctx.options()));
  POND_RETURN_IF_ERROR(Setup(cluster, ctx));
  Result<uint16_t> runs = cluster.CreateTable(RunsTable().options);
  if (!runs.ok()) return runs.status();
  const uint16_t runs_table = *runs;
  POND_RETURN_IF_ERROR(
      cluster.Load(runs_table, 1, [](uint64_t, uint64_t* key, std::span<std::byte> v) {
        *key = kRunsKey;
        std::fill(v.begin(), v.end(), std::byte{0});
      }));
  // Every table by its name, for a client's reads (the driver's check reads through procedures).
  for (const TableOptions& o : TpccTableOptions(p_)) {
    Result<uint16_t> id = cluster.FindTable(o.name);
    if (!id.ok()) return id.status();
    POND_RETURN_IF_ERROR(dir->AddTable({o.name, *id, o.value_bytes, o.capacity}));
  }
  POND_RETURN_IF_ERROR(dir->AddTable({kRunsTable, runs_table, 8, 1}));

  const TpccParams p = p_;
  TpccEnv* env = env_.get();
  for (int k = 0; k < kTpccTxnCount; k++) {
    const auto kind = static_cast<TpccTxn>(k);
    const bool ro = kind == TpccTxn::kOrderStatus || kind == TpccTxn::kStockLevel;
    ProcedureId id = procs_[static_cast<size_t>(k)];
    if (kind == TpccTxn::kNewOrder) {
      // The 1% rolled back on purpose is an answer, not a failure: it replies so.
      id = cluster.RegisterProcedure(
          [env](Session& s,
                std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
            TpccArgs a;
            std::memcpy(&a, args.data(), std::min(args.size(), sizeof(a)));
            const Status st = co_await TpccNewOrder(s, *env, a);
            if (st.code() == Code::kNotFound) co_return std::vector<std::byte>{std::byte{1}};
            if (!st.ok()) co_return st;
            co_return std::vector<std::byte>{std::byte{0}};
          });
    }
    const uint16_t district = t_.district;
    POND_RETURN_IF_ERROR(dir->AddProcedure(
        {kTpccProcedureNames[static_cast<size_t>(k)], id, 0, ro,
         [kind, ro, p, district](std::span<const std::byte> args) -> Result<RouteHint> {
           POND_RETURN_IF_ERROR(CheckTpccArgs(kind, args, p));
           TpccArgs a;
           std::memcpy(static_cast<void*>(&a), args.data(), kTpccArgsHeaderBytes);
           // As the embedded terminals route: where the home warehouse's locks are.
           return RouteHint{ro ? TxnKind::kReadOnly : TxnKind::kReadWrite, district,
                            DistrictKey(a.w, a.d)};
         }}));
  }

  // tpcc.start: the next run number, with the scale and constants to draw by.
  TpccServedInfo info;
  info.warehouses = p_.warehouses;
  info.items = p_.items;
  info.customers = p_.customers;
  info.order_room = TpccOrderRoom(p_);
  info.c_last_load = nu_.c_last_load;
  info.c_last = nu_.c_last;
  info.c_id = nu_.c_id;
  info.i_id = nu_.i_id;
  const ProcedureId start = cluster.RegisterProcedure(
      [info, runs_table](Session& s,
                         std::span<const std::byte>) -> Task<Result<std::vector<std::byte>>> {
        Txn tx = s.Begin(TxnKind::kReadWrite);
        tx.AddRW(runs_table, kRunsKey);
        POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
        Result<std::span<const std::byte>> v = tx.Read(runs_table, kRunsKey);
        if (!v.ok()) co_return v.status();
        uint64_t last = 0;
        std::memcpy(&last, v->data(), sizeof(last));
        if (last >= kServedRunsMax) {
          co_return OutOfSpace(fmt::format(
              "this server has started {} TPC-C driver runs, as many as history keys tell "
              "apart: serve it anew",
              last));
        }
        TpccServedInfo reply = info;
        reply.run = last + 1;
        POND_CO_RETURN_IF_ERROR(
            tx.Write(runs_table, kRunsKey, std::as_bytes(std::span(&reply.run, 1))));
        POND_CO_RETURN_IF_ERROR(co_await tx.Commit());
        co_return BytesOf(reply);
      });
  POND_RETURN_IF_ERROR(
      dir->AddProcedure({kStartProcedure, start, 0, false,
                         [runs_table](std::span<const std::byte> args) -> Result<RouteHint> {
                           if (!args.empty())
                             return InvalidArgument("tpcc.start takes no arguments");
                           return RouteHint{TxnKind::kReadWrite, runs_table, kRunsKey};
                         }}));

  // The check's reads, run on the server: a district's ranges, a warehouse's snapshot.
  const TpccTables* t = &t_;
  const ProcedureId check_district = cluster.RegisterProcedure(
      [t](Session& s, std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
        TpccWhere at;
        std::memcpy(&at, args.data(), sizeof(at));
        TpccDistrictFacts f;
        POND_CO_RETURN_IF_ERROR(co_await ReadTpccDistrict(s, *t, at.w, at.d, &f));
        co_return BytesOf(f);
      });
  const ProcedureId check_warehouse = cluster.RegisterProcedure(
      [t](Session& s, std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
        TpccWhere at;
        std::memcpy(&at, args.data(), sizeof(at));
        TpccWarehouseFacts f;
        POND_CO_RETURN_IF_ERROR(co_await ReadTpccWarehouse(s, *t, at.w, &f));
        co_return BytesOf(f);
      });
  const uint16_t district = t_.district;
  POND_RETURN_IF_ERROR(
      dir->AddProcedure({kCheckDistrictProcedure, check_district, sizeof(TpccWhere), true,
                         [p, district](std::span<const std::byte> args) -> Result<RouteHint> {
                           TpccWhere at;
                           std::memcpy(&at, args.data(), sizeof(at));
                           POND_RETURN_IF_ERROR(CheckWarehouse("w", at.w, p));
                           POND_RETURN_IF_ERROR(CheckDistrict("d", at.d));
                           return RouteHint{TxnKind::kReadOnly, district, DistrictKey(at.w, at.d)};
                         }}));
  POND_RETURN_IF_ERROR(
      dir->AddProcedure({kCheckWarehouseProcedure, check_warehouse, sizeof(TpccWhere), true,
                         [p, district](std::span<const std::byte> args) -> Result<RouteHint> {
                           TpccWhere at;
                           std::memcpy(&at, args.data(), sizeof(at));
                           POND_RETURN_IF_ERROR(CheckWarehouse("w", at.w, p));
                           if (at.d != 0) return InvalidArgument("d must be 0 for a warehouse");
                           return RouteHint{TxnKind::kReadOnly, district, DistrictKey(at.w, 1)};
                         }}));
  return Status::Ok();
}

namespace {

// Drives a served TPC-C as the embedded terminals do: client i is the terminal of warehouse
// i % W + 1, district i / W % 10 + 1; an aborted input is sent again (up to kTpccAttemptsMax
// times), so the committed mix stays the standard one.
class TpccRemote final : public RemoteDriver {
 public:
  explicit TpccRemote(const TpccParams& p) : mix_(p.mix), clients_(kServedClientsMax) {}

  std::string Settings() const override {
    return fmt::format("the server's warehouses, mix {}", fmt::join(mix_, "/"));
  }
  std::vector<std::string> TxnNames() const override {
    return {kTpccTxnNames.begin(), kTpccTxnNames.end()};
  }

  Status Start(const RemoteStore& store) override {
    Result<std::string> reply = store.call(kStartProcedure, "");
    if (!reply.ok()) return reply.status();
    Result<TpccServedInfo> info = FromReply<TpccServedInfo>(kStartProcedure, *reply);
    if (!info.ok()) return info.status();
    if (info->run < 1 || info->run > kServedRunsMax || info->warehouses < 1 ||
        info->warehouses > kWarehousesMax || info->customers < 1 || info->items < 1) {
      return Internal("tpcc.start replied a scale or run number out of range");
    }
    run_ = info->run;
    env_.p.warehouses = info->warehouses;
    env_.p.items = info->items;
    env_.p.customers = info->customers;
    env_.p.order_room = info->order_room;
    env_.p.mix = mix_;
    env_.nu = TpccNuRand{info->c_last_load, info->c_last, info->c_id, info->i_id};
    return Status::Ok();
  }

  RemoteCall Next(Rng& rng, uint64_t client, uint64_t) override {
    POND_CHECK(client < kServedClientsMax);
    Terminal& me = clients_[client];
    if (me.retry.has_value()) {
      RemoteCall again = *me.retry;
      me.retry.reset();
      return again;
    }
    const uint32_t wh = env_.p.warehouses;
    const auto w = static_cast<uint32_t>(client % wh + 1);
    const auto d = static_cast<uint32_t>(client / wh % kDistrictsPerWarehouse + 1);
    const auto kind = static_cast<TpccTxn>(DrawFromMix(rng, mix_));
    const uint64_t call = ++me.calls;
    if (call >= kServedCallsMax) done_ = true;
    const uint64_t tag = run_ << (kTagClientBits + kTagCallBits) | client << kTagCallBits | call;
    const TpccArgs a = DrawTpccArgs(rng, env_, kind, w, d, tag);
    const std::span<const std::byte> bytes = TpccArgsBytes(a);
    me.attempts = 0;
    return RemoteCall{
        .kind = static_cast<size_t>(kind),
        .procedure = kTpccProcedureNames[static_cast<size_t>(kind)],
        .args = std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
        .read_write = kind != TpccTxn::kOrderStatus && kind != TpccTxn::kStockLevel,
        .client = client};
  }

  bool Book(const RemoteCall& call, RemoteOutcome outcome, std::string_view reply) override {
    Terminal& me = clients_[call.client];
    switch (outcome) {
      case RemoteOutcome::kCommitted:
        if (call.kind == static_cast<size_t>(TpccTxn::kNewOrder)) {
          if (reply.size() != kNewOrderReplyBytes) {
            bad_replies_.fetch_add(1, std::memory_order_relaxed);
          } else if (reply[0] != 0) {
            // The spec's rolled-back 1%: a TPC-C answer, booked as declined.
            rolled_back_.fetch_add(1, std::memory_order_relaxed);
            return false;
          }
        }
        by_txn_[call.kind].fetch_add(1, std::memory_order_relaxed);
        return true;
      case RemoteOutcome::kAborted:
        // A conflict: the terminal sends the same input again.
        if (++me.attempts < kTpccAttemptsMax) {
          me.retry = call;
        } else {
          gave_up_.fetch_add(1, std::memory_order_relaxed);
        }
        return true;
      default:
        // Unknown (its CN failed: it may have committed), a duplicate history key, or refused:
        // the terminal moves on.
        return true;
    }
  }

  Status Finish(const RemoteStore& store, RunResult* r) override {
    const uint32_t wh = env_.p.warehouses;
    std::vector<TpccWarehouseFacts> wf(wh);
    std::vector<TpccDistrictFacts> df(uint64_t{wh} * kDistrictsPerWarehouse);
    for (uint32_t w = 1; w <= wh; w++) {
      for (uint32_t d = 0; d <= kDistrictsPerWarehouse; d++) {
        const TpccWhere at{w, d};
        const char* proc = d == 0 ? kCheckWarehouseProcedure : kCheckDistrictProcedure;
        Result<std::string> reply =
            store.call(proc, std::string_view(reinterpret_cast<const char*>(&at), sizeof(at)));
        if (!reply.ok())
          return Internal("the TPC-C check's reads failed: " + reply.status().ToString());
        if (d == 0) {
          Result<TpccWarehouseFacts> f = FromReply<TpccWarehouseFacts>(proc, *reply);
          if (!f.ok()) return f.status();
          wf[w - 1] = *f;
        } else {
          Result<TpccDistrictFacts> f = FromReply<TpccDistrictFacts>(proc, *reply);
          if (!f.ok()) return f.status();
          df[(w - 1) * kDistrictsPerWarehouse + d - 1] = *f;
        }
      }
    }
    const TpccCheckResult check = JudgeTpcc(wf, df);
    r->loaded = fmt::format("{} warehouses, {} customers per district, served (run {})", wh,
                            env_.p.customers, run_);
    r->declined = rolled_back_.load();
    for (size_t k = 0; k < kTpccTxnCount; k++) {
      r->committed_by_txn.emplace_back(kTpccTxnNames[k], by_txn_[k].load());
    }
    r->headline = HeadlineRate{.name = "New-Order",
                               .json_key = "new_orders",
                               .committed = by_txn_[static_cast<size_t>(TpccTxn::kNewOrder)]};
    WorkloadCheck wc = TpccWorkloadCheck(check);
    if (bad_replies_.load() != 0) {
      wc.ok = false;
      wc.detail = fmt::format(
          "{} committed New-Orders replied without saying whether they rolled "
          "back",
          bad_replies_.load());
    }
    wc.json["rolled_back"] = rolled_back_.load();
    wc.json["gave_up"] = gave_up_.load();
    r->check = std::move(wc);
    return Status::Ok();
  }

  bool Done() const override { return done_.load(std::memory_order_relaxed); }

 private:
  // One client's terminal: touched by that client's thread alone.
  struct Terminal {
    uint64_t calls = 0;
    int attempts = 0;
    std::optional<RemoteCall> retry;
  };

  const std::array<int, kTpccTxnCount> mix_;
  TpccEnv env_;  // the server's scale and constants, from Start
  uint64_t run_ = 0;
  std::vector<Terminal> clients_;
  std::array<std::atomic<uint64_t>, kTpccTxnCount> by_txn_{};
  std::atomic<uint64_t> rolled_back_{0}, gave_up_{0}, bad_replies_{0};
  std::atomic<bool> done_{false};
};

}  // namespace

Result<std::unique_ptr<RemoteDriver>> TpccWorkload::Remote(
    const std::vector<RemoteTable>& tables) const {
  // A server that does not serve TPC-C has no tpcc.start: refused here, before any call.
  Result<RemoteTable> runs = FindRemoteTable(tables, kRunsTable, 8);
  if (!runs.ok()) return runs.status();
  return std::unique_ptr<RemoteDriver>(std::make_unique<TpccRemote>(p_));
}

}  // namespace pond::bench
