// Lock messages that do not parse (lock_messages.h): the server and the client drop such a batch
// whole and count it — no lock taken or answered from it — for it came from another process.
#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "pond/lock/lock_rpc_harness.h"

namespace pond::lock {
namespace {

using namespace rpc_test;  // NOLINT: the harness is this file's vocabulary

TEST_F(LockServerTest, AMalformedBatchTakesNothingAndIsNotAnswered) {
  const LockKey a = KeyOn(map_, 1, 1), b = KeyOn(map_, 1, 2);
  const std::vector<std::byte> good =
      Batch({Entry(kOpLock, a, W, 7, 1), Entry(kOpLock, b, W, 7, 2)});
  std::vector<std::vector<std::byte>> bad;
  bad.emplace_back(good.begin(), good.begin() + 3);  // shorter than a header
  bad.emplace_back(good.begin(), good.end() - 1);    // a byte short of its count
  bad.push_back(Batch(std::vector<LockRequestEntry>(kLockBatchEntriesMax + 1,
                                                    Entry(kOpLock, a, W, 7, 1))));  // too long
  // The second entry's op, then its mode, out of range: the first, valid, must not act either.
  const size_t second = sizeof(BatchHeader) + sizeof(LockRequestEntry);
  bad.push_back(good);
  bad.back()[second + offsetof(LockRequestEntry, op)] = std::byte{9};
  bad.push_back(good);
  bad.back()[second + offsetof(LockRequestEntry, mode)] = std::byte{2};
  for (const auto& payload : bad) {
    server_.OnRequests(Message{remote_.ep->self(), kMsgLockRequests, payload});
    server_sched_.RunOnce();
    remote_.sched.RunOnce();
  }
  EXPECT_TRUE(remote_.batches.empty()) << "a malformed batch is not answered";
  EXPECT_TRUE(table_->HeldLocks().empty()) << "nor does any of its entries act";
  EXPECT_EQ(server_.stats().malformed, bad.size());
  EXPECT_EQ(server_ep_->stats().messages_malformed, bad.size());
  EXPECT_EQ(server_.stats().request_batches, 0u);
  // Expect: the server goes on; the same batch, well formed, takes both.
  auto replies = Feed(remote_, {Entry(kOpLock, a, W, 7, 1), Entry(kOpLock, b, W, 7, 2)});
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].size(), 2u);
  EXPECT_TRUE(Holds(*table_, a, W, LockOwner{0, 7}));
}

// A reply with a code a lock server never sends, or from a CN the request did not go to, answers
// nothing: the request stays awaited, and the true reply is taken when it comes.
TEST(LockClientMalformedTest, AReplyWithABadCodeOrFromAnotherCnIsNotTaken) {
  Cluster c(3);
  const LockOwner owner{0, 1};
  const LockKey k = KeyOn(c.map, 1, 1);
  LockClient* client = c.At(0).client.get();
  std::optional<Status> st;
  int replies = 0;
  c.At(0).ep->OnMessage(kMsgLockReplies, [&](const Message& m) {
    if (replies++ == 0) {
      std::vector<std::byte> bad(m.payload.begin(), m.payload.end());
      bad[sizeof(BatchHeader) + offsetof(LockReplyEntry, code)] = std::byte{99};
      client->OnReplies(Message{m.from, m.kind, bad});
      client->OnReplies(Message{WorkerAddr{2, 0}, m.kind, m.payload});  // not from CN 1
      EXPECT_FALSE(st.has_value());
      EXPECT_EQ(client->awaiting(), 1u);
    }
    client->OnReplies(m);
  });
  client->Start(owner);
  c.At(0).sched.Spawn(AcquireInto(client, owner, {{k, W}}, &st));
  ASSERT_GE(c.PumpUntil([&] { return st.has_value(); }), 0);
  EXPECT_TRUE(st->ok()) << st->ToString();
  EXPECT_EQ(client->stats().malformed, 2u);
  EXPECT_EQ(c.At(0).ep->stats().messages_malformed, 2u);
  EXPECT_EQ(client->awaiting(), 0u);
}

}  // namespace
}  // namespace pond::lock
