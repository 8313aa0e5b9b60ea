#include "pond/transport/ucx/peer_token.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <thread>

#include "pond/base/assert.h"

namespace pond::ucx {

PeerToken DerivePeerToken(std::string_view secret, std::string_view cluster) {
  PeerToken t{};
  if (secret.empty()) return t;
  std::string message = "pond peer token 1";
  message.push_back('\0');
  message.append(cluster);
  unsigned len = 0;
  const unsigned char* out = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                                  reinterpret_cast<const unsigned char*>(message.data()),
                                  message.size(), reinterpret_cast<unsigned char*>(t.data()), &len);
  POND_CHECK_MSG(out != nullptr && len == t.size(), "HMAC-SHA256 failed");
  // A derived token of all zeros would read as "open": 2^-256, but said rather than assumed.
  POND_CHECK(!IsOpen(t));
  return t;
}

bool IsOpen(const PeerToken& t) {
  std::byte any{0};
  for (std::byte b : t) any |= b;
  return any == std::byte{0};
}

std::optional<uint64_t> Admit(const void* header, size_t header_length, const PeerToken& mine) {
  if (header_length != sizeof(AmHeader)) return std::nullopt;
  AmHeader h;
  std::memcpy(&h, header, sizeof(h));
  std::byte diff{0};
  for (size_t i = 0; i < mine.size(); i++) diff |= h.token[i] ^ mine[i];
  if (diff != std::byte{0}) return std::nullopt;
  return h.word;
}

namespace {

struct Hello {
  PeerToken token;
  bool answered = false;
  std::vector<std::byte> key;  // empty: refused
};

ucs_status_t OnHelloReply(void* arg, const void* header, size_t header_length, void* data,
                          size_t length, const ucp_am_recv_param_t* param) {
  auto* hello = static_cast<Hello*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) return UCS_OK;
  hello->answered = true;
  // Only an MN of this cluster answers with the token: anything else is a refusal.
  if (length == 0 || !Admit(header, header_length, hello->token).has_value()) return UCS_OK;
  const auto* p = static_cast<const std::byte*>(data);
  hello->key.assign(p, p + length);
  return UCS_OK;
}

void OnHelloSent(void* /*request*/, ucs_status_t /*status*/, void* /*user_data*/) {}

// Progresses `w` until `request` (a send or a close) completes or `deadline` passes.
void Finish(ucp_worker_h w, ucs_status_ptr_t request,
            std::chrono::steady_clock::time_point deadline) {
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  while (ucp_request_check_status(request) == UCS_INPROGRESS &&
         std::chrono::steady_clock::now() < deadline) {
    if (ucp_worker_progress(w) == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_request_cancel(w, request);
  while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(w);
  ucp_request_free(request);
}

}  // namespace

Result<std::vector<std::byte>> AskRegionKey(Context& ctx, const MnDescriptor& d,
                                            const PeerToken& token, bool peer_errors,
                                            std::chrono::milliseconds wait) {
  const std::string who = "MN " + std::to_string(d.mn);
  auto worker = Worker::Create(ctx);
  if (!worker.ok()) return worker.status();
  ucp_worker_h w = (*worker)->get();
  Hello hello{token};
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = kHelloReplyAmId;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  hp.cb = &OnHelloReply;
  hp.arg = &hello;
  ucs_status_t s = ucp_worker_set_am_recv_handler(w, &hp);
  if (s != UCS_OK) return FromUcs(s, "cannot set the peer hello's handler");
  Status st;
  ucp_ep_h ep = CreateEp(w, d.worker_address, peer_errors, &st);
  if (!st.ok()) return Unavailable(who + ": " + std::string(st.message()));

  const auto deadline = std::chrono::steady_clock::now() + wait;
  const AmHeader header{0, token};
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &OnHelloSent;
  p.user_data = nullptr;
  p.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
  Finish(w, ucp_am_send_nbx(ep, kHelloAmId, &header, sizeof(header), nullptr, 0, &p), deadline);
  while (!hello.answered && std::chrono::steady_clock::now() < deadline) {
    if (ucp_worker_progress(w) == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ucp_request_param_t cp{};
  cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
  Finish(w, ucp_ep_close_nbx(ep, &cp), std::chrono::steady_clock::now() + wait);
  if (!hello.answered) {
    return Unavailable(who + " did not answer the peer hello within " +
                       std::to_string(wait.count()) + " ms");
  }
  if (hello.key.empty()) {
    return PermissionDenied(who +
                            " refused this process's peer token: it belongs to another "
                            "cluster, or to one with another secret");
  }
  return std::move(hello.key);
}

}  // namespace pond::ucx
