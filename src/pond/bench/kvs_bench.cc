#include "pond/bench/kvs_bench.h"

#include <fmt/core.h>

#include <cstring>
#include <vector>

#include "pond/base/hash.h"

namespace pond::bench {

namespace {

constexpr uint16_t kProcUpdateOne = 0;
constexpr uint16_t kProcReadOne = 1;

// Zipf ranks are scattered over the key space, so that the hottest keys do not all fall in the
// shards of one CN (the shard is the low 12 bits of the key).
uint64_t KeyOfRank(uint64_t rank, uint64_t keys) { return Mix64(rank) % keys; }

}  // namespace

Status KvsWorkload::Set(std::string_view key, double value) {
  if (key == "rw-ratio") {
    p_.rw_ratio = value;
  } else if (key == "theta") {
    p_.theta = value;
  } else {
    return Workload::Set(key, value);
  }
  return Status::Ok();
}

Status KvsWorkload::Validate(const RunOptions& o) const {
  if (o.record) return InvalidArgument("the KVS workload records no history");
  if (p_.keys < 1 || p_.keys > (uint64_t{1} << 32))
    return InvalidArgument("--keys must be 1 to 2^32");
  if (!(p_.rw_ratio >= 0 && p_.rw_ratio <= 1))
    return InvalidArgument("--rw-ratio must be in [0, 1]");
  if (!(p_.theta >= 0 && p_.theta < 1)) return InvalidArgument("--theta must be in [0, 1)");
  if (p_.value_bytes < 8) return InvalidArgument("values must hold at least 8 bytes");
  return Status::Ok();
}

std::string KvsWorkload::Settings() const {
  return fmt::format("{} keys, {} keys, {:.0f}% UpdateOne", p_.keys,
                     p_.theta == 0 ? "uniform" : fmt::format("zipf({})", p_.theta),
                     p_.rw_ratio * 100);
}

nlohmann::json KvsWorkload::SettingsJson() const {
  return {{"keys", p_.keys}, {"rw_ratio", p_.rw_ratio}, {"theta", p_.theta}};
}

Status KvsWorkload::Setup(Cluster& cluster, RunContext&) {
  Result<uint16_t> table = cluster.CreateTable(
      TableOptions{.name = "kvs", .value_bytes = p_.value_bytes, .capacity = p_.keys});
  if (!table.ok()) return table.status();
  const uint16_t t = table_ = *table;
  POND_RETURN_IF_ERROR(
      cluster.Load(t, p_.keys, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
        *key = i;
        std::memcpy(v.data(), &i, 8);
      }));

  // UpdateOne: read the value and write it back with its counter (bytes 8..15) incremented.
  cluster.RegisterProcedure([t](Session& s, std::span<const std::byte> args) -> Task<Status> {
    uint64_t key;
    std::memcpy(&key, args.data(), 8);
    Txn txn = s.Begin(TxnKind::kReadWrite);
    txn.AddRW(t, key);
    POND_CO_RETURN_IF_ERROR(co_await txn.Execute());
    Result<std::span<const std::byte>> v = txn.Read(t, key);
    if (!v.ok()) co_return v.status();
    std::vector<std::byte> nv(v->begin(), v->end());
    uint64_t counter;
    std::memcpy(&counter, nv.data() + 8, 8);
    counter++;
    std::memcpy(nv.data() + 8, &counter, 8);
    POND_CO_RETURN_IF_ERROR(txn.Write(t, key, nv));
    co_return co_await txn.Commit();
  });
  // ReadOne.
  cluster.RegisterProcedure([t](Session& s, std::span<const std::byte> args) -> Task<Status> {
    uint64_t key;
    std::memcpy(&key, args.data(), 8);
    Txn txn = s.Begin(TxnKind::kReadOnly);
    txn.AddRO(t, key);
    POND_CO_RETURN_IF_ERROR(co_await txn.Execute());
    Result<std::span<const std::byte>> v = txn.Read(t, key);
    if (!v.ok()) co_return v.status();
    uint64_t stored;
    std::memcpy(&stored, v->data(), 8);
    if (stored != key) co_return Internal("ReadOne returned another key's value");
    co_return co_await txn.Commit();
  });
  zipf_.emplace(p_.keys, p_.theta);
  return Status::Ok();
}

Task<void> KvsWorkload::RunClient(Session& s, RunContext& ctx) {
  Rng& rng = s.rng();
  while (ctx.NextCall(s)) {
    uint64_t key = KeyOfRank(zipf_->Next(rng), p_.keys);
    bool rw = rng.Chance(p_.rw_ratio);
    uint64_t t0 = s.clock().NowNs();
    Status st =
        co_await s.Call(rw ? kProcUpdateOne : kProcReadOne, std::as_bytes(std::span(&key, 1)),
                        RouteHint{rw ? TxnKind::kReadWrite : TxnKind::kReadOnly, table_, key});
    if (!ctx.Book(s, st, t0, s.clock().NowNs(), rw)) break;
  }
}

Status KvsWorkload::Finish(Cluster&, RunContext&, RunResult* r) {
  r->loaded = fmt::format("{} keys", p_.keys);
  r->rw_name = "UpdateOne";
  r->report_caches = true;
  return Status::Ok();
}

}  // namespace pond::bench
