// CnProcess: what a CN of a cluster of processes (a `pond cn` daemon, TransportConfig.cn) adds to
// the runtime, at the few points where the runtime calls it. It speaks UCX and the coordination
// service, so it is implemented above node/ (deploy/cn_process.h), where the deployment is
// chosen; the runtime sees only this interface and links neither.
#pragma once

#include "pond/status.h"

namespace pond::node {

class CnProcess {
 public:
  virtual ~CnProcess() = default;

  // Once the CN's workers are built (Cluster::Start): where its logs are and how its workers are
  // reached go to the coordination service, and a restarted CN asks to be let back in.
  virtual Status Publish() = 0;
  // As the cluster starts serving, before its workers do: the other CNs' workers are reached.
  virtual Status ConnectPeers() = 0;
  // Once the workers serve: the membership starts; returns once this CN is alive in the newest
  // epoch it applied (a restarted CN: let back in), or with an error after peers_wait_ms.
  virtual Status StartMembership() = 0;
  // The first thing StopServing does: the membership stops posting to the workers (it would
  // keep a stopping worker waiting) while it keeps this CN's lease with its beats.
  virtual void PauseCoordination() = 0;
  // Once the workers stopped, for good: the CN's last beats say it left, so that the others
  // declare it at once rather than a lease later; returns once they say so on every MN up, or
  // after a while (the others then wait out the lease).
  virtual void Leave() = 0;
  // Then the membership stops.
  virtual void StopMembership() = 0;
  // Once the workers stopped: its workers' addresses are withdrawn (best effort).
  virtual void Withdraw() = 0;
};

}  // namespace pond::node
