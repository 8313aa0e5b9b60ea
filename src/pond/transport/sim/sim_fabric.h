// SimFabric: the `sim` transport. The same one-sided ops and CN messages as the `local`
// transport, carried out on the simulator's virtual time: a one-sided op travels one-way
// latency to its MN, waits for and occupies that MN's NIC (a FIFO server with a service time per
// verb kind and per byte, from the Testbed), and its completion travels back. CN packets take
// one-way latency plus their size at the link rate, and may be dropped, duplicated or delayed by
// the testbed's MessageFaults.
//
// MN memory is real memory in this process, so data is exact; an MN applies a batch's ops in
// posting order when the batch reaches its NIC. The NIC serves requests FIFO, so the order of
// memory operations on one MN is exactly their arrival order, as it would be if each op took
// effect at the end of its service.
//
// Driving: a worker's endpoint only collects what the worker posts and sends during a scheduling
// round; the driver (which also models the worker's CPU) calls Launch(worker, t) with the time
// the round's CPU work ends, and everything leaves then. When a packet arrives, the packet hook
// tells the driver to run that worker. Completions make the waiting coroutine ready through its
// scheduler, whose wake hook the driver also watches.
//
// Thread rules: single-threaded, on the thread that runs the engine.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "pond/sim/engine.h"
#include "pond/sim/faults.h"
#include "pond/sim/server.h"
#include "pond/status.h"
#include "pond/transport/fabric.h"
#include "pond/transport/sim/sim_model.h"

namespace pond {

class SimEndpoint;

// What one endpoint did since the driver last asked: the CPU model charges for it.
struct SimActivity {
  uint64_t ops = 0;
  uint64_t batches = 0;
  uint64_t messages = 0;  // sent and received
};

class SimFabric final : public Fabric {
 public:
  static constexpr size_t kPacketBuffersKeptMax = 4096;

  static Result<std::unique_ptr<SimFabric>> Create(sim::Engine& engine, const Testbed& testbed,
                                                   uint16_t num_mns, uint64_t region_bytes);
  ~SimFabric() override;

  uint16_t num_mns() const override { return static_cast<uint16_t>(regions_.size()); }
  uint64_t region_bytes() const override { return region_bytes_; }
  std::byte* region(MnId mn) override { return regions_[mn]; }
  std::unique_ptr<Endpoint> CreateEndpoint(WorkerAddr self, Scheduler& sched) override;
  // An endpoint for control-plane work — a CN's lease beats and lease-page reads — whose ops
  // each MN's NIC serves as they arrive instead of queueing them behind the data ops of every
  // other worker: a real NIC serves its queue pairs in turn, so an op on a queue pair of its own
  // waits for a few ops, not for the whole backlog this FIFO model would make it wait for (a
  // 2 ms lease would lapse behind a full-table scan). Everything else as CreateEndpoint.
  std::unique_ptr<Endpoint> CreateControlEndpoint(WorkerAddr self, Scheduler& sched);
  uint64_t packets_in_flight() const override { return in_flight_; }

  // Sends what `worker` posted and sent since its last Launch, leaving its CN at `at_ns`.
  void Launch(WorkerAddr worker, uint64_t at_ns);
  // What `worker` did since the last call (and resets it).
  SimActivity TakeActivity(WorkerAddr worker);
  // Called when a packet for `worker` has arrived (the worker must run to poll it).
  void SetPacketHook(std::function<void(WorkerAddr)> hook) { packet_hook_ = std::move(hook); }

  // CN `cn` crashes now (a fault schedule's crash-cn): its endpoints stop — packets to or from
  // it are lost from now on, what it received but had not polled is gone, and of the batches it
  // had sent that have not reached their MNs yet each lands or not (drawn from the endpoint's
  // stream), with no completion. Its workers must not run rounds any more (the driver's part).
  void CrashCn(uint16_t cn);
  // Whether a crashed CN's batch may also land cut short (a prefix of its ops, the last one a
  // prefix of its 8-byte words), besides whole or not at all. On by default; the cluster turns it
  // off for protocols with lock words on MNs, whose recovery does not survive it yet
  // (docs/recovery.md "A cell the failed CN died writing").
  void set_cut_dying_batches(bool on) { cut_dying_batches_ = on; }
  bool IsCnDown(uint16_t cn) const { return cn < down_.size() && down_[cn]; }
  // CN `cn` crashes at this instant, from inside one of its transactions (a crash aimed at a
  // commit step), though CrashCn runs as the next event: what its workers launch until then —
  // the round after the step, say — never leaves it. So the step is where the crash is, not a
  // draw of whether the next round's batches landed (ArriveAll). Cleared by RestartCn.
  void DieNow(uint16_t cn);
  bool IsCnDying(uint16_t cn) const { return cn < dying_.size() && dying_[cn]; }
  // CN `cn` (crashed) comes back as a new incarnation: its old endpoints give up their
  // addresses, and CreateEndpoint makes the new ones. Packets that left before — to it or from
  // it — are lost, as is anything sent to it while it was down.
  void RestartCn(uint16_t cn);
  // Bumped by every crash and restart of the CN; a packet is delivered only if neither end's
  // changed while it was on the wire.
  uint16_t Generation(uint16_t cn) const {
    return cn < generation_.size() ? generation_[cn] : uint16_t{0};
  }
  // CN `cn` is cut off from every other CN (a fault schedule's partition-cn): a packet to or
  // from it is lost if it leaves or arrives while the cut lasts. Its one-sided ops still reach
  // the memory pool: the cut that matters for fencing, a CN that could still write there after
  // the others gave it up (docs/recovery.md "Partitions and fencing").
  void PartitionCn(uint16_t cn);
  void HealCn(uint16_t cn);
  bool IsCnPartitioned(uint16_t cn) const { return cn < cut_.size() && cut_[cn]; }
  // Host `host` — CN `host` and MN `host` (scripts/hosts.sh) — is cut off from everyone else (a
  // partition-host): CN `host` as by PartitionCn, and one-sided ops between the host and the
  // rest fail as to a crashed MN (kMnUnreachableNs), both ways: CN `host`'s to every other MN,
  // and every other CN's to MN `host`. MN `host` keeps its memory, and CN `host` reaches it.
  void PartitionHost(uint16_t host);
  void HealHost(uint16_t host);
  // Hosts `a` and `b` lose the link between them alone (cut-hosts): CN `a` and CN `b` lose each
  // other's packets, and each CN's one-sided ops to the other host's MN fail as to a crashed MN
  // (kMnUnreachableNs). Both reach everyone else.
  void CutHosts(uint16_t a, uint16_t b);
  void HealHosts(uint16_t a, uint16_t b);
  // False while a host cut lies between CN `cn` and MN `mn`.
  bool Reaches(uint16_t cn, MnId mn) const {
    if (cn == mn) return true;
    return !(cn < host_cut_.size() && host_cut_[cn]) && !(mn < host_cut_.size() && host_cut_[mn]) &&
           !HostsCut(cn, mn);
  }
  // True while a packet between CN `a` and CN `b` is lost: either is partitioned, or their hosts
  // are cut apart.
  bool PacketCut(uint16_t a, uint16_t b) const {
    return IsCnPartitioned(a) || IsCnPartitioned(b) || HostsCut(a, b);
  }
  struct CrashStats {
    uint64_t dropped_packets = 0;  // to or from a crashed CN
    uint64_t landed_batches = 0;   // of a crashed CN, reached their MN (whole or in part)
    uint64_t cut_batches = 0;      // of those, cut short (LandDying)
    uint64_t lost_batches = 0;     // of a crashed CN, did not
    uint64_t cut_packets = 0;      // to or from a partitioned CN
  };
  CrashStats crash_stats() const {
    return {crash_dropped_packets_, crash_landed_batches_, crash_cut_batches_, crash_lost_batches_,
            cut_packets_};
  }

  // MN `mn` crashes now (a fault schedule's crash-mn): its memory is gone, and every batch that
  // reaches it from now on — or reached it but had not completed — fails after
  // kMnUnreachableNs, its bit set in the Flush's unreachable mask.
  void CrashMn(MnId mn);
  bool IsMnDown(MnId mn) const { return mn < mn_down_.size() && mn_down_[mn]; }
  // MN `mn` (crashed) comes back with blank memory (a restart-mn; the caller formats it). A
  // batch posted to it before — or reaching it before and completing after — fails as
  // unreachable: its queue pair died with the old MN.
  void RestartMn(MnId mn);
  uint16_t MnGeneration(MnId mn) const {
    return mn < mn_generation_.size() ? mn_generation_[mn] : uint16_t{0};
  }
  // How long a queue pair tries an MN that does not answer before it reports the error: RDMA's
  // retransmission timeout, set short (about 70 us) times its 7 retries.
  static constexpr uint64_t kMnUnreachableNs = 500'000;

  // Atomics on [begin, end) of MN `mn`'s region are served at the device-memory rate
  // (Testbed::mn_device_atomic_mops): the caller keeps its lock words there, as Sherman keeps
  // them in the NIC's on-chip memory. Reads and writes there cost what they cost elsewhere.
  void MarkDeviceMemory(MnId mn, uint64_t begin, uint64_t end);
  bool IsDeviceMemory(MnId mn, uint64_t offset) const {
    if (mn >= device_ranges_.size()) return false;
    for (const auto& [b, e] : device_ranges_[mn]) {
      if (offset >= b && offset < e) return true;
    }
    return false;
  }
  uint64_t device_atomics() const { return device_atomics_; }
  // Atomics that waited for an earlier one in their NIC lock bucket (Testbed::mn_atomic_serial_ns),
  // and the virtual time they waited, in all.
  uint64_t serialized_atomics() const { return serialized_atomics_; }
  uint64_t serialized_wait_ns() const { return serialized_wait_ns_; }
  static constexpr uint64_t kAtomicBuckets = 4096;  // by an address's 12 low bits (Sherman §2.3)

  const sim::Server& nic(MnId mn) const { return nics_[mn]; }
  void ResetNicStats();
  const Testbed& testbed() const { return testbed_; }
  sim::Engine& engine() { return engine_; }
  // Faults applied so far, over all endpoints.
  sim::FaultStats fault_stats() const;

 private:
  friend class SimEndpoint;
  SimFabric(sim::Engine& engine, const Testbed& testbed, std::vector<std::byte*> regions,
            uint64_t region_bytes);
  SimEndpoint* Find(WorkerAddr w) const;
  // pond::NicServiceNs, remembered: it is a pure function of (kind, bytes) for one testbed, and
  // the simulator asks it for every op.
  uint64_t NicServiceNs(int verb_kind, uint32_t bytes) {
    if (bytes >= kNicServiceMemoBytes) return pond::NicServiceNs(testbed_, verb_kind, bytes);
    uint64_t& ns = nic_service_ns_[verb_kind][bytes];
    if (ns == kUnknown) ns = pond::NicServiceNs(testbed_, verb_kind, bytes);
    return ns;
  }
  // When an atomic the NIC served at `served_ns` completes: not before the last one in its lock
  // bucket has held it for the testbed's serial time.
  uint64_t AtomicDoneNs(MnId mn, uint64_t offset, bool device, uint64_t served_ns);
  static constexpr uint32_t kNicServiceMemoBytes = 512;
  static constexpr uint64_t kUnknown = UINT64_MAX;

  sim::Engine& engine_;
  Testbed testbed_;
  std::vector<std::byte*> regions_;
  uint64_t region_bytes_;
  std::vector<sim::Server> nics_;
  std::array<std::array<uint64_t, kNicServiceMemoBytes>, kNumVerbs> nic_service_ns_;
  // endpoints_[cn][worker]; null where none. A dense table: every packet and round looks it up.
  std::vector<std::vector<SimEndpoint*>> endpoints_;
  std::function<void(WorkerAddr)> packet_hook_;
  // Shared by every endpoint (one thread); in flight, a packet's buffer is in its event.
  PacketBufferPool packet_buffers_{kPacketBuffersKeptMax};
  uint64_t in_flight_ = 0;
  std::vector<bool> down_;           // by CN
  std::vector<bool> dying_;          // by CN: DieNow
  std::vector<bool> cut_;            // by CN: partitioned
  std::vector<bool> host_cut_;       // by host: cut off, its CN and MN together
  std::vector<uint64_t> hosts_cut_;  // by host: bit h set while cut apart from host h
  bool HostsCut(uint16_t a, uint16_t b) const {
    return a < hosts_cut_.size() && b < 64 && ((hosts_cut_[a] >> b) & 1) != 0;
  }
  std::vector<uint16_t> generation_;  // by CN: crashes and restarts so far
  std::vector<bool> mn_down_;
  std::vector<uint16_t> mn_generation_;  // by MN: restarts so far
  uint64_t crash_dropped_packets_ = 0;
  uint64_t crash_landed_batches_ = 0;
  uint64_t crash_cut_batches_ = 0;
  bool cut_dying_batches_ = true;
  uint64_t crash_lost_batches_ = 0;
  uint64_t cut_packets_ = 0;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> device_ranges_;  // by MN
  uint64_t device_atomics_ = 0;
  // [mn * kAtomicBuckets + bucket]: when the bucket's last atomic completes.
  std::vector<uint64_t> bucket_free_ns_;
  uint64_t serialized_atomics_ = 0;
  uint64_t serialized_wait_ns_ = 0;
};

}  // namespace pond
