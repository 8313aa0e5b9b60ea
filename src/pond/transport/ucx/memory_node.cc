#include "pond/transport/ucx/memory_node.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/base/thread_name.h"
#include "pond/transport/ucx/batch_message.h"

namespace pond::ucx {

Result<std::unique_ptr<UcxMemoryNode>> UcxMemoryNode::Start(MnId mn, uint64_t bytes,
                                                            const UcxOptions& options) {
  if (bytes < 4096 || bytes % 4096 != 0 || bytes > GAddr::kOffsetMask) {
    return InvalidArgument("MN region size must be a multiple of 4096 below 2^48 bytes");
  }
  std::unique_ptr<UcxMemoryNode> n(new UcxMemoryNode());
  // Without UCX's keepalive: an MN acts on no peer's failure (the CNs' leases find failed
  // nodes), and UCX 1.13 aborts the whole process when it must answer a READ on a connection its
  // keepalive gave up — which the last READs of a CN on a host cut off for a few seconds, sent
  // again by that host's kernel once the link is back, made it do to MNs on the majority side.
  UcxOptions own = options;
  own.keepalive = false;
  // Over TCP alone CNs send batch messages, checked op by op (ApplyBatch); UCX's one-sided verbs
  // are left out, as their emulation there writes wherever a peer says (VerbsByMessage).
  auto ctx = Context::Create(own, !VerbsByMessage(options.tls));
  if (!ctx.ok()) return ctx.status();
  n->ctx_ = std::move(ctx).value();
  auto worker = Worker::Create(*n->ctx_);
  if (!worker.ok()) return worker.status();
  n->worker_ = std::move(worker).value();

  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.length = bytes;
  // UCX allocates, so that on shared memory the region is a segment other processes can map.
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucs_status_t s = ucp_mem_map(n->ctx_->get(), &mp, &n->mem_);
  if (s != UCS_OK) {
    return FromUcs(s, "cannot map an MN region of " + std::to_string(bytes) + " bytes");
  }
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  s = ucp_mem_query(n->mem_, &attr);
  if (s != UCS_OK) return FromUcs(s, "cannot query the MN region");
  POND_CHECK(attr.length >= bytes);
  n->region_ = static_cast<std::byte*>(attr.address);

  void* rkey = nullptr;
  size_t rkey_len = 0;
  s = ucp_rkey_pack(n->ctx_->get(), n->mem_, &rkey, &rkey_len);
  if (s != UCS_OK) return FromUcs(s, "cannot pack the MN region's remote key");
  const auto* r = static_cast<const std::byte*>(rkey);
  n->descriptor_.rkey.assign(r, r + rkey_len);
  ucp_rkey_buffer_release(rkey);
  n->descriptor_.mn = mn;
  n->descriptor_.base = reinterpret_cast<uint64_t>(n->region_);
  n->descriptor_.bytes = bytes;
  n->descriptor_.worker_address = n->worker_->address();

  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = kBatchAmId;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  hp.cb = &UcxMemoryNode::OnBatch;
  hp.arg = n.get();
  s = ucp_worker_set_am_recv_handler(n->worker_->get(), &hp);
  if (s == UCS_OK) {
    hp.id = kHelloAmId;
    hp.cb = &UcxMemoryNode::OnHello;
    s = ucp_worker_set_am_recv_handler(n->worker_->get(), &hp);
  }
  if (s != UCS_OK) return FromUcs(s, "cannot set the MN's message handlers");
  n->token_ = options.peer_token;

  n->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (n->stop_fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  int efd = -1;
  s = ucp_worker_get_efd(n->worker_->get(), &efd);
  if (s != UCS_OK) return FromUcs(s, "cannot get the MN worker's event descriptor");
  n->thread_ = std::thread([m = n.get()] {
    NameThisThread("pond-mn");
    m->Serve();
  });
  return n;
}

void UcxMemoryNode::Serve() {
  ucp_worker_h w = worker_->get();
  int efd = -1;
  POND_CHECK(ucp_worker_get_efd(w, &efd) == UCS_OK);
  for (;;) {
    while (ucp_worker_progress(w) != 0) {
    }
    // Arm, then sleep until UCX has work (a batch message or a peer hello) or we are stopped. BUSY
    // means events came between the progress and the arm: progress again.
    ucs_status_t s = ucp_worker_arm(w);
    if (s == UCS_ERR_BUSY) continue;
    // Any other failure to arm (a peer's connection failing under it, say) must not take the
    // MN down with it: the worker is then polled every millisecond instead of woken.
    const int timeout_ms = s == UCS_OK ? -1 : 1;
    if (s != UCS_OK && !arm_failure_said_) {
      arm_failure_said_ = true;
      std::fprintf(stderr, "pond mn %u: cannot arm the UCX worker (%s); polling it instead\n",
                   descriptor_.mn, ucs_status_string(s));
    }
    pollfd fds[2] = {{efd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int n = poll(fds, 2, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    POND_CHECK_MSG(n >= 0, "poll on the MN worker failed");
    if (fds[1].revents != 0) return;
  }
}

namespace {

struct ReplySlot {
  AmHeader header;  // the reply's UCX header, which must outlive the send
  std::vector<std::byte> bytes;
};

void OnReplySent(void* request, ucs_status_t /*status*/, void* user_data) {
  // A reply that could not leave (its CN died) is lost with the CN: nothing waits for it.
  delete static_cast<ReplySlot*>(user_data);
  ucp_request_free(request);
}

// Answers on `reply_ep` with `slot` (eagerly, so that it arrives whole in the CN's handler).
void Reply(ucp_ep_h reply_ep, unsigned id, ReplySlot* slot) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &OnReplySent;
  p.user_data = slot;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  ucs_status_ptr_t r = ucp_am_send_nbx(reply_ep, id, &slot->header, sizeof(slot->header),
                                       slot->bytes.data(), slot->bytes.size(), &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) delete slot;
}

}  // namespace

MnDescriptor UcxMemoryNode::published_descriptor() const {
  MnDescriptor d = descriptor_;
  if (!IsOpen(token_)) d.rkey.clear();
  return d;
}

ucs_status_t UcxMemoryNode::OnHello(void* arg, const void* header, size_t header_length,
                                    void* /*data*/, size_t /*length*/,
                                    const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxMemoryNode*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0) return UCS_OK;
  const std::optional<uint64_t> word = Admit(header, header_length, self->token_);
  // A refusal is an empty answer with an all-zero token: the stranger learns no more than that.
  auto* slot = new ReplySlot{};
  if (word.has_value()) {
    slot->header = AmHeader{*word, self->token_};
    slot->bytes = self->descriptor_.rkey;
  } else if (!self->refusal_said_) {
    self->refusal_said_ = true;
    std::fprintf(stderr, "pond mn %u: refused a peer without this cluster's token (said once)\n",
                 self->descriptor_.mn);
  }
  Reply(param->reply_ep, kHelloReplyAmId, slot);
  return UCS_OK;
}

ucs_status_t UcxMemoryNode::OnBatch(void* arg, const void* header, size_t header_length, void* data,
                                    size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxMemoryNode*>(arg);
  // A CN of this cluster sends batches eagerly, with its token, and asks for a reply: anything
  // else is a stranger's, and is dropped unapplied (its sender, if any, learns nothing and fails
  // the batch as it would for a dead MN).
  const std::optional<uint64_t> tag = Admit(header, header_length, self->token_);
  if (!tag.has_value() || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0 ||
      (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0) {
    return UCS_OK;
  }
  auto* slot = new ReplySlot{AmHeader{*tag, self->token_}, {}};
  ApplyBatch(self->region_, self->descriptor_.bytes,
             std::span(static_cast<const std::byte*>(data), length), &slot->bytes);
  Reply(param->reply_ep, kBatchReplyAmId, slot);
  self->batches_answered_.fetch_add(1, std::memory_order_relaxed);
  return UCS_OK;
}

UcxMemoryNode::~UcxMemoryNode() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    POND_CHECK(write(stop_fd_, &one, sizeof(one)) == sizeof(one));
    thread_.join();
  }
  if (stop_fd_ >= 0) close(stop_fd_);
  if (mem_ != nullptr) ucp_mem_unmap(ctx_->get(), mem_);
  worker_.reset();
  ctx_.reset();
}

}  // namespace pond::ucx
