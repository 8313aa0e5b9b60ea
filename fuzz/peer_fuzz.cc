// What one CN's worker reads from the others: a CN packet (docs/formats.md "CN packet"), byte
// for byte, handed to the worker's endpoint as a transport hands over what arrived, with every
// handler a CN registers behind it — the lock server and client, the timestamp server and client
// and routed calls — each holding a request of its own that a reply may answer.
//
// Nothing may crash, assert or read past the packet. A packet that does not parse is dropped
// whole: nothing is locked, answered or granted from it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "pond/lock/lock_client.h"
#include "pond/lock/lock_server.h"
#include "pond/lock/lock_table.h"
#include "pond/lock/shard_map.h"
#include "pond/node/routed_call.h"
#include "pond/runtime/clocks.h"
#include "pond/runtime/scheduler.h"
#include "pond/transport/packet.h"
#include "pond/transport/raw_endpoint.h"
#include "pond/txn/timestamp_oracle.h"

namespace {

using namespace pond;

void Check(bool holds) {
  if (!holds) __builtin_trap();
}

// The worker under test is worker 0 of CN 1, in a cluster of two CNs: CN 0 manages half the
// shards and hosts the timestamp oracle; its worker 0 is where the primed requests went.
constexpr WorkerAddr kSelf{1, 0};
constexpr WorkerAddr kPeer{0, 0};

lock::LockKey KeyOf(const lock::ShardMap& map, uint16_t cn) {
  for (uint32_t s = 0; s < lock::kShards; s++) {
    if (map.CnOf(s) == cn) return lock::LockKey::Record(0, s);
  }
  __builtin_trap();
}

struct Worker {
  ManualClock clock{1'000'000};
  Scheduler sched{clock};
  RawEndpoint ep{kSelf, sched};
  lock::ShardMap map{2};
  lock::LockTable table{64, kSelf.cn};
  lock::LockServer lock_server{ep, table};
  lock::LockClient lock_client{kSelf.cn, ep, table, map};
  txn::TimestampOracle oracle{clock};
  txn::TsoServer tso_server{ep, &oracle};  // as if it hosted the oracle too: requests are served
  txn::TsoClient tso_client{ep, kPeer, nullptr};
  node::RoutedCalls calls{ep, sched,
                          [](ProcedureId, std::span<const std::byte> args,
                             std::vector<std::byte>* reply) -> Task<Status> {
                            if (reply != nullptr) reply->assign(args.begin(), args.end());
                            co_return Status::Ok();
                          }};
  std::optional<Status> locked, called;
  uint64_t ts = 0;

  Worker() {
    for (uint32_t s = 0; s < lock::kShards; s++) table.SetManaged(s, map.CnOf(s) == kSelf.cn);
    // One request awaiting each kind of reply: lock request 1 to CN 0, timestamp request seq 0
    // and call 1, all to worker 0 of CN 0.
    const lock::LockOwner owner{kSelf.cn, 1};
    lock_client.Start(owner);
    sched.Spawn([](Worker* w, lock::LockOwner o) -> Task<void> {
      const lock::LockRequest req{KeyOf(w->map, kPeer.cn), lock::LockMode::kWrite};
      w->locked = co_await w->lock_client.Acquire(o, std::span(&req, 1));
    }(this, owner));
    sched.Spawn([](Worker* w) -> Task<void> { w->ts = co_await w->tso_client.Get(); }(this));
    sched.Spawn([](Worker* w) -> Task<void> {
      const std::byte arg{1};
      w->called = co_await w->calls.Call(kPeer, 1, std::span(&arg, 1));
    }(this));
    sched.RunOnce();
    Check(ep.sent().size() == 1 && lock_client.awaiting() == 1 && tso_client.awaiting() == 1);
    ep.sent().clear();
  }
  // The coroutines hold pointers into the members: their frames go first.
  ~Worker() { sched.DestroyUnfinished(); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Worker w;
  const uint64_t granted = w.oracle.last();
  w.ep.Deliver(std::span(reinterpret_cast<const std::byte*>(data), size));
  // Rounds for what the packet started (a routed call's procedure, a waiter made ready), and a
  // resend timeout for what it left unanswered.
  w.sched.RunOnce();
  w.clock.Advance(kResendAfterNs);
  w.sched.RunOnce();
  w.sched.RunOnce();
  if (w.ep.stats().packets_received == 0) {
    // Dropped whole: nothing locked, granted or answered, and counted.
    Check(w.table.HeldLocks().empty());
    Check(w.oracle.last() == granted);
    Check(!w.locked.has_value() && !w.called.has_value() && w.ts == 0);
    Check(w.ep.stats().messages_malformed == 1);
  }
  Check(w.table.VerifyInvariants().ok());
  // Every lock held here is held for the packet's sender, the only CN that asked.
  for (const lock::LockTable::Held& h : w.table.HeldLocks()) {
    PacketHeader ph;
    std::memcpy(&ph, data, sizeof(ph));  // the packet parsed, so it is that long
    Check(h.owner.cn == ph.src_cn);
  }
  return 0;
}
