// UcxFabric: the `ucx` transport. Every CN worker has a UCP worker of its own; one-sided verbs go
// to the MNs' regions as UCP RMA and atomics, and CN messages to other CN workers as UCP active
// messages. The protocol code above does not know: it sees the Endpoint contract (endpoint.h),
// which this backend keeps as follows.
//
//   - A doorbell batch is the MN's posted ops, each but the first behind ucp_worker_fence (UCX
//     orders nothing by itself, and protocols rely on posting order), completed by one
//     ucp_ep_flush_nbx: the flush's callback completes the batch.
//   - READ/WRITE are ucp_get_nbx/ucp_put_nbx, CAS is UCP_ATOMIC_OP_CSWAP and FAA is
//     UCP_ATOMIC_OP_ADD with a reply buffer (ucp_atomic_op_nbx), all on the MN's packed rkey.
//   - An op outside the MN's region, or an unaligned atomic, fails its batch from that op on
//     (checked here: UCX checks nothing); an MN whose endpoint fails answers Unavailable.
//   - Over TCP alone (UCX_TLS "tcp"), a batch to an MN goes instead as active messages that
//     the MN's thread applies and answers (batch_message.h): one, or for a batch larger than
//     kBatchMessageMax (a bulk load's) several, each sent once the one before is answered. No
//     verb goes as UCX RMA there. An MN whose connection fails, is declared down or is replaced
//     fails the batches awaiting its answer as unreachable.
//   - A packet is one active message (eager, so it always arrives whole in the handler), copied
//     into a buffer at arrival and delivered by Poll.
//
// On shared memory (UCX_TLS=shm) the regions are mapped into this process (ucp_rkey_ptr), and
// every verb is done here as the local fabric does it (remote_copy.h): UCX's own PUT and GET
// there are memcpy, whose byte order would let a torn READ pass the version check. On TCP the
// MN's worker applies batch messages; on RDMA the NIC does the verbs.
//
// Setup rules as for the local fabric: create every endpoint before workers start sending; each
// endpoint then belongs to its worker's thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "pond/status.h"
#include "pond/transport/fabric.h"
#include "pond/transport/ucx/memory_node.h"
#include "pond/transport/ucx/peer_token.h"
#include "pond/transport/ucx/ucx_context.h"

namespace pond::ucx {

class UcxFabric final : public Fabric {
 public:
  // Starts `num_mns` memory nodes inside this process (a UcxMemoryNode each, with its own UCP
  // context and thread) and reaches them over UCX: the embedded cluster on the ucx transport.
  static Result<std::unique_ptr<UcxFabric>> CreateWithLocalMns(uint16_t num_mns,
                                                               uint64_t region_bytes,
                                                               const UcxOptions& options);
  // Reaches MNs served elsewhere (other processes or hosts) by their descriptors, one per MN in
  // MN order, all of one size. A descriptor without its region key (a daemon of a cluster with a
  // secret publishes none) is completed by the peer hello (peer_token.h): PermissionDenied when
  // the MN refuses this process's token.
  static Result<std::unique_ptr<UcxFabric>> Connect(std::vector<MnDescriptor> mns,
                                                    const UcxOptions& options);
  ~UcxFabric() override;
  UcxFabric(const UcxFabric&) = delete;
  UcxFabric& operator=(const UcxFabric&) = delete;

  uint16_t num_mns() const override { return static_cast<uint16_t>(mns_.size()); }
  uint64_t region_bytes() const override { return mns_.front().bytes; }
  // The region of an MN served by this process; nullptr for one served elsewhere.
  std::byte* region(MnId mn) override;
  // An MN started in this process (CreateWithLocalMns), or null: for tests.
  const UcxMemoryNode* local_mn(MnId mn) const {
    return mn < local_mns_.size() ? local_mns_[mn].get() : nullptr;
  }
  std::unique_ptr<Endpoint> CreateEndpoint(WorkerAddr self, Scheduler& sched) override;
  // Packets between workers of this process sent and not yet processed (those to and from
  // other processes are not counted: each process knows only its own).
  uint64_t packets_in_flight() const override { return in_flight_.load(std::memory_order_acquire); }

  // CNs spread over processes (`pond cn` daemons, one CN each): what another process needs to
  // reach the workers of CN `cn` here (every endpoint of it created), and the workers of a CN
  // served elsewhere. Once a remote CN is added the fabric is open: a packet to a worker it
  // does not know is dropped (its CN has not published, or withdrew) rather than a bug.
  Result<CnDescriptor> Describe(uint16_t cn, uint16_t incarnation);
  // A CN added again (restarted as a new process) replaces its earlier workers' addresses.
  Status AddRemoteCn(const CnDescriptor& d);
  // MN `d.mn` restarted as a new process (blank memory: docs/recovery.md "MN restart"): its
  // descriptor replaces the old one, and every endpoint reconnects at its next batch to it.
  // InvalidArgument for an MN this fabric does not have, or a region of another size; the
  // peer hello's refusals as for Connect.
  Status ReplaceMn(MnDescriptor d);
  // Declared down, MN `mn`'s connections are closed by force at every endpoint's next poll,
  // which fails the batches waiting on them as unreachable, and later batches to it fail at
  // once until it is let back in (its rejoin; a ReplaceMn comes first). Over TCP nothing else
  // would end them: the kernel retransmits to a host beyond a cut for many minutes.
  void SetMnDown(MnId mn, bool down) override;
  bool open() const { return open_.load(std::memory_order_acquire); }

 private:
  friend class UcxEndpoint;
  UcxFabric() = default;
  Status Init(const UcxOptions& options);
  // Asks MN `d` for its region key unless `d` has it (the peer hello).
  Status Unseal(MnDescriptor& d);
  // How long the peer hello waits for an MN's answer: an MN that is up answers in a round trip.
  static constexpr std::chrono::milliseconds kHelloWait{5000};
  struct WorkerEntry {
    std::vector<std::byte> address;  // its UCP worker address
    bool remote = false;             // in another process
  };
  // A CN worker's directory entry, if it has one.
  std::optional<WorkerEntry> FindWorker(WorkerAddr a);
  // What a destroyed endpoint leaves: its worker and the UCP endpoints on it. They are closed
  // with everyone else's when the fabric goes, while every peer's worker still exists: an
  // endpoint closed after its peer's worker is gone waits out a timeout and logs an error.
  // Where a CN worker's MN connections report that they failed (UcxEndpoint::OnMnError). It
  // lives as long as the worker, for UCX may report while the fabric closes a retired worker's
  // connections.
  struct EpErrors {
    std::vector<ucp_ep_h> failed;
  };
  struct Retired {
    std::unique_ptr<EpErrors> errors;  // first, so that it goes last
    std::unique_ptr<Worker> worker;
    std::vector<ucp_ep_h> eps;
  };
  void Retire(Retired r);
  // A worker with requests UCX could not cancel (UcxEndpoint::Abandon): never progressed again,
  // never destroyed.
  void Abandon(std::unique_ptr<Worker> w, std::unique_ptr<EpErrors> errors);
  uint32_t generation(uint16_t cn) const {
    return cn < generations_.size() ? generations_[cn].load(std::memory_order_acquire) : 0;
  }
  uint32_t mn_generation(MnId mn) const {
    return mn < mn_generations_.size() ? mn_generations_[mn].load(std::memory_order_acquire) : 0;
  }
  bool mn_down(MnId mn) const {
    return mn < mn_down_.size() && mn_down_[mn].load(std::memory_order_acquire);
  }
  uint32_t mn_down_changes() const { return mn_down_changes_.load(std::memory_order_acquire); }
  // MN `mn`'s descriptor now (ReplaceMn may change it from another thread).
  MnDescriptor MnNow(MnId mn);

  std::vector<std::unique_ptr<UcxMemoryNode>> local_mns_;  // empty when connected to daemons
  std::vector<MnDescriptor> mns_;  // guarded by directory_mu_ once endpoints exist
  std::unique_ptr<Context> ctx_;   // the CN workers' context
  std::mutex directory_mu_;
  std::unordered_map<uint32_t, WorkerEntry> workers_;  // by WorkerAddr::Packed()
  std::vector<Retired> retired_;                       // guarded by directory_mu_
  std::vector<std::unique_ptr<Worker>> abandoned_;     // guarded by directory_mu_
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<bool> open_{false};
  bool peer_errors_ = false;       // endpoints ask UCX to report a peer's failure (not on shm)
  bool verbs_by_message_ = false;  // batches to unmapped MNs go as messages (batch_message.h)
  PeerToken peer_token_{};         // UcxOptions::peer_token
  std::array<std::atomic<uint32_t>, 64> generations_{};     // by CN: AddRemoteCn calls
  std::array<std::atomic<uint32_t>, 64> mn_generations_{};  // by MN: ReplaceMn calls
  std::array<std::atomic<bool>, 64> mn_down_{};             // by MN: SetMnDown
  std::atomic<uint32_t> mn_down_changes_{0};                // endpoints look again when it moves
};

}  // namespace pond::ucx
