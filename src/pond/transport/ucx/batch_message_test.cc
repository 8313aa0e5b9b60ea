// Batch messages (batch_message.h) without UCX: a batch applied by the MN's side is what the local
// fabric's ops would have done, a bad op stops the batch where the local fabric stops it, and no
// request that does not parse — cut short anywhere, or lying about its sizes — changes a byte of
// the region.
#include "pond/transport/ucx/batch_message.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace pond::ucx {
namespace {

constexpr uint64_t kRegion = 4096;

struct Region {
  alignas(64) std::byte bytes[kRegion] = {};
};

Op MakeOp(Verb v, uint64_t offset, void* local, uint32_t len, uint64_t arg0 = 0,
          uint64_t arg1 = 0) {
  return Op{v, len, GAddr::Make(0, offset), local, arg0, arg1};
}

std::vector<std::byte> Apply(Region& r, const PacketBuffer& request) {
  std::vector<std::byte> reply;
  ApplyBatch(r.bytes, kRegion, std::span(request.data(), request.size()), &reply);
  return reply;
}

TEST(BatchMessageTest, AppliesInOrderAndAnswersReadsAndAtomics) {
  Region region;
  const char text[] = "seventeen bytes!";  // 17 with its NUL: the WRITE is padded on the wire
  char read_back[17] = {};
  uint64_t cas_old = 0, cas_failed_old = 0, faa_old = 0, word = 0;
  const std::vector<Op> ops = {
      MakeOp(Verb::kWrite, 100, const_cast<char*>(text), sizeof(text)),
      MakeOp(Verb::kRead, 100, read_back, sizeof(read_back)),  // sees the WRITE before it
      MakeOp(Verb::kCas, 8, &cas_old, 8, 0, 5),
      MakeOp(Verb::kCas, 8, &cas_failed_old, 8, 0, 9),  // fails: the word is 5 now
      MakeOp(Verb::kFaa, 8, &faa_old, 8, 10),
      MakeOp(Verb::kRead, 8, &word, 8),
  };
  PacketBuffer request;
  EncodeBatch(ops, &request);
  EXPECT_EQ(request.size(), BatchRequestBytes(ops));
  const std::vector<std::byte> reply = Apply(region, request);
  EXPECT_EQ(reply.size(), BatchReplyBytes(ops));
  Status st = TakeBatchReply(ops, reply);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_STREQ(read_back, text);
  EXPECT_EQ(cas_old, 0u);
  EXPECT_EQ(cas_failed_old, 5u);
  EXPECT_EQ(faa_old, 5u);
  EXPECT_EQ(word, 15u);
  EXPECT_EQ(std::memcmp(region.bytes + 100, text, sizeof(text)), 0);
}

// As the local fabric: an op outside the region, or an unaligned atomic, fails the batch from that
// op on; the ops before it are applied and the ones after it are not.
// An op longer than one message may hold is cut into consecutive ones that each fit a message
// of their own; the rest stay as they are, in order.
TEST(BatchMessageTest, SplitLargeOpsCutsOnlyWhatCannotFitAMessage) {
  std::vector<std::byte> a(kBatchOpBytesMax), b(2 * kBatchOpBytesMax + 3);
  uint64_t old = 0;
  std::vector<Op> ops{MakeOp(Verb::kWrite, 64, a.data(), static_cast<uint32_t>(a.size())),
                      MakeOp(Verb::kFaa, 8, &old, 8, 1),
                      MakeOp(Verb::kRead, 1000, b.data(), static_cast<uint32_t>(b.size()))};
  SplitLargeOps(&ops);
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[0].len, kBatchOpBytesMax) << "exactly the most a message holds: left whole";
  EXPECT_EQ(ops[1].verb, Verb::kFaa);
  for (int i = 0; i < 3; i++) {
    const Op& piece = ops[2 + i];
    EXPECT_EQ(piece.verb, Verb::kRead);
    EXPECT_EQ(piece.addr.offset(), 1000 + i * kBatchOpBytesMax);
    EXPECT_EQ(piece.local, b.data() + i * kBatchOpBytesMax);
    EXPECT_EQ(piece.len, i < 2 ? kBatchOpBytesMax : 3u);
    EXPECT_LE(BatchReplyBytes(std::span(&piece, 1)), kBatchMessageMax);
  }
  EXPECT_EQ(BatchRequestBytes(std::span(ops.data(), 1)), kBatchMessageMax);
}

TEST(BatchMessageTest, ABadOpStopsTheBatchThere) {
  for (Op bad :
       {MakeOp(Verb::kRead, kRegion - 4, nullptr, 8), MakeOp(Verb::kWrite, kRegion + 8, nullptr, 0),
        MakeOp(Verb::kFaa, 12, nullptr, 8, 1)}) {
    Region region;
    uint64_t one = 1, two = 2, sink[2] = {};
    bad.local = sink;
    const std::vector<Op> ops = {MakeOp(Verb::kWrite, 0, &one, 8), bad,
                                 MakeOp(Verb::kWrite, 16, &two, 8)};
    PacketBuffer request;
    EncodeBatch(ops, &request);
    Status st = TakeBatchReply(ops, Apply(region, request));
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
    uint64_t first = 0, third = 0;
    std::memcpy(&first, region.bytes, 8);
    std::memcpy(&third, region.bytes + 16, 8);
    EXPECT_EQ(first, 1u) << "the op before the bad one is applied";
    EXPECT_EQ(third, 0u) << "the op after it is not";
  }
}

TEST(BatchMessageTest, ARequestThatDoesNotParseChangesNothing) {
  uint64_t v = ~uint64_t{0}, sink = 0;
  const std::vector<Op> ops = {MakeOp(Verb::kWrite, 0, &v, 8), MakeOp(Verb::kFaa, 8, &sink, 8, 3),
                               MakeOp(Verb::kWrite, 16, &v, 8)};
  PacketBuffer good;
  EncodeBatch(ops, &good);
  auto expect_refused = [&](const PacketBuffer& request, const char* what) {
    Region region;
    const std::vector<std::byte> reply = Apply(region, request);
    BatchReplyHeader h;
    ASSERT_EQ(reply.size(), sizeof(h)) << what;
    std::memcpy(&h, reply.data(), sizeof(h));
    EXPECT_EQ(h.status, static_cast<uint32_t>(BatchStatus::kMalformed)) << what;
    EXPECT_EQ(h.applied, 0u) << what;
    for (std::byte b : region.bytes) ASSERT_EQ(b, std::byte{0}) << what;
    EXPECT_EQ(TakeBatchReply(ops, reply).code(), Code::kInternal) << what;
  };
  for (size_t cut = 0; cut < good.size(); cut++) {
    PacketBuffer shorter(good.begin(), good.begin() + static_cast<ptrdiff_t>(cut));
    expect_refused(shorter, "cut short");
  }
  PacketBuffer longer = good;
  longer.resize(good.size() + 8);
  expect_refused(longer, "bytes after the last op");
  auto patched = [&](size_t at, uint32_t value) {
    PacketBuffer p = good;
    std::memcpy(p.data() + at, &value, sizeof(value));
    return p;
  };
  const size_t op0 = sizeof(BatchRequestHeader);
  const size_t op1 = op0 + sizeof(BatchOpRecord) + 8;
  expect_refused(patched(0, 4), "a count above the ops sent");
  expect_refused(patched(op1, 7), "an unknown verb");
  expect_refused(patched(op1 + offsetof(BatchOpRecord, len), 16), "an atomic of 16 bytes");
  expect_refused(patched(op0 + offsetof(BatchOpRecord, len), 1 << 20), "a WRITE longer than sent");
  // A READ whose answer would pass the bound is refused before anything is applied.
  std::vector<Op> huge = {MakeOp(Verb::kWrite, 0, &v, 8),
                          MakeOp(Verb::kRead, 0, nullptr, kBatchMessageMax)};
  PacketBuffer big_answer;
  EncodeBatch(huge, &big_answer);
  expect_refused(big_answer, "an answer above kBatchMessageMax");
}

TEST(BatchMessageTest, AReplyThatDoesNotMatchItsOpsIsABug) {
  uint64_t a = 0;
  const std::vector<Op> ops = {MakeOp(Verb::kRead, 0, &a, 8)};
  std::vector<std::byte> reply(sizeof(BatchReplyHeader) + 8);
  const BatchReplyHeader ok{0, 1};
  std::memcpy(reply.data(), &ok, sizeof(ok));
  EXPECT_TRUE(TakeBatchReply(ops, reply).ok());
  reply.resize(reply.size() - 1);
  EXPECT_EQ(TakeBatchReply(ops, reply).code(), Code::kInternal);
  const BatchReplyHeader too_many{0, 2};
  std::memcpy(reply.data(), &too_many, sizeof(too_many));
  EXPECT_EQ(TakeBatchReply(ops, reply).code(), Code::kInternal);
}

}  // namespace
}  // namespace pond::ucx
