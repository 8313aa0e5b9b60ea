// The harness of the lock RPC tests: request and reply batches built by hand, a LockServer fed
// one message at a time (LockServerTest), and CNs of lock clients and servers over the local
// transport driven round by round on one thread (Cluster).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "pond/base/assert.h"
#include "pond/lock/lock_client.h"
#include "pond/lock/lock_messages.h"
#include "pond/lock/lock_server.h"
#include "pond/lock/lock_table.h"
#include "pond/lock/shard_map.h"
#include "pond/runtime/clocks.h"
#include "pond/transport/local/local_fabric.h"

namespace pond::lock::rpc_test {

inline constexpr LockMode R = LockMode::kRead;
inline constexpr LockMode W = LockMode::kWrite;

inline std::unique_ptr<LocalFabric> MakeFabric() {
  auto f = LocalFabric::Create(1, 1 << 20);
  POND_CHECK(f.ok());
  return std::move(f).value();
}

// A table of CN `cn` that manages exactly the shards `map` gives it.
inline std::unique_ptr<LockTable> TableFor(const ShardMap& map, uint16_t cn) {
  auto t = std::make_unique<LockTable>(256, cn);
  for (uint32_t s = 0; s < kShards; s++) t->SetManaged(s, map.CnOf(s) == cn);
  return t;
}

// Key number i of the first shard `map` gives to `cn`.
inline LockKey KeyOn(const ShardMap& map, uint16_t cn, uint64_t i) {
  for (uint32_t s = 0; s < kShards; s++) {
    if (map.CnOf(s) == cn) return LockKey::Record(1, (i << kShardBits) | s);
  }
  POND_CHECK_MSG(false, "CN manages no shard");
  return {};
}

inline bool Holds(const LockTable& t, const LockKey& k, LockMode mode, const LockOwner& o) {
  for (const auto& h : t.HeldLocks()) {
    if (h.key == k && h.mode == mode && h.owner == o) return true;
  }
  return false;
}

inline LockRequestEntry Entry(uint8_t op, const LockKey& k, LockMode mode, uint64_t txn,
                              uint32_t id) {
  LockRequestEntry e{};
  e.txn_id = txn;
  e.key = k.key;
  e.table = k.table;
  e.op = op;
  e.mode = static_cast<uint8_t>(mode);
  e.req_id = id;
  return e;
}

inline std::vector<std::byte> Batch(const std::vector<LockRequestEntry>& entries,
                                    uint64_t floor = 0) {
  std::vector<std::byte> b(sizeof(BatchHeader) + entries.size() * sizeof(LockRequestEntry));
  BatchHeader h{static_cast<uint32_t>(entries.size()), 0, floor};
  std::memcpy(b.data(), &h, sizeof(h));
  if (!entries.empty()) {
    std::memcpy(b.data() + sizeof(h), entries.data(), entries.size() * sizeof(LockRequestEntry));
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// LockServer, message by message. The server is worker 0 of CN 1; the peers that send to it are
// plain endpoints that record every reply batch they get.

struct Peer {
  ManualClock clock;
  Scheduler sched{clock};
  std::unique_ptr<Endpoint> ep;
  std::vector<std::vector<LockReplyEntry>> batches;  // one per reply message received
  Peer(LocalFabric& f, WorkerAddr a) : ep(f.CreateEndpoint(a, sched)) {
    ep->OnMessage(kMsgLockReplies, [this](const Message& m) {
      BatchHeader h;
      std::memcpy(&h, m.payload.data(), sizeof(h));
      EXPECT_EQ(m.payload.size(), sizeof(h) + h.count * sizeof(LockReplyEntry));
      std::vector<LockReplyEntry> v(h.count);
      std::memcpy(v.data(), m.payload.data() + sizeof(h), h.count * sizeof(LockReplyEntry));
      batches.push_back(std::move(v));
    });
  }
};

class LockServerTest : public ::testing::Test {
 protected:
  LockServerTest()
      : fabric_(MakeFabric()),
        map_(2),
        table_(TableFor(map_, 1)),
        server_ep_(fabric_->CreateEndpoint({1, 0}, server_sched_)),
        server_(*server_ep_, *table_),
        remote_(*fabric_, {0, 0}),
        same_cn_(*fabric_, {1, 1}) {}

  // Hands one request batch from `from` to the server, lets the reply (if any) travel, and
  // returns the reply batches `from` received.
  std::vector<std::vector<LockReplyEntry>> Feed(Peer& from,
                                                const std::vector<LockRequestEntry>& entries,
                                                uint64_t floor = 0) {
    std::vector<std::byte> payload = Batch(entries, floor);
    server_.OnRequests(Message{from.ep->self(), kMsgLockRequests, payload});
    server_sched_.RunOnce();  // EndRound sends the reply packet
    from.sched.RunOnce();     // Poll delivers it
    return std::exchange(from.batches, {});
  }

  ManualClock clock_;
  Scheduler server_sched_{clock_};
  std::unique_ptr<LocalFabric> fabric_;
  ShardMap map_;
  std::unique_ptr<LockTable> table_;
  std::unique_ptr<Endpoint> server_ep_;
  LockServer server_;
  Peer remote_;   // worker 0 of CN 0: a remote CN
  Peer same_cn_;  // worker 1 of CN 1: the server's own CN
};

struct CnWorker {
  ManualClock clock;
  Scheduler sched{clock};
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<LockServer> server;
  std::unique_ptr<LockClient> client;
  CnWorker(LocalFabric& f, WorkerAddr a, LockTable& t, const ShardMap& map)
      : ep(f.CreateEndpoint(a, sched)),
        server(std::make_unique<LockServer>(*ep, t)),
        // Created after the endpoint, so it is a later poller: its EndRound runs first.
        client(std::make_unique<LockClient>(a.cn, *ep, t, map)) {}
};

struct Cluster {
  std::unique_ptr<LocalFabric> fabric = MakeFabric();
  ShardMap map;
  int per_cn;
  std::vector<std::unique_ptr<LockTable>> tables;
  std::vector<std::unique_ptr<CnWorker>> workers;  // CN-major

  explicit Cluster(uint16_t cns, int workers_per_cn = 1) : map(cns), per_cn(workers_per_cn) {
    for (uint16_t cn = 0; cn < cns; cn++) tables.push_back(TableFor(map, cn));
    for (uint16_t cn = 0; cn < cns; cn++) {
      for (int w = 0; w < per_cn; w++) {
        workers.push_back(std::make_unique<CnWorker>(
            *fabric, WorkerAddr{cn, static_cast<uint16_t>(w)}, *tables[cn], map));
      }
    }
  }
  CnWorker& At(uint16_t cn, int w = 0) { return *workers[cn * per_cn + w]; }
  LockTable& Table(uint16_t cn) { return *tables[cn]; }
  void Round() {
    for (auto& w : workers) w->sched.RunOnce();
  }
  // Rounds until `done`; the number of rounds it took, or -1 if it did not happen in `max`.
  template <typename F>
  int PumpUntil(F done, int max = 50) {
    for (int i = 0; i < max; i++) {
      if (done()) return i;
      Round();
    }
    return done() ? max : -1;
  }
  bool AllIdle() {
    for (auto& w : workers) {
      if (w->sched.live() > 0) return false;
    }
    return true;
  }
  bool NoLocks() {
    for (auto& t : tables) {
      if (!t->HeldLocks().empty()) return false;
    }
    return true;
  }
};

inline Task<void> AcquireInto(LockClient* c, LockOwner owner, std::vector<LockRequest> reqs,
                              std::optional<Status>* out) {
  *out = co_await c->Acquire(owner, reqs);
}

}  // namespace pond::lock::rpc_test
