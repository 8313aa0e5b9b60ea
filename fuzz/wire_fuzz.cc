// The decoders of what Pond's processes read from one another: the values they publish in
// ZooKeeper (MN and CN descriptors, configurations, log areas, shard lists, shard moves), and the
// batch message an MN applies for a CN over TCP (transport/ucx/batch_message.h) — the one parser
// whose input decides what is written to the region. The first byte picks the decoder.
//
// Each must answer a value or an error, never crash or read past its input; a value it accepts
// must encode and decode back to the same (where the type says what "same" is). ApplyBatch must
// keep every write inside the region it is given, which the sanitizer checks: the region is
// exactly as large as the MN's.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pond/cluster/directory.h"
#include "pond/cluster/membership.h"
#include "pond/transport/ucx/batch_message.h"
#include "pond/transport/ucx/peer_token.h"
#include "pond/transport/ucx/ucx_context.h"

namespace {

constexpr uint32_t kShards = 4096;
constexpr uint64_t kRegionBytes = 64 << 10;

void Check(bool holds) {
  if (!holds) __builtin_trap();
}

void Batch(std::span<const std::byte> request) {
  static std::vector<std::byte> region(kRegionBytes);
  std::vector<std::byte> reply;
  pond::ucx::ApplyBatch(region.data(), region.size(), request, &reply);
  Check(reply.size() >= sizeof(pond::ucx::BatchReplyHeader));
  Check(reply.size() <= pond::ucx::kBatchMessageMax);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  using namespace pond;
  switch (data[0] % 8) {
    case 0: {
      Result<ucx::MnDescriptor> d = ucx::MnDescriptor::Decode(in);
      if (d.ok()) Check(ucx::MnDescriptor::Decode(d->Encode()).ok());
      break;
    }
    case 1: {
      Result<ucx::CnDescriptor> d = ucx::CnDescriptor::Decode(in);
      if (d.ok()) Check(ucx::CnDescriptor::Decode(d->Encode()).ok());
      break;
    }
    case 2: {
      Result<cluster::Configuration> c = cluster::Configuration::Decode(in);
      if (c.ok()) {
        Result<cluster::Configuration> again = cluster::Configuration::Decode(c->Encode());
        Check(again.ok() && *again == *c);
      }
      break;
    }
    case 3: {
      Result<cluster::LogAreas> l = cluster::LogAreas::Decode(in);
      if (l.ok()) Check(cluster::LogAreas::Decode(l->Encode()).ok());
      break;
    }
    case 4: {
      Result<std::vector<uint32_t>> ids = cluster::DecodeShardList(in, kShards);
      if (ids.ok()) {
        Result<std::vector<uint32_t>> again =
            cluster::DecodeShardList(cluster::EncodeShardList(*ids), kShards);
        Check(again.ok() && *again == *ids);
      }
      break;
    }
    case 5: {
      Result<cluster::MoveRecord> m = cluster::MoveRecord::Decode(in, kShards);
      if (m.ok()) {
        Result<cluster::MoveRecord> again = cluster::MoveRecord::Decode(m->Encode(), kShards);
        Check(again.ok() && *again == *m);
      }
      break;
    }
    case 6:
      Batch(in);
      break;
    default: {
      // A message header from a peer: admitted only with the token, whatever its length.
      const ucx::PeerToken token =
          ucx::DerivePeerToken("fuzz-secret-fuzz-secret-fuzz-secret", "pond");
      if (ucx::Admit(in.data(), in.size(), token).has_value()) {
        Check(in.size() == sizeof(ucx::AmHeader));
      }
      break;
    }
  }
  return 0;
}
