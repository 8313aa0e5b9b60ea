// TATP (Telecom Application Transaction Processing, in the form FaSST and FORD run): four
// tables — subscriber, access_info, special_facility, call_forwarding — and seven transactions,
// 80% read-only: GetSubscriberData 35%, GetNewDestination 10%, GetAccessData 35%,
// UpdateSubscriberData 2%, UpdateLocation 14%, InsertCallForwarding 2%, DeleteCallForwarding 2%.
// Subscribers are drawn with TATP's non-uniform NURand. The subscriber id is the critical field:
// every row of a subscriber has the subscriber's shard in key bits 0..11 (Lotus §4.2), so one
// subscriber's rows share a lock CN; calls are routed on the subscriber (§4.3). Every call is one
// attempt.
//
// After the run a referential check reads every possible row of every subscriber: the
// subscriber exists, every access_info, special_facility and call_forwarding row names it, and
// call_forwarding rows exist only under an existing special_facility row. docs/workloads.md
// describes the workload.
//
// Thread rules: RunTatp is called from one thread; it starts and stops its own cluster.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "pond/base/histogram.h"
#include "pond/bench/kvs_bench.h"
#include "pond/cluster.h"

namespace pond::bench {

enum class TatpTxn : uint8_t {
  kGetSubscriberData,
  kGetNewDestination,
  kGetAccessData,
  kUpdateSubscriberData,
  kUpdateLocation,
  kInsertCallForwarding,
  kDeleteCallForwarding,
};
constexpr int kTatpTxnCount = 7;
const char* TatpTxnName(TatpTxn t);
constexpr std::array<int, kTatpTxnCount> kTatpMixPct = {35, 10, 35, 2, 14, 2, 2};

struct TatpOptions {
  ClusterConfig cluster;
  int coros = 4;
  uint64_t subscribers = 100'000;
  double seconds = 10;
  std::optional<Testbed> sim;
};

// The measures of the run, and TATP's own counts and check.
struct TatpResult : RunMeasures {
  // Committed without effect by TATP's rules: UpdateSubscriberData or InsertCallForwarding of a
  // special facility the subscriber lacks, and InsertCallForwarding of a present row.
  uint64_t declined = 0;
  std::array<uint64_t, kTatpTxnCount> committed_by_txn{};
  // The referential check.
  uint64_t rows_loaded = 0;  // over the four tables
  uint64_t rows_after = 0;   // found by the check
  bool check_ok = false;
  std::string check_detail;
};

Status ValidateTatpOptions(const TatpOptions& o);

Result<TatpResult> RunTatp(const TatpOptions& o,
                           const std::function<void(const KvsProgress&)>& progress);

std::string TatpResultJson(const TatpOptions& o, const TatpResult& r);

// A row's key: the subscriber id and a sub-key (0 for the subscriber, the type 1..4 for
// access_info and special_facility, sf_type * 4 + start_time / 8 for call_forwarding) above bits
// 0..11, which hold the subscriber's shard (its id's low 12 bits).
inline uint64_t TatpKey(uint64_t s_id, uint64_t sub) {
  return (((s_id << 8) | sub) << 12) | (s_id & 0xfff);
}

}  // namespace pond::bench
