#include "pond/tools/connect_bench.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pond/base/assert.h"
#include "pond/base/histogram.h"
#include "pond/bench/build_info.h"
#include "pond/bench/report.h"
#include "pond/client/client.h"
#include "pond/runtime/clocks.h"
#include "pond/tools/run_command.h"
#include "pond/tools/run_flags.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

constexpr int kClientsMax = 1024;
// Calls one client keeps in flight, and calls in flight over all clients: each is a client of
// its own to the workload's driver, which tells at most 4096 apart (TPC-C's terminals).
constexpr int kPipelineMax = 1024;
constexpr int kCallersMax = 4096;
// How long one read or call of the check is tried again while it aborts (a snapshot too old, a
// torn read while a writer finishes, an MN that died and is not declared yet: reads of its keys
// abort until its failure is, a lease and a few periods after the kill), waiting up to 64 ms
// between attempts.
constexpr auto kCheckRetryFor = std::chrono::seconds(15);

// Runs `once` until it says it is done (an answer other than ABORTED) or kCheckRetryFor passes.
template <typename Attempt>
void RetryAborted(Attempt once) {
  const auto until = std::chrono::steady_clock::now() + kCheckRetryFor;
  for (int attempt = 0; !once() && std::chrono::steady_clock::now() < until; attempt++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1 << std::min(attempt, 6)));
  }
}

// The flags an embedded run takes that a connected one must not be given.
constexpr const char* kEmbeddedOnly[] = {"--moving-hotspot-ms",  // the served driver keeps it still
                                         "--mns",
                                         "--cns",
                                         "--workers",
                                         "--coros",
                                         "--isolation",
                                         "--replication",
                                         "--versions",
                                         "--region-mib",
                                         "--transport",
                                         "--ucx-tls",
                                         "--ucx-net-devices",
                                         "--coord",
                                         "--cluster",
                                         "--protocol",
                                         "--sweep",
                                         "--faults",
                                         "--accounts",
                                         "--keys",
                                         "--subscribers",
                                         "--warehouses",
                                         "--items",
                                         "--customers",
                                         "--order-room",
                                         "--keep-deleted-entries",
                                         "--keep-empty-leaves",
                                         "--lock-buckets",
                                         "--vt-cache-entries",
                                         "--addr-cache-entries"};

// Pond's abort reasons (AbortCounts) by the client's; the service's own reasons, which a
// benchmark's procedure calls do not meet, are counted apart.
uint64_t* AbortCounter(AbortCounts& a, client::AbortReason r) {
  using R = client::AbortReason;
  switch (r) {
    case R::kLockConflict:
      return &a.lock_conflict;
    case R::kNewerVersion:
      return &a.newer_version;
    case R::kSnapshotTooOld:
      return &a.snapshot_too_old;
    case R::kTornRead:
      return &a.torn_read;
    case R::kInvisibleWait:
      return &a.invisible_wait;
    case R::kDuplicateKey:
      return &a.duplicate_key;
    case R::kValidation:
      return &a.validation;
    case R::kUser:
      return &a.user;
    case R::kMnUnreachable:
      return &a.mn_unreachable;
    default:
      return nullptr;
  }
}

// What every client thread books, merged at the end.
struct ClientTally {
  Histogram latency_ns;
  uint64_t committed = 0, committed_rw = 0, aborted = 0, unknown = 0, rejected = 0, other = 0;
  AbortCounts aborts;
  std::string first_rejection;
  std::string first_unknown;  // what the server said of the first call of unknown outcome
};

bench::RemoteReader MakeReader(client::Client& c) {
  return
      [&c](std::string_view table,
           const std::vector<uint64_t>& keys) -> Result<std::vector<std::optional<std::string>>> {
        client::Request r(/*read_only=*/true);
        for (uint64_t k : keys) r.Read(table, k);
        client::Reply reply;
        RetryAborted([&] {
          reply = c.Execute(r);
          return reply.answer.outcome != client::Outcome::kAborted;
        });
        if (!reply.answer.committed()) return Unavailable(reply.answer.ToString());
        std::vector<std::optional<std::string>> out;
        for (client::Value& v : reply.values) {
          out.push_back(v.found ? std::optional<std::string>(std::move(v.bytes)) : std::nullopt);
        }
        if (out.size() != keys.size())
          return Internal("the server answered another number of values");
        return out;
      };
}

bench::RemoteCaller MakeCaller(client::Client& c) {
  return [&c](std::string_view procedure, std::string_view args) -> Result<std::string> {
    client::CallReply reply;
    RetryAborted([&] {
      reply = c.Call(procedure, args);
      return reply.answer.outcome != client::Outcome::kAborted;
    });
    if (!reply.answer.committed()) {
      return Unavailable(fmt::format("{}: {}", procedure, reply.answer.ToString()));
    }
    return std::move(reply.reply);
  };
}

// The embedded runs' lines (PrintMeasures, PrintCheck), with the answers a client alone sees.
void PrintResult(const bench::RunResult& r, const ClientTally& t) {
  std::printf("loaded       %s\n", r.loaded.c_str());
  PrintMeasures(r, "", " (at the client)");
  std::printf("answers      %lu unknown, %lu rejected, %lu aborted for other reasons%s\n",
              static_cast<unsigned long>(t.unknown), static_cast<unsigned long>(t.rejected),
              static_cast<unsigned long>(t.other),
              t.first_unknown.empty()
                  ? ""
                  : fmt::format(" (the first unknown: {})", t.first_unknown).c_str());
  PrintCheck(r);
}

// Commits so far, every kTimelineStepNs from the start of the run.
constexpr uint64_t kTimelineStepNs = 100'000'000;
struct Timeline {
  uint64_t start_unix_ms = 0;
  std::vector<uint64_t> committed;
};

nlohmann::json ResultJson(const std::string& what, const std::string& address, int clients,
                          int pipeline, double seconds, uint64_t seed, const bench::RunResult& r,
                          const ClientTally& t, const Timeline& timeline) {
  // The embedded runs' measures (bench::MeasuresJson), with what a client alone sees.
  nlohmann::json result = bench::MeasuresJson(r);
  result["unknown"] = t.unknown;
  result["rejected"] = t.rejected;
  result["timeline"] = {{"start_unix_ms", timeline.start_unix_ms},
                        {"step_ms", kTimelineStepNs / 1'000'000},
                        {"committed", timeline.committed}};
  return {{"bench", r.workload},
          {"command", what},
          {"build_type", bench::kBuildType},
          {"transport", "grpc"},
          {"connect", address},
          {"settings",
           {{"clients", clients}, {"pipeline", pipeline}, {"seconds", seconds}, {"seed", seed}}},
          {"result", result}};
}

// What the client threads of one connected run share.
struct ClientPool {
  ClientPool(bench::RemoteDriver& d, uint64_t s, uint64_t end_ns, int clients)
      : dr(d), seed(s), deadline(end_ns), tallies(static_cast<size_t>(clients)) {}
  bench::RemoteDriver& dr;
  Clock& clock = SystemClock::Get();
  const uint64_t seed;
  const uint64_t deadline;
  std::vector<ClientTally> tallies;  // one per client
  std::atomic<uint64_t> committed{0}, aborted{0};
  std::atomic<bool> stop{false};
  std::mutex fail_mu;
  std::string connect_failure;    // guarded by fail_mu
  client::ClientOptions options;  // how every client connects (its TLS, or plaintext)
};

bench::RemoteOutcome OutcomeOf(const client::Answer& a) {
  if (a.outcome == client::Outcome::kCommitted) return bench::RemoteOutcome::kCommitted;
  if (a.outcome == client::Outcome::kAborted) {
    return a.reason == client::AbortReason::kDuplicateKey ? bench::RemoteOutcome::kDuplicateKey
                                                          : bench::RemoteOutcome::kAborted;
  }
  if (a.outcome == client::Outcome::kRejected) return bench::RemoteOutcome::kRejected;
  return bench::RemoteOutcome::kUnknown;
}

// Books one call the driver counted into client `t`'s tally.
void TallyCall(ClientPool& pool, ClientTally& t, const bench::RemoteCall& call,
               bench::RemoteOutcome o, const client::Answer& a, uint64_t latency_ns) {
  switch (o) {
    case bench::RemoteOutcome::kCommitted:
      t.latency_ns.Record(latency_ns);
      t.committed++;
      if (call.read_write) t.committed_rw++;
      pool.committed.fetch_add(1, std::memory_order_relaxed);
      break;
    case bench::RemoteOutcome::kUnknown:
      t.unknown++;
      if (t.first_unknown.empty()) t.first_unknown = a.ToString();
      break;
    case bench::RemoteOutcome::kRejected:
      // The server and this client disagree about the workload: stop, and say why.
      t.rejected++;
      if (t.first_rejection.empty()) t.first_rejection = a.ToString();
      pool.stop = true;
      break;
    default:
      t.aborted++;
      pool.aborted.fetch_add(1, std::memory_order_relaxed);
      if (uint64_t* counter = AbortCounter(t.aborts, a.reason)) {
        (*counter)++;
      } else {
        t.other++;
      }
      break;
  }
}

// Books one answered call into client `t`'s tally, stamped `done_ns`.
void BookCall(ClientPool& pool, ClientTally& t, bench::RemoteCall& call,
              const client::Answer& answer, std::string_view reply, uint64_t done_ns) {
  call.done_ns = done_ns;
  const bench::RemoteOutcome o = OutcomeOf(answer);
  if (!pool.dr.Book(call, o, reply)) return;
  TallyCall(pool, t, call, o, answer, done_ns - call.invoke_ns);
}

bool KeepCalling(ClientPool& pool) {
  return !pool.stop.load(std::memory_order_relaxed) && pool.clock.NowNs() < pool.deadline &&
         !pool.dr.Done();
}

// One unary call at a time, each answered before the next is drawn.
void CallOneByOne(ClientPool& pool, int i, client::Client& c) {
  ClientTally& t = pool.tallies[static_cast<size_t>(i)];
  Rng rng(pool.seed * 1'000'003 + static_cast<uint64_t>(i));
  for (uint64_t n = 1; KeepCalling(pool); n++) {
    bench::RemoteCall call = pool.dr.Next(rng, static_cast<uint64_t>(i), n);
    call.invoke_ns = pool.clock.NowNs();
    client::CallReply reply = c.Call(call.procedure, call.args, call.route_key);
    BookCall(pool, t, call, reply.answer, reply.reply, pool.clock.NowNs());
  }
}

// `depth` calls in flight on one pipeline. Slot k of client i is the driver's client
// i * depth + k: it draws with its own stream of randomness and has one call in flight at a
// time, so that what the driver knows of a client (a TPC-C terminal, a list-append process)
// stays one sequence of calls.
void CallPipelined(ClientPool& pool, int i, int depth, client::Client& c) {
  ClientTally& t = pool.tallies[static_cast<size_t>(i)];
  struct Slot {
    Rng rng;
    uint64_t n = 0;
    bench::RemoteCall call;
  };
  std::vector<Slot> slots;
  for (int k = 0; k < depth; k++) {
    const uint64_t caller =
        static_cast<uint64_t>(i) * static_cast<uint64_t>(depth) + static_cast<uint64_t>(k);
    slots.push_back(Slot{Rng(pool.seed * 1'000'003 + caller), 0, {}});
  }
  std::unique_ptr<client::Pipeline> p = c.OpenPipeline();
  std::unordered_map<uint64_t, size_t> slot_of;  // by request id
  auto issue = [&](size_t k) {
    Slot& s = slots[k];
    s.call =
        pool.dr.Next(s.rng, static_cast<uint64_t>(i) * static_cast<uint64_t>(depth) + k, ++s.n);
    s.call.invoke_ns = pool.clock.NowNs();
    slot_of[p->Call(s.call.procedure, s.call.args, s.call.route_key)] = k;
  };
  for (size_t k = 0; k < slots.size() && KeepCalling(pool); k++) issue(k);
  while (!slot_of.empty()) {
    for (client::PipelinedReply& r : p->Receive()) {
      const auto it = slot_of.find(r.id);
      POND_CHECK_MSG(it != slot_of.end(), "an answer to a call this client did not make");
      const size_t k = it->second;
      slot_of.erase(it);
      BookCall(pool, t, slots[k].call, r.answer, r.reply, pool.clock.NowNs());
      if (KeepCalling(pool)) issue(k);
    }
  }
}

// Client i's thread: connects to `addresses` and calls until the deadline, a stop or the
// driver's end.
void RunClientThread(ClientPool& pool, int i, int depth,
                     const std::vector<std::string>& addresses) {
  auto c = client::Client::Connect(addresses, pool.options);
  if (!c.ok()) {
    std::lock_guard lock(pool.fail_mu);
    pool.connect_failure = c.status().message();
    return;
  }
  if (depth == 1) {
    CallOneByOne(pool, i, **c);
  } else {
    CallPipelined(pool, i, depth, **c);
  }
}

// Clients spread over the CNs, as Lotus's are (each moves to another if its CN fails). A client
// starts at its own CN and knows the others: its CN may have failed before it connects.
std::vector<std::string> ClientAddresses(const client::Description& d, const std::string& address,
                                         int i) {
  std::vector<std::string> addresses = d.cn_addresses;
  if (addresses.empty()) addresses.push_back(address);
  std::rotate(addresses.begin(),
              addresses.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(i) % addresses.size()),
              addresses.end());
  return addresses;
}

// Progress about once a second, as the embedded runs print it, until the run ends; the JSON's
// timeline has the commits every 100 ms (how long a failure stalls the clients, docs/perf.md).
Timeline WatchRun(ClientPool& pool, uint64_t start) {
  Clock& clock = pool.clock;
  auto progress = KvsProgressPrinter(stdout, /*simulate=*/false, "");
  Timeline timeline;
  timeline.start_unix_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  for (uint64_t next = start + 1'000'000'000, sample = start + kTimelineStepNs;
       clock.NowNs() < pool.deadline && !pool.stop.load() && !pool.dr.Done();) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    while (clock.NowNs() >= sample) {
      timeline.committed.push_back(pool.committed.load());
      sample += kTimelineStepNs;
    }
    if (clock.NowNs() >= next) {
      progress({static_cast<double>(clock.NowNs() - start) / 1e9, pool.committed.load(),
                pool.aborted.load()});
      next += 1'000'000'000;
    }
  }
  return timeline;
}

// Every client's tally in one, and its counts in r.
ClientTally MergeTallies(const std::vector<ClientTally>& tallies, bench::RunResult* r) {
  ClientTally all;
  for (const ClientTally& t : tallies) {
    r->latency_ns.Merge(t.latency_ns);
    all.committed += t.committed;
    all.committed_rw += t.committed_rw;
    all.aborted += t.aborted;
    all.unknown += t.unknown;
    all.rejected += t.rejected;
    all.other += t.other;
    for (const AbortCounts::Reason& reason : AbortCounts::Reasons()) {
      all.aborts.*reason.count += t.aborts.*reason.count;
    }
    if (all.first_rejection.empty()) all.first_rejection = t.first_rejection;
    if (all.first_unknown.empty()) all.first_unknown = t.first_unknown;
  }
  r->committed = all.committed;
  r->committed_rw = all.committed_rw;
  r->aborted = all.aborted;
  r->unknown = all.unknown;
  r->stats.aborts = all.aborts;
  return all;
}

// The run's result, the JSON file if asked, the history (written if asked, and its verdict) and
// the workload's check. The exit code.
int ReportConnected(const std::string& what, const ConnectFlags& f, double seconds, uint64_t seed,
                    const bench::RunResult& r, const ClientTally& all, const Timeline& timeline,
                    const std::string& json_path, const std::string& history_path) {
  PrintResult(r, all);
  if (!json_path.empty()) {
    if (!WriteFile(json_path, ResultJson(what, f.address, f.clients, f.pipeline, seconds, seed, r,
                                         all, timeline)
                                      .dump(2) +
                                  "\n")) {
      return Fail(what, "cannot write " + json_path);
    }
    std::printf("results written to %s\n", json_path.c_str());
  }
  std::fflush(stdout);
  if (r.history) {
    if (!history_path.empty() && !WriteFile(history_path, r.history->text)) {
      return Fail(what, "cannot write " + history_path);
    }
    PrintHistoryVerdict(*r.history, history_path);
    if (!r.history->ok) {
      std::fprintf(stderr, "pond %s: the history check failed%s: %s\n", what.c_str(),
                   history_path.empty() ? "" : (" (" + history_path + ")").c_str(),
                   r.history->detail.c_str());
      return 1;
    }
  }
  if (r.check && !r.check->ok) {
    std::fprintf(stderr, "pond %s: %s failed: %s\n", what.c_str(), r.check->name.c_str(),
                 r.check->detail.c_str());
    return 1;
  }
  return 0;
}

// Runs the clients, one thread each, until the run ends; the run's timeline.
Timeline RunClients(ClientPool& pool, const client::Description& d, const ConnectFlags& f,
                    uint64_t start) {
  std::vector<std::thread> threads;
  for (int i = 0; i < f.clients; i++) {
    threads.emplace_back(
        [&pool, i, depth = f.pipeline, addresses = ClientAddresses(d, f.address, i)] {
          RunClientThread(pool, i, depth, addresses);
        });
  }
  Timeline timeline = WatchRun(pool, start);
  for (std::thread& t : threads) t.join();
  return timeline;
}

void PrintConnectedHeader(const std::string& what, const ConnectFlags& f,
                          const client::Description& d, const bench::RemoteDriver& dr,
                          double seconds, uint64_t seed) {
  std::printf(
      "pond %s: build %s, transport grpc, connected to %s (cluster %s, %zu CN "
      "address(es), the clients spread over them), %d client(s), %s, %s, %g s, seed %lu\n",
      what.c_str(), bench::kBuildType, f.address.c_str(), d.cluster.c_str(), d.cn_addresses.size(),
      f.clients,
      f.pipeline == 1 ? "one call at a time each"
                      : fmt::format("{} calls in flight each (pipelined)", f.pipeline).c_str(),
      dr.Settings().c_str(), seconds, static_cast<unsigned long>(seed));
  if (bench::kAssertsOn) {
    std::printf("warning: asserts are on; numbers are not comparable with Release\n");
  }
  std::fflush(stdout);
}

}  // namespace

void AddConnectFlags(CLI::App* cmd, ConnectFlags* f) {
  cmd->add_option("--connect", f->address,
                  "drive a cluster that serves this workload (pond serve --workload ...) at "
                  "HOST:PORT through the client API, instead of an embedded cluster");
  cmd->add_option("--clients", f->clients, "with --connect: client threads, one connection each")
      ->check(CLI::Range(1, kClientsMax))
      ->capture_default_str();
  cmd->add_option("--pipeline", f->pipeline,
                  "with --connect: calls each client keeps in flight on one stream (1: one "
                  "unary call at a time)")
      ->check(CLI::Range(1, kPipelineMax))
      ->capture_default_str();
  AddClientSecurityFlags(cmd, &f->security, "with --connect: ");
}

Status CheckConnectFlags(const CLI::App& cmd, const ConnectFlags& f) {
  if (f.address.empty()) {
    for (const char* flag : {"--clients", "--pipeline", "--certs-dir", "--dir", "--user",
                             "--token-file", "--insecure"}) {
      if (cmd.get_option_no_throw(flag) != nullptr && cmd.count(flag) > 0) {
        return InvalidArgument(std::string(flag) + " goes with --connect");
      }
    }
    return Status::Ok();
  }
  if (f.clients * f.pipeline > kCallersMax) {
    return InvalidArgument(
        fmt::format("--clients {} x --pipeline {} is {} calls in flight; at most {}", f.clients,
                    f.pipeline, f.clients * f.pipeline, kCallersMax));
  }
  for (const char* flag : kEmbeddedOnly) {
    if (cmd.get_option_no_throw(flag) != nullptr && cmd.count(flag) > 0) {
      return InvalidArgument(std::string(flag) +
                             " shapes an embedded cluster or its data; with --connect the "
                             "server's cluster and tables decide it");
    }
  }
  return Status::Ok();
}

int RunConnected(const std::string& what, const bench::Workload& w, const ConnectFlags& f,
                 double seconds, uint64_t seed, const std::string& json_path,
                 const std::string& history_path) {
  if (!(seconds > 0) || seconds > 86400) return Fail(what, "--seconds must be in (0, 86400]");
  client::ClientOptions options;
  if (Status st = ApplyClientSecurity(f.security, &options); !st.ok()) {
    return Fail(what, st.message());
  }
  auto control = client::Client::Connect(f.address, options);
  if (!control.ok()) {
    std::fprintf(stderr, "pond %s: %s\n", what.c_str(), control.status().message().c_str());
    return 1;
  }
  Result<client::Description> d = (*control)->Describe();
  if (!d.ok()) {
    std::fprintf(stderr, "pond %s: %s\n", what.c_str(), d.status().message().c_str());
    return 1;
  }
  std::vector<bench::RemoteTable> tables;
  for (const client::TableInfo& t : d->tables)
    tables.push_back({t.name, t.value_bytes, t.capacity});
  Result<std::unique_ptr<bench::RemoteDriver>> driver = w.Remote(tables);
  if (!driver.ok()) return Fail(what, f.address + ": " + driver.status().message());
  bench::RemoteDriver& dr = **driver;
  if (d->isolation != "sr" && d->isolation != "si") {
    return Fail(what, f.address + " does not say what isolation it guarantees");
  }
  const Isolation isolation =
      d->isolation == "si" ? Isolation::kSnapshot : Isolation::kSerializable;
  const bench::RemoteStore store{MakeReader(**control), MakeCaller(**control)};
  PrintConnectedHeader(what, f, *d, dr, seconds, seed);
  if (Status st = dr.Start(store); !st.ok()) {
    std::fprintf(stderr, "pond %s: %s\n", what.c_str(), st.ToString().c_str());
    return 1;
  }

  const uint64_t start = SystemClock::Get().NowNs();
  ClientPool pool(dr, seed, start + static_cast<uint64_t>(seconds * 1e9), f.clients);
  pool.options = options;
  const Timeline timeline = RunClients(pool, *d, f, start);
  const double elapsed = static_cast<double>(pool.clock.NowNs() - start) / 1e9;
  if (!pool.connect_failure.empty()) {
    std::fprintf(stderr, "pond %s: a client could not connect: %s\n", what.c_str(),
                 pool.connect_failure.c_str());
    return 1;
  }

  bench::RunResult r;
  r.workload = w.name();
  r.elapsed_s = elapsed;
  r.wall_s = elapsed;
  const ClientTally all = MergeTallies(pool.tallies, &r);
  if (all.rejected > 0) {
    std::fprintf(stderr, "pond %s: the server rejected a call: %s\n", what.c_str(),
                 all.first_rejection.c_str());
    return 1;
  }
  const Status finished = dr.Finish(store, &r);
  // The history is judged even when the run failed: what the clients saw is the evidence.
  std::optional<std::string> history = dr.TakeHistory();
  if (history) r.history = bench::JudgeHistory(std::move(*history), isolation);
  if (!finished.ok()) {
    std::fprintf(stderr, "pond %s: %s\n", what.c_str(), finished.ToString().c_str());
    return 1;
  }
  return ReportConnected(what, f, seconds, seed, r, all, timeline, json_path, history_path);
}

}  // namespace pond::tools
