#include "pond/transport/ucx/ucx_endpoint.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "pond/base/assert.h"
#include "pond/transport/remote_copy.h"
#include "pond/transport/ucx/batch_message.h"

namespace pond::ucx {

namespace {

// The active-message id of a CN packet (batch messages have theirs in batch_message.h, the peer
// hello in peer_token.h). Its header's word says whether the sender counted it in its fabric's
// packets in flight (it did when the receiver is in its process), so that the receiver counts it
// off only then.
constexpr unsigned kPacketAmId = 1;
constexpr uint64_t kCounted = 1;
constexpr uint64_t kNotCounted = 0;

}  // namespace

Status UcxEndpoint::Init() {
  ucs_status_t s = SetHandler(kPacketAmId, &UcxEndpoint::OnPacket, this);
  if (s == UCS_OK) s = SetHandler(kBatchReplyAmId, &UcxEndpoint::OnBatchReply, this);
  if (s != UCS_OK) return FromUcs(s, "cannot set the UCX message handlers");
  mns_.resize(fabric_.mns_.size());
  for (MnId mn = 0; mn < mns_.size(); mn++) {
    Status st = Connect(mn);
    if (st.ok()) continue;
    if (st.code() != Code::kUnavailable) return st;
    std::fprintf(stderr,
                 "pond: worker %u.%u cannot reach MN %u yet (%s); retrying at its next batch\n",
                 self().cn, self().worker, mn, st.ToString().c_str());
  }
  return Status::Ok();
}

UcxEndpoint::~UcxEndpoint() {
  // What UCX may still call back into this endpoint goes first. A packet that arrives from now
  // on (a peer's resend, a probe) is dropped; sends and flushes in flight complete, within
  // kCloseWait or by forcing this endpoint's connections closed. Otherwise the fabric, which
  // progresses the worker once more as it closes every connection, would hand them to freed
  // memory.
  ucp_worker_h w = worker_->get();
  SetHandler(kPacketAmId, &UcxEndpoint::DropPacket, nullptr);
  SetHandler(kBatchReplyAmId, &UcxEndpoint::DropPacket, nullptr);
  const auto until = std::chrono::steady_clock::now() + kCloseWait;
  while (requests_ > 0 && std::chrono::steady_clock::now() < until) ucp_worker_progress(w);
  if (requests_ > 0 && !ForceClose()) {
    Abandon();
    return;
  }
  // Closes of a down MN's connections still under way: UCX releases them once done.
  for (Closing& c : closing_) {
    ucp_request_free(c.request);
    if (c.rkey != nullptr) ucp_rkey_destroy(c.rkey);
  }
  closing_.clear();
  for (Batch* b : flushed_) delete b;
  flushed_.clear();
  for (Batch* b : awaiting_) delete b;
  awaiting_.clear();
  UcxFabric::Retired r;
  for (Mn& mn : mns_) {
    if (mn.rkey != nullptr) ucp_rkey_destroy(mn.rkey);
    if (mn.ep != nullptr) r.eps.push_back(mn.ep);
  }
  for (auto& [addr, peer] : peers_) r.eps.push_back(peer.ep);
  r.eps.insert(r.eps.end(), stale_.begin(), stale_.end());
  r.worker = std::move(worker_);
  r.errors = std::move(errors_);
  fabric_.Retire(std::move(r));
}

void UcxEndpoint::SubmitBatch(MnId mn, std::vector<Op>& ops, Completion* done) {
  if (mn >= mns_.size()) {
    Complete(done, InvalidArgument("no MN " + std::to_string(mn)));
    return;
  }
  if (fabric_.mn_down(mn)) {
    ops.clear();
    CompleteUnreachable(done, uint64_t{1} << mn, 1);
    return;
  }
  if (mns_[mn].generation != fabric_.mn_generation(mn)) Forget(mn);
  if (mns_[mn].ep == nullptr && !Reconnect(mn)) {
    ops.clear();
    CompleteUnreachable(done, uint64_t{1} << mn, 1);
    return;
  }
  std::unique_ptr<Batch> b = TakeBatch();
  b->ep = this;
  b->done = done;
  b->mn = mn;
  b->generation = mns_[mn].generation;
  b->ops.swap(ops);  // the ops hold the atomics' operands, which must outlive the posting
  Continue(std::move(b));
}

void UcxEndpoint::SendPacket(WorkerAddr to, PacketBuffer packet) {
  const Peer* peer = FindPeer(to);
  if (peer == nullptr) {
    // A worker of a CN that has not published its descriptor (yet, or any more): the packet
    // is lost, as on a network, and the sender's resend or its failure handling covers it.
    RecycleBuffer(std::move(packet));
    return;
  }
  // Only packets between workers of this process are counted in flight: the fabric's count
  // is what tells this process's run that nothing of its own is still on the way, and a
  // packet to another process is counted off there, never here.
  if (!peer->remote) fabric_.in_flight_.fetch_add(1, std::memory_order_acq_rel);
  auto* slot = new SendSlot{this, std::move(packet), !peer->remote, 0,
                            AmHeader{peer->remote ? kNotCounted : kCounted, fabric_.peer_token_}};
  // Eager only: the receiver then always has the whole packet in its handler.
  SendAm(peer->ep, kPacketAmId, slot, UCP_AM_SEND_FLAG_EAGER);
}

void UcxEndpoint::EndRound() {
  Endpoint::EndRound();
  // As in the local fabric: a packet stops counting as in flight only once the answers its
  // handlers buffered have left.
  if (consumed_ != 0) {
    fabric_.in_flight_.fetch_sub(consumed_, std::memory_order_acq_rel);
    consumed_ = 0;
  }
}

bool UcxEndpoint::PollBackend() {
  progressed_ = false;
  ucp_worker_h w = worker_->get();
  for (int i = 0; i < kProgressMax && ucp_worker_progress(w) != 0; i++) {
  }
  if (down_seen_ != fabric_.mn_down_changes()) CloseDownMns();
  if (!errors_->failed.empty()) FailAwaitingOnFailedEps();
  if (!closing_.empty()) ReleaseClosed();
  // Batches whose flush completed go on here, outside UCX's callbacks, and those answered (or
  // failed) as messages finish.
  while (!answered_.empty()) {
    std::unique_ptr<Batch> b(answered_.back());
    answered_.pop_back();
    Finish(std::move(b), UCS_OK);
  }
  if (!flushed_.empty()) progressed_ = true;
  while (!flushed_.empty()) {
    std::unique_ptr<Batch> b(flushed_.back());
    flushed_.pop_back();
    Continue(std::move(b));
  }
  for (auto& p : arrived_) {
    Deliver(p);
    RecycleBuffer(std::move(p));
  }
  consumed_ += counted_arrivals_;
  counted_arrivals_ = 0;
  const bool any = progressed_ || !arrived_.empty();
  arrived_.clear();
  return any;
}

void UcxEndpoint::Continue(std::unique_ptr<Batch> b) {
  const Mn& m = mns_[b->mn];
  if (m.ep == nullptr || m.generation != b->generation) {
    // Its MN restarted while the batch was between segments (the old process is gone), or
    // was declared down and its connection closed (CloseDownMns).
    b->status = Unavailable("MN " + std::to_string(b->mn) + " is gone (down, or restarted)");
    b->unreachable = true;
    Finish(std::move(b), UCS_OK);
    return;
  }
  if (fabric_.verbs_by_message_ && m.mapped == nullptr) {
    if (b->next == 0) SplitLargeOps(&b->ops);
    SendAsMessage(std::move(b), m);
    return;
  }
  for (;;) {
    bool segment_writes = false;
    size_t posted = 0;
    while (b->next < b->ops.size() && b->status.ok()) {
      Op& op = b->ops[b->next];
      const bool writes = op.verb != Verb::kRead;
      if (posted > 0 && (segment_writes || writes)) break;
      b->status = Check(b->mn, op);
      if (!b->status.ok()) break;
      Status st = PostOp(m, op);
      if (!st.ok()) {
        b->unreachable = st.code() == Code::kUnavailable;
        b->status = std::move(st);
        break;
      }
      b->next++;
      posted++;
      segment_writes |= writes;
    }
    if (posted == 0) {
      Finish(std::move(b), UCS_OK);
      return;
    }
    // On a mapped region the ops are done, in posting order, and there is nothing for UCX to
    // flush: shared memory has no peer error handling (a dead MN is learnt when it is
    // declared), and a flush left pending while the connection was still being set up could
    // outlive it.
    if (m.mapped != nullptr) continue;
    ucp_request_param_t fp{};
    fp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    fp.cb.send = &UcxEndpoint::OnFlushed;
    fp.user_data = b.get();
    ucs_status_ptr_t r = ucp_ep_flush_nbx(m.ep, &fp);
    if (UCS_PTR_IS_ERR(r)) {
      Finish(std::move(b), UCS_PTR_STATUS(r));
      return;
    }
    if (r != nullptr) {
      requests_++;
      b.release();  // OnFlushed hands it back through flushed_
      return;
    }
    // Done at once (shared memory): post the next segment now.
  }
}

Status UcxEndpoint::Check(MnId mn, const Op& op) const {
  const uint64_t size = fabric_.region_bytes();
  const uint64_t off = op.addr.offset();
  if (off > size || op.len > size - off) {
    return InvalidArgument("remote access outside MN " + std::to_string(mn) + " region");
  }
  if (op.verb != Verb::kRead && op.verb != Verb::kWrite && (off & 7) != 0) {
    return InvalidArgument("atomic on unaligned remote address");
  }
  return Status::Ok();
}

void UcxEndpoint::SendAsMessage(std::unique_ptr<Batch> b, const Mn& m) {
  // The ops from b->next that fit one message, up to one that fails the CN's own checks.
  // Sizes add op by op (a batch's is its header's and its ops'), so they are summed as it grows.
  const size_t first = b->next;
  size_t end = first;
  size_t request = sizeof(BatchRequestHeader), reply = sizeof(BatchReplyHeader);
  Status refused;
  for (; end < b->ops.size(); end++) {
    refused = Check(b->mn, b->ops[end]);
    if (!refused.ok()) break;
    const std::span<const Op> op(&b->ops[end], 1);
    request += BatchRequestBytes(op) - sizeof(BatchRequestHeader);
    reply += BatchReplyBytes(op) - sizeof(BatchReplyHeader);
    if (request > kBatchMessageMax || reply > kBatchMessageMax) break;  // the next message's
  }
  // SplitLargeOps left no op that a message cannot hold alone.
  POND_ASSERT(end > first || !refused.ok());
  b->status = std::move(refused);
  if (end == first) {
    Finish(std::move(b), UCS_OK);
    return;
  }
  const std::span<const Op> ops(b->ops.data() + first, end - first);
  b->tag = next_tag_++;
  b->sent_on = m.ep;
  b->sent_from = first;
  b->next = end;
  auto* slot =
      new SendSlot{this, TakeBuffer(), false, b->tag, AmHeader{b->tag, fabric_.peer_token_}};
  EncodeBatch(ops, &slot->bytes);
  awaiting_.push_back(b.release());
  // Eager, so that it arrives whole in the MN's handler; REPLY, so that the MN can answer on the
  // connection it came by.
  SendAm(m.ep, kBatchAmId, slot, UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY);
}

template <typename Pred>
void UcxEndpoint::FailAwaiting(Pred which, const Status& why) {
  for (size_t i = 0; i < awaiting_.size();) {
    Batch* b = awaiting_[i];
    if (!which(*b)) {
      i++;
      continue;
    }
    b->status = why;
    b->unreachable = why.code() == Code::kUnavailable;
    answered_.push_back(b);
    awaiting_[i] = awaiting_.back();
    awaiting_.pop_back();
  }
}

void UcxEndpoint::OnMnError(void* arg, ucp_ep_h ep, ucs_status_t /*status*/) {
  static_cast<UcxFabric::EpErrors*>(arg)->failed.push_back(ep);
}

void UcxEndpoint::FailAwaitingOnFailedEps() {
  for (ucp_ep_h ep : errors_->failed) {
    FailAwaiting([ep](const Batch& b) { return b.sent_on == ep; },
                 Unavailable("the connection to an MN failed"));
  }
  errors_->failed.clear();
}

ucs_status_t UcxEndpoint::OnBatchReply(void* arg, const void* header, size_t header_length,
                                       void* data, size_t length,
                                       const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  // Only this cluster's MNs answer with its token, and eagerly: anything else is a stranger's,
  // and dropped unread.
  const std::optional<uint64_t> tag = Admit(header, header_length, self->fabric_.peer_token_);
  if (!tag.has_value() || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) return UCS_OK;
  for (size_t i = 0; i < self->awaiting_.size(); i++) {
    Batch* b = self->awaiting_[i];
    if (b->tag != *tag) continue;
    const size_t carried = b->next - b->sent_from;
    Status st = TakeBatchReply(std::span<const Op>(b->ops.data() + b->sent_from, carried),
                               std::span(static_cast<const std::byte*>(data), length));
    // The CN's own refusal of a later op stands if the MN applied what it was sent.
    if (!st.ok()) b->status = std::move(st);
    // A batch larger than one message goes on with its next once this one is answered, so that
    // its ops apply in posting order (Continue, outside UCX's callbacks).
    if (b->status.ok() && b->next < b->ops.size()) {
      self->flushed_.push_back(b);
    } else {
      self->answered_.push_back(b);
    }
    self->awaiting_[i] = self->awaiting_.back();
    self->awaiting_.pop_back();
    return UCS_OK;
  }
  return UCS_OK;  // its batch failed before the answer came (the MN was declared down)
}

Status UcxEndpoint::PostOp(const Mn& m, Op& op) {
  if (m.mapped != nullptr) {
    std::byte* at = m.mapped + op.addr.offset();
    uint64_t old = 0;
    switch (op.verb) {
      case Verb::kRead:
        RemoteLoad(op.local, at, op.len);
        return Status::Ok();
      case Verb::kWrite:
        RemoteStore(at, op.local, op.len);
        return Status::Ok();
      case Verb::kCas:
        old = RemoteCas(at, op.arg0, op.arg1);
        break;
      case Verb::kFaa:
        old = RemoteFaa(at, op.arg0);
        break;
    }
    std::memcpy(op.local, &old, 8);
    return Status::Ok();
  }
  ucp_request_param_t p{};
  ucs_status_ptr_t r = nullptr;
  const uint64_t raddr = m.base + op.addr.offset();
  switch (op.verb) {
    case Verb::kRead:
      r = ucp_get_nbx(m.ep, op.local, op.len, raddr, m.rkey, &p);
      break;
    case Verb::kWrite:
      r = ucp_put_nbx(m.ep, op.local, op.len, raddr, m.rkey, &p);
      break;
    case Verb::kCas:
      // CSWAP compares with `buffer` and swaps in the reply buffer's value, which it then
      // overwrites with the old one.
      std::memcpy(op.local, &op.arg1, 8);
      p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
      p.datatype = ucp_dt_make_contig(8);
      p.reply_buffer = op.local;
      r = ucp_atomic_op_nbx(m.ep, UCP_ATOMIC_OP_CSWAP, &op.arg0, 1, raddr, m.rkey, &p);
      break;
    case Verb::kFaa:
      p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
      p.datatype = ucp_dt_make_contig(8);
      p.reply_buffer = op.local;
      r = ucp_atomic_op_nbx(m.ep, UCP_ATOMIC_OP_ADD, &op.arg0, 1, raddr, m.rkey, &p);
      break;
  }
  if (UCS_PTR_IS_ERR(r)) return FromUcs(UCS_PTR_STATUS(r), VerbName(op.verb));
  if (r != nullptr) ucp_request_free(r);
  return Status::Ok();
}

std::unique_ptr<UcxEndpoint::Batch> UcxEndpoint::TakeBatch() {
  if (spare_batches_.empty()) return std::make_unique<Batch>();
  std::unique_ptr<Batch> b = std::move(spare_batches_.back());
  spare_batches_.pop_back();
  return b;
}

void UcxEndpoint::Finish(std::unique_ptr<Batch> b, ucs_status_t flushed) {
  progressed_ = true;
  Completion* done = b->done;
  if (flushed != UCS_OK && b->status.ok()) {
    b->status = FromUcs(flushed, "batch to MN " + std::to_string(b->mn));
    b->unreachable = b->status.code() == Code::kUnavailable;
  }
  if (b->unreachable) {
    CompleteUnreachable(done, uint64_t{1} << b->mn, 1);
  } else if (b->status.ok()) {
    CompleteOk(done);
  } else {
    Complete(done, std::move(b->status));
  }
  b->status = Status::Ok();
  b->unreachable = false;
  b->next = 0;
  b->ops.clear();
  b->tag = 0;
  b->sent_on = nullptr;
  b->sent_from = 0;
  if (spare_batches_.size() < kSpareBatchesMax) spare_batches_.push_back(std::move(b));
}

void UcxEndpoint::OnFlushed(void* request, ucs_status_t status, void* user_data) {
  auto* b = static_cast<Batch*>(user_data);
  b->ep->requests_--;
  if (status != UCS_OK && b->status.ok()) {
    b->status = FromUcs(status, "batch to MN " + std::to_string(b->mn));
    b->unreachable = b->status.code() == Code::kUnavailable;
  }
  b->ep->flushed_.push_back(b);
  ucp_request_free(request);
}

void UcxEndpoint::SendAm(ucp_ep_h ep, unsigned id, SendSlot* slot, uint32_t flags) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &UcxEndpoint::OnSent;
  p.user_data = slot;
  p.flags = flags;
  ucs_status_ptr_t r = ucp_am_send_nbx(ep, id, &slot->header, sizeof(slot->header),
                                       slot->bytes.data(), slot->bytes.size(), &p);
  if (r == nullptr) {
    Sent(slot, UCS_OK);
  } else if (UCS_PTR_IS_ERR(r)) {
    Sent(slot, UCS_PTR_STATUS(r));
  } else {
    requests_++;  // OnSent finishes it
  }
}

void UcxEndpoint::Sent(SendSlot* slot, ucs_status_t status) {
  // A packet that could not leave is lost, as on any network: the sender's resend covers it.
  if (status != UCS_OK && slot->counted) fabric_.in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  // A batch message that could not leave fails its batch (its MN is unreachable).
  if (status != UCS_OK && slot->tag != 0) {
    Status st = FromUcs(status, "batch message");
    FailAwaiting([tag = slot->tag](const Batch& b) { return b.tag == tag; }, st);
  }
  RecycleBuffer(std::move(slot->bytes));
  delete slot;
}

void UcxEndpoint::OnSent(void* request, ucs_status_t status, void* user_data) {
  auto* slot = static_cast<SendSlot*>(user_data);
  slot->ep->requests_--;
  slot->ep->Sent(slot, status);
  ucp_request_free(request);
}

ucs_status_t UcxEndpoint::SetHandler(unsigned id, ucp_am_recv_callback_t cb, void* arg) {
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = id;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  hp.cb = cb;
  hp.arg = arg;
  return ucp_worker_set_am_recv_handler(worker_->get(), &hp);
}

ucs_status_t UcxEndpoint::DropPacket(void*, const void*, size_t, void*, size_t,
                                     const ucp_am_recv_param_t*) {
  return UCS_OK;
}

bool UcxEndpoint::ForceClose() {
  std::vector<ucs_status_ptr_t> closing;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  auto close = [&](ucp_ep_h& ep) {
    if (ep == nullptr) return;
    closing.push_back(ucp_ep_close_nbx(ep, &p));
    ep = nullptr;
  };
  for (Mn& mn : mns_) close(mn.ep);
  for (auto& [addr, peer] : peers_) close(peer.ep);
  for (ucp_ep_h& ep : stale_) close(ep);
  peers_.clear();
  stale_.clear();
  const auto until = std::chrono::steady_clock::now() + kCloseWait;
  ucp_worker_h w = worker_->get();
  for (bool pending = true; pending && std::chrono::steady_clock::now() < until;) {
    ucp_worker_progress(w);
    pending = requests_ > 0;
    for (ucs_status_ptr_t& req : closing) {
      if (req == nullptr || UCS_PTR_IS_ERR(req)) continue;
      if (ucp_request_check_status(req) == UCS_INPROGRESS) {
        pending = true;
      } else {
        ucp_request_free(req);
        req = nullptr;
      }
    }
  }
  POND_CHECK_MSG(requests_ == 0 || !fabric_.peer_errors_,
                 "UCX requests still in flight after their connections closed");
  return requests_ == 0;
}

void UcxEndpoint::Abandon() {
  std::fprintf(stderr,
               "pond: worker %u.%u: %d UCX sends were never taken by their peer over shared "
               "memory; leaving its UCX worker as it is\n",
               self().cn, self().worker, requests_);
  fabric_.Abandon(std::move(worker_), std::move(errors_));
}

ucs_status_t UcxEndpoint::OnPacket(void* arg, const void* header, size_t header_length, void* data,
                                   size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  // A packet without this cluster's token, or by rendezvous (Pond sends them eagerly), is not a
  // Pond CN's: dropped unread.
  const std::optional<uint64_t> counted = Admit(header, header_length, self->fabric_.peer_token_);
  if (!counted.has_value() || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) return UCS_OK;
  if (*counted == kCounted) self->counted_arrivals_++;
  PacketBuffer buf = self->TakeBuffer();
  buf.resize(length);
  std::memcpy(buf.data(), data, length);
  self->arrived_.push_back(std::move(buf));
  return UCS_OK;
}

void UcxEndpoint::CloseDownMns() {
  down_seen_ = fabric_.mn_down_changes();
  for (MnId mn = 0; mn < mns_.size(); mn++) {
    Mn& m = mns_[mn];
    if (m.ep == nullptr || !fabric_.mn_down(mn)) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(m.ep, &p);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
      closing_.push_back(Closing{r, m.rkey});
    } else if (m.rkey != nullptr) {
      ucp_rkey_destroy(m.rkey);
    }
    std::fprintf(stderr, "pond: worker %u.%u closed its connection to MN %u, declared down\n",
                 self().cn, self().worker, mn);
    FailAwaiting([mn](const Batch& b) { return b.mn == mn; },
                 Unavailable("MN " + std::to_string(mn) + " was declared down"));
    m = Mn{};
    progressed_ = true;
  }
}

void UcxEndpoint::ReleaseClosed() {
  for (size_t i = 0; i < closing_.size();) {
    if (ucp_request_check_status(closing_[i].request) == UCS_INPROGRESS) {
      i++;
      continue;
    }
    ucp_request_free(closing_[i].request);
    if (closing_[i].rkey != nullptr) ucp_rkey_destroy(closing_[i].rkey);
    closing_[i] = closing_.back();
    closing_.pop_back();
  }
}

void UcxEndpoint::Forget(MnId mn) {
  Mn& m = mns_[mn];
  if (m.rkey != nullptr) ucp_rkey_destroy(m.rkey);
  if (m.ep != nullptr) stale_.push_back(m.ep);
  FailAwaiting([mn](const Batch& b) { return b.mn == mn; },
               Unavailable("MN " + std::to_string(mn) + " restarted"));
  m = Mn{};
}

Status UcxEndpoint::Connect(MnId mn) {
  Mn& m = mns_[mn];
  // The generation first: a ReplaceMn after it makes the next batch connect again.
  m.generation = fabric_.mn_generation(mn);
  const MnDescriptor d = fabric_.MnNow(mn);
  m.base = d.base;
  m.last_try = std::chrono::steady_clock::now();
  if (d.rkey.empty()) {
    return Unavailable("MN " + std::to_string(mn) +
                       " did not answer the peer hello; it is reached once it restarts");
  }
  Status st;
  ucp_ep_h ep = CreateEp(worker_->get(), d.worker_address, fabric_.peer_errors_, &st,
                         &UcxEndpoint::OnMnError, errors_.get());
  if (!st.ok()) return Unavailable("MN " + std::to_string(mn) + ": " + std::string(st.message()));
  ucp_rkey_h rkey = nullptr;
  ucs_status_t s = ucp_ep_rkey_unpack(ep, d.rkey.data(), &rkey);
  if (s != UCS_OK) {
    stale_.push_back(ep);  // closed with the rest
    return FromUcs(s, "cannot unpack MN " + std::to_string(mn) + "'s rkey");
  }
  m.ep = ep;
  m.rkey = rkey;
  m.mapped = nullptr;
  void* first = nullptr;
  void* last = nullptr;
  const uint64_t size = fabric_.region_bytes();
  // Mapped only if the whole region is, in one piece.
  if (ucp_rkey_ptr(rkey, d.base, &first) == UCS_OK &&
      ucp_rkey_ptr(rkey, d.base + size - 8, &last) == UCS_OK &&
      static_cast<std::byte*>(last) == static_cast<std::byte*>(first) + size - 8) {
    m.mapped = static_cast<std::byte*>(first);
  }
  return Status::Ok();
}

bool UcxEndpoint::Reconnect(MnId mn) {
  if (std::chrono::steady_clock::now() - mns_[mn].last_try < kReconnectEvery) return false;
  Status st = Connect(mn);
  if (st.ok()) {
    std::fprintf(stderr, "pond: worker %u.%u reached MN %u\n", self().cn, self().worker, mn);
  }
  return st.ok();
}

const UcxEndpoint::Peer* UcxEndpoint::FindPeer(WorkerAddr to) {
  auto it = peers_.find(to.Packed());
  const uint32_t generation = fabric_.generation(to.cn);
  if (it != peers_.end()) {
    if (it->second.generation == generation) return &it->second;
    // The CN restarted as a new process since: its workers have new addresses.
    stale_.push_back(it->second.ep);
    peers_.erase(it);
  }
  std::optional<UcxFabric::WorkerEntry> w = fabric_.FindWorker(to);
  if (!w.has_value()) {
    POND_CHECK_MSG(fabric_.open(), "message to a worker that has no endpoint");
    return nullptr;
  }
  Status st;
  ucp_ep_h ep = CreateEp(worker_->get(), w->address, fabric_.peer_errors_, &st);
  // A CN whose process is gone (killed, not yet declared) may refuse the connection: its
  // packets are lost, as they would be on a connection to it, and tried again with the next.
  if (!st.ok()) return nullptr;
  return &peers_.emplace(to.Packed(), Peer{ep, w->remote, generation}).first->second;
}

}  // namespace pond::ucx
