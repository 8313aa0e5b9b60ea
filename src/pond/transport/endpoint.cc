#include "pond/transport/endpoint.h"

#include <algorithm>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/transport/packet.h"

namespace pond {

const char* VerbName(Verb v) {
  switch (v) {
    case Verb::kRead:
      return "READ";
    case Verb::kWrite:
      return "WRITE";
    case Verb::kCas:
      return "CAS";
    case Verb::kFaa:
      return "FAA";
  }
  return "?";
}

void EndpointStats::Merge(const EndpointStats& o) {
  for (int i = 0; i < kNumVerbs; i++) {
    ops[i] += o.ops[i];
    bytes[i] += o.bytes[i];
  }
  batches += o.batches;
  flushes += o.flushes;
  messages_sent += o.messages_sent;
  packets_sent += o.packets_sent;
  messages_received += o.messages_received;
  packets_received += o.packets_received;
  packets_refused += o.packets_refused;
  messages_malformed += o.messages_malformed;
}

void Endpoint::KeepWrites(std::vector<Op>* into) {
  into->clear();
  keep_into_ = into;
  keep_from_.resize(by_mn_.size());
  for (size_t mn = 0; mn < by_mn_.size(); mn++) keep_from_[mn] = by_mn_[mn].size();
}

void Endpoint::PostAgain(const std::vector<Op>& ops, uint64_t mns) {
  for (const Op& op : ops) {
    if (op.addr.mn() < 64 && ((mns >> op.addr.mn()) & 1) != 0) Post(op);
  }
}

void Endpoint::SubmitPending(Completion* c) {
  POND_ASSERT(pending_count_ > 0);
  stats_.flushes++;
  // One doorbell batch per MN, in increasing MN order. Few MNs: insertion sort.
  for (size_t i = 1; i < posted_mns_.size(); i++) {
    MnId mn = posted_mns_[i];
    size_t j = i;
    for (; j > 0 && posted_mns_[j - 1] > mn; j--) posted_mns_[j] = posted_mns_[j - 1];
    posted_mns_[j] = mn;
  }
  // Every group is counted before any is submitted: a backend may complete synchronously.
  c->outstanding = static_cast<int>(posted_mns_.size());
  stats_.batches += posted_mns_.size();
  if (keep_into_ != nullptr) {
    // Before SubmitBatch, which may take the ops away; every commit round comes by here, so
    // the copy grows its vector once.
    auto from = [&](MnId mn) { return mn < keep_from_.size() ? keep_from_[mn] : 0; };
    size_t n = 0;
    for (MnId mn : posted_mns_) n += by_mn_[mn].size() - from(mn);
    keep_into_->reserve(n);
    for (MnId mn : posted_mns_) {
      const std::vector<Op>& ops = by_mn_[mn];
      for (size_t i = from(mn); i < ops.size(); i++) {
        if (ops[i].verb == Verb::kWrite) keep_into_->push_back(ops[i]);
      }
    }
    keep_into_ = nullptr;
  }
  for (MnId mn : posted_mns_) {
    SubmitBatch(mn, by_mn_[mn], c);
    by_mn_[mn].clear();
  }
  posted_mns_.clear();
  pending_count_ = 0;
}

void Endpoint::Complete(Completion* c, Status status, int batches) {
  if (!status.ok() && c->status.ok()) c->status = std::move(status);
  CompleteOk(c, batches);
}

void Endpoint::Send(WorkerAddr to, uint16_t kind, std::span<const std::byte> payload) {
  POND_CHECK_MSG(payload.size() <= kMessageLenMax, "message larger than kMessageLenMax");
  OutBuffer* buf = nullptr;
  for (auto& b : out_) {
    if (b.to == to && b.count < kPacketMessagesMax) {
      buf = &b;
      break;
    }
  }
  if (buf == nullptr) {
    OutBuffer b{to, 0, buffer_pool_->Take()};
    b.bytes.resize(sizeof(PacketHeader));  // filled in at EndRound
    out_.push_back(std::move(b));
    buf = &out_.back();
  }
  MessageHeader mh{kind, 0, static_cast<uint32_t>(payload.size())};
  const size_t at = buf->bytes.size();
  const size_t padded = PaddedLen(payload.size());
  buf->bytes.resize(at + sizeof(mh) + padded);  // uninitialised: every byte is written below
  std::byte* p = buf->bytes.data() + at;
  std::memcpy(p, &mh, sizeof(mh));
  if (!payload.empty()) std::memcpy(p + sizeof(mh), payload.data(), payload.size());
  // Zeroed padding: a packet's bytes depend only on what was sent, not on the recycled buffer's
  // history.
  std::memset(p + sizeof(mh) + payload.size(), 0, padded - payload.size());
  buf->count++;
  stats_.messages_sent++;
}

void Endpoint::EndRound() {
  for (auto& b : out_) {
    PacketHeader h{kPacketMagic, self_.cn, self_.worker, b.to.cn,
                   b.to.worker,  b.count,  incarnation_};
    std::memcpy(b.bytes.data(), &h, sizeof(h));
    stats_.packets_sent++;
    SendPacket(b.to, std::move(b.bytes));
  }
  out_.clear();
}

bool Endpoint::Poll() { return PollBackend(); }

void Endpoint::OnMessage(uint16_t kind, MessageHandler handler) {
  for (auto& [k, h] : handlers_) {
    if (k == kind) {
      h = std::move(handler);
      return;
    }
  }
  handlers_.emplace_back(kind, std::move(handler));
}

namespace {

// Whether `packet` is a packet for `self` whose messages all lie within it: checked whole before
// any message is handled, so a bad packet is dropped whole and none of it acts.
bool WellFormedPacket(std::span<const std::byte> packet, WorkerAddr self) {
  if (packet.size() < sizeof(PacketHeader)) return false;
  PacketHeader h;
  std::memcpy(&h, packet.data(), sizeof(h));
  if (h.magic != kPacketMagic || h.dst_cn != self.cn || h.dst_worker != self.worker) return false;
  size_t at = sizeof(PacketHeader);
  for (uint16_t i = 0; i < h.count; i++) {
    if (packet.size() - at < sizeof(MessageHeader)) return false;
    MessageHeader mh;
    std::memcpy(&mh, packet.data() + at, sizeof(mh));
    at += sizeof(mh);
    if (packet.size() - at < mh.len) return false;
    // The last message's padding may be cut off; any other's must be there.
    at = std::min(packet.size(), at + PaddedLen(mh.len));
  }
  return true;
}

}  // namespace

void Endpoint::Deliver(std::span<const std::byte> packet) {
  // Packets come from other processes: a malformed one is dropped and counted, never asserted
  // on (with the peer token, only a member of the cluster can send one; a member's bug then
  // fails the run that counts it, bench::RunWorkload).
  if (!WellFormedPacket(packet, self_)) {
    stats_.messages_malformed++;
    return;
  }
  PacketHeader h;
  std::memcpy(&h, packet.data(), sizeof(h));
  WorkerAddr from{h.src_cn, h.src_worker};
  if (accept_ && !accept_(from, h.incarnation)) {
    stats_.packets_refused++;
    return;
  }
  stats_.packets_received++;
  size_t at = sizeof(PacketHeader);
  for (uint16_t i = 0; i < h.count; i++) {
    MessageHeader mh;
    std::memcpy(&mh, packet.data() + at, sizeof(mh));
    at += sizeof(mh);
    stats_.messages_received++;
    Message m{from, mh.kind, packet.subspan(at, mh.len)};
    bool handled = false;
    for (auto& [kind, handler] : handlers_) {
      if (kind == mh.kind) {
        handler(m);
        handled = true;
        break;
      }
    }
    if (!handled) stats_.messages_malformed++;
    at = std::min(packet.size(), at + PaddedLen(mh.len));
  }
}

}  // namespace pond
