// TPC-C's schema as Pond stores it: the nine tables and the two secondary indexes, each row's
// 64-bit key and its fixed-size value (docs/workloads.md "TPC-C" lists what each keeps and what
// it leaves out of the spec). Used by the workload (tpcc.cc), its transactions (tpcc_txns.cc), its
// load (tpcc_load.cc) and its consistency check (tpcc_check.cc); nothing here touches a cluster.
//
// Keys. The warehouse id is the critical field (Lotus §4.2): every warehouse-scoped key keeps
// its warehouse's shard in bits 0..11 and the rest of its primary key above, so one warehouse's
// rows share a lock CN. The shard is the warehouse id with its 12 bits reversed: Pond's shard map
// gives each CN a contiguous range of shards (lock/shard_map.h), so warehouses 1, 2, 3, ... land
// on CNs far apart rather than all on CN 0. Above the shard each key lays out its fields from the
// most significant down, so that the ranges the transactions scan — one district's new orders,
// one district's last orders' lines, one customer's orders, one last name's customers — are
// contiguous in an ordered table's order (shard first, then the bits above). Every ordered key
// is nonzero (the shard of warehouse 1..4095 is) and below 2^60, as ordered tables require.
//
// Values are little-endian structs copied in and out with memcpy; their sizes and offsets are
// pinned below. Money is in cents, rates (tax, discount) in units of 0.0001.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "pond/base/assert.h"

namespace pond::bench::tpcc {

inline constexpr uint32_t kDistrictsPerWarehouse = 10;
inline constexpr uint32_t kWarehousesMax = 4095;  // a shard each; shard 0 is never used
inline constexpr uint32_t kCustomersMax = 4095;   // per district: 12 bits of a key
inline constexpr uint32_t kItemsMax = 1 << 20;
inline constexpr uint32_t kOrderIdsMax = 1 << 24;  // per district, initial orders and new ones
inline constexpr uint32_t kLastNames = 1000;       // C_LAST is one of 1000 syllable strings
inline constexpr uint32_t kOrderLinesMax = 15;
inline constexpr uint32_t kOrderLinesMin = 5;

// The shard of warehouse w (1..4095): w's 12 bits reversed.
constexpr uint64_t Shard(uint32_t w) {
  uint64_t s = 0;
  for (int b = 0; b < 12; b++) s |= uint64_t{(w >> b) & 1} << (11 - b);
  return s;
}
// The warehouse a key of a warehouse-scoped table belongs to.
constexpr uint32_t WarehouseOf(uint64_t key) { return static_cast<uint32_t>(Shard(key & 0xfff)); }
static_assert(Shard(1) == 2048 && Shard(2) == 1024 && WarehouseOf(Shard(77) | 5 << 12) == 77);

constexpr uint64_t Scoped(uint32_t w, uint64_t rest) { return rest << 12 | Shard(w); }

constexpr uint64_t WarehouseKey(uint32_t w) { return Scoped(w, 0); }
constexpr uint64_t DistrictKey(uint32_t w, uint32_t d) { return Scoped(w, d); }
constexpr uint64_t CustomerKey(uint32_t w, uint32_t d, uint32_t c) {
  return Scoped(w, uint64_t{d} << 12 | c);
}
constexpr uint64_t StockKey(uint32_t w, uint32_t i) { return Scoped(w, i); }
// Not warehouse-scoped: items are shared by every warehouse and never written.
constexpr uint64_t ItemKey(uint32_t i) { return i; }
// History has no primary key in the spec; a unique tag per Payment (the caller's client and call
// number, below 2^48) makes one.
constexpr uint64_t HistoryKey(uint32_t w, uint64_t tag) { return Scoped(w, tag); }

// Ordered tables. A district's orders and new orders: (d, o_id) with o_id below 2^24, so one
// district is one run of keys, ascending by order id.
inline constexpr int kOrderIdBits = 24;
constexpr uint64_t OrderKey(uint32_t w, uint32_t d, uint32_t o) {
  return Scoped(w, uint64_t{d} << kOrderIdBits | o);
}
constexpr uint64_t NewOrderKey(uint32_t w, uint32_t d, uint32_t o) { return OrderKey(w, d, o); }
constexpr uint32_t OrderIdOf(uint64_t order_key) {
  return static_cast<uint32_t>((order_key >> 12) & (kOrderIdsMax - 1));
}
// Order lines: (d, o_id, ol_number) with ol_number 1..15 in 4 bits, so one order's lines and the
// lines of a run of orders are each contiguous.
inline constexpr int kLineBits = 4;
constexpr uint64_t OrderLineKey(uint32_t w, uint32_t d, uint32_t o, uint32_t ol) {
  return Scoped(w, (uint64_t{d} << kOrderIdBits | o) << kLineBits | ol);
}
// The secondary index of customers by last name: (d, last name number, c_id).
constexpr uint64_t CustomerNameKey(uint32_t w, uint32_t d, uint32_t last, uint32_t c) {
  return Scoped(w, (uint64_t{d} << 10 | last) << 12 | c);
}
constexpr uint32_t CustomerIdOfNameKey(uint64_t key) {
  return static_cast<uint32_t>((key >> 12) & 0xfff);
}
// The secondary index of orders by customer: (d, c_id, o_id), so a customer's last order is the
// highest key of its range.
constexpr uint64_t OrderByCustomerKey(uint32_t w, uint32_t d, uint32_t c, uint32_t o) {
  return Scoped(w, (uint64_t{d} << 12 | c) << kOrderIdBits | o);
}

// Stripe widths (TableOptions::stripe_bits, counted above the shard): one stripe per district in
// every ordered table. A district's New-Orders already serialise on the district row, so inserts
// into one stripe cost no concurrency, and Delivery's scan of a district's new orders reads one
// stripe row.
inline constexpr int kNewOrderStripeBits = kOrderIdBits;
inline constexpr int kOrderStripeBits = kOrderIdBits;
inline constexpr int kOrderLineStripeBits = kOrderIdBits + kLineBits;
inline constexpr int kCustomerNameStripeBits = 10 + 12;
inline constexpr int kOrderByCustomerStripeBits = 12 + kOrderIdBits;

// [low, high) of one district's keys in an ordered table whose district field sits at `shift`
// bits above the shard.
constexpr uint64_t DistrictLow(uint32_t w, uint32_t d, int shift) {
  return Scoped(w, uint64_t{d} << shift);
}
constexpr uint64_t DistrictHigh(uint32_t w, uint32_t d, int shift) {
  return Scoped(w, uint64_t{d + 1} << shift);
}
static_assert(DistrictHigh(kWarehousesMax, kDistrictsPerWarehouse, kOrderByCustomerStripeBits) <
                  uint64_t{1} << 60,
              "ordered keys with a critical field stay below 2^60");

// ---- Values ----------------------------------------------------------------------------------

// WAREHOUSE: W_YTD and W_TAX (name and address left out).
struct WarehouseRow {
  int64_t ytd = 0;
  uint32_t tax = 0;
  uint32_t w_id = 0;
};
static_assert(sizeof(WarehouseRow) == 16 && offsetof(WarehouseRow, tax) == 8);

// DISTRICT: D_YTD, D_TAX, D_NEXT_O_ID.
struct DistrictRow {
  int64_t ytd = 0;
  uint32_t tax = 0;
  uint32_t next_o_id = 0;
};
static_assert(sizeof(DistrictRow) == 16 && offsetof(DistrictRow, next_o_id) == 12);

// CUSTOMER: the balances and counters Payment and Delivery keep, the discount and credit New-Order
// and Payment read, and the last name's number (names, address, phone, C_DATA left out).
struct CustomerRow {
  int64_t balance = 0;
  int64_t ytd_payment = 0;
  uint32_t payment_cnt = 0;
  uint32_t delivery_cnt = 0;
  uint16_t discount = 0;
  uint16_t last = 0;  // 0..999: which of the 1000 C_LAST strings
  uint8_t bad_credit = 0;
  uint8_t pad[3] = {};
};
static_assert(sizeof(CustomerRow) == 32 && offsetof(CustomerRow, discount) == 24 &&
              offsetof(CustomerRow, bad_credit) == 28);

// HISTORY: who paid, where, how much, when (H_DATA left out; H_W_ID is the key's warehouse).
struct HistoryRow {
  int64_t amount = 0;
  uint64_t date = 0;
  uint32_t c_id = 0;
  uint16_t c_w_id = 0;
  uint8_t c_d_id = 0;
  uint8_t d_id = 0;
};
static_assert(sizeof(HistoryRow) == 24 && offsetof(HistoryRow, c_id) == 16);

// NEW-ORDER: the key is the whole row; the value repeats the order id for the check.
struct NewOrderRow {
  uint32_t o_id = 0;
  uint32_t pad = 0;
};
static_assert(sizeof(NewOrderRow) == 8);

// ORDER: O_C_ID, O_ENTRY_D, O_CARRIER_ID (0: none yet), O_OL_CNT, O_ALL_LOCAL.
struct OrderRow {
  uint64_t entry_d = 0;
  uint32_t c_id = 0;
  uint8_t ol_cnt = 0;
  uint8_t carrier_id = 0;
  uint8_t all_local = 0;
  uint8_t pad = 0;
};
static_assert(sizeof(OrderRow) == 16 && offsetof(OrderRow, ol_cnt) == 12);

// ORDER-LINE: OL_AMOUNT, OL_DELIVERY_D (0: not delivered), OL_I_ID, OL_SUPPLY_W_ID, OL_QUANTITY
// (OL_DIST_INFO left out).
struct OrderLineRow {
  int64_t amount = 0;
  uint64_t delivery_d = 0;
  uint32_t i_id = 0;
  uint16_t supply_w_id = 0;
  uint8_t quantity = 0;
  uint8_t pad = 0;
};
static_assert(sizeof(OrderLineRow) == 24 && offsetof(OrderLineRow, i_id) == 16);

// ITEM: I_PRICE and I_IM_ID (name and data left out).
struct ItemRow {
  int64_t price = 0;
  uint32_t im_id = 0;
  uint32_t pad = 0;
};
static_assert(sizeof(ItemRow) == 16);

// STOCK: S_QUANTITY, S_YTD, S_ORDER_CNT, S_REMOTE_CNT (S_DIST_xx and S_DATA left out).
struct StockRow {
  int64_t ytd = 0;
  int32_t quantity = 0;
  uint32_t order_cnt = 0;
  uint32_t remote_cnt = 0;
  uint32_t pad = 0;
};
static_assert(sizeof(StockRow) == 24 && offsetof(StockRow, quantity) == 8);

// The two secondary indexes: the key says everything; the value repeats the id it leads to.
struct IndexRow {
  uint32_t id = 0;
  uint32_t pad = 0;
};
static_assert(sizeof(IndexRow) == 8);

template <typename Row>
Row Decode(std::span<const std::byte> v) {
  static_assert(std::is_trivially_copyable_v<Row>);
  POND_ASSERT(v.size() == sizeof(Row));
  Row r;
  std::memcpy(&r, v.data(), sizeof(Row));
  return r;
}
template <typename Row>
std::span<const std::byte> Bytes(const Row& r) {
  return std::as_bytes(std::span(&r, 1));
}

}  // namespace pond::bench::tpcc
