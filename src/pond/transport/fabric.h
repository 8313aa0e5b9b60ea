// Fabric: one transport backend's view of a whole pool — its MN regions and the endpoints of
// every CN worker. Code above the transport (the cluster, the benchmarks) is written against this
// interface, so the same cluster runs on the `local` backend (threads and shared memory) and on
// the `sim` backend (one thread, virtual time).
//
// Thread rules: CreateEndpoint and region() are for setup, before workers run; endpoints then
// belong to their worker; packets_in_flight() may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pond/runtime/scheduler.h"
#include "pond/transport/endpoint.h"
#include "pond/transport/gaddr.h"

namespace pond {

class Fabric {
 public:
  virtual ~Fabric() = default;

  virtual uint16_t num_mns() const = 0;
  virtual uint64_t region_bytes() const = 0;
  // The memory of an MN's region, for the MN's own start-up work (formatting) and for tests.
  virtual std::byte* region(MnId mn) = 0;
  // Creates the endpoint of one CN worker and registers it with that worker's scheduler.
  virtual std::unique_ptr<Endpoint> CreateEndpoint(WorkerAddr self, Scheduler& sched) = 0;
  // CN packets sent and not yet processed by their receiver.
  virtual uint64_t packets_in_flight() const = 0;
  // The configuration this CN applied declares MN `mn` down (true), or lets it back in (false:
  // joining). A transport whose operations to a silent peer can wait without end (TCP
  // retransmits to a host beyond a cut) ends them here, failed as unreachable — what the
  // protocol already does with a batch to an MN declared down — and fails every later batch to
  // it at once. A transport whose operations fail by themselves (the simulator's queue-pair
  // timeout, shared memory) has nothing to do.
  virtual void SetMnDown(MnId /*mn*/, bool /*down*/) {}
};

}  // namespace pond
