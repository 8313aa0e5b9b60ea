// TPC-C, whole: nine tables (warehouse, district, customer, history, new_order, orders,
// order_line, item, stock) plus two secondary indexes (customers by last name, orders by
// customer), the five transactions in the standard mix — New-Order 45%, Payment 43%,
// Order-Status 4%, Delivery 4%, Stock-Level 4% — with customers chosen by last name in 60% of
// Payments and Order-Statuses, real range scans (Txn::Scan on ordered tables), remote warehouses
// at the spec's rates (1% of New-Order lines, 15% of Payments) and 1% of New-Orders rolled back.
// The warehouse id is the critical field (tpcc_schema.h), and read-write calls are routed to the
// CN that manages their home warehouse's shard (Lotus §4.3).
//
// Each client is a terminal bound to one (warehouse, district); an aborted attempt is booked as an
// abort and retried with the same input after a randomized backoff, as a terminal would, so the
// committed mix stays the standard one. After the run the TPC-C consistency conditions 1–4
// (clause 3.3.2) are checked by reading every district back through transactions (tpcc_check.h);
// a failure fails the command. docs/workloads.md "TPC-C" describes the workload.
//
// Thread rules: as every Workload (workload.h).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pond/bench/workload.h"

namespace pond::bench {

enum class TpccTxn : uint8_t { kNewOrder, kPayment, kOrderStatus, kDelivery, kStockLevel };
constexpr int kTpccTxnCount = 5;
constexpr std::array<const char*, kTpccTxnCount> kTpccTxnNames = {
    "NewOrder", "Payment", "OrderStatus", "Delivery", "StockLevel"};
constexpr std::array<int, kTpccTxnCount> kTpccMixPct = {45, 43, 4, 4, 4};

// The spec's cardinalities, scaled by flags. Each district has `customers` customers and as many
// initial orders (one per customer), the last 30% of them undelivered (900 of 3000 in the spec).
struct TpccParams {
  uint32_t warehouses = 1;
  uint32_t items = 100'000;
  uint32_t customers = 3'000;  // per district
  // Orders each district may take during the run: what the growing tables (orders, new_order,
  // order_line, the order index, history) are sized for beyond their load. 0: as many as
  // `customers`. A run that outgrows it fails with OutOfSpace, never silently.
  uint32_t order_room = 0;
  // Percent of New-Order, Payment, Order-Status, Delivery, Stock-Level (clause 5.2.3's minimum
  // mix by default); they sum to 100.
  std::array<int, kTpccTxnCount> mix = kTpccMixPct;
  // Deliveries leave their new orders' tree entries in place (TableOptions), so that every
  // later Delivery of the district scans past them: what the tree's cleaning saves, measured.
  bool keep_deleted_entries = false;
  // Leaves Deliveries empty stay on their level (TableOptions): what merging them saves.
  bool keep_empty_leaves = false;
};

// The tables Setup created, by id.
struct TpccTables {
  uint16_t warehouse = 0, district = 0, customer = 0, history = 0, new_order = 0, orders = 0,
           order_line = 0, item = 0, stock = 0;
  uint16_t customer_name = 0;      // ordered: (w, d, last, c_id)
  uint16_t order_by_customer = 0;  // ordered: (w, d, c_id, o_id)
};

// NURand's run-time constants (clause 2.1.6), drawn from the seed at Setup; `c_last_load` is the
// one the load used for last names, and `c_last` differs from it as clause 2.1.6.1 requires.
struct TpccNuRand {
  uint32_t c_last_load = 0, c_last = 0, c_id = 0, i_id = 0;
};

// Per worker: commits and aborted attempts by kind, booked by the calling client's worker;
// districts Delivery found empty, booked by the worker that ran it.
struct alignas(64) TpccCounters {
  std::array<std::atomic<uint64_t>, kTpccTxnCount> committed{};
  std::array<std::atomic<uint64_t>, kTpccTxnCount> aborted{};
  std::atomic<uint64_t> rolled_back{0};      // New-Orders with an unused item (clause 2.4.2.3)
  std::atomic<uint64_t> gave_up{0};          // inputs dropped after kTpccAttemptsMax attempts
  std::atomic<uint64_t> empty_districts{0};  // Delivery: no new order in the district
  std::atomic<uint64_t> remote_lines{0};     // committed New-Order lines from another warehouse
  std::atomic<uint64_t> remote_payments{0};  // committed Payments of another warehouse's customer
  std::atomic<uint64_t> by_name{0};          // committed Payments and Order-Statuses by last name
};

// A terminal's attempts at one input before it gives up on it (booked apart; the run goes on).
inline constexpr int kTpccAttemptsMax = 64;

struct TpccEnv;

class TpccWorkload : public Workload {
 public:
  explicit TpccWorkload(const TpccParams& p);
  ~TpccWorkload() override;
  const TpccParams& params() const { return p_; }
  const TpccTables& tables() const { return t_; }

  const char* name() const override { return "tpcc"; }
  const char* title() const override { return "TPC-C"; }
  std::unique_ptr<Workload> Clone() const override { return std::make_unique<TpccWorkload>(p_); }
  Status Validate(const RunOptions& o) const override;
  std::string Settings() const override;
  nlohmann::json SettingsJson() const override;
  Status Setup(Cluster& cluster, RunContext& ctx) override;
  Task<void> RunClient(Session& s, RunContext& ctx) override;
  // The consistency conditions 1-4 (tpcc_check.h) and the workload's counts.
  Status Finish(Cluster& cluster, RunContext& ctx, RunResult* r) override;
  // tpcc_served.cc. Served as tpcc.new_order ... tpcc.stock_level (TpccArgs, checked by
  // CheckTpccArgs), tpcc.start, tpcc.check_district and tpcc.check_warehouse (docs/formats.md
  // "Served procedures").
  Status Serve(Cluster& cluster, server::ServiceDirectory* dir) override;
  std::vector<TableNeed> ServedTables() const override;
  Result<std::unique_ptr<RemoteDriver>> Remote(
      const std::vector<RemoteTable>& tables) const override;

 private:
  // tpcc_load.cc: creates and loads the tables.
  Status CreateTables(Cluster& cluster);
  Status LoadTables(Cluster& cluster);

  TpccParams p_;
  TpccTables t_;
  TpccNuRand nu_;
  uint64_t rows_loaded_ = 0;
  std::vector<ProcedureId> procs_;  // in TpccTxn order
  std::vector<TpccCounters> counters_;
  // Each client's last call number, kept outside its session: a restarted CN's clients carry on
  // from their dead incarnation's numbers, so no two Payments share a history key.
  std::unique_ptr<std::atomic<uint32_t>[]> calls_;
  std::unique_ptr<TpccEnv> env_;  // what the procedures share; lives as long as they may run
};

// The order room TpccParams::order_room resolves to.
inline uint32_t TpccOrderRoom(const TpccParams& p) {
  return p.order_room != 0 ? p.order_room : p.customers;
}
// MiB per MN that the tables need, a little over: their hash indexes and trees in the general
// heap (a quarter of the region) and their records, with room for a second version, in the
// rest. The CLI gives a run this much when --region-mib is not given.
uint64_t TpccRegionMib(const TpccParams& p, const ClusterConfig& c);
// The tables CreateTables makes, with the rows the load puts in them.
std::vector<TableNeed> TpccTableNeeds(const TpccParams& p);
// The tables CreateTables makes, in its order.
std::vector<TableOptions> TpccTableOptions(const TpccParams& p);
// Undelivered orders per district at load: the last 30% (900 of the spec's 3000).
inline uint32_t TpccNewOrdersAtLoad(const TpccParams& p) { return p.customers * 3 / 10; }

}  // namespace pond::bench
