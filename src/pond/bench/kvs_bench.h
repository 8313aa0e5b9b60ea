// The KVS benchmark (Lotus §8.2): 8-byte keys, 40-byte values, UpdateOne (read-write: read a
// key, write it back changed) and ReadOne (read-only) transactions in a chosen mix, keys uniform
// or zipf(theta), routed by hybrid routing (§4.3). Every call is one attempt: an abort counts as
// an abort, not as a retry, so the abort rate is the protocol's. ReadOne checks its answer: the
// first word of a value is its key.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "pond/bench/workload.h"
#include "pond/bench/zipf.h"

namespace pond::bench {

struct KvsParams {
  uint64_t keys = 1'000'000;
  double rw_ratio = 0.5;  // fraction of UpdateOne
  double theta = 0.0;     // 0: uniform; else zipf(theta), e.g. 0.99
  uint32_t value_bytes = 40;
};

class KvsWorkload : public Workload {
 public:
  explicit KvsWorkload(const KvsParams& p) : p_(p) {}
  const KvsParams& params() const { return p_; }

  const char* name() const override { return "kvs"; }
  const char* title() const override { return "KVS"; }
  std::unique_ptr<Workload> Clone() const override { return std::make_unique<KvsWorkload>(p_); }
  // rw-ratio, theta.
  Status Set(std::string_view key, double value) override;
  Status Validate(const RunOptions& o) const override;
  std::string Settings() const override;
  nlohmann::json SettingsJson() const override;
  Status Setup(Cluster& cluster, RunContext& ctx) override;
  Task<void> RunClient(Session& s, RunContext& ctx) override;
  Status Finish(Cluster& cluster, RunContext& ctx, RunResult* r) override;
  // Served as kvs.update_one and kvs.read_one, each taking the 8-byte key (little-endian).
  Status Serve(Cluster& cluster, server::ServiceDirectory* dir) override;
  std::vector<TableNeed> ServedTables() const override;
  Result<std::unique_ptr<RemoteDriver>> Remote(
      const std::vector<RemoteTable>& tables) const override;

 private:
  KvsParams p_;
  uint16_t table_ = 0;
  ProcedureId update_one_ = 0, read_one_ = 0;
  std::optional<Zipf> zipf_;
};

}  // namespace pond::bench
