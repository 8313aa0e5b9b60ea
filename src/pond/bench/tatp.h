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
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pond/bench/workload.h"

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
constexpr std::array<const char*, kTatpTxnCount> kTatpTxnNames = {
    "GetSubscriberData", "GetNewDestination",    "GetAccessData",       "UpdateSubscriberData",
    "UpdateLocation",    "InsertCallForwarding", "DeleteCallForwarding"};
constexpr std::array<int, kTatpTxnCount> kTatpMixPct = {35, 10, 35, 2, 14, 2, 2};

struct TatpParams {
  uint64_t subscribers = 100'000;
};

struct TatpCounters;

class TatpWorkload : public Workload {
 public:
  explicit TatpWorkload(const TatpParams& p);
  ~TatpWorkload() override;
  const TatpParams& params() const { return p_; }

  const char* name() const override { return "tatp"; }
  const char* title() const override { return "TATP"; }
  std::unique_ptr<Workload> Clone() const override { return std::make_unique<TatpWorkload>(p_); }
  Status Validate(const RunOptions& o) const override;
  std::string Settings() const override;
  nlohmann::json SettingsJson() const override;
  Status Setup(Cluster& cluster, RunContext& ctx) override;
  Task<void> RunClient(Session& s, RunContext& ctx) override;
  // The referential check.
  Status Finish(Cluster& cluster, RunContext& ctx, RunResult* r) override;
  // Served as tatp.get_subscriber_data ... tatp.delete_call_forwarding, each taking 40 bytes:
  // s_id, type, start_time, end_time, data (u64 each, little-endian; docs/formats.md).
  Status Serve(Cluster& cluster, server::ServiceDirectory* dir) override;
  std::vector<TableNeed> ServedTables() const override;
  Result<std::unique_ptr<RemoteDriver>> Remote(
      const std::vector<RemoteTable>& tables) const override;

 private:
  TatpParams p_;
  std::vector<ProcedureId> procs_;        // as registered, in TatpTxn order
  std::array<uint64_t, 4> capacities_{};  // of the four tables, as created
  uint16_t tsub_ = 0, tai_ = 0, tsf_ = 0, tcf_ = 0;
  uint64_t rows_loaded_ = 0;
  std::vector<TatpCounters> counters_;
};

// A row's key: the subscriber id and a sub-key (0 for the subscriber, the type 1..4 for
// access_info and special_facility, sf_type * 4 + start_time / 8 for call_forwarding) above bits
// 0..11, which hold the subscriber's shard (its id's low 12 bits).
inline uint64_t TatpKey(uint64_t s_id, uint64_t sub) {
  return (((s_id << 8) | sub) << 12) | (s_id & 0xfff);
}

}  // namespace pond::bench
