// WorkerStats' sums (txn_context.h).
#include "pond/txn/txn_context.h"

namespace pond::txn {

static_assert(sizeof(WorkerStats::Aborts) == sizeof(AbortCounts),
              "a reason added to AbortCounts is counted by the workers too");

void WorkerStats::AddTo(ClusterStats& s) const {
  s.committed += committed;
  s.committed_read_only += committed_read_only;
  AbortCounts& a = s.aborts;
  a.lock_conflict += aborts.lock_conflict;
  a.newer_version += aborts.newer_version;
  a.snapshot_too_old += aborts.snapshot_too_old;
  a.torn_read += aborts.torn_read;
  a.invisible_wait += aborts.invisible_wait;
  a.duplicate_key += aborts.duplicate_key;
  a.validation += aborts.validation;
  a.user += aborts.user;
  a.mn_unreachable += aborts.mn_unreachable;
  s.remote_calls += remote_calls;
  s.gone_lock_words_freed += gone_lock_words_freed;
  s.gone_tree_words_taken += gone_tree_words_taken;
  s.commit_rounds_posted_again += commit_rounds_posted_again;
  s.tree_entries_removed += tree_entries_removed;
  s.tree_entries_kept += tree_entries_kept;
  s.tree_leaf_merges += tree_leaf_merges;
  s.scan_leaves_read += scan_leaves_read;
  s.scan_entries_absent += scan_entries_absent;
  for (size_t i = 0; i < commit_latency.size(); i++) {
    s.commit_latency.counts[i] += commit_latency[i];
  }
  s.commit_latency.sum_ns += commit_latency_sum_ns;
}

}  // namespace pond::txn
