#include "pond/bench/raw_bench.h"

#include <atomic>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "pond/base/assert.h"
#include "pond/bench/build_info.h"
#include "pond/rng.h"
#include "pond/runtime/clocks.h"
#include "pond/runtime/scheduler.h"
#include "pond/transport/local/local_fabric.h"

namespace pond::bench {

namespace {

constexpr uint64_t kMiB = 1 << 20;
// The first page of a region is left alone so the bench never scribbles on anything but data.
constexpr uint64_t kReservedBytes = 4096;

struct ThreadState {
  Scheduler sched{SystemClock::Get()};
  std::unique_ptr<Endpoint> ep;
  Histogram latency;
  uint64_t ops = 0;
};

Task<void> Loop(ThreadState* ts, Verb verb, const RawBenchOptions* o, uint64_t region_bytes,
                uint64_t deadline_ns, uint64_t seed) {
  Rng rng(seed);
  Clock& clock = ts->sched.clock();
  uint32_t len = (verb == Verb::kRead || verb == Verb::kWrite) ? o->size : 8;
  // Addresses are 8-byte aligned so that atomics are legal and READ/WRITE take the word path.
  uint64_t slots = (region_bytes - kReservedBytes - len) / 8;
  std::vector<std::byte> buf(len, std::byte{0x5a});
  uint64_t result = 0;
  for (;;) {
    GAddr a = GAddr::Make(static_cast<MnId>(rng.Uniform(o->mns)),
                          kReservedBytes + rng.Uniform(slots) * 8);
    switch (verb) {
      case Verb::kRead:
        ts->ep->Read(a, buf.data(), len);
        break;
      case Verb::kWrite:
        ts->ep->Write(a, buf.data(), len);
        break;
      case Verb::kCas:
        ts->ep->Cas(a, result, result + 1, &result);
        break;
      case Verb::kFaa:
        ts->ep->Faa(a, 1, &result);
        break;
    }
    uint64_t t0 = clock.NowNs();
    Status s = co_await ts->ep->Flush();
    uint64_t t1 = clock.NowNs();
    POND_CHECK_MSG(s.ok(), s.ToString().c_str());
    ts->latency.Record(t1 - t0);
    ts->ops++;
    if (t1 >= deadline_ns) break;
  }
}

}  // namespace

Status ValidateRawOptions(const RawBenchOptions& o) {
  if (o.threads < 1 || o.threads > 256) return InvalidArgument("--threads must be 1 to 256");
  if (o.coros < 1 || o.coros > 256) return InvalidArgument("--coros must be 1 to 256");
  if (!(o.seconds > 0) || o.seconds > 3600)
    return InvalidArgument("--seconds must be in (0, 3600]");
  if (o.mns < 1 || o.mns > 64) return InvalidArgument("--mns must be 1 to 64");
  if (o.region_mib < 1 || o.region_mib > (uint64_t{1} << 20)) {
    return InvalidArgument("--region-mib must be 1 to 1048576");
  }
  if (o.size < 1 || o.size > o.region_mib * kMiB - kReservedBytes - 8) {
    return InvalidArgument("--size " + std::to_string(o.size) + " does not fit in a " +
                           std::to_string(o.region_mib) + " MiB region");
  }
  if (o.verbs.empty()) return InvalidArgument("no verbs to run");
  return Status::Ok();
}

Result<std::vector<RawVerbResult>> RunRawBench(
    const RawBenchOptions& o, const std::function<void(const RawVerbResult&)>& on_verb_done) {
  POND_RETURN_IF_ERROR(ValidateRawOptions(o));
  uint64_t region_bytes = o.region_mib * kMiB;
  auto fabric = LocalFabric::Create(static_cast<uint16_t>(o.mns), region_bytes);
  if (!fabric.ok()) return fabric.status();
  // Touch every page first so page faults are not measured as op latency.
  for (int mn = 0; mn < o.mns; mn++) std::memset((*fabric)->region(mn), 0, region_bytes);

  std::vector<std::unique_ptr<ThreadState>> states;
  for (int t = 0; t < o.threads; t++) {
    states.push_back(std::make_unique<ThreadState>());
    states[t]->ep =
        (*fabric)->CreateEndpoint(WorkerAddr{static_cast<uint16_t>(t), 0}, states[t]->sched);
  }
  Rng seeds(o.seed);
  std::vector<RawVerbResult> results;
  for (Verb verb : o.verbs) {
    for (auto& s : states) {
      s->latency = Histogram();
      s->ops = 0;
    }
    uint64_t start = SystemClock::Get().NowNs();
    uint64_t deadline = start + static_cast<uint64_t>(o.seconds * 1e9);
    std::vector<std::thread> threads;
    for (int t = 0; t < o.threads; t++) {
      for (int c = 0; c < o.coros; c++) {
        states[t]->sched.Spawn(
            Loop(states[t].get(), verb, &o, region_bytes, deadline, seeds.Next()));
      }
      threads.emplace_back([s = states[t].get()] { s->sched.RunUntilIdle(); });
    }
    for (auto& th : threads) th.join();
    uint64_t end = SystemClock::Get().NowNs();
    RawVerbResult r;
    r.verb = verb;
    for (auto& s : states) {
      r.ops += s->ops;
      r.latency_ns.Merge(s->latency);
    }
    r.elapsed_s = static_cast<double>(end - start) / 1e9;
    r.ops_per_sec = static_cast<double>(r.ops) / r.elapsed_s;
    if (on_verb_done) on_verb_done(r);
    results.push_back(std::move(r));
  }
  return results;
}

std::string RawResultsJson(const RawBenchOptions& o, const std::vector<RawVerbResult>& results) {
  nlohmann::json j;
  j["bench"] = "raw";
  j["build_type"] = kBuildType;
  j["transport"] = "local";
  j["settings"] = {{"threads", o.threads}, {"coros", o.coros},           {"seconds", o.seconds},
                   {"size", o.size},       {"region_mib", o.region_mib}, {"mns", o.mns},
                   {"seed", o.seed}};
  j["results"] = nlohmann::json::array();
  for (const auto& r : results) {
    j["results"].push_back({{"verb", VerbName(r.verb)},
                            {"ops", r.ops},
                            {"elapsed_s", r.elapsed_s},
                            {"ops_per_sec", r.ops_per_sec},
                            {"latency_ns",
                             {{"mean", r.latency_ns.Mean()},
                              {"p50", r.latency_ns.Percentile(0.50)},
                              {"p99", r.latency_ns.Percentile(0.99)},
                              {"p999", r.latency_ns.Percentile(0.999)},
                              {"max", r.latency_ns.max()}}}});
  }
  return j.dump(2) + "\n";
}

}  // namespace pond::bench
