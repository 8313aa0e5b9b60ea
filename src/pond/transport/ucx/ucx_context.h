// The parts of UCX (UCP) that every user of the `ucx` transport shares: the options that pick
// UCX's transports, a process's UCP context, one UCP worker per thread, and the MN descriptor —
// what a CN needs to reach one MN's region (the MN worker's address and the region's packed
// remote key), whether that MN is a thread of this process or a daemon on another host.
//
// UCX types stay in this folder: code above the transport sees Fabric and Endpoint only.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pond/status.h"
#include "pond/transport/gaddr.h"

namespace pond::ucx {

// Which of UCX's transports to use. Empty fields leave UCX's own choice (its UCX_TLS and
// UCX_NET_DEVICES environment variables, else everything it finds): RDMA verbs where a NIC
// exists, shared memory and TCP otherwise.
struct UcxOptions {
  std::string tls;          // UCX_TLS: "shm" (one host, truly one-sided), "tcp", "rc,sm", ...
  std::string net_devices;  // UCX_NET_DEVICES: "lo" pins TCP to loopback, "mlx5_0:1" a NIC port
  // UCX's own keepalive between peers (UCX_KEEPALIVE_INTERVAL). A memory node turns it off
  // (UcxMemoryNode::Start says why).
  bool keepalive = true;
  // The cluster's peer token (peer_token.h): carried by every message this process sends, and
  // asked of every message it takes. All zero: the cluster has no secret.
  std::array<std::byte, 32> peer_token{};
};

// A failed UCX call as a Status: Unavailable when the peer is unreachable, Internal otherwise.
Status FromUcs(ucs_status_t s, const std::string& what);

// An endpoint on `w` to the worker at `address`; nullptr with `*status` set when UCX refuses.
// With `peer_errors` (not on shared memory) a peer's failure fails the endpoint's operations and
// is reported to `on_error` (nullptr: to nobody) rather than ending the process. A batch sent as
// a message has no operation left to fail once sent, so an MN's connection also reports the
// failure to its CN endpoint (UcxEndpoint::OnMnError).
ucp_ep_h CreateEp(ucp_worker_h w, const std::vector<std::byte>& address, bool peer_errors,
                  Status* status, ucp_err_handler_cb_t on_error = nullptr,
                  void* error_arg = nullptr);

// UCX's shared-memory transports have no peer error handling (a dead peer's memory stays
// mapped, and what is written to it is simply never read): endpoints ask for it only when the
// transports `tls` names include none of them.
bool PeerErrorsHandled(const std::string& tls);
// Whether UCX reaches peers by TCP alone (`tls` names tcp, and maybe self). Then a CN sends its
// batches to an MN as messages the MN applies (batch_message.h), where UCX would emulate each
// verb with messages anyway, and an MN serves none of UCX's one-sided verbs: their emulation
// would act on any address a peer names, unchecked. With an RDMA transport possible the NIC does
// the verbs, without the MN's CPU, and checks the region key.
bool VerbsByMessage(const std::string& tls);

// One UCP context: the process's (or one in-process MN's) handle on UCX with active messages and
// wake-up on events, and, if `one_sided`, RMA and 64-bit atomics.
class Context {
 public:
  static Result<std::unique_ptr<Context>> Create(const UcxOptions& options, bool one_sided = true);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ucp_context_h get() const { return ctx_; }

 private:
  explicit Context(ucp_context_h c) : ctx_(c) {}
  ucp_context_h ctx_;
};

// One UCP worker, used by one thread at a time (UCS_THREAD_MODE_SINGLE).
class Worker {
 public:
  static Result<std::unique_ptr<Worker>> Create(Context& ctx);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ucp_worker_h get() const { return w_; }
  // The worker's address, which peers pass to ucp_ep_create.
  const std::vector<std::byte>& address() const { return address_; }

 private:
  Worker(ucp_worker_h w, std::vector<std::byte> address) : w_(w), address_(std::move(address)) {}
  ucp_worker_h w_;
  std::vector<std::byte> address_;
};

// What a CN needs to reach one MN: grammar in docs/formats.md "MN descriptor".
struct MnDescriptor {
  MnId mn = 0;
  uint64_t base = 0;   // the region's virtual address in the MN's process
  uint64_t bytes = 0;  // the region's size
  std::vector<std::byte> worker_address;
  std::vector<std::byte> rkey;  // from ucp_rkey_pack; empty when published sealed (peer_token.h)

  std::vector<std::byte> Encode() const;
  // InvalidArgument with one line when `bytes` is not a descriptor.
  static Result<MnDescriptor> Decode(std::span<const std::byte> bytes);
};

struct MnDescriptorHeader {
  uint32_t magic;  // kMnDescriptorMagic
  uint16_t version;
  uint16_t mn;
  uint64_t base;
  uint64_t bytes;
  uint32_t address_len;
  uint32_t rkey_len;
};
static_assert(sizeof(MnDescriptorHeader) == 32);
static_assert(offsetof(MnDescriptorHeader, mn) == 6);
static_assert(offsetof(MnDescriptorHeader, base) == 8);
static_assert(offsetof(MnDescriptorHeader, bytes) == 16);
static_assert(offsetof(MnDescriptorHeader, address_len) == 24);
static_assert(offsetof(MnDescriptorHeader, rkey_len) == 28);
inline constexpr uint32_t kMnDescriptorMagic = 0x444e4d50;  // "PMND"
inline constexpr uint16_t kMnDescriptorVersion = 1;
// Worker addresses and packed rkeys are a few hundred bytes; more is not a descriptor.
inline constexpr uint32_t kMnDescriptorPartMax = 64 << 10;

// What a CN in another process needs to send packets to this CN's workers: grammar in
// docs/formats.md "CN descriptor". Worker i's UCP address is workers[i].
struct CnDescriptor {
  uint16_t cn = 0;
  uint16_t incarnation = 0;
  std::vector<std::vector<std::byte>> workers;

  std::vector<std::byte> Encode() const;
  // InvalidArgument with one line when `bytes` is not a descriptor.
  static Result<CnDescriptor> Decode(std::span<const std::byte> bytes);
};

struct CnDescriptorHeader {
  uint32_t magic;  // kCnDescriptorMagic
  uint16_t version;
  uint16_t cn;
  uint16_t incarnation;
  uint16_t workers;
};
static_assert(sizeof(CnDescriptorHeader) == 12);
static_assert(offsetof(CnDescriptorHeader, cn) == 6);
static_assert(offsetof(CnDescriptorHeader, incarnation) == 8);
static_assert(offsetof(CnDescriptorHeader, workers) == 10);
inline constexpr uint32_t kCnDescriptorMagic = 0x444e4350;  // "PCND"
inline constexpr uint16_t kCnDescriptorVersion = 1;
inline constexpr uint16_t kCnDescriptorWorkersMax = 64;  // ClusterConfig.workers_per_cn's bound

}  // namespace pond::ucx
