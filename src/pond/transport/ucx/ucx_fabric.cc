#include "pond/transport/ucx/ucx_fabric.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "pond/base/assert.h"
#include "pond/transport/remote_copy.h"
#include "pond/transport/ucx/batch_message.h"

namespace pond::ucx {

namespace {

// The one active-message id Pond uses: a CN packet. Its one-byte header says whether the
// sender counted it in its fabric's packets in flight (it did when the receiver is in its
// process), so that the receiver counts it off only then.
constexpr unsigned kPacketAmId = 1;
constexpr uint8_t kCounted = 1;
constexpr uint8_t kNotCounted = 0;
// How long teardown waits for the endpoints to close before it lets the workers' destruction
// reclaim them.
constexpr auto kCloseWait = std::chrono::seconds(2);

// A peer's failure (a daemon killed) must fail the operations on its endpoint, not the process:
// UCX's peer error handling reports it to the operations' callbacks. A batch sent as a message
// has no operation left to fail once sent, so an MN's connection also reports the failure to its
// endpoint (UcxEndpoint::OnMnError).
void OnEpError(void* /*arg*/, ucp_ep_h /*ep*/, ucs_status_t /*status*/) {}

// UCX's shared-memory transports have no peer error handling (a dead peer's memory stays
// mapped, and what is written to it is simply never read): endpoints ask for it only when the
// transports named include none of them.
bool PeerErrorsHandled(const std::string& tls) {
  if (tls.empty()) return false;  // UCX's choice: shared memory among them
  size_t at = 0;
  while (at <= tls.size()) {
    size_t end = tls.find(',', at);
    if (end == std::string::npos) end = tls.size();
    const std::string t = tls.substr(at, end - at);
    for (const char* shm : {"all", "sm", "shm", "posix", "sysv", "cma", "xpmem", "knem"}) {
      if (t == shm) return false;
    }
    at = end + 1;
  }
  return true;
}

// Whether one-sided ops go to an MN whose region is not mapped here as batch messages
// (batch_message.h): when UCX can reach it only by TCP, where UCX would emulate them with
// messages anyway. With an RDMA transport possible the NIC does them, without the MN's CPU.
bool VerbsByMessage(const std::string& tls) {
  bool tcp = false;
  size_t at = 0;
  while (at <= tls.size()) {
    size_t end = tls.find(',', at);
    if (end == std::string::npos) end = tls.size();
    const std::string t = tls.substr(at, end - at);
    bool known = t == "tcp";
    tcp |= known;
    for (const char* local : {"sm", "shm", "posix", "sysv", "cma", "xpmem", "knem", "self"}) {
      known |= t == local;
    }
    if (!known) return false;
    at = end + 1;
  }
  return tcp;
}

ucp_ep_h CreateEp(ucp_worker_h w, const std::vector<std::byte>& address, bool peer_errors,
                  Status* status, ucp_err_handler_cb_t on_error = &OnEpError,
                  void* error_arg = nullptr) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  p.address = reinterpret_cast<const ucp_address_t*>(address.data());
  if (peer_errors) {
    p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = on_error;
    p.err_handler.arg = error_arg;
  }
  ucp_ep_h ep = nullptr;
  ucs_status_t s = ucp_ep_create(w, &p, &ep);
  if (s != UCS_OK) *status = FromUcs(s, "cannot connect a UCX endpoint");
  return ep;
}

}  // namespace

class UcxEndpoint final : public Endpoint {
 public:
  UcxEndpoint(UcxFabric& fabric, WorkerAddr self, Scheduler& sched, std::unique_ptr<Worker> worker)
      : Endpoint(self, sched), fabric_(fabric), worker_(std::move(worker)) {}

  // Starts taking packets and connects to every MN it can. An MN that cannot be reached now (its
  // daemon is dead, or not listening yet) is not a reason to fail the CN: that MN is down as far
  // as its batches go, and the connection is tried again at its next batch, at most once per
  // kReconnectEvery.
  Status Init() {
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

  ~UcxEndpoint() override {
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

 protected:
  void SubmitBatch(MnId mn, std::vector<Op>& ops, Completion* done) override {
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

  void SendPacket(WorkerAddr to, PacketBuffer packet) override {
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
    const uint8_t* counted = peer->remote ? &kNotCounted : &kCounted;
    if (!peer->remote) fabric_.in_flight_.fetch_add(1, std::memory_order_acq_rel);
    auto* slot = new SendSlot{this, std::move(packet), !peer->remote, 0};
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = &UcxEndpoint::OnSent;
    p.user_data = slot;
    // Eager only: the receiver then always has the whole packet in its handler.
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t r = ucp_am_send_nbx(peer->ep, kPacketAmId, counted, sizeof(*counted),
                                         slot->bytes.data(), slot->bytes.size(), &p);
    if (r == nullptr) {
      Sent(slot, UCS_OK);
    } else if (UCS_PTR_IS_ERR(r)) {
      Sent(slot, UCS_PTR_STATUS(r));
    } else {
      requests_++;  // OnSent finishes it
    }
  }

  void EndRound() override {
    Endpoint::EndRound();
    // As in the local fabric: a packet stops counting as in flight only once the answers its
    // handlers buffered have left.
    if (consumed_ != 0) {
      fabric_.in_flight_.fetch_sub(consumed_, std::memory_order_acq_rel);
      consumed_ = 0;
    }
  }

  bool PollBackend() override {
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

 private:
  struct Mn {
    ucp_ep_h ep = nullptr;  // nullptr: not connected (yet)
    ucp_rkey_h rkey = nullptr;
    uint64_t base = 0;
    // The region mapped into this process (UCX over shared memory), or nullptr. Verbs on it are
    // done here, with the local fabric's copies (remote_copy.h), not by UCX: UCX's shared-memory
    // PUT and GET are memcpy, whose byte order is the C library's, and a GET that copied part
    // of a concurrent PUT could lack the PUT's head version and be taken as whole
    // (docs/formats.md "Cacheline versions"; contract::AReadThatSawPartOfAWriteSeesItsHead).
    std::byte* mapped = nullptr;
    std::chrono::steady_clock::time_point last_try{};
    uint32_t generation = 0;  // of the descriptor it connected to (UcxFabric::ReplaceMn)
  };
  struct Batch {
    UcxEndpoint* ep = nullptr;
    Completion* done = nullptr;
    MnId mn = 0;
    uint32_t generation = 0;  // of the MN's descriptor it was posted to
    Status status;
    bool unreachable = false;
    size_t next = 0;  // ops before it are posted
    std::vector<Op> ops;
    // Sent as a message (SendAsMessage): its tag, the connection it went by, and how many of its
    // ops it carried (those before one that failed the CN's own checks).
    uint64_t tag = 0;
    ucp_ep_h sent_on = nullptr;
    size_t carried = 0;
  };
  struct Closing {  // a down MN's connection, closed by force (CloseDownMns)
    ucs_status_ptr_t request;
    ucp_rkey_h rkey;  // used by the ops it cancels: destroyed once the close is done
  };
  struct SendSlot {
    UcxEndpoint* ep;
    PacketBuffer bytes;
    bool counted;  // in the fabric's packets in flight
    uint64_t
        tag;  // a batch message's (also its UCX header, which must outlive the send); 0: a packet
  };
  struct Peer {
    ucp_ep_h ep = nullptr;
    bool remote = false;      // a worker of another process
    uint32_t generation = 0;  // of its CN's entries in the fabric's directory
  };
  // How often an MN that could not be connected is tried again: often enough that an MN whose
  // daemon was only slow is used within a lease, rarely enough that a dead one costs nothing.
  static constexpr auto kReconnectEvery = std::chrono::milliseconds(100);
  // Progress calls per poll: enough to drain a burst, bounded so that a flood of arrivals does
  // not starve the worker's coroutines.
  static constexpr int kProgressMax = 64;
  static constexpr size_t kSpareBatchesMax = 64;

  // Posts the batch's next segment: ops up to the first that must not start before an earlier
  // one is done — any op after a WRITE, CAS or FAA, and a WRITE, CAS or FAA after any op; only
  // READs in a row share a segment. UCX orders nothing between operations (over TCP it carries
  // out a PUT natively and a GET or an atomic by messages, and a later op can overtake an
  // earlier one; ucp_worker_fence does not stop that in UCX 1.13), so the flush that ends a
  // segment is what keeps the posting order. On shared memory every op is done when posted and
  // a flush returns at once, so segments cost nothing there; on RDMA they cost a round trip per
  // WRITE that is followed by another op, which the queue pair's own order would make needless
  // (docs/transports.md).
  void Continue(std::unique_ptr<Batch> b) {
    const Mn& m = mns_[b->mn];
    if (m.ep == nullptr || m.generation != b->generation) {
      // Its MN restarted while the batch was between segments (the old process is gone), or
      // was declared down and its connection closed (CloseDownMns).
      b->status = Unavailable("MN " + std::to_string(b->mn) + " is gone (down, or restarted)");
      b->unreachable = true;
      Finish(std::move(b), UCS_OK);
      return;
    }
    if (fabric_.verbs_by_message_ && m.mapped == nullptr && b->next == 0 && SendAsMessage(b, m)) {
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

  // UCX checks nothing: an op outside the region, or an unaligned atomic, fails its batch here
  // from that op on, as the local fabric's does.
  Status Check(MnId mn, const Op& op) const {
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

  // Sends the batch's ops (those before one that fails Check) as one message to its MN, which
  // applies them in order and answers (OnBatchReply); false, having changed nothing, when the
  // request or its reply would pass kBatchMessageMax.
  bool SendAsMessage(std::unique_ptr<Batch>& b, const Mn& m) {
    size_t carried = 0;
    Status refused;
    for (; carried < b->ops.size(); carried++) {
      refused = Check(b->mn, b->ops[carried]);
      if (!refused.ok()) break;
    }
    const std::span<const Op> ops(b->ops.data(), carried);
    if (BatchRequestBytes(ops) > kBatchMessageMax || BatchReplyBytes(ops) > kBatchMessageMax) {
      return false;
    }
    b->status = std::move(refused);
    if (carried == 0) {
      Finish(std::move(b), UCS_OK);
      return true;
    }
    b->tag = next_tag_++;
    b->sent_on = m.ep;
    b->carried = carried;
    auto* slot = new SendSlot{this, TakeBuffer(), false, b->tag};
    EncodeBatch(ops, &slot->bytes);
    awaiting_.push_back(b.release());
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = &UcxEndpoint::OnSent;
    p.user_data = slot;
    // Eager, so that it arrives whole in the MN's handler; REPLY, so that the MN can answer on
    // the connection it came by.
    p.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t r = ucp_am_send_nbx(m.ep, kBatchAmId, &slot->tag, sizeof(slot->tag),
                                         slot->bytes.data(), slot->bytes.size(), &p);
    if (r == nullptr) {
      Sent(slot, UCS_OK);
    } else if (UCS_PTR_IS_ERR(r)) {
      Sent(slot, UCS_PTR_STATUS(r));
    } else {
      requests_++;  // OnSent finishes it
    }
    return true;
  }

  // Ends every awaiting batch that `which` selects with `why` (unreachable if it says so): its
  // ops may or may not have been applied, as after an RDMA queue pair's retry timeout.
  template <typename Pred>
  void FailAwaiting(Pred which, const Status& why) {
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

  static void OnMnError(void* arg, ucp_ep_h ep, ucs_status_t /*status*/) {
    static_cast<UcxFabric::EpErrors*>(arg)->failed.push_back(ep);
  }

  void FailAwaitingOnFailedEps() {
    for (ucp_ep_h ep : errors_->failed) {
      FailAwaiting([ep](const Batch& b) { return b.sent_on == ep; },
                   Unavailable("the connection to an MN failed"));
    }
    errors_->failed.clear();
  }

  static ucs_status_t OnBatchReply(void* arg, const void* header, size_t header_length, void* data,
                                   size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxEndpoint*>(arg);
    POND_CHECK_MSG(
        header_length == sizeof(uint64_t) && (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0,
        "a batch reply that Pond's MN did not send");
    uint64_t tag = 0;
    std::memcpy(&tag, header, sizeof(tag));
    for (size_t i = 0; i < self->awaiting_.size(); i++) {
      Batch* b = self->awaiting_[i];
      if (b->tag != tag) continue;
      Status st = TakeBatchReply(std::span<const Op>(b->ops.data(), b->carried),
                                 std::span(static_cast<const std::byte*>(data), length));
      // The CN's own refusal of a later op stands if the MN applied what it was sent.
      if (!st.ok()) b->status = std::move(st);
      self->answered_.push_back(b);
      self->awaiting_[i] = self->awaiting_.back();
      self->awaiting_.pop_back();
      return UCS_OK;
    }
    return UCS_OK;  // its batch failed before the answer came (the MN was declared down)
  }

  // Posts one op; its completion is learned from the flush that ends its segment (on a mapped
  // region the op is done here, and there is no flush).
  Status PostOp(const Mn& m, Op& op) {
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

  std::unique_ptr<Batch> TakeBatch() {
    if (spare_batches_.empty()) return std::make_unique<Batch>();
    std::unique_ptr<Batch> b = std::move(spare_batches_.back());
    spare_batches_.pop_back();
    return b;
  }

  void Finish(std::unique_ptr<Batch> b, ucs_status_t flushed) {
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
    b->carried = 0;
    if (spare_batches_.size() < kSpareBatchesMax) spare_batches_.push_back(std::move(b));
  }

  static void OnFlushed(void* request, ucs_status_t status, void* user_data) {
    auto* b = static_cast<Batch*>(user_data);
    b->ep->requests_--;
    if (status != UCS_OK && b->status.ok()) {
      b->status = FromUcs(status, "batch to MN " + std::to_string(b->mn));
      b->unreachable = b->status.code() == Code::kUnavailable;
    }
    b->ep->flushed_.push_back(b);
    ucp_request_free(request);
  }

  void Sent(SendSlot* slot, ucs_status_t status) {
    // A packet that could not leave is lost, as on any network: the sender's resend covers it.
    if (status != UCS_OK && slot->counted)
      fabric_.in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    // A batch message that could not leave fails its batch (its MN is unreachable).
    if (status != UCS_OK && slot->tag != 0) {
      Status st = FromUcs(status, "batch message");
      FailAwaiting([tag = slot->tag](const Batch& b) { return b.tag == tag; }, st);
    }
    RecycleBuffer(std::move(slot->bytes));
    delete slot;
  }

  static void OnSent(void* request, ucs_status_t status, void* user_data) {
    auto* slot = static_cast<SendSlot*>(user_data);
    slot->ep->requests_--;
    slot->ep->Sent(slot, status);
    ucp_request_free(request);
  }

  // Who takes this worker's packets or batch replies (whole messages only: Pond sends them
  // eagerly).
  ucs_status_t SetHandler(unsigned id, ucp_am_recv_callback_t cb, void* arg) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = id;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = cb;
    hp.arg = arg;
    return ucp_worker_set_am_recv_handler(worker_->get(), &hp);
  }

  static ucs_status_t DropPacket(void*, const void*, size_t, void*, size_t,
                                 const ucp_am_recv_param_t*) {
    return UCS_OK;
  }

  // Closes every connection of this endpoint at once, cancelling what is in flight on them (its
  // callbacks run here), and leaves none for the fabric to close. False if some request is still
  // in flight after kCloseWait: over shared memory a send that a peer never takes (it exited, or
  // stopped progressing, and its queue is full) outlives even a forced close, as UCX cancels
  // requests only on endpoints with peer error handling.
  bool ForceClose() {
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

  // What ForceClose could not cancel may still call back into this endpoint, but only from this
  // worker's progress: the worker (and its connections) is handed to the fabric, which never
  // progresses or destroys it, with the connections, remote keys and batches those requests
  // use, and this endpoint goes. The process leaks them; it is ending, or its peer is.
  void Abandon() {
    std::fprintf(stderr,
                 "pond: worker %u.%u: %d UCX sends were never taken by their peer over shared "
                 "memory; leaving its UCX worker as it is\n",
                 self().cn, self().worker, requests_);
    fabric_.Abandon(std::move(worker_), std::move(errors_));
  }

  static ucs_status_t OnPacket(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxEndpoint*>(arg);
    POND_CHECK_MSG((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0,
                   "a CN packet arrived by rendezvous, but Pond sends them eagerly");
    if (header_length == 1 && *static_cast<const uint8_t*>(header) == kCounted) {
      self->counted_arrivals_++;
    }
    PacketBuffer buf = self->TakeBuffer();
    buf.resize(length);
    std::memcpy(buf.data(), data, length);
    self->arrived_.push_back(std::move(buf));
    return UCS_OK;
  }

  // The configuration declared MNs down (UcxFabric::SetMnDown): their connections are closed
  // by force, which cancels what waits on them — its flush callbacks run within the close or
  // at a later progress, and the batches then fail as unreachable, their ops done or not, as in
  // the simulator after a queue pair's retry timeout. Written late after all (TCP may still
  // deliver what the kernel had queued once a cut heals), they land on memory nobody reads
  // until a rejoin copies it afresh into a new process.
  void CloseDownMns() {
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

  void ReleaseClosed() {
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

  // MN `mn` restarted (ReplaceMn): the endpoint to its old process goes (closed with the rest),
  // and the next batch connects to the new one at once.
  void Forget(MnId mn) {
    Mn& m = mns_[mn];
    if (m.rkey != nullptr) ucp_rkey_destroy(m.rkey);
    if (m.ep != nullptr) stale_.push_back(m.ep);
    FailAwaiting([mn](const Batch& b) { return b.mn == mn; },
                 Unavailable("MN " + std::to_string(mn) + " restarted"));
    m = Mn{};
  }

  Status Connect(MnId mn) {
    Mn& m = mns_[mn];
    // The generation first: a ReplaceMn after it makes the next batch connect again.
    m.generation = fabric_.mn_generation(mn);
    const MnDescriptor d = fabric_.MnNow(mn);
    m.base = d.base;
    m.last_try = std::chrono::steady_clock::now();
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

  // Connects to an MN that could not be connected before, if it is time to try again.
  bool Reconnect(MnId mn) {
    if (std::chrono::steady_clock::now() - mns_[mn].last_try < kReconnectEvery) return false;
    Status st = Connect(mn);
    if (st.ok()) {
      std::fprintf(stderr, "pond: worker %u.%u reached MN %u\n", self().cn, self().worker, mn);
    }
    return st.ok();
  }

  // The UCP endpoint to worker `to`, connected on first use; nullptr if `to` is unknown (a
  // worker of another process not in the directory).
  const Peer* FindPeer(WorkerAddr to) {
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

  UcxFabric& fabric_;
  // Outlives the worker (handed to the fabric with it): its MN connections report to it.
  std::unique_ptr<UcxFabric::EpErrors> errors_ = std::make_unique<UcxFabric::EpErrors>();
  std::unique_ptr<Worker> worker_;  // destroyed last: the endpoints below live on it
  std::vector<Mn> mns_;
  std::unordered_map<uint32_t, Peer> peers_;
  std::vector<ucp_ep_h> stale_;  // to workers of a CN's earlier process: closed with the rest
  std::vector<std::unique_ptr<Batch>> spare_batches_;
  std::vector<Batch*> flushed_;   // a segment's flush completed: post the next or finish
  std::vector<Batch*> awaiting_;  // sent as messages, not answered yet (a handful: linear search)
  std::vector<Batch*> answered_;  // answered, or failed, while awaiting: to finish
  uint64_t next_tag_ = 1;
  std::vector<Closing> closing_;
  uint32_t down_seen_ = 0;  // the fabric's mn_down_changes() CloseDownMns last acted on
  int requests_ = 0;        // sends and flushes in flight, which call back into this
  std::vector<PacketBuffer> arrived_;
  uint64_t consumed_ = 0;
  uint64_t counted_arrivals_ = 0;  // arrived this poll from workers of this process
  bool progressed_ = false;
};

Result<std::unique_ptr<UcxFabric>> UcxFabric::CreateWithLocalMns(uint16_t num_mns,
                                                                 uint64_t region_bytes,
                                                                 const UcxOptions& options) {
  if (num_mns == 0) return InvalidArgument("need at least one MN");
  std::unique_ptr<UcxFabric> f(new UcxFabric());
  for (uint16_t i = 0; i < num_mns; i++) {
    auto mn = UcxMemoryNode::Start(i, region_bytes, options);
    if (!mn.ok()) return mn.status();
    f->mns_.push_back((*mn)->descriptor());
    f->local_mns_.push_back(std::move(mn).value());
  }
  POND_RETURN_IF_ERROR(f->Init(options));
  return f;
}

Result<std::unique_ptr<UcxFabric>> UcxFabric::Connect(std::vector<MnDescriptor> mns,
                                                      const UcxOptions& options) {
  if (mns.empty()) return InvalidArgument("need at least one MN");
  for (size_t i = 0; i < mns.size(); i++) {
    if (mns[i].mn != i) return InvalidArgument("MN descriptors must come in MN order");
    if (mns[i].bytes != mns[0].bytes) {
      return InvalidArgument("MN " + std::to_string(i) + "'s region differs in size from MN 0's");
    }
  }
  std::unique_ptr<UcxFabric> f(new UcxFabric());
  f->mns_ = std::move(mns);
  POND_RETURN_IF_ERROR(f->Init(options));
  return f;
}

Status UcxFabric::Init(const UcxOptions& options) {
  auto ctx = Context::Create(options);
  if (!ctx.ok()) return ctx.status();
  ctx_ = std::move(ctx).value();
  peer_errors_ = PeerErrorsHandled(options.tls);
  verbs_by_message_ = peer_errors_ && VerbsByMessage(options.tls);
  return Status::Ok();
}

void UcxFabric::Retire(Retired r) {
  std::lock_guard lock(directory_mu_);
  retired_.push_back(std::move(r));
}

void UcxFabric::Abandon(std::unique_ptr<Worker> w, std::unique_ptr<EpErrors> errors) {
  std::lock_guard lock(directory_mu_);
  abandoned_.push_back(std::move(w));
  static_cast<void>(errors.release());  // its worker may still report to it
}

UcxFabric::~UcxFabric() {
  // Every endpoint is gone (they are destroyed before their fabric): close all their UCP
  // endpoints at once and progress every worker until the closes are done, then destroy the
  // workers. The in-process MNs' threads answer meanwhile; they stop last.
  std::vector<std::pair<ucp_worker_h, ucs_status_ptr_t>> closing;
  ucp_request_param_t p{};
  for (Retired& r : retired_) {
    for (ucp_ep_h ep : r.eps) closing.emplace_back(r.worker->get(), ucp_ep_close_nbx(ep, &p));
  }
  const auto until = std::chrono::steady_clock::now() + kCloseWait;
  for (bool pending = true; pending && std::chrono::steady_clock::now() < until;) {
    pending = false;
    for (Retired& r : retired_) ucp_worker_progress(r.worker->get());
    for (auto& [w, req] : closing) {
      if (req == nullptr || UCS_PTR_IS_ERR(req)) continue;
      if (ucp_request_check_status(req) == UCS_INPROGRESS) {
        pending = true;
      } else {
        ucp_request_free(req);
        req = nullptr;
      }
    }
  }
  for (auto& [w, req] : closing) {
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
  }
  retired_.clear();
  // An abandoned worker is never destroyed, nor the context it lives in (UCX has no cleanup of a
  // context whose workers remain).
  if (!abandoned_.empty()) {
    for (std::unique_ptr<Worker>& w : abandoned_) static_cast<void>(w.release());
    static_cast<void>(ctx_.release());
  }
}

std::byte* UcxFabric::region(MnId mn) {
  return mn < local_mns_.size() ? local_mns_[mn]->region() : nullptr;
}

std::optional<UcxFabric::WorkerEntry> UcxFabric::FindWorker(WorkerAddr a) {
  std::lock_guard lock(directory_mu_);
  auto it = workers_.find(a.Packed());
  if (it == workers_.end()) return std::nullopt;
  return it->second;
}

Result<CnDescriptor> UcxFabric::Describe(uint16_t cn, uint16_t incarnation) {
  std::lock_guard lock(directory_mu_);
  CnDescriptor d;
  d.cn = cn;
  d.incarnation = incarnation;
  for (uint16_t i = 0;; i++) {
    auto it = workers_.find(WorkerAddr{cn, i}.Packed());
    if (it == workers_.end() || it->second.remote) break;
    d.workers.push_back(it->second.address);
  }
  if (d.workers.empty()) {
    return InvalidArgument("CN " + std::to_string(cn) + " has no workers in this process");
  }
  return d;
}

Status UcxFabric::AddRemoteCn(const CnDescriptor& d) {
  std::lock_guard lock(directory_mu_);
  for (uint16_t i = 0; i < d.workers.size(); i++) {
    auto [it, fresh] = workers_.try_emplace(WorkerAddr{d.cn, i}.Packed());
    if (!fresh && !it->second.remote) {
      return InvalidArgument("CN " + std::to_string(d.cn) + " is served by this process");
    }
    it->second = WorkerEntry{d.workers[i], true};
  }
  // Endpoints connected to the CN's earlier process reconnect at their next packet to it.
  generations_[d.cn].fetch_add(1, std::memory_order_acq_rel);
  open_.store(true, std::memory_order_release);
  return Status::Ok();
}

Status UcxFabric::ReplaceMn(const MnDescriptor& d) {
  std::lock_guard lock(directory_mu_);
  if (d.mn >= mns_.size()) return InvalidArgument("no MN " + std::to_string(d.mn));
  if (d.bytes != mns_[d.mn].bytes) {
    return InvalidArgument("MN " + std::to_string(d.mn) + " came back with " +
                           std::to_string(d.bytes) + " bytes, not " +
                           std::to_string(mns_[d.mn].bytes));
  }
  mns_[d.mn] = d;
  mn_generations_[d.mn].fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
}

void UcxFabric::SetMnDown(MnId mn, bool down) {
  if (mn >= mn_down_.size()) return;
  if (mn_down_[mn].exchange(down, std::memory_order_acq_rel) == down) return;
  mn_down_changes_.fetch_add(1, std::memory_order_acq_rel);
}

MnDescriptor UcxFabric::MnNow(MnId mn) {
  std::lock_guard lock(directory_mu_);
  return mns_[mn];
}

std::unique_ptr<Endpoint> UcxFabric::CreateEndpoint(WorkerAddr self, Scheduler& sched) {
  auto worker = Worker::Create(*ctx_);
  POND_CHECK_MSG(worker.ok(), worker.status().ToString().c_str());
  {
    std::lock_guard lock(directory_mu_);
    auto [it, fresh] = workers_.emplace(self.Packed(), WorkerEntry{(*worker)->address(), false});
    POND_CHECK_MSG(fresh, "two endpoints for one worker address");
  }
  auto ep = std::make_unique<UcxEndpoint>(*this, self, sched, std::move(worker).value());
  Status s = ep->Init();
  POND_CHECK_MSG(s.ok(), s.ToString().c_str());
  sched.AddPoller(ep.get());
  return ep;
}

}  // namespace pond::ucx
