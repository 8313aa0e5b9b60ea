// What a cluster counted: transactions, aborts by reason, one-sided operations and messages, and
// cache hits, summed over its workers and CNs; and what a simulated cluster's hardware did.
#include <algorithm>

#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/cluster/replica_check.h"
#include "pond/node/sim_driver.h"
#include "pond/node/sim_faults.h"
#include "pond/node/worker_context.h"

namespace pond {

using node::ClusterImpl;

// A reason added to AbortCounts must be listed below too; this fails until it is.
static_assert(sizeof(AbortCounts) == 9 * sizeof(uint64_t));

const std::vector<AbortCounts::Reason>& AbortCounts::Reasons() {
  static const std::vector<Reason> kReasons = {
      {"lock conflict", "lock_conflict", &AbortCounts::lock_conflict},
      {"newer version", "newer_version", &AbortCounts::newer_version},
      {"snapshot too old", "snapshot_too_old", &AbortCounts::snapshot_too_old},
      {"torn read", "torn_read", &AbortCounts::torn_read},
      {"invisible wait", "invisible_wait", &AbortCounts::invisible_wait},
      {"duplicate key", "duplicate_key", &AbortCounts::duplicate_key},
      {"validation", "validation", &AbortCounts::validation},
      {"user", "user", &AbortCounts::user},
      {"MN unreachable", "mn_unreachable", &AbortCounts::mn_unreachable},
  };
  return kReasons;
}

uint64_t LatencyBuckets::count() const {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return n;
}

uint64_t AbortCounts::Total() const {
  uint64_t n = 0;
  for (const Reason& r : Reasons()) n += this->*r.count;
  return n;
}

ClusterStats ClusterStats::Since(const ClusterStats& b) const {
  ClusterStats d = *this;
  d.committed -= b.committed;
  d.committed_read_only -= b.committed_read_only;
  for (const AbortCounts::Reason& r : AbortCounts::Reasons())
    d.aborts.*r.count -= b.aborts.*r.count;
  d.remote_calls -= b.remote_calls;
  d.gone_lock_words_freed -= b.gone_lock_words_freed;
  d.gone_tree_words_taken -= b.gone_tree_words_taken;
  d.commit_rounds_posted_again -= b.commit_rounds_posted_again;
  d.tree_entries_removed -= b.tree_entries_removed;
  d.tree_entries_kept -= b.tree_entries_kept;
  d.tree_leaf_merges -= b.tree_leaf_merges;
  d.scan_leaves_read -= b.scan_leaves_read;
  d.scan_entries_absent -= b.scan_entries_absent;
  d.reads -= b.reads;
  d.writes -= b.writes;
  d.cas -= b.cas;
  d.faa -= b.faa;
  d.batches -= b.batches;
  d.messages -= b.messages;
  d.packets -= b.packets;
  d.messages_malformed -= b.messages_malformed;
  d.tso_requests -= b.tso_requests;
  d.tso_relayed -= b.tso_relayed;
  d.vt_hits -= b.vt_hits;
  d.vt_misses -= b.vt_misses;
  d.vt_invalidations -= b.vt_invalidations;
  d.addr_hits -= b.addr_hits;
  d.addr_misses -= b.addr_misses;
  for (size_t i = 0; i < d.commit_latency.counts.size(); i++) {
    d.commit_latency.counts[i] -= b.commit_latency.counts[i];
  }
  d.commit_latency.sum_ns -= b.commit_latency.sum_ns;
  return d;
}

Status Cluster::ScheduleFaults(std::vector<NodeFault> faults) {
  ClusterImpl& cl = *impl_;
  if (cl.sim_faults_ == nullptr) {
    return InvalidArgument("node faults need a simulated cluster (Cluster::StartSimulated)");
  }
  std::stable_sort(faults.begin(), faults.end(),
                   [](const NodeFault& a, const NodeFault& b) { return a.at_ns < b.at_ns; });
  POND_RETURN_IF_ERROR(cl.sim_faults_->Validate(faults));
  cl.scheduled_faults_ = std::move(faults);
  for (auto& cn : cl.cns_) {
    for (auto& w : cn->workers) w->TrackAcknowledged(true);
  }
  return Status::Ok();
}

ReplicaCheck Cluster::CheckReplicas() const {
  // Workers still write the MNs' memory while serving; a comparison then would race them and
  // report their half-done commits as disagreements.
  POND_CHECK_MSG(!serving(), "CheckReplicas while serving: StopServing first");
  const ClusterImpl& cl = *impl_;
  std::vector<cluster::AckedWrite> acked;
  // A restarted CN's dead incarnation acknowledged writes too.
  cl.ForEachWorkerEver([&acked](const node::WorkerContext& w) {
    const auto& by_table = w.acknowledged();
    for (size_t t = 0; t < by_table.size(); t++) {
      for (const auto& [key, ts] : by_table[t]) {
        acked.push_back(cluster::AckedWrite{static_cast<uint16_t>(t), key, ts});
      }
    }
  });
  cluster::ReplicaReport r = cluster::CheckReplicas(
      cl.catalog_, cl.placement_,
      [&cl](MnId mn) -> const std::byte* {
        const std::byte* region = cl.fabric_->region(mn);
        POND_CHECK_MSG(region != nullptr, "CheckReplicas: the MNs' memory is not in this process");
        return region;
      },
      acked,
      [&cl](uint64_t word) {
        for (const auto& cn : cl.cns_) {
          if (cn->gone.Gone(word)) return true;
        }
        return false;
      });
  return ReplicaCheck{r.slots,  r.versions,     r.acked,       r.disagreements,       r.invisible,
                      r.locked, r.lost_commits, r.lost_groups, std::move(r.problems), r.tree_nodes};
}

FailoverStats Cluster::GetFailoverStats() const {
  const ClusterImpl& cl = *impl_;
  return cl.sim_faults_ == nullptr ? FailoverStats{} : cl.sim_faults_->Stats();
}

ClusterStats Cluster::Stats() const {
  ClusterStats s;
  // Every incarnation's work counts, a restarted CN's dead one included.
  impl_->ForEachWorkerEver([&s](const node::WorkerContext& w) {
    w.stats().AddTo(s);
    const EndpointStats& e = w.ep().stats();
    s.reads += e.ops[static_cast<int>(Verb::kRead)];
    s.writes += e.ops[static_cast<int>(Verb::kWrite)];
    s.cas += e.ops[static_cast<int>(Verb::kCas)];
    s.faa += e.ops[static_cast<int>(Verb::kFaa)];
    s.batches += e.batches;
    s.messages += e.messages_sent;
    s.packets += e.packets_sent;
    s.messages_malformed += e.messages_malformed;
    s.tso_requests += w.tso().stats().requests;
    s.tso_relayed += w.tso().stats().relayed;
  });
  for (const auto* list : {&impl_->cns_, &impl_->retired_}) {
    for (const auto& cn : *list) {
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
  }
  return s;
}

CnStats Cluster::GetCnStats(uint16_t cn) const {
  const ClusterImpl& cl = *impl_;
  POND_CHECK_MSG(cn < cl.cns_.size(), "stats of a CN the cluster does not have");
  CnStats s;
  const lock::LockTable& locks = cl.cns_[cn]->locks;
  const lock::LockTableStats& l = locks.stats();
  constexpr auto kRelaxed = std::memory_order_relaxed;
  s.lock_slots = uint64_t{locks.buckets()} * lock::kSlotsPerBucket;
  // Released first: a hold is granted before it is released, so reading the other way round
  // could count a release whose grant it missed.
  s.lock_released = l.released.load(kRelaxed);
  s.lock_acquired = l.acquired.load(kRelaxed);
  s.locks_held = s.lock_acquired > s.lock_released ? s.lock_acquired - s.lock_released : 0;
  s.lock_conflicts = l.conflicts.load(kRelaxed);
  s.lock_bucket_full = l.bucket_full.load(kRelaxed);
  s.lock_counter_full = l.counter_full.load(kRelaxed);
  s.lock_wrong_shard = l.wrong_shard.load(kRelaxed);
  const node::MembershipCounts& m = cl.membership_counts_;
  s.epoch = m.epoch.load();
  s.cns_failed = m.cns_failed.load();
  s.mns_failed = m.mns_failed.load();
  s.cns_back = m.cns_back.load();
  s.recoveries = m.recoveries.load();
  s.logs_recovered = m.logs_recovered.load();
  s.tso_moves = m.tso_moves.load();
  s.coordination_up = m.coordination_up.load();
  s.failures_undeclared = m.failures_undeclared.load();
  return s;
}

SimStats Cluster::GetSimStats() const {
  const ClusterImpl& cl = *impl_;
  POND_CHECK_MSG(cl.sim_fabric_ != nullptr, "sim stats of a cluster that is not simulated");
  SimStats s;
  s.virtual_ns = cl.engine_->now();
  s.events = cl.engine_->stats().events_run;
  for (MnId mn = 0; mn < cl.sim_fabric_->num_mns(); mn++) {
    SimStats::Nic n;
    for (int k = 0; k < kNumVerbs; k++) {
      n.busy_ns[k] = cl.sim_fabric_->nic(mn).BusyNs(k);
      n.ops[k] = cl.sim_fabric_->nic(mn).ServedCount(k);
    }
    s.mn_nics.push_back(n);
  }
  s.cpu_busy_ns = cl.driver_->cpu_stats().busy_ns;
  s.cpu_rounds = cl.driver_->cpu_stats().rounds;
  for (const node::SimCoreStats& c : cl.driver_->core_stats()) {
    s.cores.push_back(SimStats::Core{c.addr.cn, c.addr.worker, c.cpu.busy_ns});
  }
  sim::FaultStats f = cl.sim_fabric_->fault_stats();
  s.fault_drops = f.drop_count;
  s.fault_duplicates = f.duplicate_count;
  s.fault_delays = f.delay_count;
  return s;
}

void Cluster::ResetSimStats() {
  POND_CHECK(impl_->sim_fabric_ != nullptr);
  impl_->sim_fabric_->ResetNicStats();
}

}  // namespace pond
