#include "pond/bench/tpcc_txns.h"

#include <fmt/core.h>

#include <algorithm>
#include <vector>

namespace pond::bench {

using namespace tpcc;  // NOLINT: the schema's names are this file's vocabulary

namespace {

// The most customers one last name can have in a district: where its scan stops.
constexpr size_t kNameMatchesMax = kCustomersMax;
// Clause 2.8.2.2: Stock-Level looks at the district's last 20 orders.
constexpr uint32_t kStockLevelOrders = 20;

// A row that must exist; its absence is a broken invariant, not an answer.
template <typename Row>
Result<Row> Get(const Txn& tx, uint16_t table, uint64_t key, const char* what) {
  Result<std::span<const std::byte>> v = tx.Read(table, key);
  if (!v.ok()) {
    if (v.status().code() == Code::kNotFound) {
      return Internal(
          fmt::format("{} {:#x} (warehouse {}) is missing", what, key, WarehouseOf(key)));
    }
    return v.status();
  }
  return Decode<Row>(*v);
}

template <typename Row>
Status Put(Txn& tx, uint16_t table, uint64_t key, const Row& r) {
  return tx.Write(table, key, Bytes(r));
}

// Clause 2.5.2.2 and 2.6.2.2: of the customers with one last name, sorted by first name, the
// one at position ceil(n / 2). Pond keeps no first names; c_id orders them instead.
Task<Result<uint32_t>> CustomerByName(Txn& tx, const TpccTables& t, uint32_t w, uint32_t d,
                                      uint32_t last) {
  Result<std::vector<ScanRow>> rows =
      co_await tx.Scan(t.customer_name, CustomerNameKey(w, d, last, 0),
                       CustomerNameKey(w, d, last + 1, 0), kNameMatchesMax);
  if (!rows.ok()) co_return rows.status();
  if (rows->empty()) {
    co_return Internal(fmt::format("no customer named {} in warehouse {} district {}", last, w, d));
  }
  co_return CustomerIdOfNameKey((*rows)[(rows->size() - 1) / 2].key);
}

}  // namespace

uint32_t ScaledNuRandA(uint32_t spec_a, uint32_t spec_n, uint32_t n) {
  if (n >= spec_n) return spec_a;
  const uint64_t want = (uint64_t{spec_a} + 1) * n / spec_n;
  uint64_t a = 1;
  while (a * 2 <= want) a *= 2;
  return static_cast<uint32_t>(a - 1);
}

TpccArgs DrawTpccArgs(Rng& rng, const TpccEnv& e, TpccTxn kind, uint32_t w, uint32_t d,
                      uint64_t tag) {
  const TpccParams& p = e.p;
  const uint32_t wh = p.warehouses;
  const uint32_t a_cid = ScaledNuRandA(1023, 3000, p.customers);
  const uint32_t names = TpccLastNames(p);
  const uint32_t a_last = ScaledNuRandA(255, kLastNames, names);
  // Another warehouse than w, uniformly (callers ask only when there is one).
  auto other = [&rng, wh, w] {
    uint32_t o = 1 + static_cast<uint32_t>(rng.Uniform(wh - 1));
    return static_cast<uint16_t>(o >= w ? o + 1 : o);
  };
  auto customer = [&](TpccArgs& a) {
    // 60% by last name (clauses 2.5.1.2 and 2.6.1.2).
    if (rng.Uniform(100) < 60) {
      a.c_id = 0;
      a.last = static_cast<uint16_t>(NuRand(rng, a_last, 0, names - 1, e.nu.c_last));
    } else {
      a.c_id = NuRand(rng, a_cid, 1, p.customers, e.nu.c_id);
    }
  };
  TpccArgs a;
  a.tag = tag;
  a.kind = static_cast<uint8_t>(kind);
  a.w = static_cast<uint16_t>(w);
  a.d = static_cast<uint16_t>(1 + rng.Uniform(kDistrictsPerWarehouse));
  switch (kind) {
    case TpccTxn::kNewOrder: {
      const uint32_t a_item = ScaledNuRandA(8191, 100'000, p.items);
      a.c_id = NuRand(rng, a_cid, 1, p.customers, e.nu.c_id);
      a.ol_cnt =
          static_cast<uint8_t>(kOrderLinesMin + rng.Uniform(kOrderLinesMax - kOrderLinesMin + 1));
      const bool rollback = rng.Uniform(100) == 0;  // clause 2.4.1.4: 1%
      for (uint32_t i = 0; i < a.ol_cnt; i++) {
        TpccLine& l = a.lines[i];
        l.i_id = NuRand(rng, a_item, 1, p.items, e.nu.i_id);
        // The last line of a rolled-back order names an unused item.
        if (rollback && i + 1 == a.ol_cnt) l.i_id = p.items + 1;
        // Clause 2.4.1.5: 1% of lines are supplied by another warehouse, when there is one.
        l.supply_w = wh > 1 && rng.Uniform(100) == 0 ? other() : static_cast<uint16_t>(w);
        l.quantity = static_cast<uint8_t>(1 + rng.Uniform(10));
      }
      break;
    }
    case TpccTxn::kPayment:
      // Clause 2.5.1.2: 85% of customers are of the home district, 15% of another warehouse.
      if (wh > 1 && rng.Uniform(100) < 15) {
        a.c_w = other();
        a.c_d = static_cast<uint16_t>(1 + rng.Uniform(kDistrictsPerWarehouse));
      } else {
        a.c_w = a.w;
        a.c_d = a.d;
      }
      customer(a);
      a.amount = static_cast<int64_t>(100 + rng.Uniform(500'000 - 100 + 1));
      break;
    case TpccTxn::kOrderStatus:
      customer(a);
      break;
    case TpccTxn::kDelivery:
      a.carrier = static_cast<uint8_t>(1 + rng.Uniform(10));
      break;
    case TpccTxn::kStockLevel:
      a.d = static_cast<uint16_t>(d);  // clause 2.8.1.1: the terminal's own district
      a.threshold = static_cast<uint8_t>(10 + rng.Uniform(11));
      break;
  }
  return a;
}

// Clause 2.4: places an order of `ol_cnt` lines, taking its id from the district and each line's
// item from its supplier's stock.
Task<Status> TpccNewOrder(Session& s, TpccEnv& e, const TpccArgs& a) {
  const TpccTables& t = e.t;
  Txn tx = s.Begin(TxnKind::kReadWrite);
  const uint64_t dkey = DistrictKey(a.w, a.d);
  tx.AddRO(t.warehouse, WarehouseKey(a.w));
  tx.AddRW(t.district, dkey);
  tx.AddRO(t.customer, CustomerKey(a.w, a.d, a.c_id));
  for (uint32_t i = 0; i < a.ol_cnt; i++) {
    tx.AddRO(t.item, ItemKey(a.lines[i].i_id));
    tx.AddRW(t.stock, StockKey(a.lines[i].supply_w, a.lines[i].i_id));
  }
  POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
  for (uint32_t i = 0; i < a.ol_cnt; i++) {
    Result<std::span<const std::byte>> item = tx.Read(t.item, ItemKey(a.lines[i].i_id));
    if (item.ok()) continue;
    if (item.status().code() != Code::kNotFound) co_return item.status();
    if (a.lines[i].i_id <= e.p.items)
      co_return Internal("item " + std::to_string(a.lines[i].i_id) + " is missing");
    tx.Abort();
    co_return NotFound(fmt::format("rolled back: item {} is unused", a.lines[i].i_id));
  }
  Result<DistrictRow> dist = Get<DistrictRow>(tx, t.district, dkey, "district");
  if (!dist.ok()) co_return dist.status();
  POND_CO_RETURN_IF_ERROR(
      Get<WarehouseRow>(tx, t.warehouse, WarehouseKey(a.w), "warehouse").status());
  POND_CO_RETURN_IF_ERROR(
      Get<CustomerRow>(tx, t.customer, CustomerKey(a.w, a.d, a.c_id), "customer").status());
  const uint32_t o = dist->next_o_id;
  if (o >= kOrderIdsMax) co_return OutOfSpace("district order ids ran out");
  DistrictRow nd = *dist;
  nd.next_o_id = o + 1;
  POND_CO_RETURN_IF_ERROR(Put(tx, t.district, dkey, nd));

  const uint64_t now = s.clock().NowNs();
  bool all_local = true;
  for (uint32_t i = 0; i < a.ol_cnt; i++) {
    const TpccLine& l = a.lines[i];
    Result<ItemRow> item = Get<ItemRow>(tx, t.item, ItemKey(l.i_id), "item");
    if (!item.ok()) co_return item.status();
    // A line may repeat an earlier line's item: Read returns this transaction's own write.
    const uint64_t skey = StockKey(l.supply_w, l.i_id);
    Result<StockRow> stock = Get<StockRow>(tx, t.stock, skey, "stock");
    if (!stock.ok()) co_return stock.status();
    StockRow st = *stock;
    // Clause 2.4.2.2: restock by 91 when fewer than 10 would be left.
    st.quantity =
        st.quantity >= l.quantity + 10 ? st.quantity - l.quantity : st.quantity - l.quantity + 91;
    st.ytd += l.quantity;
    st.order_cnt++;
    if (l.supply_w != a.w) {
      st.remote_cnt++;
      all_local = false;
    }
    POND_CO_RETURN_IF_ERROR(Put(tx, t.stock, skey, st));
    OrderLineRow line;
    line.amount = item->price * l.quantity;
    line.i_id = l.i_id;
    line.supply_w_id = l.supply_w;
    line.quantity = l.quantity;
    tx.Insert(t.order_line, OrderLineKey(a.w, a.d, o, i + 1), Bytes(line));
  }
  OrderRow order;
  order.entry_d = now;
  order.c_id = a.c_id;
  order.ol_cnt = a.ol_cnt;
  order.all_local = all_local ? 1 : 0;
  tx.Insert(t.orders, OrderKey(a.w, a.d, o), Bytes(order));
  tx.Insert(t.new_order, NewOrderKey(a.w, a.d, o), Bytes(NewOrderRow{.o_id = o}));
  tx.Insert(t.order_by_customer, OrderByCustomerKey(a.w, a.d, a.c_id, o), Bytes(IndexRow{.id = o}));
  POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
  co_return co_await tx.Commit();
}

// Clause 2.5: a customer pays; the warehouse's, district's and customer's year-to-date amounts
// grow by it, and a history row records it.
Task<Status> TpccPayment(Session& s, TpccEnv& e, const TpccArgs& a) {
  const TpccTables& t = e.t;
  Txn tx = s.Begin(TxnKind::kReadWrite);
  uint32_t c = a.c_id;
  if (c == 0) {
    // The index scan first: it locks nothing that others write, so the hot warehouse and
    // district rows are locked for the shortest time.
    Result<uint32_t> found = co_await CustomerByName(tx, t, a.c_w, a.c_d, a.last);
    if (!found.ok()) co_return found.status();
    c = *found;
  }
  const uint64_t wkey = WarehouseKey(a.w), dkey = DistrictKey(a.w, a.d),
                 ckey = CustomerKey(a.c_w, a.c_d, c);
  tx.AddRW(t.warehouse, wkey);
  tx.AddRW(t.district, dkey);
  tx.AddRW(t.customer, ckey);
  HistoryRow h;
  h.amount = a.amount;
  h.date = s.clock().NowNs();
  h.c_id = c;
  h.c_w_id = a.c_w;
  h.c_d_id = static_cast<uint8_t>(a.c_d);
  h.d_id = static_cast<uint8_t>(a.d);
  tx.Insert(t.history, HistoryKey(a.w, a.tag), Bytes(h));
  POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
  Result<WarehouseRow> wh = Get<WarehouseRow>(tx, t.warehouse, wkey, "warehouse");
  if (!wh.ok()) co_return wh.status();
  Result<DistrictRow> dist = Get<DistrictRow>(tx, t.district, dkey, "district");
  if (!dist.ok()) co_return dist.status();
  Result<CustomerRow> cust = Get<CustomerRow>(tx, t.customer, ckey, "customer");
  if (!cust.ok()) co_return cust.status();
  WarehouseRow nw = *wh;
  nw.ytd += a.amount;
  DistrictRow nd = *dist;
  nd.ytd += a.amount;
  CustomerRow nc = *cust;
  nc.balance -= a.amount;
  nc.ytd_payment += a.amount;
  nc.payment_cnt++;
  POND_CO_RETURN_IF_ERROR(Put(tx, t.warehouse, wkey, nw));
  POND_CO_RETURN_IF_ERROR(Put(tx, t.district, dkey, nd));
  POND_CO_RETURN_IF_ERROR(Put(tx, t.customer, ckey, nc));
  co_return co_await tx.Commit();
}

// Clause 2.6 (read-only): a customer's balance and last order with its lines.
Task<Status> TpccOrderStatus(Session& s, TpccEnv& e, const TpccArgs& a) {
  const TpccTables& t = e.t;
  Txn tx = s.Begin(TxnKind::kReadOnly);
  uint32_t c = a.c_id;
  if (c == 0) {
    Result<uint32_t> found = co_await CustomerByName(tx, t, a.w, a.d, a.last);
    if (!found.ok()) co_return found.status();
    c = *found;
  }
  // What the reads show is judged only once the transaction commits: a single-version protocol
  // (ford) may show a read-only transaction a torn state, which its commit-time validation
  // then refuses.
  Status broken;  // the first thing found wrong
  auto note = [&broken](Status st) {
    if (broken.ok()) broken = std::move(st);
  };
  const uint64_t ckey = CustomerKey(a.w, a.d, c);
  tx.AddRO(t.customer, ckey);
  // The customer's last order: the highest key of its range in the index (every customer has
  // one from the load).
  Result<std::vector<ScanRow>> last =
      co_await tx.Scan(t.order_by_customer, OrderByCustomerKey(a.w, a.d, c, 0),
                       OrderByCustomerKey(a.w, a.d, c + 1, 0), 1, ScanOrder::kDescending);
  if (!last.ok()) co_return last.status();
  note(Get<CustomerRow>(tx, t.customer, ckey, "customer").status());
  if (last->empty()) {
    note(
        Internal(fmt::format("customer {} of warehouse {} district {} has no order", c, a.w, a.d)));
  } else {
    const uint32_t o = OrderIdOf(last->front().key);
    const uint64_t okey = OrderKey(a.w, a.d, o);
    tx.AddRO(t.orders, okey);
    Result<std::vector<ScanRow>> lines =
        co_await tx.Scan(t.order_line, OrderLineKey(a.w, a.d, o, 0),
                         OrderLineKey(a.w, a.d, o + 1, 0), kOrderLinesMax + 1);
    if (!lines.ok()) co_return lines.status();
    Result<OrderRow> order = Get<OrderRow>(tx, t.orders, okey, "order");
    if (!order.ok()) {
      note(order.status());
    } else if (lines->size() != order->ol_cnt) {
      // An order and its lines are written by one transaction: a snapshot holds all or none.
      note(Internal(fmt::format("order {:#x} has O_OL_CNT {} but {} lines in one snapshot", okey,
                                order->ol_cnt, lines->size())));
    }
  }
  POND_CO_RETURN_IF_ERROR(co_await tx.Commit());
  co_return broken;
}

// Clause 2.7: delivers the oldest undelivered order of each of the warehouse's ten districts —
// deletes its new-order row, sets its carrier and its lines' delivery date, and credits the
// customer with the lines' amounts. A district without one is skipped. One transaction for all
// ten.
Task<Status> TpccDelivery(Session& s, TpccEnv& e, const TpccArgs& a) {
  const TpccTables& t = e.t;
  struct Found {
    uint32_t d = 0, o = 0, c = 0, ol_cnt = 0;
  };
  std::vector<Found> found;
  found.reserve(kDistrictsPerWarehouse);
  Txn tx = s.Begin(TxnKind::kReadWrite);
  for (uint32_t d = 1; d <= kDistrictsPerWarehouse; d++) {
    // The district's oldest new order: the first entry of its range in the tree, since each
    // Delivery takes the entry of the order it delivers out of the tree as it commits (docs/
    // btree.md "The tree cleans itself"). A scan of limit 1 reads about one row.
    Result<std::vector<ScanRow>> oldest = co_await tx.Scan(t.new_order, NewOrderKey(a.w, d, 1),
                                                           DistrictHigh(a.w, d, kOrderIdBits), 1);
    if (!oldest.ok()) co_return oldest.status();
    if (!oldest->empty()) found.push_back({.d = d, .o = OrderIdOf(oldest->front().key)});
  }
  for (const Found& f : found) {
    tx.Delete(t.new_order, NewOrderKey(a.w, f.d, f.o));
    tx.AddRW(t.orders, OrderKey(a.w, f.d, f.o));
  }
  POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
  for (Found& f : found) {
    const uint64_t okey = OrderKey(a.w, f.d, f.o);
    Result<OrderRow> order = Get<OrderRow>(tx, t.orders, okey, "order");
    if (!order.ok()) co_return order.status();
    f.c = order->c_id;
    f.ol_cnt = order->ol_cnt;
    OrderRow no = *order;
    no.carrier_id = a.carrier;
    POND_CO_RETURN_IF_ERROR(Put(tx, t.orders, okey, no));
    tx.AddRW(t.customer, CustomerKey(a.w, f.d, f.c));
    for (uint32_t ol = 1; ol <= f.ol_cnt; ol++) {
      tx.AddRW(t.order_line, OrderLineKey(a.w, f.d, f.o, ol));
    }
  }
  POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
  const uint64_t now = s.clock().NowNs();
  for (const Found& f : found) {
    int64_t sum = 0;
    for (uint32_t ol = 1; ol <= f.ol_cnt; ol++) {
      const uint64_t lkey = OrderLineKey(a.w, f.d, f.o, ol);
      Result<OrderLineRow> line = Get<OrderLineRow>(tx, t.order_line, lkey, "order line");
      if (!line.ok()) co_return line.status();
      sum += line->amount;
      OrderLineRow nl = *line;
      nl.delivery_d = now;
      POND_CO_RETURN_IF_ERROR(Put(tx, t.order_line, lkey, nl));
    }
    const uint64_t ckey = CustomerKey(a.w, f.d, f.c);
    Result<CustomerRow> cust = Get<CustomerRow>(tx, t.customer, ckey, "customer");
    if (!cust.ok()) co_return cust.status();
    CustomerRow nc = *cust;
    nc.balance += sum;
    nc.delivery_cnt++;
    POND_CO_RETURN_IF_ERROR(Put(tx, t.customer, ckey, nc));
  }
  POND_CO_RETURN_IF_ERROR(co_await tx.Commit());
  const uint64_t empty = kDistrictsPerWarehouse - found.size();
  if (empty > 0) {
    (*e.counters)[e.ctx->Worker(s)].empty_districts.fetch_add(empty, std::memory_order_relaxed);
  }
  co_return Status::Ok();
}

// Clause 2.8 (read-only): how many distinct items of the district's last 20 orders are low in
// the warehouse's stock.
Task<Status> TpccStockLevel(Session& s, TpccEnv& e, const TpccArgs& a) {
  const TpccTables& t = e.t;
  Txn tx = s.Begin(TxnKind::kReadOnly);
  const uint64_t dkey = DistrictKey(a.w, a.d);
  tx.AddRO(t.district, dkey);
  POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
  Result<DistrictRow> dist = Get<DistrictRow>(tx, t.district, dkey, "district");
  if (!dist.ok()) co_return dist.status();
  const uint32_t next = dist->next_o_id;
  const uint32_t first = next > kStockLevelOrders ? next - kStockLevelOrders : 1;
  Result<std::vector<ScanRow>> lines =
      co_await tx.Scan(t.order_line, OrderLineKey(a.w, a.d, first, 0),
                       OrderLineKey(a.w, a.d, next, 0), kStockLevelOrders * kOrderLinesMax);
  if (!lines.ok()) co_return lines.status();
  std::vector<uint32_t> items;
  items.reserve(lines->size());
  for (const ScanRow& r : *lines) items.push_back(Decode<OrderLineRow>(r.value).i_id);
  std::sort(items.begin(), items.end());
  items.erase(std::unique(items.begin(), items.end()), items.end());
  for (uint32_t i : items) tx.AddRO(t.stock, StockKey(a.w, i));
  POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
  uint32_t low = 0;
  for (uint32_t i : items) {
    Result<StockRow> st = Get<StockRow>(tx, t.stock, StockKey(a.w, i), "stock");
    if (!st.ok()) co_return st.status();
    if (st->quantity < a.threshold) low++;
  }
  (void)low;  // the terminal's answer; nothing checks it
  co_return co_await tx.Commit();
}

}  // namespace pond::bench
