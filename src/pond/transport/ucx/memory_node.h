// UcxMemoryNode: one memory node on UCX — a region mapped by UCX (so that on shared memory it
// lives in a segment other processes on the host can map, and on RDMA it is registered with the
// NIC), and a UCP worker kept progressing by a thread of its own. The MN runs no transaction
// logic: with shared memory or RDMA the CNs' operations never reach its CPU; with TCP, UCX
// carries them out in software on this worker, which is why it must progress.
//
// Over TCP a CN sends a whole doorbell batch as one message instead (batch_message.h), which this
// MN's thread applies to the region and answers — if it carries the cluster's peer token
// (peer_token.h), as must the peer hello by which a CN asks for the region key the MN's published
// descriptor leaves out.
//
// The thread sleeps on the worker's event descriptor when nothing arrives, so an idle MN costs
// no CPU. `pond mn` is this class plus a config, and the embedded cluster on UCX starts one per
// MN in its own process.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>

#include "pond/status.h"
#include "pond/transport/ucx/peer_token.h"
#include "pond/transport/ucx/ucx_context.h"

namespace pond::ucx {

class UcxMemoryNode {
 public:
  // Maps a zeroed region of `bytes` and starts serving it.
  static Result<std::unique_ptr<UcxMemoryNode>> Start(MnId mn, uint64_t bytes,
                                                      const UcxOptions& options);
  // Stops the worker's thread, then unmaps the region.
  ~UcxMemoryNode();
  UcxMemoryNode(const UcxMemoryNode&) = delete;
  UcxMemoryNode& operator=(const UcxMemoryNode&) = delete;

  const MnDescriptor& descriptor() const { return descriptor_; }
  // What the MN publishes for CNs to find it: the descriptor, without the region key when the
  // cluster has a peer token (the key then goes only to the peer hello's members).
  MnDescriptor published_descriptor() const;
  // The region's bytes, for the MN's own start-up work (formatting) and for tests.
  std::byte* region() const { return region_; }
  // Batch messages of this cluster's CNs applied and answered so far (any thread may read it).
  uint64_t batches_answered() const { return batches_answered_.load(std::memory_order_relaxed); }

 private:
  UcxMemoryNode() = default;
  void Serve();
  // A CN's batch message (kBatchAmId): applied and answered at once, on the serving thread.
  static ucs_status_t OnBatch(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param);
  // A CN's peer hello (kHelloAmId): answered with the region key if it shows the token.
  static ucs_status_t OnHello(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param);

  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Worker> worker_;
  ucp_mem_h mem_ = nullptr;
  std::byte* region_ = nullptr;
  MnDescriptor descriptor_;
  std::atomic<uint64_t> batches_answered_{0};
  int stop_fd_ = -1;               // an eventfd: written once to wake the thread and stop it
  bool arm_failure_said_ = false;  // the serving thread's
  bool refusal_said_ = false;      // the serving thread's
  PeerToken token_{};
  std::thread thread_;
};

}  // namespace pond::ucx
