// Lock RPCs: LockServer fed one message at a time (STYLE.md item 10), then LockClient and
// LockServer end to end over the local transport, with 2-3 CNs in one process. The tests are
// single-threaded: they drive every worker by calling its scheduler's RunOnce() in turn.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "pond/base/assert.h"
#include "pond/lock/lock_client.h"
#include "pond/lock/lock_messages.h"
#include "pond/lock/lock_rpc_harness.h"
#include "pond/lock/lock_server.h"
#include "pond/lock/lock_table.h"
#include "pond/lock/shard_map.h"
#include "pond/rng.h"
#include "pond/runtime/clocks.h"
#include "pond/transport/local/local_fabric.h"

namespace pond::lock {
namespace {

using namespace rpc_test;  // NOLINT: the harness is this file's vocabulary

TEST_F(LockServerTest, AnswersAllLocksOfABatchInOneReply) {
  const LockKey a = KeyOn(map_, 1, 1), b = KeyOn(map_, 1, 2), c = KeyOn(map_, 1, 3);
  auto replies = Feed(remote_, {Entry(kOpLock, a, W, 7, 10), Entry(kOpLock, b, R, 7, 11),
                                Entry(kOpLock, c, W, 7, 12)});
  // Expect: one reply message, answers in request order, each echoing its req_id.
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[0].size(), 3u);
  for (uint32_t i = 0; i < 3; i++) {
    EXPECT_EQ(replies[0][i].req_id, 10 + i);
    EXPECT_EQ(replies[0][i].code, static_cast<uint8_t>(Code::kOk));
  }
  // Expect: the owner is (sender's CN, txn id).
  EXPECT_TRUE(Holds(*table_, a, W, LockOwner{0, 7}));
  EXPECT_TRUE(Holds(*table_, b, R, LockOwner{0, 7}));
  EXPECT_EQ(server_.stats().request_batches, 1u);
  EXPECT_EQ(server_.stats().locks, 3u);
}

TEST_F(LockServerTest, DuplicateRequestIsAnsweredOkAndChangesNothing) {
  const LockKey a = KeyOn(map_, 1, 1);
  ASSERT_EQ(Feed(remote_, {Entry(kOpLock, a, W, 7, 1)}).size(), 1u);
  const auto held = table_->HeldLocks().size();
  // A retransmission of the same request (same owner, key, mode; any req_id).
  auto replies = Feed(remote_, {Entry(kOpLock, a, W, 7, 2), Entry(kOpLock, a, W, 7, 2)});
  // Expect: Ok for both copies, one hold, and the table counts them as repeats.
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[0].size(), 2u);
  EXPECT_EQ(replies[0][0].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_EQ(replies[0][1].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_EQ(table_->HeldLocks().size(), held);
  EXPECT_EQ(table_->stats().repeated.load(), 2u);
  // Expect: one unlock frees it; the duplicate unlock is stray.
  EXPECT_TRUE(Feed(remote_, {Entry(kOpUnlock, a, W, 7, 0), Entry(kOpUnlock, a, W, 7, 0)}).empty());
  EXPECT_TRUE(table_->HeldLocks().empty());
  EXPECT_EQ(server_.stats().unlocks, 1u);
  EXPECT_EQ(server_.stats().stray_unlocks, 1u);
}

TEST_F(LockServerTest, UnlockOfLockNotHeldIsCountedAndIgnored) {
  const LockKey a = KeyOn(map_, 1, 1);
  ASSERT_EQ(Feed(remote_, {Entry(kOpLock, a, R, 8, 1)}).size(), 1u);
  // Unlocks by a txn that holds nothing, in the wrong mode, and by another CN with the same id.
  auto replies = Feed(remote_, {Entry(kOpUnlock, a, R, 9, 0), Entry(kOpUnlock, a, W, 8, 0)});
  auto replies2 = Feed(same_cn_, {Entry(kOpUnlock, a, R, 8, 0)});
  // Expect: no reply at all (unlocks are not answered), three strays, and txn 8's read intact.
  EXPECT_TRUE(replies.empty());
  EXPECT_TRUE(replies2.empty());
  EXPECT_EQ(server_.stats().stray_unlocks, 3u);
  EXPECT_EQ(server_.stats().unlocks, 0u);
  EXPECT_TRUE(Holds(*table_, a, R, LockOwner{0, 8}));
  EXPECT_EQ(table_->HeldLocks().size(), 1u);
}

TEST_F(LockServerTest, RequestForShardNotManagedGetsWrongShard) {
  const LockKey theirs = KeyOn(map_, 0, 1), ours = KeyOn(map_, 1, 1);
  auto replies = Feed(remote_, {Entry(kOpLock, theirs, W, 7, 1), Entry(kOpLock, ours, W, 7, 2)});
  // Expect: WrongShard for the key of CN 0's shard, nothing recorded for it; the batch's other
  // entry is still served.
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[0].size(), 2u);
  EXPECT_EQ(replies[0][0].code, static_cast<uint8_t>(Code::kWrongShard));
  EXPECT_EQ(replies[0][1].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_EQ(server_.stats().wrong_shard, 1u);
  EXPECT_EQ(table_->HeldLocks().size(), 1u);
  EXPECT_TRUE(Holds(*table_, ours, W, LockOwner{0, 7}));
}

TEST_F(LockServerTest, ReorderedUnlockBeforeLock) {
  const LockKey a = KeyOn(map_, 1, 1);
  // A reordering network delivers txn 7's unlock before its lock.
  auto r1 = Feed(remote_, {Entry(kOpUnlock, a, W, 7, 0)});
  // Expect: the early unlock finds nothing to undo: stray, no reply, no change.
  EXPECT_TRUE(r1.empty());
  EXPECT_EQ(server_.stats().stray_unlocks, 1u);
  EXPECT_TRUE(table_->HeldLocks().empty());
  auto r2 = Feed(remote_, {Entry(kOpLock, a, W, 7, 5)});
  // Expect: the late lock cannot be told from a fresh one: it is granted and stays held (until a
  // new unlock or recovery's ReleaseAllOf(0)); see lock_server.h.
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0][0].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_TRUE(Holds(*table_, a, W, LockOwner{0, 7}));
  // Expect: recovery of CN 0 releases it.
  EXPECT_EQ(table_->ReleaseAllOf(0), 1u);
  EXPECT_TRUE(table_->HeldLocks().empty());
}

TEST_F(LockServerTest, LockAndUnlockInOneBatchApplyInOrder) {
  const LockKey a = KeyOn(map_, 1, 1);
  auto replies = Feed(remote_, {Entry(kOpLock, a, W, 7, 1), Entry(kOpUnlock, a, W, 7, 0),
                                Entry(kOpLock, a, W, 8, 2)});
  // Expect: txn 7 locks, then unlocks, so txn 8's lock in the same batch is granted; only the two
  // locks are answered.
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[0].size(), 2u);
  EXPECT_EQ(replies[0][0].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_EQ(replies[0][1].req_id, 2u);
  EXPECT_EQ(replies[0][1].code, static_cast<uint8_t>(Code::kOk));
  EXPECT_TRUE(Holds(*table_, a, W, LockOwner{0, 8}));
}

TEST_F(LockServerTest, OwnerCnComesFromTheSender) {
  const LockKey a = KeyOn(map_, 1, 1);
  ASSERT_EQ(Feed(remote_, {Entry(kOpLock, a, W, 7, 1)}).size(), 1u);
  // Same txn id, but sent by a worker of CN 1: a different owner.
  auto replies = Feed(same_cn_, {Entry(kOpLock, a, W, 7, 1)});
  // Expect: Conflict, not an idempotent repeat.
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0][0].code, static_cast<uint8_t>(Code::kConflict));
}

TEST_F(LockServerTest, RemoteWriteHookRunsOnlyForGrantedRemoteWrites) {
  std::vector<LockKey> invalidated;
  server_.SetRemoteWriteHook([&](const LockKey& k) {
    // Expect: by the time the hook runs the lock is held, so no local reader can refill the
    // cache entry after the invalidation.
    EXPECT_EQ(table_->Acquire(k, R, LockOwner{1, 999}).code(), Code::kConflict);
    invalidated.push_back(k);
  });
  const LockKey a = KeyOn(map_, 1, 1), b = KeyOn(map_, 1, 2), c = KeyOn(map_, 1, 3),
                d = KeyOn(map_, 1, 4);
  ASSERT_TRUE(table_->Acquire(c, R, LockOwner{1, 50}).ok());
  Feed(remote_, {Entry(kOpLock, a, W, 7, 1),     // remote write, granted: hook
                 Entry(kOpLock, b, R, 7, 2),     // remote read: no hook
                 Entry(kOpLock, c, W, 7, 3)});   // remote write, refused: no hook
  Feed(same_cn_, {Entry(kOpLock, d, W, 7, 4)});  // write from the server's own CN: no hook
  ASSERT_EQ(invalidated.size(), 1u);
  EXPECT_EQ(invalidated[0], a);
}

// ---------------------------------------------------------------------------------------------
// LockClient <-> LockServer over the local transport.

TEST(LockClientTest, TakesLocalAndRemoteLocks) {
  Cluster c(3);
  const LockOwner owner{0, 1};
  const LockKey local = KeyOn(c.map, 0, 1), on1 = KeyOn(c.map, 1, 1), on2 = KeyOn(c.map, 2, 1);
  std::optional<Status> got;
  c.At(0).sched.Spawn(
      AcquireInto(c.At(0).client.get(), owner, {{on1, W}, {local, W}, {on2, R}}, &got));
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }), 0);
  ASSERT_TRUE(got->ok()) << got->ToString();
  EXPECT_TRUE(Holds(c.Table(0), local, W, owner));
  EXPECT_TRUE(Holds(c.Table(1), on1, W, owner));
  EXPECT_TRUE(Holds(c.Table(2), on2, R, owner));
  const auto& st = c.At(0).client->stats();
  EXPECT_EQ(st.local_acquires, 1u);
  EXPECT_EQ(st.remote_acquires, 2u);
  EXPECT_EQ(st.request_messages, 2u);  // one per destination CN

  const std::vector<LockRequest> all{{on1, W}, {local, W}, {on2, R}};
  c.At(0).client->Release(owner, all);
  EXPECT_TRUE(c.Table(0).HeldLocks().empty());  // local: at once
  ASSERT_GE(c.PumpUntil([&] { return c.NoLocks(); }), 0);
  EXPECT_TRUE(c.AllIdle());
}

TEST(LockClientTest, RequestsGoToTheSameWorkerOfTheTargetCn) {
  Cluster c(2, 2);
  const LockKey on1 = KeyOn(c.map, 1, 1);
  std::optional<Status> got;
  c.At(0, 1).sched.Spawn(AcquireInto(c.At(0, 1).client.get(), {0, 1}, {{on1, W}}, &got));
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }), 0);
  ASSERT_TRUE(got->ok());
  EXPECT_EQ(c.At(1, 1).server->stats().request_batches, 1u);
  EXPECT_EQ(c.At(1, 0).server->stats().request_batches, 0u);
}

TEST(LockClientTest, BatchesRequestsOfAllTransactionsOfAWorker) {
  Cluster c(2);
  const LockKey k1 = KeyOn(c.map, 1, 1), k2 = KeyOn(c.map, 1, 2), k3 = KeyOn(c.map, 1, 3);
  std::optional<Status> a, b;
  // Two transactions (coroutines) of worker 0 of CN 0, both asking CN 1 in the same round.
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), {0, 1}, {{k1, W}, {k2, R}}, &a));
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), {0, 2}, {{k3, W}}, &b));
  ASSERT_GE(c.PumpUntil([&] { return a.has_value() && b.has_value(); }), 0);
  ASSERT_TRUE(a->ok());
  ASSERT_TRUE(b->ok());
  // Exactly one request message left worker 0 of CN 0, and CN 1 answered with exactly one.
  EXPECT_EQ(c.At(0).client->stats().request_messages, 1u);
  EXPECT_EQ(c.At(0).ep->stats().messages_sent, 1u);
  EXPECT_EQ(c.At(1).server->stats().request_batches, 1u);
  EXPECT_EQ(c.At(1).server->stats().locks, 3u);
  EXPECT_EQ(c.At(1).ep->stats().messages_sent, 1u);
  EXPECT_EQ(c.Table(1).HeldLocks().size(), 3u);
}

TEST(LockClientTest, RefusedRemoteLockReleasesEverythingAcquired) {
  Cluster c(3);
  const LockKey local = KeyOn(c.map, 0, 1), on1 = KeyOn(c.map, 1, 1), on2 = KeyOn(c.map, 2, 1);
  // A transaction of CN 2 already writes on2.
  ASSERT_TRUE(c.Table(2).Acquire(on2, W, LockOwner{2, 77}).ok());
  std::optional<Status> got;
  const LockOwner owner{0, 1};
  c.At(0).sched.Spawn(
      AcquireInto(c.At(0).client.get(), owner, {{local, W}, {on1, W}, {on2, W}}, &got));
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }), 0);
  EXPECT_EQ(got->code(), Code::kConflict);
  // The local lock is released before Acquire returns.
  EXPECT_TRUE(c.Table(0).HeldLocks().empty());
  EXPECT_EQ(c.At(0).client->stats().refusals, 1u);
  // The granted remote lock on CN 1 is released by an asynchronous unlock.
  ASSERT_GE(c.PumpUntil([&] { return c.Table(1).HeldLocks().empty(); }), 0);
  EXPECT_EQ(c.At(1).server->stats().unlocks, 1u);
  // Only the other transaction's lock remains.
  auto held = c.Table(2).HeldLocks();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].owner, (LockOwner{2, 77}));
}

TEST(LockClientTest, LocalRefusalSendsNothing) {
  Cluster c(2);
  const LockKey local = KeyOn(c.map, 0, 1), on1 = KeyOn(c.map, 1, 1), local2 = KeyOn(c.map, 0, 2);
  ASSERT_TRUE(c.Table(0).Acquire(local, W, LockOwner{0, 77}).ok());
  std::optional<Status> got;
  // The remote request is listed first, yet the local refusal is found before anything is sent.
  c.At(0).sched.Spawn(
      AcquireInto(c.At(0).client.get(), {0, 1}, {{on1, W}, {local2, R}, {local, W}}, &got));
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }), 0);
  EXPECT_EQ(got->code(), Code::kConflict);
  EXPECT_EQ(c.At(0).client->stats().request_messages, 0u);
  EXPECT_EQ(c.At(0).ep->stats().messages_sent, 0u);
  EXPECT_FALSE(Holds(c.Table(0), local2, R, LockOwner{0, 1}));  // released
  EXPECT_TRUE(c.Table(1).HeldLocks().empty());
}

TEST(LockClientTest, RemoteWriteLockCallsTheHook) {
  Cluster c(2);
  std::vector<LockKey> invalidated;
  c.At(1).server->SetRemoteWriteHook([&](const LockKey& k) { invalidated.push_back(k); });
  const LockKey w = KeyOn(c.map, 1, 1), r = KeyOn(c.map, 1, 2);
  std::optional<Status> got;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), {0, 1}, {{w, W}, {r, R}}, &got));
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }), 0);
  ASSERT_TRUE(got->ok());
  ASSERT_EQ(invalidated.size(), 1u);
  EXPECT_EQ(invalidated[0], w);
  // CN 1's own transactions lock locally, without the server and without the hook.
  std::optional<Status> own;
  const LockKey w2 = KeyOn(c.map, 1, 3);
  c.At(1).sched.Spawn(AcquireInto(c.At(1).client.get(), {1, 1}, {{w2, W}}, &own));
  ASSERT_GE(c.PumpUntil([&] { return own.has_value(); }), 0);
  ASSERT_TRUE(own->ok());
  EXPECT_EQ(invalidated.size(), 1u);
}

TEST(LockClientTest, UnlockIsAsynchronousYetTakesEffect) {
  Cluster c(2);
  const LockKey k = KeyOn(c.map, 1, 1);
  const LockOwner owner{0, 1};
  std::optional<Status> got;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), owner, {{k, W}}, &got));
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }), 0);
  ASSERT_TRUE(got->ok());

  const std::vector<LockRequest> reqs{{k, W}};
  c.At(0).client->Release(owner, reqs);
  // Release returned at once; nothing has been sent yet, CN 1 still holds the lock.
  EXPECT_TRUE(Holds(c.Table(1), k, W, owner));
  EXPECT_EQ(c.At(0).client->stats().unlocks_sent, 1u);
  // Within a couple of rounds the unlock arrives and frees the key for others.
  const int rounds = c.PumpUntil([&] { return c.Table(1).HeldLocks().empty(); });
  ASSERT_GE(rounds, 1);
  EXPECT_LE(rounds, 3);
  EXPECT_EQ(c.At(1).server->stats().unlocks, 1u);
  std::optional<Status> next;
  c.At(1).sched.Spawn(AcquireInto(c.At(1).client.get(), {1, 5}, {{k, W}}, &next));
  ASSERT_GE(c.PumpUntil([&] { return next.has_value(); }), 0);
  EXPECT_TRUE(next->ok());
}

TEST(LockClientTest, WrongShardResendsWhereTheMapNowPoints) {
  Cluster c(3);
  const LockKey k = KeyOn(c.map, 1, 1);
  // The shard moves from CN 1 to CN 2: CN 1 stops managing it before the map says so.
  c.Table(1).SetManaged(k.shard(), false);
  c.Table(2).SetManaged(k.shard(), true);
  std::optional<Status> got;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), {0, 1}, {{k, W}}, &got));
  c.Round();  // the request leaves for CN 1
  c.map.Assign(k.shard(), 2);
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }), 0);
  ASSERT_TRUE(got->ok()) << got->ToString();
  EXPECT_EQ(c.At(0).client->stats().wrong_shard_retries, 1u);
  EXPECT_EQ(c.At(1).server->stats().wrong_shard, 1u);
  EXPECT_TRUE(Holds(c.Table(2), k, W, LockOwner{0, 1}));
  EXPECT_TRUE(c.Table(1).HeldLocks().empty());
}

TEST(LockClientTest, WrongShardRetriesAreBounded) {
  Cluster c(2);
  const LockKey k = KeyOn(c.map, 1, 1);
  c.Table(1).SetManaged(k.shard(), false);  // nobody manages k's shard; the map never moves
  std::optional<Status> got;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), {0, 1}, {{k, W}}, &got));
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }, 100), 0);
  EXPECT_EQ(got->code(), Code::kWrongShard);
  EXPECT_EQ(c.At(0).client->stats().wrong_shard_retries, uint64_t{kWrongShardRetriesMax});
  EXPECT_EQ(c.At(1).server->stats().wrong_shard, uint64_t{kWrongShardRetriesMax} + 1);
  EXPECT_TRUE(c.NoLocks());
}

TEST(LockClientTest, ReplyWithUnknownReqIdIsIgnored) {
  Cluster c(2);
  const LockKey k = KeyOn(c.map, 1, 1);
  std::optional<Status> got;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), {0, 1}, {{k, W}}, &got));
  // A reply no request of this worker asked for (e.g. to an Acquire destroyed at shutdown).
  LockReplyEntry r{123456, static_cast<uint8_t>(Code::kOk), {}};
  std::vector<std::byte> payload(sizeof(BatchHeader) + sizeof(r));
  BatchHeader h{1, 0};
  std::memcpy(payload.data(), &h, sizeof(h));
  std::memcpy(payload.data() + sizeof(h), &r, sizeof(r));
  c.At(1).ep->Send({0, 0}, kMsgLockReplies, payload);
  ASSERT_GE(c.PumpUntil([&] { return got.has_value(); }), 0);
  EXPECT_TRUE(got->ok());
  EXPECT_EQ(c.At(0).client->stats().stale_replies, 1u);
}

TEST(LockClientTest, ShutdownWithAnAcquireWaiting) {
  // The worker stops while an Acquire waits for its reply: the client goes first, then the
  // scheduler destroys the waiting coroutine, whose state must not reach back into the client.
  auto c = std::make_unique<Cluster>(2);
  const LockKey k = KeyOn(c->map, 1, 1);
  std::optional<Status> got;
  c->At(0).sched.Spawn(AcquireInto(c->At(0).client.get(), {0, 1}, {{k, W}}, &got));
  c->At(0).sched.RunOnce();  // the request leaves; CN 1 never runs
  EXPECT_EQ(c->At(0).client->stats().request_messages, 1u);
  c.reset();
  EXPECT_FALSE(got.has_value());
}

// Real threads: 2 CNs x 2 workers, each worker thread running its own scheduler with several
// transactions (coroutines) that take local and remote locks on a small pool of keys, hold them
// across a few rounds, and release them. Every worker also serves lock requests, so the CN's
// table is used by its workers' clients and servers at once. Mutual exclusion is checked per key
// (atomic counts, plus a plain value only write holders change: ThreadSanitizer flags a lapse).
TEST(LockClientTest, ConcurrentWorkersKeepMutualExclusion) {
  constexpr int kCoroutines = 4, kTxns = 1500;
  constexpr uint64_t kKeysPerCn = 12;
  Cluster c(2, 2);
  const int seed = ::testing::UnitTest::GetInstance()->random_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));

  struct PerKey {
    LockKey key;
    std::atomic<int> readers{0}, writers{0};
    uint64_t value = 0;  // protected by the key's lock only
  };
  std::vector<PerKey> keys(2 * kKeysPerCn);
  for (uint64_t i = 0; i < keys.size(); i++) {
    keys[i].key = KeyOn(c.map, static_cast<uint16_t>(i % 2), i / 2);
  }
  std::atomic<uint64_t> violations{0}, committed{0}, aborted{0};
  std::atomic<int> finished{0};

  auto txns = [&](CnWorker* w, uint64_t stream) -> Task<void> {
    Rng rng(static_cast<uint64_t>(seed) * 1000 + stream);
    const uint16_t cn = w->ep->self().cn;
    for (int n = 0; n < kTxns; n++) {
      const LockOwner owner{cn, (stream << 32) | static_cast<uint64_t>(n)};
      std::vector<LockRequest> reqs;
      std::vector<uint64_t> idx;
      const int wanted = 1 + static_cast<int>(rng.Uniform(3));
      for (int i = 0; i < wanted; i++) {
        uint64_t k = rng.Uniform(keys.size());
        if (std::find(idx.begin(), idx.end(), k) != idx.end()) continue;
        idx.push_back(k);
        reqs.push_back({keys[k].key, rng.Chance(0.4) ? W : R});
      }
      Status s = co_await w->client->Acquire(owner, reqs);
      if (!s.ok()) {
        if (s.code() != Code::kConflict) violations++;
        aborted++;
        continue;
      }
      std::vector<uint64_t> seen(idx.size());
      for (size_t i = 0; i < idx.size(); i++) {
        PerKey& pk = keys[idx[i]];
        if (reqs[i].mode == W) {
          if (pk.writers.fetch_add(1) != 0 || pk.readers.load() != 0) violations++;
          pk.value++;
        } else {
          pk.readers.fetch_add(1);
          if (pk.writers.load() != 0) violations++;
        }
        seen[i] = pk.value;
      }
      // Hold the locks across rounds so other transactions and workers run meanwhile.
      const int rounds = static_cast<int>(rng.Uniform(3));
      for (int r = 0; r < rounds; r++) co_await w->sched.Yield();
      for (size_t i = 0; i < idx.size(); i++) {
        PerKey& pk = keys[idx[i]];
        if (pk.value != seen[i]) violations++;
        (reqs[i].mode == W ? pk.writers : pk.readers).fetch_sub(1);
      }
      w->client->Release(owner, reqs);
      committed++;
    }
    finished++;
  };

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (uint16_t cn = 0; cn < 2; cn++) {
    for (int wi = 0; wi < 2; wi++) {
      CnWorker* w = &c.At(cn, wi);
      for (int j = 0; j < kCoroutines; j++) {
        w->sched.Spawn(txns(w, (uint64_t{cn} * 2 + static_cast<uint64_t>(wi)) * kCoroutines +
                                   static_cast<uint64_t>(j)));
      }
      // A worker keeps running rounds after its own transactions end: it still serves requests
      // and must send its last unlocks.
      threads.emplace_back([w, &stop] {
        while (!stop.load(std::memory_order_relaxed)) {
          if (!w->sched.RunOnce()) std::this_thread::yield();
        }
      });
    }
  }
  const int total = 4 * kCoroutines;
  while (finished.load() < total) std::this_thread::yield();
  // All transactions are done; the last asynchronous unlocks drain within a few rounds.
  for (int spins = 0; !c.NoLocks() && spins < 1000000; spins++) std::this_thread::yield();
  stop = true;
  for (auto& th : threads) th.join();

  EXPECT_EQ(violations.load(), 0u);
  EXPECT_EQ(committed.load() + aborted.load(), uint64_t{total} * kTxns);
  EXPECT_GT(committed.load(), 0u);
  EXPECT_GT(aborted.load(), 0u) << "the test should reach conflicts";
  EXPECT_TRUE(c.NoLocks());
  for (auto& t : c.tables) {
    Status inv = t->VerifyInvariants();
    EXPECT_TRUE(inv.ok()) << inv.ToString();
  }
}

}  // namespace
}  // namespace pond::lock
