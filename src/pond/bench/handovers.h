// Handovers (Zeus §2, §8.1): a cellular control plane. Phones are attached to base stations
// (cells); each operation updates the phone's context and its cell's:
//   ServiceRequest  an idle phone wakes to send data: it becomes connected, and its cell counts
//                   one more connected phone;
//   Release         a connected phone goes back to sleep: the reverse;
//   Handover        a mobile phone moves to a neighbouring cell: detached from the old cell,
//                   attached to the new one, its connection carried over — three objects.
// Handovers are `--handover-pct` of the operations (the paper: 2.5%, and 5% for doubled
// mobility), all by the mobile share of the phones; the rest are any phone's next request — a
// service request if it is idle, a release if it is connected. Zeus runs a handover as two
// transactions; here it is one.
//
// A phone's key carries the shard of the cell it was attached to at load (its home), so at load
// a phone and its cell are on one CN — Zeus's "perfect sharding" — and handovers pull them apart;
// keeping them together is what locality-seeking moves are for (docs/resharding.md).
//
// After the run a check reads every phone and every cell: every phone is attached to exactly one
// cell (the cell its row names), and each cell's attached and connected counts are the phones
// that name it. docs/workloads.md describes the workload.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pond/bench/workload.h"

namespace pond::bench {

enum class HandoversTxn : uint8_t { kServiceRequest, kRelease, kHandover };
constexpr int kHandoversTxnCount = 3;
constexpr std::array<const char*, kHandoversTxnCount> kHandoversTxnNames = {"ServiceRequest",
                                                                            "Release", "Handover"};

struct HandoversParams {
  uint64_t phones = 100'000;     // Zeus: 2 M
  uint64_t cells = 50;           // base stations; Zeus: 1000 for 2 M phones
  double mobile_share = 0.2;     // phones that move; Zeus: 400 k of 2 M
  double handover_pct = 2.5;     // of the operations; Zeus: 2.5 and 5
  uint32_t context_bytes = 200;  // a phone's context; Zeus commits about 400 B per transaction
};

struct HandoversCounters;

class HandoversWorkload : public Workload {
 public:
  explicit HandoversWorkload(const HandoversParams& p);
  ~HandoversWorkload() override;
  const HandoversParams& params() const { return p_; }

  const char* name() const override { return "handovers"; }
  const char* title() const override { return "Handovers"; }
  std::unique_ptr<Workload> Clone() const override {
    return std::make_unique<HandoversWorkload>(p_);
  }
  Status Validate(const RunOptions& o) const override;
  std::string Settings() const override;
  nlohmann::json SettingsJson() const override;
  Status Setup(Cluster& cluster, RunContext& ctx) override;
  Task<void> RunClient(Session& s, RunContext& ctx) override;
  // The attachment check.
  Status Finish(Cluster& cluster, RunContext& ctx, RunResult* r) override;

 private:
  HandoversParams p_;
  std::vector<ProcedureId> procs_;  // as registered, in HandoversTxn order
  uint16_t tphone_ = 0, tcell_ = 0;
  std::vector<HandoversCounters> counters_;
};

// A cell's key: its number above its shard (a hash of the number). A phone's: its number above
// the shard of its home cell, the cell it is attached to at load.
uint64_t CellKey(uint64_t cell);
uint64_t HomeCell(uint64_t phone, uint64_t cells);
inline uint64_t PhoneKey(uint64_t phone, uint64_t cells) {
  return (phone << 12) | (CellKey(HomeCell(phone, cells)) & 0xfff);
}

}  // namespace pond::bench
