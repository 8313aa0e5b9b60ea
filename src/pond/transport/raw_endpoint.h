// RawEndpoint: an Endpoint with no transport behind it, for tests and fuzz targets that hand it
// packets byte for byte — well formed or not — as a transport hands it what arrived, and read
// back the packets it sends. It has no memory pool: every batch fails with Unavailable.
// For tests and fuzz targets only.
#pragma once

#include <utility>
#include <vector>

#include "pond/transport/endpoint.h"

namespace pond {

class RawEndpoint final : public Endpoint {
 public:
  struct Sent {
    WorkerAddr to;
    PacketBuffer bytes;
  };

  // Polled by `sched` as a fabric's endpoints are; create it before the clients that send
  // through it, so that their EndRound runs first and their messages leave in the same round.
  RawEndpoint(WorkerAddr self, Scheduler& sched) : Endpoint(self, sched) { sched.AddPoller(this); }
  using Endpoint::Deliver;

  // The packets sent so far, in order; the caller may clear it.
  std::vector<Sent>& sent() { return sent_; }

 protected:
  void SubmitBatch(MnId /*mn*/, std::vector<Op>& /*ops*/, Completion* done) override {
    Complete(done, Unavailable("a raw endpoint has no memory pool"));
  }
  void SendPacket(WorkerAddr to, PacketBuffer packet) override {
    sent_.push_back({to, std::move(packet)});
  }
  bool PollBackend() override { return false; }

 private:
  std::vector<Sent> sent_;
};

}  // namespace pond
