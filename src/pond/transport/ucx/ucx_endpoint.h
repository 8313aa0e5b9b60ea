// UcxEndpoint: one CN worker's Endpoint on the `ucx` fabric, with a UCP worker of its own
// (ucx_fabric.h says how it keeps the Endpoint contract). Internal to this folder: UcxFabric
// creates them, and they reach into its directory of workers and MNs.
#pragma once

#include <chrono>
#include <memory>
#include <unordered_map>
#include <vector>

#include "pond/status.h"
#include "pond/transport/endpoint.h"
#include "pond/transport/ucx/peer_token.h"
#include "pond/transport/ucx/ucx_context.h"
#include "pond/transport/ucx/ucx_fabric.h"

namespace pond::ucx {

// How long teardown waits for the endpoints to close before it lets the workers' destruction
// reclaim them.
inline constexpr auto kCloseWait = std::chrono::seconds(2);

class UcxEndpoint final : public Endpoint {
 public:
  UcxEndpoint(UcxFabric& fabric, WorkerAddr self, Scheduler& sched, std::unique_ptr<Worker> worker)
      : Endpoint(self, sched), fabric_(fabric), worker_(std::move(worker)) {}

  // Starts taking packets and connects to every MN it can. An MN that cannot be reached now (its
  // daemon is dead, or not listening yet) is not a reason to fail the CN: that MN is down as far
  // as its batches go, and the connection is tried again at its next batch, at most once per
  // kReconnectEvery.
  Status Init();

  ~UcxEndpoint() override;

 protected:
  void SubmitBatch(MnId mn, std::vector<Op>& ops, Completion* done) override;

  void SendPacket(WorkerAddr to, PacketBuffer packet) override;

  void EndRound() override;

  bool PollBackend() override;

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
    // Sent as messages (SendAsMessage): the last one's tag, the connection it went by, and its
    // first op (it carried those up to `next`).
    uint64_t tag = 0;
    ucp_ep_h sent_on = nullptr;
    size_t sent_from = 0;
  };
  struct Closing {  // a down MN's connection, closed by force (CloseDownMns)
    ucs_status_ptr_t request;
    ucp_rkey_h rkey;  // used by the ops it cancels: destroyed once the close is done
  };
  struct SendSlot {
    UcxEndpoint* ep;
    PacketBuffer bytes;
    bool counted;     // in the fabric's packets in flight
    uint64_t tag;     // a batch message's; 0: a packet
    AmHeader header;  // the message's UCX header, which must outlive the send
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
  void Continue(std::unique_ptr<Batch> b);

  // UCX checks nothing: an op outside the region, or an unaligned atomic, fails its batch here
  // from that op on, as the local fabric's does.
  Status Check(MnId mn, const Op& op) const;

  // Sends the batch's next ops (from b->next, as many as fit kBatchMessageMax, and none from
  // one that fails Check) as one message to its MN, which applies them in order and answers
  // (OnBatchReply); the answer sends the next message, if any. Ops longer than one message may
  // hold must have been cut first (SplitLargeOps).
  void SendAsMessage(std::unique_ptr<Batch> b, const Mn& m);

  // Ends every awaiting batch that `which` selects with `why` (unreachable if it says so): its
  // ops may or may not have been applied, as after an RDMA queue pair's retry timeout.
  template <typename Pred>
  void FailAwaiting(Pred which, const Status& why);

  static void OnMnError(void* arg, ucp_ep_h ep, ucs_status_t /*status*/);

  void FailAwaitingOnFailedEps();

  static ucs_status_t OnBatchReply(void* arg, const void* header, size_t header_length, void* data,
                                   size_t length, const ucp_am_recv_param_t* param);

  // Posts one op; its completion is learned from the flush that ends its segment (on a mapped
  // region the op is done here, and there is no flush).
  Status PostOp(const Mn& m, Op& op);

  std::unique_ptr<Batch> TakeBatch();

  void Finish(std::unique_ptr<Batch> b, ucs_status_t flushed);

  static void OnFlushed(void* request, ucs_status_t status, void* user_data);

  // Sends `slot`'s bytes as active message `id` with the slot's header; Sent finishes the slot,
  // now or from OnSent.
  void SendAm(ucp_ep_h ep, unsigned id, SendSlot* slot, uint32_t flags);
  void Sent(SendSlot* slot, ucs_status_t status);

  static void OnSent(void* request, ucs_status_t status, void* user_data);

  // Who takes this worker's packets or batch replies (whole messages only: Pond sends them
  // eagerly).
  ucs_status_t SetHandler(unsigned id, ucp_am_recv_callback_t cb, void* arg);

  static ucs_status_t DropPacket(void*, const void*, size_t, void*, size_t,
                                 const ucp_am_recv_param_t*);

  // Closes every connection of this endpoint at once, cancelling what is in flight on them (its
  // callbacks run here), and leaves none for the fabric to close. False if some request is still
  // in flight after kCloseWait: over shared memory a send that a peer never takes (it exited, or
  // stopped progressing, and its queue is full) outlives even a forced close, as UCX cancels
  // requests only on endpoints with peer error handling.
  bool ForceClose();

  // What ForceClose could not cancel may still call back into this endpoint, but only from this
  // worker's progress: the worker (and its connections) is handed to the fabric, which never
  // progresses or destroys it, with the connections, remote keys and batches those requests
  // use, and this endpoint goes. The process leaks them; it is ending, or its peer is.
  void Abandon();

  static ucs_status_t OnPacket(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param);

  // The configuration declared MNs down (UcxFabric::SetMnDown): their connections are closed
  // by force, which cancels what waits on them — its flush callbacks run within the close or
  // at a later progress, and the batches then fail as unreachable, their ops done or not, as in
  // the simulator after a queue pair's retry timeout. Written late after all (TCP may still
  // deliver what the kernel had queued once a cut heals), they land on memory nobody reads
  // until a rejoin copies it afresh into a new process.
  void CloseDownMns();

  void ReleaseClosed();

  // MN `mn` restarted (ReplaceMn): the endpoint to its old process goes (closed with the rest),
  // and the next batch connects to the new one at once.
  void Forget(MnId mn);

  Status Connect(MnId mn);

  // Connects to an MN that could not be connected before, if it is time to try again.
  bool Reconnect(MnId mn);

  // The UCP endpoint to worker `to`, connected on first use; nullptr if `to` is unknown (a
  // worker of another process not in the directory).
  const Peer* FindPeer(WorkerAddr to);

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

}  // namespace pond::ucx
