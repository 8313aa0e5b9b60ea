// Who may talk to a cluster's UCX workers. A cluster with a secret (docs/deploy.md "Security")
// derives a peer token from it, and every active message between its processes — a CN's packet,
// a batch message and its reply, the peer hello — carries that token in its UCX header; a
// message without it is dropped unread. An MN daemon publishes its descriptor without its region
// key, and hands the key only to a CN that shows the token in the first exchange (AskRegionKey),
// so a stranger who reads the descriptor from ZooKeeper can connect to the MN's worker and learn
// nothing. Grammar in docs/formats.md "Peer token and peer hello".
//
// The token proves membership; it does not hide the traffic: UCX's TCP carries it, like the
// data, in the clear, and over RDMA the NIC checks only the region key. Both fabrics are trusted
// against eavesdroppers (docs/deploy.md says so).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pond/status.h"
#include "pond/transport/ucx/ucx_context.h"

namespace pond::ucx {

// All zero: a cluster without a secret, whose workers take any peer's messages.
using PeerToken = std::array<std::byte, 32>;

// HMAC-SHA256 under `secret` of "pond peer token 1" and the cluster's name: one token per cluster
// and secret, never the secret itself. All zero for an empty secret.
PeerToken DerivePeerToken(std::string_view secret, std::string_view cluster);
bool IsOpen(const PeerToken& t);

// Every Pond active message's UCX header.
struct AmHeader {
  uint64_t word;    // a batch message's tag (request and reply); a CN packet's counted flag
  PeerToken token;  // the sender's cluster's
};
static_assert(sizeof(AmHeader) == 40);
static_assert(offsetof(AmHeader, token) == 8);

// The header's word when `header` is an AmHeader carrying `mine` (compared in constant time, so
// that a stranger cannot find the token byte by byte); nullopt when it is not.
std::optional<uint64_t> Admit(const void* header, size_t header_length, const PeerToken& mine);

// The peer hello's active messages (a CN packet is 1, batch messages 2 and 3). The request has
// no data; the reply's data is the packed region key, or nothing when the MN refuses — and then
// its header's token is all zero, so that a refusal tells a stranger nothing.
inline constexpr unsigned kHelloAmId = 4;
inline constexpr unsigned kHelloReplyAmId = 5;

// The peer hello: a CN shows MN `d` the token and gets its packed region key back.
// PermissionDenied when the MN refuses it (another cluster's token, or none); Unavailable when
// the MN does not answer within `wait`.
Result<std::vector<std::byte>> AskRegionKey(Context& ctx, const MnDescriptor& d,
                                            const PeerToken& token, bool peer_errors,
                                            std::chrono::milliseconds wait);

}  // namespace pond::ucx
