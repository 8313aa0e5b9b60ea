#include "pond/bench/kvs_bench.h"

#include <fmt/core.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "pond/base/hash.h"
#include "pond/server/service_directory.h"

namespace pond::bench {

namespace {

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

std::vector<TableNeed> KvsWorkload::ServedTables() const {
  return {
      {TableOptions{.name = "kvs", .value_bytes = p_.value_bytes, .capacity = p_.keys}, p_.keys}};
}

Status KvsWorkload::Setup(Cluster& cluster, RunContext&) {
  Result<uint16_t> table = cluster.CreateTable(ServedTables()[0].options);
  if (!table.ok()) return table.status();
  const uint16_t t = table_ = *table;
  POND_RETURN_IF_ERROR(
      cluster.Load(t, p_.keys, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
        *key = i;
        std::memcpy(v.data(), &i, 8);
      }));

  // UpdateOne: read the value and write it back with its counter (bytes 8..15) incremented.
  update_one_ =
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
  read_one_ =
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
        co_await s.Call(rw ? update_one_ : read_one_, std::as_bytes(std::span(&key, 1)),
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

Status KvsWorkload::Serve(Cluster& cluster, server::ServiceDirectory* dir) {
  RunContext& ctx = ServingContext(cluster);
  POND_RETURN_IF_ERROR(Validate(ctx.options()));
  POND_RETURN_IF_ERROR(Setup(cluster, ctx));
  POND_RETURN_IF_ERROR(dir->AddTable({"kvs", table_, p_.value_bytes, p_.keys}));
  const uint16_t t = table_;
  const uint64_t keys = p_.keys;
  for (const bool rw : {true, false}) {
    POND_RETURN_IF_ERROR(dir->AddProcedure(
        {rw ? "kvs.update_one" : "kvs.read_one", rw ? update_one_ : read_one_, 8, !rw,
         [rw, t, keys](std::span<const std::byte> args) -> Result<RouteHint> {
           uint64_t key;
           std::memcpy(&key, args.data(), 8);
           // Loaded keys only: ReadOne of an absent key would fail its own check.
           if (key >= keys)
             return InvalidArgument(fmt::format("key {} is not below {}", key, keys));
           return RouteHint{rw ? TxnKind::kReadWrite : TxnKind::kReadOnly, t, key};
         }}));
  }
  return Status::Ok();
}

namespace {

class KvsRemote final : public RemoteDriver {
 public:
  explicit KvsRemote(const KvsParams& p) : p_(p), zipf_(p.keys, p.theta) {}
  std::string Settings() const override {
    return fmt::format("{} keys (the server's), {} keys, {:.0f}% UpdateOne", p_.keys,
                       p_.theta == 0 ? "uniform" : fmt::format("zipf({})", p_.theta),
                       p_.rw_ratio * 100);
  }
  std::vector<std::string> TxnNames() const override { return {"UpdateOne", "ReadOne"}; }
  Status Start(const RemoteStore&) override { return Status::Ok(); }
  RemoteCall Next(Rng& rng, uint64_t, uint64_t) override {
    const uint64_t key = KeyOfRank(zipf_.Next(rng), p_.keys);
    const bool rw = rng.Chance(p_.rw_ratio);
    RemoteCall call{rw ? size_t{0} : size_t{1}, rw ? "kvs.update_one" : "kvs.read_one",
                    std::string(reinterpret_cast<const char*>(&key), 8), rw};
    if (rw) call.route_key = key;  // where Serve's route sends it
    return call;
  }
  bool Book(const RemoteCall& call, RemoteOutcome outcome, std::string_view) override {
    if (outcome == RemoteOutcome::kCommitted) by_txn_[call.kind].fetch_add(1);
    return true;
  }
  // ReadOne checks its answer on the server (a value names its key); nothing to read back.
  Status Finish(const RemoteStore&, RunResult* r) override {
    r->loaded = fmt::format("{} keys, served", p_.keys);
    r->rw_name = "UpdateOne";
    r->committed_by_txn = {{"UpdateOne", by_txn_[0].load()}, {"ReadOne", by_txn_[1].load()}};
    return Status::Ok();
  }

 private:
  const KvsParams p_;
  const Zipf zipf_;
  std::atomic<uint64_t> by_txn_[2] = {};
};

}  // namespace

Result<std::unique_ptr<RemoteDriver>> KvsWorkload::Remote(
    const std::vector<RemoteTable>& tables) const {
  Result<RemoteTable> t = FindRemoteTable(tables, "kvs", 0);
  if (!t.ok()) return t.status();
  KvsParams p = p_;
  p.keys = t->capacity;
  p.value_bytes = t->value_bytes;
  POND_RETURN_IF_ERROR(KvsWorkload(p).Validate(RunOptions{}));
  return std::unique_ptr<RemoteDriver>(std::make_unique<KvsRemote>(p));
}

}  // namespace pond::bench
