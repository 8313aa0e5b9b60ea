#include "pond/bench/tpcc_check.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include "pond/bench/tpcc_schema.h"

namespace pond::bench {

using namespace tpcc;  // NOLINT: the schema's names are this file's vocabulary

namespace {

// Rows per read-only transaction of the check. A Scan adds every key it returns to its
// transaction, so a district's order lines (tens of thousands at the spec's scale) are read in
// pieces, each transaction small. Nothing else runs while the check reads, so a district read in
// pieces is read as one state.
constexpr size_t kScanChunk = 512;

// Calls `fn` on every row of [low, high) in key order, once each, reading kScanChunk rows per
// read-only transaction.
Task<Status> ScanEach(Session& s, uint16_t table, uint64_t low, uint64_t high,
                      const std::function<void(const ScanRow&)>& fn) {
  std::vector<ScanRow> rows;
  while (low < high) {
    Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& tx) -> Task<Status> {
      Result<std::vector<ScanRow>> r = co_await tx.Scan(table, low, high, kScanChunk);
      if (!r.ok()) co_return r.status();
      rows = std::move(*r);
      co_return Status::Ok();
    });
    if (!st.ok()) co_return st;
    for (const ScanRow& r : rows) fn(r);
    if (rows.size() < kScanChunk) break;
    // The next key up in the shard's order: one above the shard's bits.
    low = rows.back().key + (uint64_t{1} << 12);
  }
  co_return Status::Ok();
}

}  // namespace

Task<Status> ReadTpccDistrict(Session& s, const TpccTables& t, uint32_t w, uint32_t d,
                              TpccDistrictFacts* f) {
  *f = TpccDistrictFacts{};
  POND_CO_RETURN_IF_ERROR(co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& tx) -> Task<Status> {
    tx.AddRO(t.district, DistrictKey(w, d));
    POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
    Result<std::span<const std::byte>> dist = tx.Read(t.district, DistrictKey(w, d));
    if (!dist.ok()) co_return dist.status();
    const DistrictRow dr = Decode<DistrictRow>(*dist);
    f->ytd = dr.ytd;
    f->next_o_id = dr.next_o_id;
    co_return Status::Ok();
  }));
  POND_CO_RETURN_IF_ERROR(
      co_await ScanEach(s, t.orders, DistrictLow(w, d, kOrderIdBits),
                        DistrictHigh(w, d, kOrderIdBits), [f](const ScanRow& r) {
                          f->orders++;
                          f->max_o = std::max<uint64_t>(f->max_o, OrderIdOf(r.key));
                          f->sum_ol_cnt += Decode<OrderRow>(r.value).ol_cnt;
                        }));
  POND_CO_RETURN_IF_ERROR(
      co_await ScanEach(s, t.new_order, DistrictLow(w, d, kOrderIdBits),
                        DistrictHigh(w, d, kOrderIdBits), [f](const ScanRow& r) {
                          const uint64_t o = OrderIdOf(r.key);
                          f->min_no = f->new_orders == 0 ? o : std::min(f->min_no, o);
                          f->max_no = std::max(f->max_no, o);
                          f->new_orders++;
                        }));
  co_return co_await ScanEach(s, t.order_line, DistrictLow(w, d, kOrderLineStripeBits),
                              DistrictHigh(w, d, kOrderLineStripeBits),
                              [f](const ScanRow&) { f->lines++; });
}

namespace {

Task<Status> ReadWarehouse(Txn& tx, const TpccTables& t, uint32_t w, TpccWarehouseFacts* f) {
  *f = TpccWarehouseFacts{};
  tx.AddRO(t.warehouse, WarehouseKey(w));
  for (uint32_t d = 1; d <= kDistrictsPerWarehouse; d++) tx.AddRO(t.district, DistrictKey(w, d));
  POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
  Result<std::span<const std::byte>> wh = tx.Read(t.warehouse, WarehouseKey(w));
  if (!wh.ok()) co_return wh.status();
  f->ytd = Decode<WarehouseRow>(*wh).ytd;
  for (uint32_t d = 1; d <= kDistrictsPerWarehouse; d++) {
    Result<std::span<const std::byte>> dist = tx.Read(t.district, DistrictKey(w, d));
    if (!dist.ok()) co_return dist.status();
    f->sum_d_ytd += Decode<DistrictRow>(*dist).ytd;
  }
  co_return Status::Ok();
}

std::string Money(int64_t cents) {
  const char* sign = cents < 0 ? "-" : "";
  const uint64_t a = cents < 0 ? 0 - static_cast<uint64_t>(cents) : static_cast<uint64_t>(cents);
  return fmt::format("{}{}.{:02}", sign, a / 100, a % 100);
}

void Judge(TpccCondition& c, bool holds, const std::function<std::string()>& why) {
  c.checked++;
  if (holds) return;
  if (c.failed++ == 0) c.first_failure = why();
}

}  // namespace

Task<Status> ReadTpccWarehouse(Session& s, const TpccTables& t, uint32_t w, TpccWarehouseFacts* f) {
  return s.RunTxn(TxnKind::kReadOnly,
                  [&t, w, f](Txn& tx) -> Task<Status> { return ReadWarehouse(tx, t, w, f); });
}

bool TpccCheckResult::ok() const {
  if (!read_error.empty()) return false;
  return std::all_of(conditions.begin(), conditions.end(),
                     [](const TpccCondition& c) { return c.failed == 0 && c.checked > 0; });
}

std::string TpccCheckResult::Summary() const {
  if (!read_error.empty()) return "not checked: " + read_error;
  std::string s;
  for (const TpccCondition& c : conditions) {
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", c.clause,
                     c.failed == 0 ? "ok" : fmt::format("FAILED x{}", c.failed));
  }
  return s + fmt::format(
                 " over {} warehouses and {} districts ({} orders, {} new orders, {} "
                 "order lines)",
                 conditions[0].checked, conditions[1].checked, orders, new_orders, order_lines);
}

std::string TpccCheckResult::Brief() const {
  if (!ok()) return Summary();
  return fmt::format(
      "conditions 1-4 hold in {} warehouses, {} districts: {} orders, {} new "
      "orders, {} order lines",
      conditions[0].checked, conditions[1].checked, orders, new_orders, order_lines);
}

std::string TpccCheckResult::Detail() const {
  if (!read_error.empty()) return "the check's reads failed: " + read_error;
  std::string s;
  for (const TpccCondition& c : conditions) {
    if (c.failed == 0 && c.checked > 0) continue;
    s += fmt::format("{}{} ({}) failed in {} of {}: {}", s.empty() ? "" : "; ", c.clause, c.rule,
                     c.failed, c.checked, c.checked == 0 ? "nothing checked" : c.first_failure);
  }
  return s;
}

nlohmann::json TpccCheckResult::Json() const {
  nlohmann::json conds = nlohmann::json::array();
  for (const TpccCondition& c : conditions) {
    conds.push_back({{"clause", c.clause},
                     {"rule", c.rule},
                     {"ok", c.failed == 0 && c.checked > 0},
                     {"checked", c.checked},
                     {"failed", c.failed},
                     {"first_failure", c.first_failure}});
  }
  return {{"ok", ok()},
          {"conditions", conds},
          {"orders", orders},
          {"new_orders", new_orders},
          {"order_lines", order_lines},
          {"detail", ok() ? std::string() : Detail()}};
}

TpccCheckResult JudgeTpcc(const std::vector<TpccWarehouseFacts>& wf,
                          const std::vector<TpccDistrictFacts>& df) {
  TpccCheckResult r;
  r.conditions[0].clause = "3.3.2.1";
  r.conditions[0].rule = "W_YTD = sum(D_YTD)";
  r.conditions[1].clause = "3.3.2.2";
  r.conditions[1].rule = "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)";
  r.conditions[2].clause = "3.3.2.3";
  r.conditions[2].rule = "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER";
  r.conditions[3].clause = "3.3.2.4";
  r.conditions[3].rule = "sum(O_OL_CNT) = rows in ORDER-LINE";
  for (size_t i = 0; i < wf.size(); i++) {
    const TpccWarehouseFacts& f = wf[i];
    Judge(r.conditions[0], f.ytd == f.sum_d_ytd, [&] {
      return fmt::format("warehouse {}: W_YTD {} but sum(D_YTD) {}", i + 1, Money(f.ytd),
                         Money(f.sum_d_ytd));
    });
  }
  for (uint64_t j = 0; j < df.size(); j++) {
    const TpccDistrictFacts& f = df[j];
    const auto where = fmt::format("warehouse {} district {}", j / kDistrictsPerWarehouse + 1,
                                   j % kDistrictsPerWarehouse + 1);
    r.orders += f.orders;
    r.new_orders += f.new_orders;
    r.order_lines += f.lines;
    const uint64_t last = f.next_o_id - uint64_t{1};
    Judge(r.conditions[1], last == f.max_o && (f.new_orders == 0 || last == f.max_no), [&] {
      return fmt::format("{}: D_NEXT_O_ID - 1 = {}, max(O_ID) = {}, max(NO_O_ID) = {}", where, last,
                         f.max_o, f.new_orders == 0 ? "none" : std::to_string(f.max_no));
    });
    Judge(r.conditions[2], f.new_orders == 0 || f.max_no - f.min_no + 1 == f.new_orders, [&] {
      return fmt::format("{}: NO_O_ID {}..{} but {} rows", where, f.min_no, f.max_no, f.new_orders);
    });
    Judge(r.conditions[3], f.sum_ol_cnt == f.lines, [&] {
      return fmt::format("{}: sum(O_OL_CNT) = {} but {} order lines", where, f.sum_ol_cnt, f.lines);
    });
  }
  return r;
}

TpccCheckResult CheckTpccConsistency(Cluster& cluster, const TpccTables& t, uint32_t warehouses,
                                     int coros) {
  const uint64_t districts = uint64_t{warehouses} * kDistrictsPerWarehouse;
  std::vector<TpccDistrictFacts> dfacts(districts);
  std::vector<TpccWarehouseFacts> wfacts(warehouses);
  // Jobs: districts first (the long ones), then warehouses; taken in turn by every client.
  std::atomic<uint64_t> next_job{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string read_error;  // guarded by mu
  cluster.Run(coros, [&](Session& s) -> Task<void> {
    for (uint64_t j = next_job++; j < districts + warehouses && !failed; j = next_job++) {
      Status st;
      if (j < districts) {
        const auto w = static_cast<uint32_t>(j / kDistrictsPerWarehouse + 1);
        const auto d = static_cast<uint32_t>(j % kDistrictsPerWarehouse + 1);
        st = co_await ReadTpccDistrict(s, t, w, d, &dfacts[j]);
      } else {
        const auto w = static_cast<uint32_t>(j - districts + 1);
        st = co_await ReadTpccWarehouse(s, t, w, &wfacts[w - 1]);
      }
      if (!st.ok()) {
        failed = true;
        std::lock_guard lock(mu);
        if (read_error.empty()) read_error = st.ToString();
      }
    }
  });
  if (failed) {
    TpccCheckResult r = JudgeTpcc({}, {});
    r.read_error = read_error;
    return r;
  }
  return JudgeTpcc(wfacts, dfacts);
}

WorkloadCheck TpccWorkloadCheck(const TpccCheckResult& c) {
  WorkloadCheck check;
  check.name = "consistency check";
  check.label = "consistency";
  check.json_key = "consistency_check";
  check.ok = c.ok();
  check.summary = c.Summary();
  check.brief = c.Brief();
  check.detail = c.ok() ? "" : c.Detail();
  check.json = c.Json();
  return check;
}

}  // namespace pond::bench
