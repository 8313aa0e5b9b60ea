#include "pond/transport/local/local_fabric.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "pond/base/assert.h"
#include "pond/transport/remote_copy.h"

namespace pond {

class LocalEndpoint final : public Endpoint {
 public:
  LocalEndpoint(LocalFabric& fabric, WorkerAddr self, Scheduler& sched, LocalFabric::Mailbox* inbox)
      : Endpoint(self, sched), fabric_(fabric), inbox_(inbox) {}

 protected:
  void SubmitBatch(MnId mn, std::vector<Op>& ops, Completion* done) override {
    Status status;
    if (mn >= fabric_.num_mns()) {
      status = InvalidArgument("no MN " + std::to_string(mn));
    } else {
      std::byte* base = fabric_.region(mn);
      uint64_t size = fabric_.region_bytes();
      for (const Op& op : ops) {
        uint64_t off = op.addr.offset();
        if (off > size || op.len > size - off) {
          status = InvalidArgument("remote access outside MN " + std::to_string(mn) + " region");
          break;
        }
        switch (op.verb) {
          case Verb::kRead:
            RemoteLoad(op.local, base + off, op.len);
            break;
          case Verb::kWrite:
            RemoteStore(base + off, op.local, op.len);
            break;
          case Verb::kCas:
          case Verb::kFaa: {
            if ((off & 7) != 0) {
              status = InvalidArgument("atomic on unaligned remote address");
              break;
            }
            uint64_t old = op.verb == Verb::kCas ? RemoteCas(base + off, op.arg0, op.arg1)
                                                 : RemoteFaa(base + off, op.arg0);
            std::memcpy(op.local, &old, 8);
            break;
          }
        }
        if (!status.ok()) break;
      }
    }
    Complete(done, std::move(status));
  }

  void SendPacket(WorkerAddr to, PacketBuffer packet) override {
    LocalFabric::Mailbox* box = fabric_.FindMailbox(to);
    POND_CHECK_MSG(box != nullptr, "message to a worker that has no endpoint");
    fabric_.in_flight_.fetch_add(1, std::memory_order_acq_rel);
    {
      std::lock_guard lock(box->mu);
      box->packets.push_back(std::move(packet));
      box->nonempty.store(true, std::memory_order_release);
    }
    if (Doorbell* bell = box->doorbell.load(std::memory_order_acquire)) bell->Ring();
  }

  bool SetDoorbell(Doorbell* bell) override {
    inbox_->doorbell.store(bell, std::memory_order_release);
    return true;
  }

  void EndRound() override {
    Endpoint::EndRound();
    if (consumed_ != 0) {
      fabric_.in_flight_.fetch_sub(consumed_, std::memory_order_acq_rel);
      consumed_ = 0;
    }
  }

  bool PollBackend() override {
    // The flag keeps an idle worker's poll to one load, not a lock.
    if (!inbox_->nonempty.load(std::memory_order_acquire)) return false;
    {
      std::lock_guard lock(inbox_->mu);
      arrived_.swap(inbox_->packets);
      inbox_->nonempty.store(false, std::memory_order_relaxed);
    }
    for (auto& p : arrived_) Deliver(p);
    // Counted down only at the end of the round (EndRound), after the answers the handlers
    // buffered have left: so "none in flight" means "all processed and answered". Counting down
    // here would open a window, between this poll and the round's end, in which nothing is in
    // flight yet an answer is about to leave — and a worker that left Cluster::Run in it would
    // never take that answer, leaving it in flight for good.
    consumed_ += arrived_.size();
    for (auto& p : arrived_) RecycleBuffer(std::move(p));
    bool any = !arrived_.empty();
    arrived_.clear();
    return any;
  }

 private:
  LocalFabric& fabric_;
  LocalFabric::Mailbox* inbox_;
  std::vector<PacketBuffer> arrived_;
  uint64_t consumed_ = 0;  // packets polled this round, still counted in flight
};

Result<std::unique_ptr<LocalFabric>> LocalFabric::Create(uint16_t num_mns, uint64_t region_bytes) {
  if (num_mns == 0) return InvalidArgument("need at least one MN");
  if (region_bytes < 4096 || region_bytes % 4096 != 0 || region_bytes > GAddr::kOffsetMask) {
    return InvalidArgument("MN region size must be a multiple of 4096 below 2^48 bytes");
  }
  std::vector<std::byte*> regions;
  for (uint16_t i = 0; i < num_mns; i++) {
    void* p = mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      for (auto* r : regions) munmap(r, region_bytes);
      return OutOfSpace("cannot map MN region of " + std::to_string(region_bytes) +
                        " bytes: " + std::strerror(err));
    }
    // Huge pages cut TLB misses on random access, as registered RDMA regions use them (§7.2).
    madvise(p, region_bytes, MADV_HUGEPAGE);
    regions.push_back(static_cast<std::byte*>(p));
  }
  return std::unique_ptr<LocalFabric>(new LocalFabric(std::move(regions), region_bytes));
}

LocalFabric::~LocalFabric() {
  for (auto* r : regions_) munmap(r, region_bytes_);
}

LocalFabric::Mailbox* LocalFabric::FindMailbox(WorkerAddr a) {
  std::lock_guard lock(directory_mu_);
  auto it = mailboxes_.find(a.Packed());
  return it == mailboxes_.end() ? nullptr : it->second.get();
}

std::unique_ptr<Endpoint> LocalFabric::CreateEndpoint(WorkerAddr self, Scheduler& sched) {
  Mailbox* box;
  {
    std::lock_guard lock(directory_mu_);
    auto& slot = mailboxes_[self.Packed()];
    POND_CHECK_MSG(slot == nullptr, "two endpoints for one worker address");
    slot = std::make_unique<Mailbox>();
    box = slot.get();
  }
  auto ep = std::make_unique<LocalEndpoint>(*this, self, sched, box);
  sched.AddPoller(ep.get());
  return ep;
}

}  // namespace pond
