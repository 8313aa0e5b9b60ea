// A doorbell batch as one message: how the `ucx` transport carries a batch of one-sided ops to
// an MN whose region it reaches over TCP. There UCX would emulate every GET and atomic with a
// message the MN's worker answers, and Pond must flush after every segment to keep the posting
// order (ucx_fabric.h) — a round trip per segment, and a wake-up of the MN's thread per op. As
// one message the batch costs one round trip and one wake-up: the MN's thread applies the ops in
// order to its region, with the same copies and atomics as the local fabric (remote_copy.h), and
// answers with what the READs read and the atomics' old values.
//
// The grammar is in docs/formats.md "Batch message". Both ends are Pond, but the MN holds the
// data: it checks every request to the byte and answers a malformed one with an error rather
// than acting on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pond/status.h"
#include "pond/transport/endpoint.h"
#include "pond/transport/packet.h"

namespace pond::ucx {

struct BatchRequestHeader {
  uint32_t count;  // ops that follow
  uint32_t reserved;
};
static_assert(sizeof(BatchRequestHeader) == 8);

struct BatchOpRecord {
  uint8_t verb;  // Verb
  uint8_t reserved[3];
  uint32_t len;  // READ/WRITE: bytes; CAS/FAA: 8
  uint64_t offset;
  uint64_t arg0;  // CAS: expected; FAA: addend
  uint64_t arg1;  // CAS: desired
};
static_assert(sizeof(BatchOpRecord) == 32);
static_assert(offsetof(BatchOpRecord, len) == 4);
static_assert(offsetof(BatchOpRecord, offset) == 8);
static_assert(offsetof(BatchOpRecord, arg0) == 16);
static_assert(offsetof(BatchOpRecord, arg1) == 24);

enum class BatchStatus : uint32_t {
  kOk = 0,
  kBadOp = 1,      // an op outside the region, or an unaligned atomic: the ops before it applied
  kMalformed = 2,  // the request does not parse: nothing applied
};

struct BatchReplyHeader {
  uint32_t status;   // BatchStatus
  uint32_t applied;  // ops applied, in order; their results follow
};
static_assert(sizeof(BatchReplyHeader) == 8);

// Active-message ids (a CN packet is 1, ucx_fabric.cc). A request's UCX header is its tag (u64),
// chosen by the CN; the reply's header is the same tag, and it goes back on the connection the
// request came by (UCP_AM_SEND_FLAG_REPLY).
inline constexpr unsigned kBatchAmId = 2;
inline constexpr unsigned kBatchReplyAmId = 3;

// The most a request or a reply may hold. A batch larger than this (a bulk load's WRITEs) goes
// as several messages, each sent once the one before is answered, so that they apply in
// posting order; an op larger than kBatchOpBytesMax is cut into ops of at most that many bytes
// first (SplitLargeOps). Over TCP no batch goes as UCX RMA, whose software emulation would act on
// whatever address a peer names: the MN's own checks (ApplyBatch) are the only way in.
inline constexpr size_t kBatchMessageMax = 256 << 10;
inline constexpr size_t kBatchOpBytesMax =
    kBatchMessageMax - sizeof(BatchRequestHeader) - sizeof(BatchOpRecord);
static_assert(sizeof(BatchReplyHeader) + kBatchOpBytesMax <= kBatchMessageMax,
              "a READ of kBatchOpBytesMax fits one reply");

// `ops` with every READ and WRITE longer than kBatchOpBytesMax cut into consecutive ones of at
// most that length, in order: each then fits a message of its own.
void SplitLargeOps(std::vector<Op>* ops);

// Bytes of the request and of the reply for `ops`.
size_t BatchRequestBytes(std::span<const Op> ops);
size_t BatchReplyBytes(std::span<const Op> ops);

// Writes `ops` as a request to `out` (replacing what it held).
void EncodeBatch(std::span<const Op> ops, PacketBuffer* out);

// The MN's side: applies the request to `region` (of `region_bytes`) in order and writes the
// reply to `reply` (cleared first). A request that does not parse, or whose reply would exceed
// kBatchMessageMax, applies nothing and answers kMalformed.
void ApplyBatch(std::byte* region, uint64_t region_bytes, std::span<const std::byte> request,
                std::vector<std::byte>* reply);

// The CN's side: copies the reply's results into the ops' local buffers. InvalidArgument when
// the MN refused an op (as the local fabric fails a batch), Internal when the reply does not
// match the ops (a bug, not a peer's failure).
Status TakeBatchReply(std::span<const Op> ops, std::span<const std::byte> reply);

}  // namespace pond::ucx
