// Lock RPCs when messages are lost, copied and late (lock_messages.h): the server message by
// message — an end request releases what its transaction still holds and makes the server
// refuse late copies of its lock requests, as does the sender's floor — and clients that lose a
// request, a reply or an end request and send it again.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "pond/lock/lock_rpc_harness.h"

namespace pond::lock {
namespace {

using namespace rpc_test;  // NOLINT: the harness is this file's vocabulary

constexpr uint8_t kOk = static_cast<uint8_t>(Code::kOk);
constexpr uint8_t kConflict = static_cast<uint8_t>(Code::kConflict);

LockRequestEntry End(uint64_t txn, uint32_t id) {
  LockRequestEntry e{};
  e.txn_id = txn;
  e.op = kOpEnd;
  e.req_id = id;
  return e;
}

TEST_F(LockServerTest, EndReleasesWhatItsTransactionHoldsAndRefusesItsLateCopies) {
  const LockKey a = KeyOn(map_, 1, 1), b = KeyOn(map_, 1, 2);
  ASSERT_EQ(Feed(remote_, {Entry(kOpLock, a, W, 7, 1), Entry(kOpLock, b, R, 7, 2)}).size(), 1u);
  // The unlocks were lost; the end request arrives.
  auto replies = Feed(remote_, {End(7, 3)});
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[0].size(), 1u);
  EXPECT_EQ(replies[0][0].req_id, 3u);
  EXPECT_EQ(replies[0][0].code, kOk);
  EXPECT_TRUE(table_->HeldLocks().empty()) << "the end released both holds";
  // A late copy of a lock request of the ended transaction: refused, nothing taken.
  replies = Feed(remote_, {Entry(kOpLock, a, W, 7, 1)});
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0][0].code, kConflict);
  EXPECT_TRUE(table_->HeldLocks().empty());
  EXPECT_EQ(server_.stats().late_locks, 1u);
  // A copy of the end request is answered again and changes nothing; other transactions of the
  // sender still lock.
  replies = Feed(remote_, {End(7, 3), Entry(kOpLock, a, W, 8, 4)});
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[0].size(), 2u);
  EXPECT_EQ(replies[0][0].code, kOk);
  EXPECT_EQ(replies[0][1].code, kOk);
  EXPECT_TRUE(Holds(*table_, a, W, LockOwner{0, 8}));
  EXPECT_EQ(server_.stats().ends, 2u);
}

TEST_F(LockServerTest, EndAfterUnlocksReleasesOnlyWhatIsLeft) {
  const LockKey a = KeyOn(map_, 1, 1), b = KeyOn(map_, 1, 2);
  ASSERT_EQ(Feed(remote_, {Entry(kOpLock, a, W, 7, 1), Entry(kOpLock, b, W, 7, 2)}).size(), 1u);
  EXPECT_TRUE(Feed(remote_, {Entry(kOpUnlock, a, W, 7, 0)}).empty());
  // Another transaction takes `a` meanwhile; the end of 7 must not touch it.
  ASSERT_EQ(Feed(remote_, {Entry(kOpLock, a, W, 9, 5)})[0][0].code, kOk);
  ASSERT_EQ(Feed(remote_, {End(7, 3)}).size(), 1u);
  EXPECT_FALSE(Holds(*table_, b, W, LockOwner{0, 7}));
  EXPECT_TRUE(Holds(*table_, a, W, LockOwner{0, 9}));
  EXPECT_EQ(server_.stats().stray_unlocks, 0u);
}

TEST_F(LockServerTest, LockRequestBelowTheSendersFloorIsRefused) {
  const LockKey a = KeyOn(map_, 1, 1);
  // The sender says every transaction below 10 has ended: 9's request is a late copy.
  auto replies = Feed(remote_, {Entry(kOpLock, a, W, 9, 1), Entry(kOpLock, a, R, 10, 2)}, 10);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0][0].code, kConflict);
  EXPECT_EQ(replies[0][1].code, kOk);
  EXPECT_FALSE(Holds(*table_, a, W, LockOwner{0, 9}));
  // An older batch, reordered, carries a lower floor: it does not move the floor back.
  replies = Feed(remote_, {Entry(kOpLock, a, R, 9, 3)}, 5);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0][0].code, kConflict);
  // Floors are per sender: the server's own CN's worker has its own.
  replies = Feed(same_cn_, {Entry(kOpLock, a, R, 9, 4)}, 0);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0][0].code, kOk);
}

// Drops the first `n` request batches that reach worker `w` before its server sees them.
void DropRequests(CnWorker& w, int n) {
  auto left = std::make_shared<int>(n);
  LockServer* server = w.server.get();
  w.ep->OnMessage(kMsgLockRequests, [left, server](const Message& m) {
    if ((*left)-- > 0) return;
    server->OnRequests(m);
  });
}

// Drops the first `n` reply batches that reach worker `w` before its client sees them.
void DropReplies(CnWorker& w, int n) {
  auto left = std::make_shared<int>(n);
  LockClient* client = w.client.get();
  w.ep->OnMessage(kMsgLockReplies, [left, client](const Message& m) {
    if ((*left)-- > 0) return;
    client->OnReplies(m);
  });
}

void AdvanceAll(Cluster& c, uint64_t ns) {
  for (auto& w : c.workers) w->clock.Advance(ns);
}

TEST(LockClientLossTest, ALostRequestIsSentAgainAfterTheTimeout) {
  Cluster c(2);
  const LockOwner owner{0, 1};
  const LockKey k = KeyOn(c.map, 1, 1);
  DropRequests(c.At(1), 1);
  c.At(0).client->Start(owner);
  std::optional<Status> st;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), owner, {{k, W}}, &st));
  EXPECT_EQ(c.PumpUntil([&] { return st.has_value(); }, 20), -1) << "the request was lost";
  EXPECT_EQ(c.At(0).client->stats().resends, 0u);
  AdvanceAll(c, kResendAfterNs);
  ASSERT_GE(c.PumpUntil([&] { return st.has_value(); }), 0);
  EXPECT_TRUE(st->ok()) << st->ToString();
  EXPECT_EQ(c.At(0).client->stats().resends, 1u);
  EXPECT_TRUE(Holds(c.Table(1), k, W, owner));
}

TEST(LockClientLossTest, ALostReplyIsAnsweredAgainWithoutASecondHold) {
  Cluster c(2);
  const LockOwner owner{0, 1};
  const LockKey k = KeyOn(c.map, 1, 1);
  DropReplies(c.At(0), 1);
  c.At(0).client->Start(owner);
  std::optional<Status> st;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), owner, {{k, W}}, &st));
  EXPECT_EQ(c.PumpUntil([&] { return st.has_value(); }, 20), -1) << "the reply was lost";
  EXPECT_TRUE(Holds(c.Table(1), k, W, owner)) << "granted all the same";
  AdvanceAll(c, kResendAfterNs);
  ASSERT_GE(c.PumpUntil([&] { return st.has_value(); }), 0);
  EXPECT_TRUE(st->ok());
  EXPECT_EQ(c.Table(1).HeldLocks().size(), 1u);
  EXPECT_EQ(c.Table(1).stats().repeated.load(), 1u);
}

TEST(LockClientLossTest, FinishEndsTheTransactionOnlyWhereItAskedAndALostEndIsResent) {
  Cluster c(3);
  const LockOwner owner{0, 1};
  const LockKey k = KeyOn(c.map, 1, 1);
  c.At(0).client->Start(owner);
  std::optional<Status> st;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), owner, {{k, W}}, &st));
  ASSERT_GE(c.PumpUntil([&] { return st.has_value(); }), 0);
  ASSERT_TRUE(st->ok());
  // The batch with the unlock and the end is lost: the lock stays until the end is resent.
  DropRequests(c.At(1), 1);
  const std::vector<LockRequest> held = {{k, W}};
  c.At(0).client->Finish(owner, held);
  c.PumpUntil([] { return false; }, 10);
  EXPECT_TRUE(Holds(c.Table(1), k, W, owner));
  AdvanceAll(c, kResendAfterNs);
  ASSERT_GE(c.PumpUntil([&] { return c.NoLocks(); }), 0);
  EXPECT_EQ(c.At(1).server->stats().ends, 1u);
  EXPECT_EQ(c.At(2).server->stats().ends, 0u) << "CN 2 was never asked";
  EXPECT_EQ(c.At(0).client->stats().ends_sent, 1u);
  EXPECT_EQ(c.At(0).client->stats().resends, 1u);
  // Answered (once its answer is in): no more resends however long it waits.
  c.PumpUntil([] { return false; }, 5);
  AdvanceAll(c, 10 * kResendAfterNs);
  c.PumpUntil([] { return false; }, 10);
  EXPECT_EQ(c.At(0).client->stats().resends, 1u);
}

TEST(LockClientLossTest, AnOlderLiveTransactionStillLocksAfterAYoungerOneEnded) {
  Cluster c(2);
  const LockKey k1 = KeyOn(c.map, 1, 1), k2 = KeyOn(c.map, 1, 2);
  const LockOwner old{0, 5}, young{0, 6};
  c.At(0).client->Start(old);
  c.At(0).client->Start(young);
  std::optional<Status> a, b;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), young, {{k1, W}}, &a));
  ASSERT_GE(c.PumpUntil([&] { return a.has_value(); }), 0);
  c.At(0).client->Finish(young, std::vector<LockRequest>{{k1, W}});
  c.PumpUntil([] { return false; }, 5);
  // 6 ended but 5 is live: the floor is 5, so the server still knows 6 by its ended set.
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), old, {{k2, W}}, &b));
  ASSERT_GE(c.PumpUntil([&] { return b.has_value(); }), 0);
  EXPECT_TRUE(b->ok()) << "5 is live: its requests are not late";
  c.At(0).client->Finish(old, std::vector<LockRequest>{{k2, W}});
  ASSERT_GE(c.PumpUntil([&] { return c.NoLocks(); }), 0);
}

// A peer CN fails (docs/recovery.md): the client stops waiting for it and sends it nothing more.
TEST(LockClientPeerFailureTest, ARequestAwaitingAFailedCnIsRefusedAndItsEndIsNotKept) {
  Cluster c(3);
  const LockOwner owner{0, 1};
  const LockKey on1 = KeyOn(c.map, 1, 1), on2 = KeyOn(c.map, 2, 1);
  DropRequests(c.At(2), 1);  // CN 2 never answers: it has crashed
  c.At(0).client->Start(owner);
  std::optional<Status> st;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), owner, {{on1, W}, {on2, W}}, &st));
  EXPECT_EQ(c.PumpUntil([&] { return st.has_value(); }, 20), -1);
  EXPECT_EQ(c.At(0).client->LiveContacting(2), 1u);
  EXPECT_EQ(c.At(0).client->LiveContacting(1), 1u);
  c.At(0).client->PeerFailed(2);
  ASSERT_GE(c.PumpUntil([&] { return st.has_value(); }), 0);
  EXPECT_EQ(st->code(), Code::kConflict) << "its lock table is gone";
  // The lock CN 1 granted is given back by the failed Acquire; the transaction ends only at CN 1.
  c.At(0).client->Finish(owner, {});
  ASSERT_GE(c.PumpUntil([&] { return c.At(0).client->awaiting() == 0; }), 0)
      << "no end request is kept for the failed CN";
  EXPECT_TRUE(c.Table(1).HeldLocks().empty());
  EXPECT_EQ(c.At(0).client->LiveContacting(2), 0u);
  // A later lock of a shard the map still gives the failed CN is refused at once, unsent.
  const LockOwner next{0, 2};
  c.At(0).client->Start(next);
  std::optional<Status> st2;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), next, {{on2, R}}, &st2));
  ASSERT_GE(c.PumpUntil([&] { return st2.has_value(); }), 0);
  EXPECT_EQ(st2->code(), Code::kConflict);
  EXPECT_EQ(c.At(0).client->awaiting(), 0u);
  c.At(0).client->Finish(next, {});
}

TEST(LockClientPeerFailureTest, LiveContactingCountsUntilTheTransactionEnds) {
  Cluster c(2);
  const LockOwner owner{0, 1};
  const LockKey k = KeyOn(c.map, 1, 1);
  c.At(0).client->Start(owner);
  std::optional<Status> st;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), owner, {{k, W}}, &st));
  ASSERT_GE(c.PumpUntil([&] { return st.has_value(); }), 0);
  ASSERT_TRUE(st->ok());
  // CN 1 fails while the transaction holds its lock there (a commit in progress): the drain
  // waits for it.
  c.At(0).client->PeerFailed(1);
  EXPECT_EQ(c.At(0).client->LiveContacting(1), 1u);
  const std::vector<LockRequest> held = {{k, W}};
  c.At(0).client->Finish(owner, held);
  EXPECT_EQ(c.At(0).client->LiveContacting(1), 0u);
  c.PumpUntil([] { return false; }, 5);
  EXPECT_EQ(c.At(0).client->awaiting(), 0u) << "neither the unlock nor the end is awaited";
}

// The server forgets a failed CN's workers once their locks are released.
TEST_F(LockServerTest, ForgetCnDropsTheFailedCnsSenders) {
  const LockKey a = KeyOn(map_, 1, 1);
  ASSERT_EQ(Feed(remote_, {Entry(kOpLock, a, W, 7, 1)}, /*floor=*/7).size(), 1u);
  EXPECT_EQ(table_->ReleaseAllOf(0), 1u);
  server_.ForgetCn(0);
  // The floor 7 is forgotten with the rest: a transaction of the same worker address numbered
  // below it (a later incarnation's) is not taken for a late copy.
  auto replies = Feed(remote_, {Entry(kOpLock, a, W, 1, 2)}, /*floor=*/1);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0][0].code, kOk);
}

// Partitions (docs/recovery.md "Partitions and fencing"): a peer is silent once a request to it
// has waited a lease with no reply from it meanwhile; a probe asks a peer nothing waits on.
TEST(LockClientSilenceTest, APeerIsSilentOnlyOnceARequestHasWaitedWithNoReplyFromIt) {
  constexpr uint64_t kLease = 4 * kResendAfterNs;
  Cluster c(3);
  const LockOwner owner{0, 1};
  const LockKey on1 = KeyOn(c.map, 1, 1), on2 = KeyOn(c.map, 2, 1);
  DropRequests(c.At(2), 1'000'000);  // CN 2 is cut off
  c.At(0).client->Start(owner);
  std::optional<Status> st;
  c.At(0).sched.Spawn(AcquireInto(c.At(0).client.get(), owner, {{on1, W}, {on2, W}}, &st));
  c.PumpUntil([] { return false; }, 10);
  EXPECT_EQ(c.At(0).client->Silent(kLease), 0u) << "nothing has waited a lease yet";
  for (int i = 0; i < 4; i++) {
    AdvanceAll(c, kResendAfterNs);
    c.PumpUntil([] { return false; }, 10);
  }
  EXPECT_EQ(c.At(0).client->Silent(kLease), uint64_t{1} << 2) << "CN 1 answered; CN 2 did not";
  EXPECT_FALSE(st.has_value());
  EXPECT_GE(c.At(0).client->stats().resends, 4u);
}

TEST(LockClientSilenceTest, AProbeIsAnsweredByAPeerThatHearsAndNotByOneCutOff) {
  constexpr uint64_t kLease = 4 * kResendAfterNs;
  Cluster c(3);
  DropRequests(c.At(2), 1'000'000);  // CN 2 is cut off
  // Nothing waits on either peer: nothing is silent, whatever the time.
  AdvanceAll(c, 10 * kLease);
  EXPECT_EQ(c.At(0).client->Silent(kLease), 0u);
  c.At(0).client->Probe(1, kLease / 2);
  c.At(0).client->Probe(2, kLease / 2);
  c.At(0).client->Probe(2, kLease / 2);  // one probe at a time per peer
  c.At(0).client->Probe(0, kLease / 2);  // itself: nothing
  EXPECT_EQ(c.At(0).client->awaiting(), 2u);
  for (int i = 0; i < 4; i++) {
    c.PumpUntil([] { return false; }, 10);
    AdvanceAll(c, kResendAfterNs);
  }
  c.PumpUntil([] { return false; }, 10);
  EXPECT_EQ(c.At(0).client->Silent(kLease), uint64_t{1} << 2);
  EXPECT_EQ(c.At(0).client->awaiting(), 1u) << "CN 1 answered its probe";
  EXPECT_TRUE(c.Table(1).HeldLocks().empty()) << "a probe takes nothing";
  c.At(0).client->Probe(1, 2 * kLease);
  EXPECT_EQ(c.At(0).client->awaiting(), 1u) << "CN 1 was heard from lately: not asked again";
  // CN 2 declared failed: nothing waits on it any more.
  c.At(0).client->PeerFailed(2);
  EXPECT_EQ(c.At(0).client->Silent(kLease), 0u);
  EXPECT_EQ(c.At(0).client->awaiting(), 0u);
}

}  // namespace
}  // namespace pond::lock
