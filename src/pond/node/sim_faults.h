// What a simulated cluster asks of what carries out its node-fault schedule (crashes, restarts,
// partitions of CNs and MNs) and the recovery from it: the membership machine the daemons run,
// one per simulated CN (sim_membership.h).
//
// Thread rules: the simulator's thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "pond/cluster.h"

namespace pond::node {

class SimFaults {
 public:
  virtual ~SimFaults() = default;
  // Refuses a schedule this cluster cannot survive (one line naming the fault and why).
  virtual Status Validate(const std::vector<NodeFault>& faults) const = 0;
  // Arms `faults` (validated), relative to now; called as a Run starts.
  virtual void Arm(const std::vector<NodeFault>& faults) = 0;
  // The run is over: faults not reached yet never happen.
  virtual void Disarm() = 0;
  // No failure is waiting to be detected, recovered or reopened: a run may end.
  virtual bool Idle() const = 0;
  // CN `cn` is not running (crashed, or fenced itself).
  virtual bool IsCrashed(uint16_t cn) const = 0;
  virtual FailoverStats Stats() const = 0;
};

}  // namespace pond::node
