// TPC-C's tables and their initial population (clause 4.3.3), scaled by TpccParams. Everything
// loaded is a fixed function of the seed: the last names, the order of customers in the initial
// orders and every row's values.
#include <fmt/core.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "pond/base/hash.h"
#include "pond/bench/tpcc.h"
#include "pond/bench/tpcc_schema.h"
#include "pond/bench/tpcc_txns.h"

namespace pond::bench {

using namespace tpcc;  // NOLINT: the schema's names are this file's vocabulary

namespace {

// Values a row draws from its key: a stream per row, so loads in any order agree.
class RowRng {
 public:
  RowRng(uint64_t seed, uint64_t table, uint64_t key)
      : r_(Mix64(seed ^ Mix64(table << 56 ^ key))) {}
  // Uniform in [lo, hi].
  int64_t In(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(r_.Uniform(static_cast<uint64_t>(hi - lo + 1)));
  }

 private:
  Rng r_;
};

// Which stream of values a row draws from (RowRng): one per table, and one more for a field drawn
// apart from the others of its row. The numbers are part of what a seed loads: keep them.
enum RowStream : uint64_t {
  kWh = 1,
  kDist = 2,
  kCust = 3,
  kOrd = 5,
  kLine = 6,
  kItem = 7,
  kStock = 8,
  kPlan = 9,
  kOrdCarrier = 21,
};

// What one district's load needs besides its keys: each customer's last name, and which customer
// placed each initial order (clause 4.3.3.1: a random permutation of the customers).
struct DistrictPlan {
  std::vector<uint16_t> last;      // [c - 1]
  std::vector<uint16_t> customer;  // [o - 1]
};

DistrictPlan PlanDistrict(const TpccParams& p, const TpccNuRand& nu, uint64_t seed, uint32_t w,
                          uint32_t d) {
  DistrictPlan plan;
  Rng rng(Mix64(seed ^ Mix64(kPlan << 56 | uint64_t{w} << 8 | d)));
  const uint32_t names = TpccLastNames(p);
  const uint32_t a_last = ScaledNuRandA(255, kLastNames, names);
  plan.last.resize(p.customers);
  // Clause 4.3.3.1: the first 1000 customers take the names in turn, the rest NURand's.
  for (uint32_t c = 1; c <= p.customers; c++) {
    plan.last[c - 1] = static_cast<uint16_t>(
        c <= names ? c - 1 : NuRand(rng, a_last, 0, names - 1, nu.c_last_load));
  }
  plan.customer.resize(p.customers);
  std::iota(plan.customer.begin(), plan.customer.end(), uint16_t{1});
  for (uint32_t i = p.customers; i > 1; i--) {
    std::swap(plan.customer[i - 1], plan.customer[rng.Uniform(i)]);
  }
  return plan;
}

// O_OL_CNT of an initial order: 5..15, from the order's key.
uint32_t InitialLines(uint64_t seed, uint32_t w, uint32_t d, uint32_t o) {
  return static_cast<uint32_t>(
      RowRng(seed, kOrd, OrderKey(w, d, o)).In(kOrderLinesMin, kOrderLinesMax));
}

template <typename Row>
void Fill(std::span<std::byte> v, const Row& r) {
  std::memcpy(v.data(), &r, sizeof(Row));
}

// A failed load, with what to change.
Status LoadFailed(const std::string& what, const Status& st) {
  return Status(st.code(),
                fmt::format("{}: {}{}", what, st.message(),
                            st.code() == Code::kOutOfSpace
                                ? " (more --region-mib, or fewer --warehouses or --customers)"
                                : ""));
}

}  // namespace

namespace {

// A table as CreateTables makes it, and the rows the load puts in it.
struct TableSpec {
  uint16_t TpccTables::*id;
  TableOptions o;
  uint64_t rows;
};

std::vector<TableSpec> TableSpecs(const TpccParams& p) {
  const uint64_t w = p.warehouses, c = p.customers, room = TpccOrderRoom(p);
  const uint64_t districts = w * kDistrictsPerWarehouse, lines = districts * c * 10;
  const uint64_t orders = districts * (c + room), no = districts * TpccNewOrdersAtLoad(p);
  // Orders have 5..15 lines, 10 on average; a tenth more for chance. History takes one row per
  // customer at load and one per Payment after, about as many as orders. New orders are deleted,
  // but a deleted key keeps its slot: the table holds every order placed.
  return {
      {&TpccTables::warehouse,
       {.name = "warehouse",
        .value_bytes = sizeof(WarehouseRow),
        .capacity = w,
        .critical_field = true},
       w},
      {&TpccTables::district,
       {.name = "district",
        .value_bytes = sizeof(DistrictRow),
        .capacity = districts,
        .critical_field = true},
       districts},
      {&TpccTables::customer,
       {.name = "customer",
        .value_bytes = sizeof(CustomerRow),
        .capacity = districts * c,
        .critical_field = true},
       districts * c},
      {&TpccTables::history,
       {.name = "history",
        .value_bytes = sizeof(HistoryRow),
        .capacity = orders,
        .critical_field = true},
       districts * c},
      {&TpccTables::new_order,
       {.name = "new_order",
        .value_bytes = sizeof(NewOrderRow),
        .capacity = districts * (TpccNewOrdersAtLoad(p) + room),
        .critical_field = true,
        .ordered = true,
        .stripe_bits = kNewOrderStripeBits,
        .keep_deleted_entries = p.keep_deleted_entries,
        .keep_empty_leaves = p.keep_empty_leaves},
       no},
      {&TpccTables::orders,
       {.name = "orders",
        .value_bytes = sizeof(OrderRow),
        .capacity = orders,
        .critical_field = true,
        .ordered = true,
        .stripe_bits = kOrderStripeBits},
       districts * c},
      {&TpccTables::order_line,
       {.name = "order_line",
        .value_bytes = sizeof(OrderLineRow),
        .capacity = orders * 11,
        .critical_field = true,
        .ordered = true,
        .stripe_bits = kOrderLineStripeBits},
       lines},
      {&TpccTables::item,
       {.name = "item",
        .value_bytes = sizeof(ItemRow),
        .capacity = p.items,
        .critical_field = false},
       p.items},
      {&TpccTables::stock,
       {.name = "stock",
        .value_bytes = sizeof(StockRow),
        .capacity = w * p.items,
        .critical_field = true},
       w * p.items},
      {&TpccTables::customer_name,
       {.name = "customer_name",
        .value_bytes = sizeof(IndexRow),
        .capacity = districts * c,
        .critical_field = true,
        .ordered = true,
        .stripe_bits = kCustomerNameStripeBits},
       districts * c},
      {&TpccTables::order_by_customer,
       {.name = "order_by_customer",
        .value_bytes = sizeof(IndexRow),
        .capacity = orders,
        .critical_field = true,
        .ordered = true,
        .stripe_bits = kOrderByCustomerStripeBits},
       districts * c},
  };
}

}  // namespace

std::vector<TableOptions> TpccTableOptions(const TpccParams& p) {
  std::vector<TableOptions> o;
  for (const TableSpec& t : TableSpecs(p)) o.push_back(t.o);
  return o;
}

std::vector<TableNeed> TpccTableNeeds(const TpccParams& p) {
  std::vector<TableNeed> needs;
  for (const TableSpec& t : TableSpecs(p)) needs.push_back({t.o, t.rows});
  return needs;
}

uint64_t TpccRegionMib(const TpccParams& p, const ClusterConfig& c) {
  return RegionNeedFor(TpccTableNeeds(p), c).mib;
}

Status TpccWorkload::CreateTables(Cluster& cluster) {
  for (const TableSpec& s : TableSpecs(p_)) {
    Result<uint16_t> id = cluster.CreateTable(s.o);
    if (!id.ok()) return LoadFailed("creating " + s.o.name, id.status());
    t_.*s.id = *id;
  }
  return Status::Ok();
}

Status TpccWorkload::LoadTables(Cluster& cluster) {
  const uint64_t seed = cluster.config().seed;
  const uint32_t W = p_.warehouses, C = p_.customers, I = p_.items;
  const uint32_t delivered = C - TpccNewOrdersAtLoad(p_);  // orders 1..delivered are delivered
  rows_loaded_ = 0;
  auto load = [&](const char* name, uint16_t table, uint64_t count,
                  const std::function<void(uint64_t, uint64_t*, std::span<std::byte>)>& gen) {
    Status st = cluster.Load(table, count, gen);
    if (!st.ok()) return LoadFailed(std::string("loading ") + name, st);
    rows_loaded_ += count;
    return Status::Ok();
  };

  POND_RETURN_IF_ERROR(load("item", t_.item, I, [&](uint64_t i, uint64_t* key, auto v) {
    *key = ItemKey(static_cast<uint32_t>(i + 1));
    RowRng r(seed, kItem, *key);
    Fill(v, ItemRow{.price = r.In(100, 10'000), .im_id = static_cast<uint32_t>(r.In(1, 10'000))});
  }));
  POND_RETURN_IF_ERROR(load("warehouse", t_.warehouse, W, [&](uint64_t i, uint64_t* key, auto v) {
    const auto w = static_cast<uint32_t>(i + 1);
    *key = WarehouseKey(w);
    RowRng r(seed, kWh, *key);
    // W_YTD 300 000.00: ten districts' D_YTD of 30 000.00 (condition 1 holds from the start).
    Fill(v,
         WarehouseRow{.ytd = 30'000'000, .tax = static_cast<uint32_t>(r.In(0, 2000)), .w_id = w});
  }));
  POND_RETURN_IF_ERROR(load("district", t_.district, uint64_t{W} * kDistrictsPerWarehouse,
                            [&](uint64_t i, uint64_t* key, auto v) {
                              const auto w = static_cast<uint32_t>(i / kDistrictsPerWarehouse + 1);
                              const auto d = static_cast<uint32_t>(i % kDistrictsPerWarehouse + 1);
                              *key = DistrictKey(w, d);
                              RowRng r(seed, kDist, *key);
                              Fill(v, DistrictRow{.ytd = 3'000'000,
                                                  .tax = static_cast<uint32_t>(r.In(0, 2000)),
                                                  .next_o_id = C + 1});
                            }));
  POND_RETURN_IF_ERROR(
      load("stock", t_.stock, uint64_t{W} * I, [&](uint64_t i, uint64_t* key, auto v) {
        *key = StockKey(static_cast<uint32_t>(i / I + 1), static_cast<uint32_t>(i % I + 1));
        RowRng r(seed, kStock, *key);
        Fill(v, StockRow{.quantity = static_cast<int32_t>(r.In(10, 100))});
      }));

  // District by district: the rows of one district follow from its plan.
  for (uint32_t w = 1; w <= W; w++) {
    for (uint32_t d = 1; d <= kDistrictsPerWarehouse; d++) {
      const DistrictPlan plan = PlanDistrict(p_, nu_, seed, w, d);
      POND_RETURN_IF_ERROR(load("customer", t_.customer, C, [&](uint64_t i, uint64_t* key, auto v) {
        const auto c = static_cast<uint32_t>(i + 1);
        *key = CustomerKey(w, d, c);
        RowRng r(seed, kCust, *key);
        // Clause 4.3.3.1: C_BALANCE -10.00, C_YTD_PAYMENT 10.00, 10% bad credit.
        Fill(v, CustomerRow{.balance = -1000,
                            .ytd_payment = 1000,
                            .payment_cnt = 1,
                            .discount = static_cast<uint16_t>(r.In(0, 5000)),
                            .last = plan.last[c - 1],
                            .bad_credit = static_cast<uint8_t>(r.In(1, 10) == 1 ? 1 : 0)});
      }));
      POND_RETURN_IF_ERROR(
          load("customer_name", t_.customer_name, C, [&](uint64_t i, uint64_t* key, auto v) {
            const auto c = static_cast<uint32_t>(i + 1);
            *key = CustomerNameKey(w, d, plan.last[c - 1], c);
            Fill(v, IndexRow{.id = c});
          }));
      POND_RETURN_IF_ERROR(load("history", t_.history, C, [&](uint64_t i, uint64_t* key, auto v) {
        const auto c = static_cast<uint32_t>(i + 1);
        // Tags from clients start at 1 << 32: the load's rows take the ones below.
        *key = HistoryKey(w, uint64_t{d} << 12 | c);
        Fill(v, HistoryRow{.amount = 1000,
                           .c_id = c,
                           .c_w_id = static_cast<uint16_t>(w),
                           .c_d_id = static_cast<uint8_t>(d),
                           .d_id = static_cast<uint8_t>(d)});
      }));
      POND_RETURN_IF_ERROR(load("orders", t_.orders, C, [&](uint64_t i, uint64_t* key, auto v) {
        const auto o = static_cast<uint32_t>(i + 1);
        *key = OrderKey(w, d, o);
        RowRng r(seed, kOrdCarrier, *key);
        Fill(v, OrderRow{.c_id = plan.customer[o - 1],
                         .ol_cnt = static_cast<uint8_t>(InitialLines(seed, w, d, o)),
                         .carrier_id = static_cast<uint8_t>(o <= delivered ? r.In(1, 10) : 0),
                         .all_local = 1});
      }));
      POND_RETURN_IF_ERROR(load("order_by_customer", t_.order_by_customer, C,
                                [&](uint64_t i, uint64_t* key, auto v) {
                                  const auto o = static_cast<uint32_t>(i + 1);
                                  *key = OrderByCustomerKey(w, d, plan.customer[o - 1], o);
                                  Fill(v, IndexRow{.id = o});
                                }));
      POND_RETURN_IF_ERROR(
          load("new_order", t_.new_order, C - delivered, [&](uint64_t i, uint64_t* key, auto v) {
            const auto o = static_cast<uint32_t>(delivered + i + 1);
            *key = NewOrderKey(w, d, o);
            Fill(v, NewOrderRow{.o_id = o});
          }));
      // The lines, listed first: Load wants an index, and orders have 5 to 15 lines.
      std::vector<uint64_t> lines;
      for (uint32_t o = 1; o <= C; o++) {
        const uint32_t n = InitialLines(seed, w, d, o);
        for (uint32_t ol = 1; ol <= n; ol++) lines.push_back(OrderLineKey(w, d, o, ol));
      }
      POND_RETURN_IF_ERROR(
          load("order_line", t_.order_line, lines.size(), [&](uint64_t i, uint64_t* key, auto v) {
            *key = lines[i];
            const uint32_t o =
                static_cast<uint32_t>((lines[i] >> (12 + kLineBits)) & (kOrderIdsMax - 1));
            RowRng r(seed, kLine, *key);
            // Clause 4.3.3.1: delivered lines have a date and no amount, the others an amount.
            Fill(v, OrderLineRow{.amount = o <= delivered ? 0 : r.In(1, 999'999),
                                 .delivery_d = o <= delivered ? 1u : 0u,
                                 .i_id = static_cast<uint32_t>(r.In(1, I)),
                                 .supply_w_id = static_cast<uint16_t>(w),
                                 .quantity = 5});
          }));
    }
  }
  return Status::Ok();
}

}  // namespace pond::bench
