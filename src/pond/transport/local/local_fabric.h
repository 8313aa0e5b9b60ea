// LocalFabric: the `local` transport. MN regions are memory of this process, shared by every
// worker thread the way CXL memory is shared by hosts; CN messages go through in-process
// mailboxes. One-sided ops are carried out by the posting thread itself at Flush, with the
// memory semantics of remote_copy.h, so concurrent workers see exactly what the formats allow.
//
// Setup rules: create every endpoint (CreateEndpoint) before worker threads start sending; the
// mailbox directory is then read-only. Endpoints are used by their own worker thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "pond/status.h"
#include "pond/transport/endpoint.h"
#include "pond/transport/fabric.h"

namespace pond {

class LocalFabric final : public Fabric {
 public:
  // Maps `num_mns` regions of `region_bytes` each (lazily backed by the OS).
  static Result<std::unique_ptr<LocalFabric>> Create(uint16_t num_mns, uint64_t region_bytes);
  ~LocalFabric() override;
  LocalFabric(const LocalFabric&) = delete;
  LocalFabric& operator=(const LocalFabric&) = delete;

  uint16_t num_mns() const override { return static_cast<uint16_t>(regions_.size()); }
  uint64_t region_bytes() const override { return region_bytes_; }
  // For setup and tests only: direct access to a region's bytes. Protocol code uses Endpoints.
  std::byte* region(MnId mn) override { return regions_[mn]; }

  std::unique_ptr<Endpoint> CreateEndpoint(WorkerAddr self, Scheduler& sched) override;

  // Packets sent and not yet taken by their receiver: lets a cluster tell when the last one-way
  // messages (e.g. asynchronous unlocks) have been processed.
  uint64_t packets_in_flight() const override { return in_flight_.load(std::memory_order_acquire); }

 private:
  friend class LocalEndpoint;
  struct Mailbox {
    std::atomic<bool> nonempty{false};
    std::mutex mu;
    std::vector<PacketBuffer> packets;
    std::atomic<Doorbell*> doorbell{nullptr};  // rung by each packet put here (SetDoorbell)
  };

  LocalFabric(std::vector<std::byte*> regions, uint64_t region_bytes)
      : regions_(std::move(regions)), region_bytes_(region_bytes) {}
  Mailbox* FindMailbox(WorkerAddr a);

  std::vector<std::byte*> regions_;
  uint64_t region_bytes_;
  std::mutex directory_mu_;
  std::unordered_map<uint32_t, std::unique_ptr<Mailbox>> mailboxes_;
  std::atomic<uint64_t> in_flight_{0};
};

}  // namespace pond
