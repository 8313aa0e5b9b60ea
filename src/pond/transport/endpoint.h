// Endpoint: one worker's door to the memory pool and to the other compute nodes.
//
// One-sided verbs (READ, WRITE, CAS, FAA) are *posted*: nothing happens until the posting
// coroutine awaits Flush(). Flush sends everything posted since the last Flush as one batch per
// MN — a doorbell batch — which the MN applies in posting order, as an RDMA RC queue pair does.
// Protocols rely on that order (e.g. write the record, then the cell that points to it). The
// awaiting coroutine resumes when every batch has completed. Because a worker runs one coroutine
// at a time, the posted ops between two awaits always belong to the coroutine that awaits.
//
// Buffers: the local buffer of a READ, WRITE, or the result cell of CAS/FAA must stay where it is
// until the Flush that carries it completes (locals of the awaiting coroutine are fine). Not
// freed, and not moved either: a std::vector that a posted op targets must not be resized,
// reassigned or grown by push_back before that Flush — its storage may move, and the op then
// lands in freed memory (or reads it) with nothing in the answers to show it. Size every such
// buffer before posting the first op into it. `make asan` catches a breach at the Flush.
//
// Messages: Send() buffers a message to another CN worker; at the end of the scheduling round all
// messages to one destination leave as one packet (docs/formats.md "CN packet"). Incoming packets
// are unpacked in Poll() and each message is handed to the handler registered for its kind
// (message kinds are listed in docs/formats.md "Message kinds").
//
// Thread rules: an Endpoint belongs to one worker thread and its Scheduler.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "pond/base/assert.h"
#include "pond/base/relaxed_counter.h"
#include "pond/runtime/doorbell.h"
#include "pond/runtime/scheduler.h"
#include "pond/status.h"
#include "pond/transport/gaddr.h"
#include "pond/transport/packet.h"

namespace pond {

enum class Verb : uint8_t { kRead = 0, kWrite = 1, kCas = 2, kFaa = 3 };
inline constexpr int kNumVerbs = 4;
const char* VerbName(Verb v);

// A posted one-sided operation.
struct Op {
  Verb verb;
  uint32_t len;   // bytes for READ/WRITE; 8 for atomics
  GAddr addr;     // remote address
  void* local;    // READ: destination; WRITE: source (const); CAS/FAA: result cell
  uint64_t arg0;  // CAS: expected; FAA: addend
  uint64_t arg1;  // CAS: desired
};

// Addresses one worker (coordinator) of one compute node.
struct WorkerAddr {
  uint16_t cn = 0;
  uint16_t worker = 0;
  friend bool operator==(WorkerAddr a, WorkerAddr b) {
    return a.cn == b.cn && a.worker == b.worker;
  }
  uint32_t Packed() const { return (uint32_t{cn} << 16) | worker; }
};

// A CN-to-CN request unanswered this long is sent again, for messages may be lost (the
// simulator's drop faults, a real network's). It is far above a round trip under load (tens of
// microseconds), so a request is resent rarely unless a message really was lost; every receiver
// treats a copy as a copy (docs/formats.md says how each does).
inline constexpr uint64_t kResendAfterNs = 1'000'000;

struct Message {
  WorkerAddr from;
  uint16_t kind;
  std::span<const std::byte> payload;
};
using MessageHandler = std::function<void(const Message&)>;

// Counted by the endpoint's thread; any thread may read them while it runs (a serving daemon's
// metrics), which is why they are RelaxedCounters.
struct EndpointStats {
  RelaxedCounter ops[kNumVerbs];
  RelaxedCounter bytes[kNumVerbs];
  RelaxedCounter batches;  // doorbell batches (one per MN per Flush)
  RelaxedCounter flushes;
  RelaxedCounter messages_sent;
  RelaxedCounter packets_sent;
  RelaxedCounter messages_received;
  RelaxedCounter packets_received;
  RelaxedCounter packets_refused;  // from a sender incarnation the accept filter refused
  // Dropped unread: packets that do not parse (or were meant for another worker), messages of a
  // kind with no handler, and messages their handler could not read (CountMalformed). Pond's
  // own senders never make one, so a run that counts any has found a bug (bench::RunWorkload
  // fails it); only a member of the cluster can send one at all (the peer token, docs/deploy.md).
  RelaxedCounter messages_malformed;
  void Merge(const EndpointStats& o);
};

class Endpoint : public Poller {
 public:
  // Tracks one Flush until all of its per-MN batches complete.
  struct Completion {
    std::coroutine_handle<> waiter;
    Status status;
    int outstanding = 0;
    // bit i: MN i did not answer (it is down); status is Unavailable. 64 bits: MNs fail to
    // answer only in clusters that run the membership machine, of at most 64 MNs
    // (kMembershipNodesMax, include/pond/cluster.h).
    uint64_t unreachable = 0;
  };
  // A Flush's outcome, with which MNs could not be reached (see FlushReporting).
  struct FlushResult {
    Status status;
    uint64_t unreachable = 0;
  };

  Endpoint(WorkerAddr self, Scheduler& sched) : self_(self), sched_(sched) {}
  ~Endpoint() override = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  void Read(GAddr from, void* to, uint32_t len) { Post(Op{Verb::kRead, len, from, to, 0, 0}); }
  void Write(GAddr to, const void* from, uint32_t len) {
    Post(Op{Verb::kWrite, len, to, const_cast<void*>(from), 0, 0});
  }
  // *old receives the value before the operation; the CAS succeeded iff *old == expected.
  void Cas(GAddr at, uint64_t expected, uint64_t desired, uint64_t* old) {
    Post(Op{Verb::kCas, 8, at, old, expected, desired});
  }
  void Faa(GAddr at, uint64_t add, uint64_t* old) { Post(Op{Verb::kFaa, 8, at, old, add, 0}); }

  size_t pending() const { return pending_count_; }

  // What Flush and FlushReporting share: submit on suspend, resume when every batch is done.
  struct FlushAwaiter {
    Endpoint* ep;
    Completion c;
    bool await_ready() const noexcept { return ep->pending_count_ == 0; }
    void await_suspend(std::coroutine_handle<> h) {
      c.waiter = h;
      ep->SubmitPending(&c);
    }
  };
  // co_await Flush(): carry out all posted ops; the Status is the first error of any batch (an
  // op outside the MN's region fails its batch from that op on, like an RDMA QP error).
  auto Flush() {
    struct Awaiter : FlushAwaiter {
      Status await_resume() { return std::move(c.status); }
    };
    return Awaiter{{this, {}}};
  }
  // co_await FlushReporting(): Flush, also saying which MNs did not answer. A batch to an MN
  // that is down fails with Unavailable after the transport's timeout, its ops undone or done,
  // unknown: a committing writer waits until such an MN is declared failed and then counts its
  // writes to the MNs that answered (txn/mvcc_txn.cc).
  auto FlushReporting() {
    struct Awaiter : FlushAwaiter {
      FlushResult await_resume() { return {std::move(c.status), c.unreachable}; }
    };
    return Awaiter{{this, {}}};
  }

  // Copies into `*into` the WRITEs posted from now to the next Flush — not ops posted before,
  // which may be another coroutine's — for PostAgain. For a commit round that an MN did not
  // answer: a link between hosts that was down for a while may be back before anyone declares
  // that MN, and only the round posted again then ends the commit (txn/mvcc_txn.cc). The caller
  // must hold locks on all it writes and keep the sources unchanged: written again, the WRITEs
  // change nothing. Whether or not a Flush came, StopKeeping(into) must follow.
  void KeepWrites(std::vector<Op>* into);
  void StopKeeping(const std::vector<Op>* into) {
    if (keep_into_ == into) keep_into_ = nullptr;
  }
  // Whether the next Flush copies its WRITEs to `into` (KeepWrites, no Flush since).
  bool Keeping(const std::vector<Op>* into) const { return keep_into_ == into; }
  // Posts again those of `ops` that go to an MN in `mns` (bit i: MN i).
  void PostAgain(const std::vector<Op>& ops, uint64_t mns);

  void Send(WorkerAddr to, uint16_t kind, std::span<const std::byte> payload);
  // Registers the handler for one message kind; a message of a kind with no handler is dropped
  // and counted as malformed.
  void OnMessage(uint16_t kind, MessageHandler handler);
  // A handler met a message it cannot read (a size that does not add up, a value out of range):
  // it drops the message, changes nothing, and says so here. Never an assertion: a message
  // comes from another process, and one bad message must not take this CN down.
  void CountMalformed() { stats_.messages_malformed++; }
  // Membership (cluster/): the incarnation of this endpoint's CN, stamped on every packet it
  // sends, and a filter every arriving packet passes first — false drops the packet whole, as
  // from a sender incarnation that has been declared dead. Neither is used by default.
  void set_incarnation(uint16_t incarnation) { incarnation_ = incarnation; }
  uint16_t incarnation() const { return incarnation_; }
  using PacketFilter = std::function<bool(WorkerAddr from, uint16_t incarnation)>;
  void SetPacketFilter(PacketFilter accept) { accept_ = std::move(accept); }

  // Poller: flush buffered messages at the end of a round; deliver completions and packets.
  void EndRound() override;
  bool Poll() override;

  // A doorbell this endpoint's packets ring as they arrive, for a worker that sleeps while idle
  // (node::ServingInbox); null for none. True if the backend rings it; a backend whose arrivals
  // the worker must poll for (UCX, the simulator) has nothing to ring, and says false.
  virtual bool SetDoorbell(Doorbell* /*bell*/) { return false; }

  WorkerAddr self() const { return self_; }
  Scheduler& scheduler() { return sched_; }
  const EndpointStats& stats() const { return stats_; }

 protected:
  // Backends implement these.
  // Carry out one MN's ops in order, then call Complete(done, status) — now or later. The
  // backend may keep `ops` by swapping it with a vector of its own (which the endpoint then
  // clears and reuses); otherwise the endpoint clears it after the call.
  virtual void SubmitBatch(MnId mn, std::vector<Op>& ops, Completion* done) = 0;
  virtual void SendPacket(WorkerAddr to, PacketBuffer packet) = 0;
  // Hand every arrived packet to Deliver() and finished batches to Complete(); true if any.
  virtual bool PollBackend() = 0;

  // `batches` of c's batches are done; status is the first error among them, if any.
  void Complete(Completion* c, Status status, int batches = 1);
  // `batches` of c's batches are done, and MNs `mns` did not answer them.
  void CompleteUnreachable(Completion* c, uint64_t mns, int batches) {
    c->unreachable |= mns;
    Complete(c, Unavailable("an MN did not answer: it is down"), batches);
  }
  // Complete(c, Status::Ok(), batches) without making and moving a Status.
  void CompleteOk(Completion* c, int batches = 1) {
    POND_ASSERT(c->outstanding >= batches && batches > 0);
    c->outstanding -= batches;
    if (c->outstanding == 0) sched_.Ready(c->waiter);
  }
  void Deliver(std::span<const std::byte> packet);
  // A backend gives each delivered packet's buffer back here; Send builds packets in them.
  void RecycleBuffer(PacketBuffer&& buf) { buffer_pool_->Give(std::move(buf)); }
  // A spare buffer, for a backend that copies arriving packets into buffers of its own.
  PacketBuffer TakeBuffer() { return buffer_pool_->Take(); }
  // Makes this endpoint take and give buffers from `pool` (which must outlive it) instead of
  // its own: for a backend whose endpoints all run on one thread.
  void UseBufferPool(PacketBufferPool* pool) { buffer_pool_ = pool; }

 private:
  void Post(const Op& op) {
    const MnId mn = op.addr.mn();
    if (mn >= by_mn_.size()) by_mn_.resize(size_t{mn} + 1);
    std::vector<Op>& ops = by_mn_[mn];
    if (ops.empty()) posted_mns_.push_back(mn);
    ops.push_back(op);
    pending_count_++;
    stats_.ops[static_cast<int>(op.verb)]++;
    stats_.bytes[static_cast<int>(op.verb)] += op.len;
  }
  void SubmitPending(Completion* c);

  WorkerAddr self_;
  Scheduler& sched_;
  // Posted ops are grouped by MN as they are posted (by_mn_[mn], in posting order), so a Flush
  // need not sort them; posted_mns_ lists the MNs with ops since the last Flush.
  std::vector<std::vector<Op>> by_mn_;
  std::vector<MnId> posted_mns_;
  size_t pending_count_ = 0;
  // KeepWrites: where the next Flush copies its WRITEs to, and per MN how many ops it had then.
  std::vector<Op>* keep_into_ = nullptr;
  std::vector<size_t> keep_from_;
  std::vector<std::pair<uint16_t, MessageHandler>> handlers_;  // few kinds: a scan beats a map
  static constexpr size_t kSpareBuffersMax = 64;               // in an endpoint's own pool
  struct OutBuffer {
    WorkerAddr to;
    uint16_t count = 0;
    PacketBuffer bytes;
  };
  std::vector<OutBuffer> out_;  // one per destination with messages this round
  uint16_t incarnation_ = 0;
  PacketFilter accept_;
  PacketBufferPool own_buffer_pool_{kSpareBuffersMax};
  PacketBufferPool* buffer_pool_ = &own_buffer_pool_;
  EndpointStats stats_;
};

}  // namespace pond
