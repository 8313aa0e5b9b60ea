#include "pond/transport/sim/sim_fabric.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "pond/base/assert.h"

namespace pond {

class SimEndpoint final : public Endpoint {
 public:
  void MarkControlPlane() { control_ = true; }

  SimEndpoint(SimFabric& fabric, WorkerAddr self, Scheduler& sched)
      : Endpoint(self, sched),
        fabric_(fabric),
        // A restarted CN's endpoints draw a stream of their own (the incarnation is in the key).
        rng_(fabric.engine().StreamRng(0x51e0000000000000ULL |
                                       uint64_t{fabric.Generation(self.cn)} << 32 | self.Packed())),
        // Jitter draws from a stream of its own, so turning it on leaves every other draw of a
        // seed (message faults, crash landings) as it was.
        jitter_rng_(fabric.engine().StreamRng(
            0x717e000000000000ULL | uint64_t{fabric.Generation(self.cn)} << 32 | self.Packed())),
        qp_arrival_ns_(fabric.num_mns(), 0) {
    auto f = sim::FaultModel::Create(FaultConfigOf(fabric.testbed().faults));
    POND_CHECK_MSG(f.ok(), "fault config must be validated with the testbed");
    faults_ = std::move(f).value();
    UseBufferPool(&fabric.packet_buffers_);
  }
  ~SimEndpoint() override {
    // A crashed incarnation's endpoint is destroyed after its successor took the address.
    SimEndpoint*& slot = fabric_.endpoints_[self().cn][self().worker];
    if (slot == this) slot = nullptr;
    for (Batch* b : batches_) delete b;
    for (Batch* b : free_batches_) delete b;
  }

  struct Flight;
  // A batch on its way: the ops are the endpoint's (taken by swapping vectors), their local
  // buffers are the posting coroutine's. Batches are recycled through free_batches_, and their
  // op vectors keep their capacity as they go back and forth.
  struct Batch {
    MnId mn;
    std::vector<Op> ops;
    Completion* done;
    Status status;  // set (and read) only when the batch failed
    bool failed;
    bool unreachable;        // failed because its MN is down
    uint16_t mn_generation;  // its MN's when posted: a restart since then loses the batch
    Batch* next;             // the next batch of the same launch
    Flight* flight;          // with jitter: the Flush it belongs to
  };
  // With jitter, a Flush's batches arrive one by one; this counts them in and completes the
  // Flush when the last one is served.
  struct Flight {
    Batch* first;
    Completion* done;
    int count;
    int pending;
    uint64_t done_ns = 0;
    Batch* failed = nullptr;
    uint64_t failed_ns = 0;
  };

  void Launch(uint64_t at_ns) {
    POND_ASSERT(!dead_);
    if (fabric_.IsCnDying(self().cn)) {
      for (Batch* b : batches_) {
        fabric_.crash_lost_batches_++;
        free_batches_.push_back(b);
      }
      batches_.clear();
      for (auto& p : packets_) {
        fabric_.crash_dropped_packets_++;
        RecycleBuffer(std::move(p.bytes));
      }
      packets_.clear();
      return;
    }
    sim::Engine& engine = fabric_.engine();
    const Testbed& m = fabric_.testbed();
    if (!batches_.empty() && m.jitter_ns != 0) {
      LaunchJittered(at_ns);
    } else if (!batches_.empty()) {
      // Every batch of a round reaches its MN at the same instant. As one event each, they
      // would run back to back (scheduled consecutively, so nothing sorts between them in
      // (time, seq) order, and an arrival resumes no coroutine, so no run condition can stop
      // the engine between them); one event applying them in order is the same run with fewer
      // events.
      for (size_t i = 0; i + 1 < batches_.size(); i++) batches_[i]->next = batches_[i + 1];
      batches_.back()->next = nullptr;
      engine.At(at_ns + m.one_way_ns, [this, head = batches_.front()] { ArriveAll(head); });
      batches_.clear();
    }
    for (auto& p : packets_) {
      if (fabric_.PacketCut(self().cn, p.to.cn)) {
        fabric_.cut_packets_++;
        RecycleBuffer(std::move(p.bytes));
        continue;
      }
      sim::FaultDecision d = faults_.Decide(rng_);
      if (d.drop) {
        RecycleBuffer(std::move(p.bytes));
        continue;
      }
      uint64_t wire = m.one_way_ns + WireNs(m, p.bytes.size());
      if (d.duplicate) Transmit(p.to, p.bytes, at_ns + wire + d.duplicate_delay_ns);
      Transmit(p.to, std::move(p.bytes), at_ns + wire + d.delay_ns);
    }
    packets_.clear();
  }

  SimActivity TakeActivity() {
    SimActivity a = activity_;
    activity_ = {};
    return a;
  }
  const sim::FaultStats& fault_stats() const { return faults_.stats(); }

  // The worker's CN crashed: nothing more is delivered to it or completed for it, and what it
  // had received but not polled is gone.
  void Kill() {
    dead_ = true;
    fabric_.in_flight_ -= inbox_.size();
    for (auto& p : inbox_) RecycleBuffer(std::move(p));
    inbox_.clear();
  }
  bool dead() const { return dead_; }

 protected:
  void SubmitBatch(MnId mn, std::vector<Op>& ops, Completion* done) override {
    Batch* b;
    if (free_batches_.empty()) {
      b = new Batch{};
    } else {
      b = free_batches_.back();
      free_batches_.pop_back();
    }
    b->mn = mn;
    b->mn_generation = fabric_.MnGeneration(mn);
    activity_.ops += ops.size();
    b->ops.swap(ops);
    b->done = done;
    batches_.push_back(b);
    activity_.batches++;
  }

  void SendPacket(WorkerAddr to, PacketBuffer packet) override {
    packets_.push_back(Outgoing{to, std::move(packet)});
    activity_.messages++;
  }

  bool PollBackend() override {
    if (inbox_.empty()) return false;
    arrived_.swap(inbox_);
    for (auto& p : arrived_) {
      Deliver(p);
      activity_.messages++;
      RecycleBuffer(std::move(p));
    }
    fabric_.in_flight_ -= arrived_.size();
    arrived_.clear();
    return true;
  }

 private:
  struct Outgoing {
    WorkerAddr to;
    PacketBuffer bytes;
  };

  // Puts a packet on the wire; it reaches its worker's inbox at `at_ns`. The event carries the
  // buffer itself (a vector fits in an event slot), so a packet in flight allocates nothing.
  void Transmit(WorkerAddr to, PacketBuffer bytes, uint64_t at_ns) {
    fabric_.in_flight_++;
    // A packet belongs to the incarnations of both ends it left between, as a message belongs
    // to its queue pair: a crash or restart of either end before it arrives loses it.
    const uint32_t ends = uint32_t{fabric_.Generation(self().cn)} << 16 | fabric_.Generation(to.cn);
    fabric_.engine().At(at_ns, [f = &fabric_, to, ends, bytes = std::move(bytes)]() mutable {
      SimEndpoint* dst = f->Find(to);
      POND_CHECK_MSG(dst != nullptr, "message to a worker that has no endpoint");
      PacketHeader h;
      std::memcpy(&h, bytes.data(), sizeof(h));
      if (dst->dead_ || f->IsCnDown(h.src_cn) ||
          ends != (uint32_t{f->Generation(h.src_cn)} << 16 | f->Generation(to.cn))) {
        f->in_flight_--;
        f->crash_dropped_packets_++;
        dst->RecycleBuffer(std::move(bytes));
        return;
      }
      if (f->PacketCut(h.src_cn, to.cn)) {
        f->in_flight_--;
        f->cut_packets_++;
        dst->RecycleBuffer(std::move(bytes));
        return;
      }
      dst->inbox_.push_back(std::move(bytes));
      if (f->packet_hook_) f->packet_hook_(to);
    });
  }

  // Each batch travels on its own: one-way latency plus a jitter drawn per batch, so batches of
  // one Flush to different MNs — and of two Flushes of two coroutines — reach their MNs in any
  // order, as on real NICs with a queue pair per MN. A queue pair keeps its order: a batch never
  // reaches its MN before one this endpoint launched to it earlier.
  void LaunchJittered(uint64_t at_ns) {
    sim::Engine& engine = fabric_.engine();
    const Testbed& m = fabric_.testbed();
    size_t i = 0;
    while (i < batches_.size()) {
      size_t end = i + 1;
      while (end < batches_.size() && batches_[end]->done == batches_[i]->done) end++;
      auto* f = new Flight{batches_[i], batches_[i]->done, static_cast<int>(end - i),
                           static_cast<int>(end - i)};
      for (size_t k = i; k < end; k++) {
        Batch* b = batches_[k];
        b->next = k + 1 < end ? batches_[k + 1] : nullptr;
        b->flight = f;
        uint64_t arrive = at_ns + m.one_way_ns + Jitter();
        if (b->mn < qp_arrival_ns_.size()) {
          arrive = std::max(arrive, qp_arrival_ns_[b->mn]);
          qp_arrival_ns_[b->mn] = arrive;
        }
        engine.At(arrive, [this, b] { ArriveOne(b); });
      }
      i = end;
    }
    batches_.clear();
  }

  // Testbed::jitter_ns: most draws are uniform in [0, jitter_ns]; one in kStragglerOneIn is a
  // straggler, uniform in [0, kStragglerTimes x jitter_ns] — a retransmission or a stalled PCIe
  // read — long enough for other workers to lock, write and unlock the same keys meanwhile.
  uint64_t Jitter() {
    const uint64_t j = fabric_.testbed().jitter_ns;
    if (jitter_rng_.Uniform(Testbed::kStragglerOneIn) == 0) {
      return jitter_rng_.Uniform(j * Testbed::kStragglerTimes + 1);
    }
    return jitter_rng_.Uniform(j + 1);
  }

  void ArriveOne(Batch* b) {
    Flight* f = b->flight;
    if (dead_) {
      LandDying(b);  // as in ArriveAll
    } else {
      const uint64_t t = Arrive(b);
      if (b->failed && (f->failed == nullptr || t < f->failed_ns)) {
        f->failed = b;
        f->failed_ns = t;
      }
      f->done_ns = std::max(f->done_ns, t);
    }
    if (--f->pending > 0) return;
    if (dead_) {
      for (Batch* r = f->first; r != nullptr; r = r->next) free_batches_.push_back(r);
      delete f;
      return;
    }
    const uint64_t back = fabric_.testbed().one_way_ns + Jitter();
    fabric_.engine().At(f->done_ns + back, [this, f] {
      Batch* first = f->first;
      Completion* c = f->done;
      const int count = f->count;
      Batch* failed = f->failed;
      delete f;
      CompleteFlush(first, c, count, failed);
    });
  }

  // The batches of one launch reach their MNs. The batches of one Flush are consecutive (one
  // SubmitPending made them) and their completions come back as one event, when the last of
  // them is done. As one event per batch, they were scheduled consecutively here; the others
  // did nothing but count down, so only the one that ran last mattered — the latest-scheduled
  // of those due last — and the single event takes its place in (time, seq) order. The Flush's
  // status is the error of the batch whose completion would have run first, as before.
  void ArriveAll(Batch* head) {
    const uint64_t one_way_ns = fabric_.testbed().one_way_ns;
    Batch* b = head;
    if (dead_) {
      // The CN crashed after these left: each batch (one MN's ops, on its own queue pair)
      // independently reaches its MN or not, or a part of it does; nothing completes.
      while (b != nullptr) {
        Batch* next = b->next;
        LandDying(b);
        free_batches_.push_back(b);
        b = next;
      }
      return;
    }
    while (b != nullptr) {
      Completion* c = b->done;
      Batch* first = b;
      Batch* last = nullptr;
      Batch* failed = nullptr;
      uint64_t failed_ns = 0;
      uint64_t done_ns = 0;
      int count = 0;
      for (; b != nullptr && b->done == c; b = b->next) {
        const uint64_t t = Arrive(b);
        if (b->failed && (failed == nullptr || t < failed_ns)) {
          failed = b;
          failed_ns = t;
        }
        done_ns = std::max(done_ns, t);
        last = b;
        count++;
      }
      last->next = nullptr;  // b already holds the next Flush's first batch
      fabric_.engine().At(done_ns + one_way_ns, [this, first, c, count, failed] {
        CompleteFlush(first, c, count, failed);
      });
    }
  }

  // A Flush's completion reaches its endpoint: `count` batches from `first` on (linked by next).
  void CompleteFlush(Batch* first, Completion* c, int count, Batch* failed) {
    Status status =
        failed != nullptr && !failed->unreachable ? std::move(failed->status) : Status::Ok();
    // An MN that crashed after a batch reached it never acknowledges it either, nor one a host
    // cut now lies between (its acknowledgement is lost on the way back).
    uint64_t unreachable = 0;
    for (Batch* r = first; r != nullptr; r = r->next) {
      if (r->unreachable || fabric_.IsMnDown(r->mn) ||
          fabric_.MnGeneration(r->mn) != r->mn_generation || !fabric_.Reaches(self().cn, r->mn)) {
        // MNs go down only by the membership machine's faults, on at most 64 MNs (the mask).
        POND_CHECK_MSG(r->mn < 64, "an unreachable MN above the Flush mask's 64");
        unreachable |= uint64_t{1} << r->mn;
      }
      free_batches_.push_back(r);
    }
    if (dead_) return;  // nobody is waiting any more
    if (unreachable != 0) {
      if (!status.ok()) c->status = std::move(status);
      CompleteUnreachable(c, unreachable, count);
    } else if (failed != nullptr) {
      Complete(c, std::move(status), count);
    } else {
      CompleteOk(c, count);
    }
  }

  // A batch of a crashed CN, on its way: it lands whole, not at all, or cut short — its ops in
  // posting order up to one drawn from the endpoint's stream, and that one, if a WRITE, up to one
  // of its 8-byte words. So stop a dying NIC's queue pair and a dying CPU's stores into shared
  // memory (CXL, UCX's shm), which store each WRITE word by word in address order
  // (remote_copy.h); recovery must cope with a cell or a log record the writer never finished.
  void LandDying(Batch* b) {
    if (!rng_.Chance(0.5)) {
      fabric_.crash_lost_batches_++;
      return;
    }
    if (fabric_.cut_dying_batches_ && rng_.Chance(0.5)) {
      const size_t keep = rng_.Uniform(b->ops.size()) + 1;
      bool cut = keep < b->ops.size();
      b->ops.resize(keep);
      Op& last = b->ops.back();
      if (last.verb == Verb::kWrite && last.len > 8) {
        last.len = static_cast<uint32_t>(8 * (1 + rng_.Uniform((last.len - 1) / 8)));
        cut = true;
      }
      fabric_.crash_cut_batches_ += cut ? 1 : 0;
    }
    Arrive(b);
    fabric_.crash_landed_batches_++;
  }

  // The batch reaches its MN's NIC: apply its ops in order and queue them on the NIC. Returns
  // when the NIC has served the last one.
  uint64_t Arrive(Batch* b) {
    sim::Engine& engine = fabric_.engine();
    // A Status holds a string: built only on failure, since it is moved several times on its
    // way and every batch passes here.
    Status status;
    b->failed = true;
    b->unreachable = false;
    uint64_t done_ns = engine.now();
    if (fabric_.IsMnDown(b->mn) || fabric_.MnGeneration(b->mn) != b->mn_generation ||
        !fabric_.Reaches(self().cn, b->mn)) {
      b->unreachable = true;
      return done_ns + SimFabric::kMnUnreachableNs;  // nothing applied
    }
    if (b->mn >= fabric_.num_mns()) {
      status = InvalidArgument("no MN " + std::to_string(b->mn));
    } else {
      std::byte* base = fabric_.regions_[b->mn];
      uint64_t size = fabric_.region_bytes_;
      sim::Server& nic = fabric_.nics_[b->mn];
      for (const Op& op : b->ops) {
        uint64_t off = op.addr.offset();
        if (off > size || op.len > size - off) {
          status = InvalidArgument("remote access outside MN " + std::to_string(b->mn) + " region");
          break;
        }
        int kind = static_cast<int>(op.verb);
        if ((op.verb == Verb::kCas || op.verb == Verb::kFaa) && (off & 7) != 0) {
          status = InvalidArgument("atomic on unaligned remote address");
          break;
        }
        switch (op.verb) {
          case Verb::kRead:
            std::memcpy(op.local, base + off, op.len);
            break;
          case Verb::kWrite:
            std::memcpy(base + off, op.local, op.len);
            break;
          case Verb::kCas: {
            uint64_t old;
            std::memcpy(&old, base + off, 8);
            if (old == op.arg0) std::memcpy(base + off, &op.arg1, 8);
            std::memcpy(op.local, &old, 8);
            break;
          }
          case Verb::kFaa: {
            uint64_t old;
            std::memcpy(&old, base + off, 8);
            uint64_t sum = old + op.arg0;
            std::memcpy(base + off, &sum, 8);
            std::memcpy(op.local, &old, 8);
            break;
          }
        }
        if (control_) {
          // A control-plane queue pair (CreateControlEndpoint): its lone op is not queued behind
          // the data ops of every other queue pair, as an RNIC that serves its queue pairs in
          // turn would not queue it; it costs the NIC nothing worth counting.
          done_ns = std::max(done_ns, engine.now() + fabric_.NicServiceNs(kind, op.len));
        } else if (kind >= 2) {
          bool device = fabric_.IsDeviceMemory(b->mn, off);
          if (device) fabric_.device_atomics_++;
          uint64_t served_ns =
              nic.Serve(engine.now(),
                        device ? pond::NicServiceNs(fabric_.testbed_, kind, op.len, true)
                               : fabric_.NicServiceNs(kind, op.len),
                        kind);
          // An atomic held up in its bucket does not hold up the ops behind it: the NIC works
          // on them meanwhile. So the batch completes with whichever of its ops ends last.
          done_ns = std::max(done_ns, fabric_.AtomicDoneNs(b->mn, off, device, served_ns));
        } else {
          done_ns =
              std::max(done_ns, nic.Serve(engine.now(), fabric_.NicServiceNs(kind, op.len), kind));
        }
      }
      b->failed = !status.ok();
    }
    if (b->failed) b->status = std::move(status);
    return done_ns;
  }

  SimFabric& fabric_;
  bool control_ = false;  // CreateControlEndpoint's: not queued on the MN NICs
  Rng rng_;
  Rng jitter_rng_;
  std::vector<uint64_t> qp_arrival_ns_;  // by MN: when the last batch launched to it arrives
  sim::FaultModel faults_;
  std::vector<Batch*> batches_;  // posted this round, not launched
  std::vector<Batch*> free_batches_;
  std::vector<Outgoing> packets_;
  std::vector<PacketBuffer> inbox_, arrived_;
  SimActivity activity_;
  bool dead_ = false;
};

Result<std::unique_ptr<SimFabric>> SimFabric::Create(sim::Engine& engine, const Testbed& testbed,
                                                     uint16_t num_mns, uint64_t region_bytes) {
  POND_RETURN_IF_ERROR(testbed.Validate());
  if (num_mns == 0) return InvalidArgument("need at least one MN");
  if (region_bytes < 4096 || region_bytes % 4096 != 0 || region_bytes > GAddr::kOffsetMask) {
    return InvalidArgument("MN region size must be a multiple of 4096 below 2^48 bytes");
  }
  std::vector<std::byte*> regions;
  for (uint16_t i = 0; i < num_mns; i++) {
    void* p = mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      for (auto* r : regions) munmap(r, region_bytes);
      return OutOfSpace("cannot map MN region of " + std::to_string(region_bytes) + " bytes");
    }
    regions.push_back(static_cast<std::byte*>(p));
  }
  return std::unique_ptr<SimFabric>(
      new SimFabric(engine, testbed, std::move(regions), region_bytes));
}

SimFabric::SimFabric(sim::Engine& engine, const Testbed& testbed, std::vector<std::byte*> regions,
                     uint64_t region_bytes)
    : engine_(engine),
      testbed_(testbed),
      regions_(std::move(regions)),
      region_bytes_(region_bytes),
      nics_(regions_.size()) {
  for (auto& per_kind : nic_service_ns_) per_kind.fill(kUnknown);
}

uint64_t SimFabric::AtomicDoneNs(MnId mn, uint64_t offset, bool device, uint64_t served_ns) {
  uint64_t serial_ns = device ? testbed_.mn_device_atomic_serial_ns : testbed_.mn_atomic_serial_ns;
  if (serial_ns == 0) return served_ns;
  if (bucket_free_ns_.empty()) bucket_free_ns_.assign(regions_.size() * kAtomicBuckets, 0);
  uint64_t& free_ns = bucket_free_ns_[size_t{mn} * kAtomicBuckets + (offset % kAtomicBuckets)];
  // Served alone, its read-modify-write would end as it is served; it cannot begin before the
  // last one in its bucket ended.
  // (0: the bucket has not been used, which is not a completion at time 0.)
  uint64_t done_ns = free_ns == 0 ? served_ns : std::max(served_ns, free_ns + serial_ns);
  if (done_ns > served_ns) {
    serialized_atomics_++;
    serialized_wait_ns_ += done_ns - served_ns;
  }
  free_ns = done_ns;
  return done_ns;
}

SimFabric::~SimFabric() {
  for (auto* r : regions_) munmap(r, region_bytes_);
}

std::unique_ptr<Endpoint> SimFabric::CreateEndpoint(WorkerAddr self, Scheduler& sched) {
  POND_CHECK_MSG(Find(self) == nullptr, "two endpoints for one worker address");
  if (endpoints_.size() <= self.cn) endpoints_.resize(size_t{self.cn} + 1);
  auto& row = endpoints_[self.cn];
  if (row.size() <= self.worker) row.resize(size_t{self.worker} + 1, nullptr);
  auto ep = std::make_unique<SimEndpoint>(*this, self, sched);
  row[self.worker] = ep.get();
  sched.AddPoller(ep.get());
  return ep;
}

std::unique_ptr<Endpoint> SimFabric::CreateControlEndpoint(WorkerAddr self, Scheduler& sched) {
  std::unique_ptr<Endpoint> ep = CreateEndpoint(self, sched);
  static_cast<SimEndpoint*>(ep.get())->MarkControlPlane();
  return ep;
}

SimEndpoint* SimFabric::Find(WorkerAddr w) const {
  if (w.cn >= endpoints_.size() || w.worker >= endpoints_[w.cn].size()) return nullptr;
  return endpoints_[w.cn][w.worker];
}

void SimFabric::Launch(WorkerAddr worker, uint64_t at_ns) {
  SimEndpoint* ep = Find(worker);
  POND_CHECK(ep != nullptr);
  ep->Launch(at_ns);
}

SimActivity SimFabric::TakeActivity(WorkerAddr worker) {
  SimEndpoint* ep = Find(worker);
  POND_CHECK(ep != nullptr);
  return ep->TakeActivity();
}

void SimFabric::CrashCn(uint16_t cn) {
  if (down_.size() <= cn) down_.resize(size_t{cn} + 1, false);
  if (generation_.size() <= cn) generation_.resize(size_t{cn} + 1, 0);
  down_[cn] = true;
  generation_[cn]++;
  if (cn >= endpoints_.size()) return;
  for (SimEndpoint* ep : endpoints_[cn]) {
    if (ep != nullptr) ep->Kill();
  }
}

void SimFabric::DieNow(uint16_t cn) {
  if (dying_.size() <= cn) dying_.resize(size_t{cn} + 1, false);
  dying_[cn] = true;
}

void SimFabric::RestartCn(uint16_t cn) {
  POND_CHECK_MSG(IsCnDown(cn), "restart of a CN that is up");
  down_[cn] = false;
  if (cn < dying_.size()) dying_[cn] = false;
  generation_[cn]++;
  // The dead endpoints stay with their owners (their batches in flight still point at them)
  // but leave the address to the new incarnation's.
  if (cn < endpoints_.size()) std::fill(endpoints_[cn].begin(), endpoints_[cn].end(), nullptr);
}

void SimFabric::PartitionCn(uint16_t cn) {
  if (cut_.size() <= cn) cut_.resize(size_t{cn} + 1, false);
  cut_[cn] = true;
}

void SimFabric::HealCn(uint16_t cn) {
  if (cn < cut_.size()) cut_[cn] = false;
}

void SimFabric::PartitionHost(uint16_t host) {
  POND_CHECK(host < num_mns());
  PartitionCn(host);
  if (host_cut_.size() <= host) host_cut_.resize(size_t{host} + 1, false);
  host_cut_[host] = true;
}

void SimFabric::HealHost(uint16_t host) {
  HealCn(host);
  if (host < host_cut_.size()) host_cut_[host] = false;
}

void SimFabric::CutHosts(uint16_t a, uint16_t b) {
  POND_CHECK(a < num_mns() && b < num_mns() && a != b);
  if (hosts_cut_.size() < num_mns()) hosts_cut_.resize(num_mns(), 0);
  hosts_cut_[a] |= uint64_t{1} << b;
  hosts_cut_[b] |= uint64_t{1} << a;
}

void SimFabric::HealHosts(uint16_t a, uint16_t b) {
  if (a < hosts_cut_.size()) hosts_cut_[a] &= ~(uint64_t{1} << b);
  if (b < hosts_cut_.size()) hosts_cut_[b] &= ~(uint64_t{1} << a);
}

void SimFabric::CrashMn(MnId mn) {
  POND_CHECK(mn < num_mns());
  if (mn_down_.size() <= mn) mn_down_.resize(size_t{mn} + 1, false);
  mn_down_[mn] = true;
  // Its memory is gone: nothing may read it any more, and a bug that did would read zeros.
  madvise(regions_[mn], region_bytes_, MADV_DONTNEED);
}

void SimFabric::RestartMn(MnId mn) {
  POND_CHECK(mn < num_mns() && IsMnDown(mn));
  mn_down_[mn] = false;
  if (mn_generation_.size() <= mn) mn_generation_.resize(size_t{mn} + 1, 0);
  mn_generation_[mn]++;
  // Blank memory, as a replacement machine's (zero pages; the crash gave them back already).
  madvise(regions_[mn], region_bytes_, MADV_DONTNEED);
}

void SimFabric::MarkDeviceMemory(MnId mn, uint64_t begin, uint64_t end) {
  POND_CHECK(mn < num_mns() && begin < end && end <= region_bytes_);
  if (device_ranges_.size() <= mn) device_ranges_.resize(mn + 1u);
  device_ranges_[mn].emplace_back(begin, end);
}

void SimFabric::ResetNicStats() {
  for (auto& n : nics_) n.ResetStats();
}

sim::FaultStats SimFabric::fault_stats() const {
  sim::FaultStats total;
  for (const auto& row : endpoints_) {
    for (const SimEndpoint* ep : row) {
      if (ep == nullptr) continue;
      const sim::FaultStats& s = ep->fault_stats();
      total.decided_count += s.decided_count;
      total.drop_count += s.drop_count;
      total.duplicate_count += s.duplicate_count;
      total.delay_count += s.delay_count;
      total.delay_ns_total += s.delay_ns_total;
    }
  }
  return total;
}

}  // namespace pond
