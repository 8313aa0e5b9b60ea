#include "pond/tools/client_probe.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pond::tools {

namespace {

// Shards of the lock map: the low 12 bits of a key (docs/api.md "Concepts").
constexpr uint32_t kShards = 4096;
// A shard that does not commit is tried again after this: a failover takes milliseconds to
// hand a shard on, and a tight loop would only add aborts to the cluster it probes.
constexpr auto kRetryPause = std::chrono::milliseconds(5);

using SteadyClock = std::chrono::steady_clock;

struct ShardResult {
  bool committed = false;
  uint32_t attempts = 0;
  uint64_t ms = 0;                 // from the CN's probe start to the commit
  std::string last = "not tried";  // the last answer that was not a commit
};

// Probes `shards` (every `stride`-th from `first`) through `address`, on one connection.
void ProbeSome(const std::string& address, uint16_t cn, const std::string& table,
               const std::string& value, uint32_t first, uint32_t stride,
               SteadyClock::time_point start, SteadyClock::time_point deadline, const ProbeArgs& a,
               std::vector<ShardResult>* out) {
  client::ClientOptions o = a.security;
  o.timeout_ms = a.timeout_ms;
  o.follow_cns = false;  // through this CN, or not at all: failing over would hide it
  std::unique_ptr<client::Client> c;
  // Pass after pass over the shards not committed yet, so that one shard that never commits
  // leaves the others tried (and each shard's last answer says why).
  bool pending = true;
  while (pending && SteadyClock::now() < deadline) {
    pending = false;
    for (uint32_t s = first; s < kShards && SteadyClock::now() < deadline; s += stride) {
      ShardResult& r = (*out)[s];
      if (r.committed) continue;
      r.attempts++;
      if (c == nullptr) {
        auto connected = client::Client::Connect(address, o);
        if (!connected.ok()) {
          r.last = connected.status().message();
          pending = true;
          std::this_thread::sleep_for(kRetryPause);
          continue;
        }
        c = std::move(*connected);
      }
      const uint64_t key = (uint64_t{cn} + 1) * kShards + s;
      client::Reply reply = c->Execute(client::Request().Put(table, key, value));
      if (reply.answer.committed()) {
        r.committed = true;
        r.ms = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start)
                   .count();
      } else {
        r.last = reply.answer.ToString();
        pending = true;
      }
    }
    if (pending) std::this_thread::sleep_for(kRetryPause);
  }
}

}  // namespace

int RunProbe(const client::Description& d, const ProbeArgs& a) {
  const client::TableInfo* t = d.Table(a.table);
  if (t == nullptr) {
    std::fprintf(stderr, "pond client probe: the server has no table \"%s\"\n", a.table.c_str());
    return 2;
  }
  const std::vector<std::string>& cns = a.cns.empty() ? d.cn_addresses : a.cns;
  const uint64_t keys = uint64_t{kShards} * (cns.size() + 1);
  if (t->capacity < keys) {
    std::fprintf(stderr,
                 "pond client probe: table %s holds %lu keys; the probe writes keys up to %lu "
                 "(a table of capacity %lu or more)\n",
                 t->name.c_str(), static_cast<unsigned long>(t->capacity),
                 static_cast<unsigned long>(keys - 1), static_cast<unsigned long>(keys));
    return 2;
  }
  std::string value = "probe";
  value.resize(t->value_bytes, '\0');
  bool all = true;
  for (size_t cn = 0; cn < cns.size(); cn++) {
    const std::string& address = cns[cn];
    std::vector<ShardResult> results(kShards);
    const SteadyClock::time_point start = SteadyClock::now();
    const SteadyClock::time_point deadline = start + std::chrono::milliseconds(a.within_ms);
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < a.threads; i++) {
      threads.emplace_back(ProbeSome, address, static_cast<uint16_t>(cn), a.table, value, i,
                           a.threads, start, deadline, std::cref(a), &results);
    }
    for (std::thread& th : threads) th.join();
    const uint64_t elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count();
    uint32_t committed = 0, retried = 0, slowest = 0;
    for (uint32_t s = 0; s < kShards; s++) {
      const ShardResult& r = results[s];
      committed += r.committed;
      retried += r.attempts > 1;
      if (r.committed && r.ms > results[slowest].ms) slowest = s;
    }
    std::printf(
        "%s: %u of %u shards committed in %lu ms (%u retried; slowest: shard %u "
        "after %lu ms)\n",
        address.c_str(), committed, kShards, static_cast<unsigned long>(elapsed), retried, slowest,
        static_cast<unsigned long>(results[slowest].ms));
    if (committed == kShards) continue;
    all = false;
    int named = 0;
    for (uint32_t s = 0; s < kShards && named < 8; s++) {
      if (results[s].committed) continue;
      std::fprintf(stderr, "pond client probe: %s: shard %u did not commit within %u ms: %s\n",
                   address.c_str(), s, a.within_ms, results[s].last.c_str());
      named++;
    }
    if (kShards - committed > static_cast<uint32_t>(named)) {
      std::fprintf(stderr, "pond client probe: %s: and %u more shards\n", address.c_str(),
                   kShards - committed - named);
    }
  }
  return all ? 0 : 3;
}

}  // namespace pond::tools
