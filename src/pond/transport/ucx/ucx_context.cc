#include "pond/transport/ucx/ucx_context.h"

#include <string>
#include <vector>

#include <cstring>

namespace pond::ucx {

Status FromUcs(ucs_status_t s, const std::string& what) {
  std::string m = what + ": " + ucs_status_string(s);
  switch (s) {
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CANCELED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_IO_ERROR:  // over TCP: the peer's process died and its socket closed
      return Unavailable(std::move(m));
    default:
      return Internal(std::move(m));
  }
}

namespace {

// A peer's failure (a daemon killed) must fail the operations on its endpoint, not the process:
// UCX's peer error handling reports it to the operations' callbacks.
void IgnoreEpError(void* /*arg*/, ucp_ep_h /*ep*/, ucs_status_t /*status*/) {}

}  // namespace

namespace {

// The transports named in a UCX_TLS list ("" when UCX chooses).
std::vector<std::string> Transports(const std::string& tls) {
  std::vector<std::string> out;
  for (size_t at = 0; at < tls.size();) {
    size_t end = tls.find(',', at);
    if (end == std::string::npos) end = tls.size();
    out.push_back(tls.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace

bool PeerErrorsHandled(const std::string& tls) {
  if (tls.empty()) return false;  // UCX's choice: shared memory among them
  for (const std::string& t : Transports(tls)) {
    for (const char* shm : {"all", "sm", "shm", "posix", "sysv", "cma", "xpmem", "knem"}) {
      if (t == shm) return false;
    }
  }
  return true;
}

bool VerbsByMessage(const std::string& tls) {
  bool tcp = false;
  for (const std::string& t : Transports(tls)) {
    if (t != "tcp" && t != "self") return false;
    tcp |= t == "tcp";
  }
  return tcp;
}

ucp_ep_h CreateEp(ucp_worker_h w, const std::vector<std::byte>& address, bool peer_errors,
                  Status* status, ucp_err_handler_cb_t on_error, void* error_arg) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  p.address = reinterpret_cast<const ucp_address_t*>(address.data());
  if (peer_errors) {
    p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = on_error != nullptr ? on_error : &IgnoreEpError;
    p.err_handler.arg = error_arg;
  }
  ucp_ep_h ep = nullptr;
  ucs_status_t s = ucp_ep_create(w, &p, &ep);
  if (s != UCS_OK) *status = FromUcs(s, "cannot connect a UCX endpoint");
  return ep;
}

Result<std::unique_ptr<Context>> Context::Create(const UcxOptions& options, bool one_sided) {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return FromUcs(s, "cannot read UCX configuration");
  if (!options.tls.empty()) s = ucp_config_modify(config, "TLS", options.tls.c_str());
  if (s == UCS_OK && !options.net_devices.empty()) {
    s = ucp_config_modify(config, "NET_DEVICES", options.net_devices.c_str());
  }
  // An MN's region must start zeroed (an empty hash bucket is zeros): every way UCX allocates
  // gives fresh pages but the last, malloc, so leave that one out.
  if (s == UCS_OK)
    s = ucp_config_modify(config, "ALLOC_PRIO", "md:sysv,md:posix,huge,thp,md:*,mmap");
  if (s == UCS_OK && !options.keepalive) s = ucp_config_modify(config, "KEEPALIVE_INTERVAL", "inf");
  if (s != UCS_OK) {
    ucp_config_release(config);
    return InvalidArgument("bad UCX transport setting (tls \"" + options.tls +
                           "\", net devices \"" + options.net_devices +
                           "\"): " + ucs_status_string(s));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  if (one_sided) params.features |= UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
  params.mt_workers_shared = 0;  // every worker belongs to one thread
  ucp_context_h ctx = nullptr;
  s = ucp_init(&params, config, &ctx);
  ucp_config_release(config);
  if (s != UCS_OK) {
    return FromUcs(s,
                   "cannot start UCX with tls \"" + options.tls + "\" (is the transport there?)");
  }
  return std::unique_ptr<Context>(new Context(ctx));
}

Context::~Context() { ucp_cleanup(ctx_); }

Result<std::unique_ptr<Worker>> Worker::Create(Context& ctx) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h w = nullptr;
  ucs_status_t s = ucp_worker_create(ctx.get(), &params, &w);
  if (s != UCS_OK) return FromUcs(s, "cannot create a UCX worker");
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
  s = ucp_worker_query(w, &attr);
  if (s != UCS_OK) {
    ucp_worker_destroy(w);
    return FromUcs(s, "cannot get a UCX worker's address");
  }
  const auto* a = reinterpret_cast<const std::byte*>(attr.address);
  std::vector<std::byte> address(a, a + attr.address_length);
  ucp_worker_release_address(w, attr.address);
  return std::unique_ptr<Worker>(new Worker(w, std::move(address)));
}

Worker::~Worker() { ucp_worker_destroy(w_); }

std::vector<std::byte> MnDescriptor::Encode() const {
  MnDescriptorHeader h{};
  h.magic = kMnDescriptorMagic;
  h.version = kMnDescriptorVersion;
  h.mn = mn;
  h.base = base;
  h.bytes = bytes;
  h.address_len = static_cast<uint32_t>(worker_address.size());
  h.rkey_len = static_cast<uint32_t>(rkey.size());
  std::vector<std::byte> out(sizeof(h) + worker_address.size() + rkey.size());
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), worker_address.data(), worker_address.size());
  // A sealed descriptor has no key, and memcpy from its null data is undefined even for 0 bytes.
  if (!rkey.empty()) {
    std::memcpy(out.data() + sizeof(h) + worker_address.size(), rkey.data(), rkey.size());
  }
  return out;
}

Result<MnDescriptor> MnDescriptor::Decode(std::span<const std::byte> in) {
  MnDescriptorHeader h;
  if (in.size() < sizeof(h)) return InvalidArgument("MN descriptor shorter than its header");
  std::memcpy(&h, in.data(), sizeof(h));
  if (h.magic != kMnDescriptorMagic) return InvalidArgument("not an MN descriptor (bad magic)");
  if (h.version != kMnDescriptorVersion) {
    return InvalidArgument("MN descriptor version " + std::to_string(h.version) +
                           " (this Pond reads version " + std::to_string(kMnDescriptorVersion) +
                           ")");
  }
  // No region key is a sealed descriptor: the CN asks the MN for it (peer_token.h).
  if (h.address_len == 0 || h.address_len > kMnDescriptorPartMax ||
      h.rkey_len > kMnDescriptorPartMax ||
      in.size() != sizeof(h) + uint64_t{h.address_len} + h.rkey_len) {
    return InvalidArgument("MN descriptor lengths do not match its size");
  }
  if (h.bytes == 0 || h.bytes > GAddr::kOffsetMask) {
    return InvalidArgument("MN descriptor region size out of range");
  }
  MnDescriptor d;
  d.mn = h.mn;
  d.base = h.base;
  d.bytes = h.bytes;
  const std::byte* p = in.data() + sizeof(h);
  d.worker_address.assign(p, p + h.address_len);
  d.rkey.assign(p + h.address_len, p + h.address_len + h.rkey_len);
  return d;
}

std::vector<std::byte> CnDescriptor::Encode() const {
  CnDescriptorHeader h{};
  h.magic = kCnDescriptorMagic;
  h.version = kCnDescriptorVersion;
  h.cn = cn;
  h.incarnation = incarnation;
  h.workers = static_cast<uint16_t>(workers.size());
  std::vector<std::byte> out(sizeof(h));
  std::memcpy(out.data(), &h, sizeof(h));
  for (const std::vector<std::byte>& a : workers) {
    const auto len = static_cast<uint32_t>(a.size());
    const size_t at = out.size();
    out.resize(at + sizeof(len) + a.size());
    std::memcpy(out.data() + at, &len, sizeof(len));
    std::memcpy(out.data() + at + sizeof(len), a.data(), a.size());
  }
  return out;
}

Result<CnDescriptor> CnDescriptor::Decode(std::span<const std::byte> in) {
  CnDescriptorHeader h;
  if (in.size() < sizeof(h)) return InvalidArgument("CN descriptor shorter than its header");
  std::memcpy(&h, in.data(), sizeof(h));
  if (h.magic != kCnDescriptorMagic) return InvalidArgument("not a CN descriptor (bad magic)");
  if (h.version != kCnDescriptorVersion) {
    return InvalidArgument("CN descriptor version " + std::to_string(h.version) +
                           " (this Pond reads version " + std::to_string(kCnDescriptorVersion) +
                           ")");
  }
  if (h.workers == 0 || h.workers > kCnDescriptorWorkersMax) {
    return InvalidArgument("CN descriptor worker count out of range");
  }
  CnDescriptor d;
  d.cn = h.cn;
  d.incarnation = h.incarnation;
  size_t at = sizeof(h);
  for (uint16_t i = 0; i < h.workers; i++) {
    uint32_t len = 0;
    if (in.size() - at < sizeof(len)) return InvalidArgument("CN descriptor cut short");
    std::memcpy(&len, in.data() + at, sizeof(len));
    at += sizeof(len);
    if (len == 0 || len > kMnDescriptorPartMax || in.size() - at < len) {
      return InvalidArgument("CN descriptor lengths do not match its size");
    }
    d.workers.emplace_back(in.data() + at, in.data() + at + len);
    at += len;
  }
  if (at != in.size()) return InvalidArgument("CN descriptor lengths do not match its size");
  return d;
}

}  // namespace pond::ucx
