// sim_engine_bench: how many events per wall second the simulator's engine runs. The figure in
// docs/simulator.md comes from this program. A program, not a test (STYLE.md item 11).
//
//   sim_engine_bench [--pattern actors|cluster] [--events N] [--seed S] [--actors N]
//
// Patterns:
//   actors   N actors (default 500), each rescheduling itself after a uniform random delay in
//            [100, 2000) ns drawn from its own stream: the bare cost of an event.
//   cluster  the shape of the paper's cluster: 9 CNs x 8 worker cores x 6 coroutines issuing
//            one-sided ops to 3 MN NICs (sim::Server, READ 35 Mops/s, CAS 2.5 Mops/s, 10% CAS),
//            1 us one way, 300 ns of CPU per op on the worker's core, and a 1 ms timeout per op
//            that is set at issue and cancelled at completion, as an RPC layer would.
//
// Output: '#' header lines (build, settings), then one JSON object. Exit 1 if a replay of the
// first events with the same seed does not give the same trace (the answer-is-right check), or
// if the cluster pattern's event count does not add up. Reads SystemClock to time itself: the
// only real time in sim/.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pond/base/hash.h"
#include "pond/runtime/clocks.h"
#include "pond/sim/engine.h"
#include "pond/sim/server.h"

namespace {

using pond::Mix64;
using pond::Rng;
using pond::sim::Engine;
using pond::sim::EventId;
using pond::sim::Server;

#ifdef POND_BUILD_TYPE
constexpr const char* kBuildType = POND_BUILD_TYPE;
#else
constexpr const char* kBuildType = "unknown";
#endif

struct Settings {
  std::string pattern = "actors";
  uint64_t event_count = 20'000'000;
  uint64_t seed = 1;
  int actor_count = 500;
};

struct Outcome {
  uint64_t trace_hash = 0;
  uint64_t virtual_ns = 0;
  pond::sim::EngineStats stats;
  uint64_t op_count = 0;   // cluster: ops completed
  bool consistent = true;  // cluster: event counts add up
  std::string extra_json;  // pattern-specific fields
};

// --- actors -------------------------------------------------------------------------------

Outcome RunActors(const Settings& s, uint64_t event_count) {
  Engine e(s.seed);
  Outcome out;
  struct Actor {
    Rng rng{0};
    uint64_t id = 0;
  };
  std::vector<Actor> actors(static_cast<size_t>(s.actor_count));
  struct Act {
    Engine* e;
    Actor* a;
    uint64_t* hash;
    void operator()() const {
      *hash = Mix64(*hash ^ (e->now() << 10 | a->id));
      e->After(100 + a->rng.Uniform(1900), *this);
    }
  };
  for (size_t i = 0; i < actors.size(); i++) {
    actors[i].rng = e.StreamRng(i);
    actors[i].id = i;
    e.At(e.rng().Uniform(1000), Act{&e, &actors[i], &out.trace_hash});
  }
  e.RunWhile([&] { return e.stats().events_run < event_count; });
  out.virtual_ns = e.now();
  out.stats = e.stats();
  return out;
}

// --- cluster ------------------------------------------------------------------------------

constexpr int kCnCount = 9, kWorkersPerCn = 8, kCorosPerWorker = 6, kMnCount = 3;
constexpr uint64_t kOneWayNs = 1'000;
constexpr uint64_t kCpuPerOpNs = 300;
constexpr uint64_t kTimeoutNs = 1'000'000;
constexpr uint64_t kReadServiceNs = 29;  // 1 / 35 Mops/s, rounded
constexpr uint64_t kCasServiceNs = 400;  // 1 / 2.5 Mops/s
enum Kind { kRead = 0, kCas = 1 };

struct Cluster;
struct Coro {
  Cluster* c;
  Server* core;
  Rng rng{0};
  uint64_t id = 0;
  int mn = 0;
  int kind = kRead;
  EventId timeout;
};
struct Cluster {
  Engine* e;
  std::vector<Server> nics = std::vector<Server>(kMnCount);
  std::vector<Server> cores = std::vector<Server>(kCnCount * kWorkersPerCn);
  std::vector<Coro> coros;
  uint64_t hash = 0;
  uint64_t issued = 0, arrived = 0, completed = 0, resumed = 0, timed_out = 0;
};

void Issue(Coro* co);

void Resume(Coro* co) {  // the coroutine runs again on its core, then issues its next op
  co->c->resumed++;
  Issue(co);
}

void Complete(Coro* co) {  // the reply is back at the CN
  Cluster& c = *co->c;
  c.completed++;
  c.hash = Mix64(c.hash ^ (c.e->now() << 16 | co->id));
  c.e->Cancel(co->timeout);
  uint64_t run_at = co->core->Serve(c.e->now(), kCpuPerOpNs, 0);
  c.e->At(run_at, [co] { Resume(co); });
}

void Arrive(Coro* co) {  // the request reaches the MN's NIC
  Cluster& c = *co->c;
  c.arrived++;
  uint64_t done =
      c.nics[co->mn].Serve(c.e->now(), co->kind == kCas ? kCasServiceNs : kReadServiceNs, co->kind);
  c.e->At(done + kOneWayNs, [co] { Complete(co); });
}

void Issue(Coro* co) {
  Cluster& c = *co->c;
  c.issued++;
  co->mn = static_cast<int>(co->rng.Uniform(kMnCount));
  co->kind = co->rng.Uniform(10) == 0 ? kCas : kRead;
  co->timeout = c.e->After(kTimeoutNs, [co] { co->c->timed_out++; });
  c.e->After(kOneWayNs + co->rng.Uniform(50), [co] { Arrive(co); });
}

Outcome RunCluster(const Settings& s, uint64_t event_count) {
  Engine e(s.seed);
  Cluster c{&e};
  c.coros.resize(kCnCount * kWorkersPerCn * kCorosPerWorker);
  for (size_t i = 0; i < c.coros.size(); i++) {
    Coro& co = c.coros[i];
    co.c = &c;
    co.core = &c.cores[i / kCorosPerWorker];
    co.rng = e.StreamRng(i);
    co.id = i;
    Coro* p = &co;
    e.At(e.rng().Uniform(1000), [p] { Issue(p); });
  }
  e.RunWhile([&] { return e.stats().events_run < event_count; });
  Outcome out;
  out.trace_hash = c.hash;
  out.virtual_ns = e.now();
  out.stats = e.stats();
  out.op_count = c.completed;
  // Every event run is an initial issue, an arrival, a completion, a resume or a timeout.
  out.consistent =
      e.stats().events_run == c.coros.size() + c.arrived + c.completed + c.resumed + c.timed_out;
  double window = static_cast<double>(e.now());
  char buf[512];
  std::snprintf(buf, sizeof buf,
                ",\"ops\":%llu,\"timeouts\":%llu,\"nic0_read_util\":%.3f,\"nic0_cas_util\":%.3f,"
                "\"virtual_mops_per_s\":%.2f",
                static_cast<unsigned long long>(c.completed),
                static_cast<unsigned long long>(c.timed_out),
                c.nics[0].Utilisation(kRead, 0, e.now()), c.nics[0].Utilisation(kCas, 0, e.now()),
                static_cast<double>(c.completed) / window * 1e3);
  out.extra_json = buf;
  return out;
}

Outcome Run(const Settings& s, uint64_t event_count) {
  return s.pattern == "cluster" ? RunCluster(s, event_count) : RunActors(s, event_count);
}

int Usage() {
  std::fprintf(stderr,
               "usage: sim_engine_bench [--pattern actors|cluster] [--events N] [--seed S] "
               "[--actors N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    std::string v = argv[++i];
    if (a == "--pattern" && (v == "actors" || v == "cluster")) {
      s.pattern = v;
    } else if (a == "--events") {
      s.event_count = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--seed") {
      s.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--actors") {
      s.actor_count = std::atoi(v.c_str());
      if (s.actor_count <= 0) return Usage();
    } else {
      return Usage();
    }
  }

  std::printf("# sim_engine_bench build=%s\n", kBuildType);
#ifndef NDEBUG
  std::printf("# WARNING: asserts are on; numbers are not comparable with Release\n");
#endif
  std::printf("# pattern=%s events=%llu seed=%llu", s.pattern.c_str(),
              static_cast<unsigned long long>(s.event_count),
              static_cast<unsigned long long>(s.seed));
  if (s.pattern == "actors") std::printf(" actors=%d", s.actor_count);
  std::printf("\n");
  std::fflush(stdout);

  // The check: the first events, run twice with one seed, give one trace.
  const uint64_t check_count = std::min<uint64_t>(s.event_count, 1'000'000);
  Outcome first = Run(s, check_count), again = Run(s, check_count);
  if (first.trace_hash != again.trace_hash || first.virtual_ns != again.virtual_ns) {
    std::fprintf(stderr, "FAIL: two runs with seed %llu differ\n",
                 static_cast<unsigned long long>(s.seed));
    return 1;
  }

  pond::SystemClock& wall = pond::SystemClock::Get();
  uint64_t start_ns = wall.NowNs();
  Outcome out = Run(s, s.event_count);
  double wall_s = static_cast<double>(wall.NowNs() - start_ns) * 1e-9;
  if (!out.consistent) {
    std::fprintf(stderr, "FAIL: cluster event counts do not add up\n");
    return 1;
  }

  std::printf(
      "{\"pattern\":\"%s\",\"build\":\"%s\",\"seed\":%llu,\"events\":%llu,\"cancelled\":%llu,"
      "\"pending_peak\":%llu,\"compactions\":%llu,\"wall_s\":%.3f,\"events_per_s\":%.0f,"
      "\"virtual_ns\":%llu,\"trace_hash\":\"%016llx\"%s}\n",
      s.pattern.c_str(), kBuildType, static_cast<unsigned long long>(s.seed),
      static_cast<unsigned long long>(out.stats.events_run),
      static_cast<unsigned long long>(out.stats.events_cancelled),
      static_cast<unsigned long long>(out.stats.pending_count_peak),
      static_cast<unsigned long long>(out.stats.heap_compactions), wall_s,
      static_cast<double>(out.stats.events_run) / wall_s,
      static_cast<unsigned long long>(out.virtual_ns),
      static_cast<unsigned long long>(out.trace_hash), out.extra_json.c_str());
  return 0;
}
