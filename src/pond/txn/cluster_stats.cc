// What a cluster counted: transactions, aborts by reason, one-sided operations and messages, and
// cache hits, summed over its workers and CNs; and what a simulated cluster's hardware did.
#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/txn/sim_driver.h"
#include "pond/txn/worker_context.h"

namespace pond {

using txn::ClusterImpl;

ClusterStats ClusterStats::Since(const ClusterStats& b) const {
  ClusterStats d = *this;
  d.committed -= b.committed;
  d.committed_read_only -= b.committed_read_only;
  d.aborts.lock_conflict -= b.aborts.lock_conflict;
  d.aborts.newer_version -= b.aborts.newer_version;
  d.aborts.snapshot_too_old -= b.aborts.snapshot_too_old;
  d.aborts.torn_read -= b.aborts.torn_read;
  d.aborts.invisible_wait -= b.aborts.invisible_wait;
  d.aborts.duplicate_key -= b.aborts.duplicate_key;
  d.aborts.validation -= b.aborts.validation;
  d.aborts.user -= b.aborts.user;
  d.remote_calls -= b.remote_calls;
  d.reads -= b.reads;
  d.writes -= b.writes;
  d.cas -= b.cas;
  d.faa -= b.faa;
  d.batches -= b.batches;
  d.messages -= b.messages;
  d.packets -= b.packets;
  d.vt_hits -= b.vt_hits;
  d.vt_misses -= b.vt_misses;
  d.vt_invalidations -= b.vt_invalidations;
  d.addr_hits -= b.addr_hits;
  d.addr_misses -= b.addr_misses;
  return d;
}

ClusterStats Cluster::Stats() const {
  ClusterStats s;
  for (auto& cn : impl_->cns) {
    for (auto& w : cn->workers) {
      s.committed += w->stats.committed;
      s.committed_read_only += w->stats.committed_read_only;
      const AbortCounts& a = w->stats.aborts;
      s.aborts.lock_conflict += a.lock_conflict;
      s.aborts.newer_version += a.newer_version;
      s.aborts.snapshot_too_old += a.snapshot_too_old;
      s.aborts.torn_read += a.torn_read;
      s.aborts.invisible_wait += a.invisible_wait;
      s.aborts.duplicate_key += a.duplicate_key;
      s.aborts.validation += a.validation;
      s.aborts.user += a.user;
      s.remote_calls += w->stats.remote_calls;
      const EndpointStats& e = w->ep->stats();
      s.reads += e.ops[static_cast<int>(Verb::kRead)];
      s.writes += e.ops[static_cast<int>(Verb::kWrite)];
      s.cas += e.ops[static_cast<int>(Verb::kCas)];
      s.faa += e.ops[static_cast<int>(Verb::kFaa)];
      s.batches += e.batches;
      s.messages += e.messages_sent;
      s.packets += e.packets_sent;
    }
    if (cn->vt) {
      cache::CacheStats v = cn->vt->stats();
      s.vt_hits += v.hits;
      s.vt_misses += v.misses;
      s.vt_invalidations += v.invalidations;
    }
    if (cn->addr) {
      cache::CacheStats a = cn->addr->stats();
      s.addr_hits += a.hits;
      s.addr_misses += a.misses;
    }
  }
  return s;
}

SimStats Cluster::GetSimStats() const {
  const ClusterImpl& cl = *impl_;
  POND_CHECK_MSG(cl.sim_fabric != nullptr, "sim stats of a cluster that is not simulated");
  SimStats s;
  s.virtual_ns = cl.engine->now();
  s.events = cl.engine->stats().events_run;
  for (MnId mn = 0; mn < cl.sim_fabric->num_mns(); mn++) {
    SimStats::Nic n;
    for (int k = 0; k < kNumVerbs; k++) {
      n.busy_ns[k] = cl.sim_fabric->nic(mn).BusyNs(k);
      n.ops[k] = cl.sim_fabric->nic(mn).ServedCount(k);
    }
    s.mn_nics.push_back(n);
  }
  s.cpu_busy_ns = cl.driver->cpu_stats().busy_ns;
  s.cpu_rounds = cl.driver->cpu_stats().rounds;
  sim::FaultStats f = cl.sim_fabric->fault_stats();
  s.fault_drops = f.drop_count;
  s.fault_duplicates = f.duplicate_count;
  s.fault_delays = f.delay_count;
  return s;
}

void Cluster::ResetSimStats() {
  POND_CHECK(impl_->sim_fabric != nullptr);
  impl_->sim_fabric->ResetNicStats();
}

}  // namespace pond
