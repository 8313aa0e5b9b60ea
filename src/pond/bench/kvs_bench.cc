#include "pond/bench/kvs_bench.h"
#include "pond/bench/report.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "pond/base/hash.h"
#include "pond/bench/build_info.h"
#include "pond/bench/zipf.h"
#include "pond/runtime/clocks.h"

namespace pond::bench {

namespace {

constexpr uint16_t kProcUpdateOne = 0;
constexpr uint16_t kProcReadOne = 1;

// Zipf ranks are scattered over the key space, so that the hottest keys do not all fall in the
// shards of one CN (the shard is the low 12 bits of the key).
uint64_t KeyOfRank(uint64_t rank, uint64_t keys) { return Mix64(rank) % keys; }

}  // namespace

Status ValidateKvsOptions(const KvsOptions& o) {
  POND_RETURN_IF_ERROR(ValidateConfig(o.cluster));
  if (o.coros < 1 || o.coros > 256) return InvalidArgument("--coros must be 1 to 256");
  if (o.keys < 1 || o.keys > (uint64_t{1} << 32))
    return InvalidArgument("--keys must be 1 to 2^32");
  if (!(o.seconds > 0) || o.seconds > 86400)
    return InvalidArgument("--seconds must be in (0, 86400]");
  if (!(o.rw_ratio >= 0 && o.rw_ratio <= 1)) return InvalidArgument("--rw-ratio must be in [0, 1]");
  if (!(o.theta >= 0 && o.theta < 1)) return InvalidArgument("--theta must be in [0, 1)");
  if (o.value_bytes < 8) return InvalidArgument("values must hold at least 8 bytes");
  return Status::Ok();
}

Result<KvsResult> RunKvs(const KvsOptions& o,
                         const std::function<void(const KvsProgress&)>& progress) {
  POND_RETURN_IF_ERROR(ValidateKvsOptions(o));
  auto started = o.sim ? Cluster::StartSimulated(o.cluster, *o.sim) : Cluster::Start(o.cluster);
  if (!started.ok()) return started.status();
  Cluster& cluster = **started;
  Result<uint16_t> table = cluster.CreateTable(
      TableOptions{.name = "kvs", .value_bytes = o.value_bytes, .capacity = o.keys});
  if (!table.ok()) return table.status();
  const uint16_t t = *table;

  KvsResult result;
  // The wall clock measures what loading cost (MeasuredRun measures the run).
  Clock& wall = SystemClock::Get();
  uint64_t load_start = wall.NowNs();
  Status loaded = cluster.Load(t, o.keys, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
    *key = i;
    std::memcpy(v.data(), &i, 8);
  });
  if (!loaded.ok()) return loaded;
  result.load_s = static_cast<double>(wall.NowNs() - load_start) / 1e9;

  // UpdateOne: read the value and write it back with its counter (bytes 8..15) incremented.
  cluster.RegisterProcedure([t](Session& s, std::span<const std::byte> args) -> Task<Status> {
    uint64_t key;
    std::memcpy(&key, args.data(), 8);
    Txn txn = s.Begin(TxnKind::kReadWrite);
    txn.AddRW(t, key);
    Status st = co_await txn.Execute();
    if (!st.ok()) co_return st;
    Result<std::span<const std::byte>> v = txn.Read(t, key);
    if (!v.ok()) co_return v.status();
    std::vector<std::byte> nv(v->begin(), v->end());
    uint64_t counter;
    std::memcpy(&counter, nv.data() + 8, 8);
    counter++;
    std::memcpy(nv.data() + 8, &counter, 8);
    st = txn.Write(t, key, nv);
    if (!st.ok()) co_return st;
    co_return co_await txn.Commit();
  });
  cluster.RegisterProcedure([t](Session& s, std::span<const std::byte> args) -> Task<Status> {
    uint64_t key;
    std::memcpy(&key, args.data(), 8);
    Txn txn = s.Begin(TxnKind::kReadOnly);
    txn.AddRO(t, key);
    Status st = co_await txn.Execute();
    if (!st.ok()) co_return st;
    Result<std::span<const std::byte>> v = txn.Read(t, key);
    if (!v.ok()) co_return v.status();
    uint64_t stored;
    std::memcpy(&stored, v->data(), 8);
    // The benchmark checks its answers: the first word of a value is always its key.
    if (stored != key) co_return Internal("ReadOne returned another key's value");
    co_return co_await txn.Commit();
  });

  Zipf zipf(o.keys, o.theta);
  MeasuredRun run(cluster, o.cluster, o.seconds, progress);
  cluster.Run(o.coros, [&](Session& s) -> Task<void> {
    Rng& rng = s.rng();
    while (run.Running(s)) {
      uint64_t key = KeyOfRank(zipf.Next(rng), o.keys);
      bool rw = rng.Chance(o.rw_ratio);
      uint64_t t0 = s.clock().NowNs();
      Status st =
          co_await s.Call(rw ? kProcUpdateOne : kProcReadOne, std::as_bytes(std::span(&key, 1)),
                          RouteHint{rw ? TxnKind::kReadWrite : TxnKind::kReadOnly, t, key});
      if (!run.Book(s, st, t0, s.clock().NowNs(), rw)) break;
    }
  });
  if (Status st = run.Finish(&result); !st.ok()) {
    return Internal("a KVS transaction failed unexpectedly: " + st.ToString());
  }
  return result;
}

std::string KvsResultJson(const KvsOptions& o, const KvsResult& r) {
  nlohmann::json j;
  const ClusterStats& s = r.stats;
  double per_txn = r.committed > 0 ? 1.0 / static_cast<double>(r.committed) : 0;
  j["bench"] = "kvs";
  j["build_type"] = kBuildType;
  j["transport"] = "local";
  j["protocol"] = o.cluster.protocol.name;
  j["settings"] = {{"mns", o.cluster.mns},
                   {"cns", o.cluster.cns},
                   {"workers_per_cn", o.cluster.workers_per_cn},
                   {"coros", o.coros},
                   {"replication", o.cluster.replication},
                   {"versions", o.cluster.versions},
                   {"isolation", IsolationName(o.cluster.isolation)},
                   {"keys", o.keys},
                   {"seconds", o.seconds},
                   {"rw_ratio", o.rw_ratio},
                   {"theta", o.theta},
                   {"seed", o.cluster.seed}};
  j["result"] = {
      {"elapsed_s", r.elapsed_s},
      {"committed", r.committed},
      {"committed_rw", r.committed_rw},
      {"aborted", r.aborted},
      {"txn_per_sec", static_cast<double>(r.committed) / r.elapsed_s},
      {"abort_rate", r.committed + r.aborted > 0 ? static_cast<double>(r.aborted) /
                                                       static_cast<double>(r.committed + r.aborted)
                                                 : 0.0},
      {"aborts", AbortsJson(s.aborts)},
      {"latency_ns",
       {{"p50", r.latency_ns.Percentile(0.50)},
        {"p99", r.latency_ns.Percentile(0.99)},
        {"p999", r.latency_ns.Percentile(0.999)},
        {"mean", r.latency_ns.Mean()}}},
      {"per_committed_txn",
       {{"read", static_cast<double>(s.reads) * per_txn},
        {"write", static_cast<double>(s.writes) * per_txn},
        {"cas", static_cast<double>(s.cas) * per_txn},
        {"faa", static_cast<double>(s.faa) * per_txn},
        {"doorbell_batches", static_cast<double>(s.batches) * per_txn},
        {"messages", static_cast<double>(s.messages) * per_txn}}},
      {"remote_calls", s.remote_calls},
      {"vt_cache",
       {{"hits", s.vt_hits}, {"misses", s.vt_misses}, {"invalidations", s.vt_invalidations}}},
      {"load_s", r.load_s},
      {"wall_s", r.wall_s}};
  j["transport"] = o.sim ? "sim" : "local";
  if (r.sim) {
    nlohmann::json nics = NicsJson(*r.sim, r.elapsed_s * 1e9);
    j["simulation"] = {{"model", nlohmann::json::parse(o.sim->ToJson())},
                       {"virtual_s", r.elapsed_s},
                       {"events", r.sim->events},
                       {"mn_nics", nics}};
  }
  return j.dump(2) + "\n";
}

}  // namespace pond::bench
