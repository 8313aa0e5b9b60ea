#include "pond/transport/ucx/batch_message.h"

#include <algorithm>
#include <cstring>

#include "pond/transport/remote_copy.h"

namespace pond::ucx {

namespace {

size_t Pad8(size_t n) { return (n + 7) & ~size_t{7}; }

bool Writes(Verb v) { return v == Verb::kWrite; }
bool Atomic(Verb v) { return v == Verb::kCas || v == Verb::kFaa; }

size_t ResultBytes(Verb v, uint32_t len) {
  if (v == Verb::kRead) return Pad8(len);
  return Atomic(v) ? 8 : 0;
}

void Refuse(std::vector<std::byte>* reply) {
  const BatchReplyHeader h{static_cast<uint32_t>(BatchStatus::kMalformed), 0};
  reply->resize(sizeof(h));
  std::memcpy(reply->data(), &h, sizeof(h));
}

}  // namespace

void SplitLargeOps(std::vector<Op>* ops) {
  const bool any =
      std::any_of(ops->begin(), ops->end(), [](const Op& op) { return op.len > kBatchOpBytesMax; });
  if (!any) return;
  std::vector<Op> out;
  for (const Op& op : *ops) {
    if (op.len <= kBatchOpBytesMax) {
      out.push_back(op);
      continue;
    }
    // Only READs and WRITEs are longer than 8 bytes.
    auto* local = static_cast<std::byte*>(op.local);
    for (uint32_t at = 0; at < op.len; at += kBatchOpBytesMax) {
      Op piece = op;
      piece.len = static_cast<uint32_t>(std::min<size_t>(kBatchOpBytesMax, op.len - at));
      piece.addr = op.addr + at;
      piece.local = local + at;
      out.push_back(piece);
    }
  }
  ops->swap(out);
}

size_t BatchRequestBytes(std::span<const Op> ops) {
  size_t n = sizeof(BatchRequestHeader);
  for (const Op& op : ops) n += sizeof(BatchOpRecord) + (Writes(op.verb) ? Pad8(op.len) : 0);
  return n;
}

size_t BatchReplyBytes(std::span<const Op> ops) {
  size_t n = sizeof(BatchReplyHeader);
  for (const Op& op : ops) n += ResultBytes(op.verb, op.len);
  return n;
}

void EncodeBatch(std::span<const Op> ops, PacketBuffer* out) {
  out->resize(BatchRequestBytes(ops));
  std::byte* at = out->data();
  const BatchRequestHeader h{static_cast<uint32_t>(ops.size()), 0};
  std::memcpy(at, &h, sizeof(h));
  at += sizeof(h);
  for (const Op& op : ops) {
    BatchOpRecord r{};
    r.verb = static_cast<uint8_t>(op.verb);
    r.len = op.len;
    r.offset = op.addr.offset();
    r.arg0 = op.arg0;
    r.arg1 = op.arg1;
    std::memcpy(at, &r, sizeof(r));
    at += sizeof(r);
    if (Writes(op.verb)) {
      std::memcpy(at, op.local, op.len);
      std::memset(at + op.len, 0, Pad8(op.len) - op.len);
      at += Pad8(op.len);
    }
  }
}

void ApplyBatch(std::byte* region, uint64_t region_bytes, std::span<const std::byte> request,
                std::vector<std::byte>* reply) {
  // Parsed whole before anything is applied: a request cut short or lying about its sizes
  // changes nothing.
  BatchRequestHeader h;
  if (request.size() < sizeof(h)) return Refuse(reply);
  std::memcpy(&h, request.data(), sizeof(h));
  size_t at = sizeof(h);
  size_t reply_bytes = sizeof(BatchReplyHeader);
  for (uint32_t i = 0; i < h.count; i++) {
    BatchOpRecord r;
    if (request.size() - at < sizeof(r)) return Refuse(reply);
    std::memcpy(&r, request.data() + at, sizeof(r));
    at += sizeof(r);
    if (r.verb >= kNumVerbs) return Refuse(reply);
    const Verb v = static_cast<Verb>(r.verb);
    if (Atomic(v) && r.len != 8) return Refuse(reply);
    if (Writes(v)) {
      if (request.size() - at < Pad8(r.len)) return Refuse(reply);
      at += Pad8(r.len);
    }
    reply_bytes += ResultBytes(v, r.len);
    if (reply_bytes > kBatchMessageMax) return Refuse(reply);
  }
  if (at != request.size()) return Refuse(reply);

  reply->resize(reply_bytes);
  BatchReplyHeader out{static_cast<uint32_t>(BatchStatus::kOk), 0};
  size_t in = sizeof(h);
  size_t res = sizeof(out);
  for (; out.applied < h.count; out.applied++) {
    BatchOpRecord r;
    std::memcpy(&r, request.data() + in, sizeof(r));
    in += sizeof(r);
    const Verb v = static_cast<Verb>(r.verb);
    // As the local fabric: an op outside the region or an unaligned atomic fails the batch from
    // that op on.
    if (r.offset > region_bytes || r.len > region_bytes - r.offset ||
        (Atomic(v) && (r.offset & 7) != 0)) {
      out.status = static_cast<uint32_t>(BatchStatus::kBadOp);
      break;
    }
    std::byte* m = region + r.offset;
    uint64_t old = 0;
    switch (v) {
      case Verb::kRead:
        RemoteLoad(reply->data() + res, m, r.len);
        break;
      case Verb::kWrite:
        RemoteStore(m, request.data() + in, r.len);
        in += Pad8(r.len);
        break;
      case Verb::kCas:
        old = RemoteCas(m, r.arg0, r.arg1);
        break;
      case Verb::kFaa:
        old = RemoteFaa(m, r.arg0);
        break;
    }
    if (Atomic(v)) std::memcpy(reply->data() + res, &old, 8);
    res += ResultBytes(v, r.len);
  }
  reply->resize(res);
  std::memcpy(reply->data(), &out, sizeof(out));
}

Status TakeBatchReply(std::span<const Op> ops, std::span<const std::byte> reply) {
  BatchReplyHeader h;
  if (reply.size() < sizeof(h)) return Internal("a batch reply shorter than its header");
  std::memcpy(&h, reply.data(), sizeof(h));
  if (h.applied > ops.size()) return Internal("a batch reply with more results than ops");
  size_t at = sizeof(h);
  for (uint32_t i = 0; i < h.applied; i++) {
    const Op& op = ops[i];
    const size_t n = ResultBytes(op.verb, op.len);
    if (reply.size() - at < n) return Internal("a batch reply cut short");
    if (op.verb != Verb::kWrite)
      std::memcpy(op.local, reply.data() + at, Atomic(op.verb) ? 8 : op.len);
    at += n;
  }
  if (at != reply.size()) return Internal("a batch reply longer than its results");
  switch (static_cast<BatchStatus>(h.status)) {
    case BatchStatus::kOk:
      if (h.applied != ops.size()) return Internal("a batch reply that applied too few ops");
      return Status::Ok();
    case BatchStatus::kBadOp:
      return InvalidArgument("remote access outside the MN's region, or an unaligned atomic");
    case BatchStatus::kMalformed:
      return Internal("the MN could not parse a batch request");
  }
  return Internal("a batch reply with an unknown status");
}

}  // namespace pond::ucx
