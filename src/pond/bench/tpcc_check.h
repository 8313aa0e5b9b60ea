// The TPC-C consistency conditions 1–4 (clause 3.3.2.1–3.3.2.4), checked by reading the
// database back through read-only transactions while nothing else runs:
//   1. per warehouse: W_YTD = sum of its districts' D_YTD;
//   2. per district:  D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID);
//   3. per district:  max(NO_O_ID) - min(NO_O_ID) + 1 = number of NEW-ORDER rows;
//   4. per district:  sum of O_OL_CNT = number of ORDER-LINE rows.
// A district's orders, new orders and order lines are read with Txn::Scan over its key ranges,
// a few hundred rows per transaction (nothing else runs, so the pieces show one state), a
// warehouse and its ten districts in one snapshot. A district whose
// new orders were all delivered satisfies 2 by its orders alone and 3 trivially (the spec's
// conditions assume rows exist).
//
// Thread rules: called on the thread that drives the cluster (as Workload::Finish), between runs.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "pond/bench/tpcc.h"
#include "pond/bench/workload.h"

namespace pond::bench {

struct TpccCondition {
  const char* clause = "";  // "3.3.2.1"
  const char* rule = "";    // "W_YTD = sum(D_YTD)"
  uint64_t checked = 0;     // warehouses (1) or districts (2-4) checked
  uint64_t failed = 0;
  std::string first_failure;  // where and what, for the first failing one
};

struct TpccCheckResult {
  std::array<TpccCondition, 4> conditions;
  // What the reads found, over every district.
  uint64_t orders = 0, new_orders = 0, order_lines = 0;
  std::string read_error;  // a read that failed: nothing was checked

  bool ok() const;
  // "3.3.2.1 ok, 3.3.2.2 ok, ..., over 3 warehouses, 30 districts (...)".
  std::string Summary() const;
  // The same, shorter, for a comparison's row: "conditions 1-4 hold in 30 districts (...)".
  std::string Brief() const;
  // The failed conditions with their first failures; empty if ok.
  std::string Detail() const;
  nlohmann::json Json() const;
};

// What the check reads of one district and of one warehouse: served TPC-C replies with them
// (docs/formats.md "Served procedures"), so their layout is pinned.
struct TpccDistrictFacts {
  int64_t ytd = 0;
  uint64_t next_o_id = 0;
  uint64_t orders = 0, max_o = 0, sum_ol_cnt = 0;
  uint64_t new_orders = 0, max_no = 0, min_no = 0;
  uint64_t lines = 0;
};
static_assert(sizeof(TpccDistrictFacts) == 72 && std::is_trivially_copyable_v<TpccDistrictFacts>);
struct TpccWarehouseFacts {
  int64_t ytd = 0;
  int64_t sum_d_ytd = 0;
};
static_assert(sizeof(TpccWarehouseFacts) == 16);

// Reads district (w, d) — its row, then its orders, new orders and order lines in pieces of a
// few hundred rows per read-only transaction — or warehouse w and its ten districts in one
// snapshot. Nothing else may run meanwhile: the pieces show one state only then.
Task<Status> ReadTpccDistrict(Session& s, const TpccTables& t, uint32_t w, uint32_t d,
                              TpccDistrictFacts* f);
Task<Status> ReadTpccWarehouse(Session& s, const TpccTables& t, uint32_t w, TpccWarehouseFacts* f);

// Conditions 1-4 judged on what was read: wf[w - 1] for each warehouse, df[(w - 1) * 10 + d - 1]
// for each district.
TpccCheckResult JudgeTpcc(const std::vector<TpccWarehouseFacts>& wf,
                          const std::vector<TpccDistrictFacts>& df);

// Checks conditions 1-4 over warehouses 1..`warehouses`, reading with `coros` clients per worker.
TpccCheckResult CheckTpccConsistency(Cluster& cluster, const TpccTables& t, uint32_t warehouses,
                                     int coros);

// The result as a workload's check (label "consistency", JSON key "consistency_check").
WorkloadCheck TpccWorkloadCheck(const TpccCheckResult& c);

}  // namespace pond::bench
