// What ordered tables add to a transaction (docs/protocol.md "Ordered tables and range scans"):
// inserts and deletes write their stripe rows and enter new keys into the B+Tree; Scan reads the
// stripe rows of its range (SR), then walks the tree and reads every key it finds through the
// transaction, like any other key.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "pond/txn/ordered.h"
#include "pond/txn/txn_state.h"

namespace pond::txn {

namespace {

// Tree entries read per round of a scan, at most: each round is one walk and one Execute of the
// keys.
constexpr size_t kScanBatch = 64;
// Stripe rows one scan may read: a wider range should have wider stripes.
constexpr uint64_t kScanStripesMax = 1 << 16;

std::atomic<bool> scans_skip_stripes{false};

}  // namespace

void SetScansSkipStripesForTesting(bool on) { scans_skip_stripes = on; }

btree::BTree& TxnContext::Tree(const store::TableInfo& t) {
  if (trees_.size() <= t.id) trees_.resize(size_t{t.id} + 1);
  std::unique_ptr<btree::BTree>& tree = trees_[t.id];
  if (tree == nullptr) {
    btree::TreeOptions options;
    options.gone = cn_.gone;
    options.gone_words_taken = &stats_.gone_tree_words_taken;
    options.placement = &placement();
    options.rounds_end_at_leaving = !config().protocol.cn_locks;
    options.merge_empty_leaves = !t.keep_empty_leaves;
    tree = std::make_unique<btree::BTree>(*ep_, TreeSpaceOf(t), options);
  }
  return *tree;
}

void TxnState::AddStripeOf(const store::TableInfo& t, uint64_t key) {
  const uint64_t row = StripeRowKey(t, key, StripeOf(t, key));
  for (const StripeRow& s : stripes_) {
    if (s.table == t.stripe_table && s.key == row) return;
  }
  stripes_.push_back({t.stripe_table, row, false});
  Add(t.stripe_table, row, AddOp::kReadWrite);
}

Task<Status> TxnState::IndexInserts() {
  for (size_t i = 0; i < items_.size(); i++) {
    Item& it = items_[i];
    if (!it.index_pending || !it.executed || it.pending != Pending::kPut) continue;
    // Entered under the key's lock, before the commit timestamp: a scan ordered after this
    // transaction walks the tree after this insert (docs/protocol.md).
    Status s = co_await w_.Tree(*it.table).Insert(TreeKeyOf(*it.table, it.lk.key), 1);
    if (!s.ok()) co_return Fail(s, &w_.stats().aborts.user);
    items_[i].index_pending = false;
  }
  co_return Status::Ok();
}

bool TxnState::DeletesIndexedKeys(const std::vector<size_t>& writes) const {
  for (size_t i : writes) {
    const Item& it = items_[i];
    if (it.table->ordered && !it.table->keep_deleted_entries && it.pending == Pending::kErase &&
        it.exists()) {
      return true;
    }
  }
  return false;
}

Task<void> TxnState::UnindexDeletes(const std::vector<size_t>& writes, uint64_t removed_at) {
  for (size_t i : writes) {
    const Item& it = items_[i];
    if (!it.table->ordered || it.table->keep_deleted_entries || it.pending != Pending::kErase ||
        !it.exists()) {
      continue;
    }
    btree::BTree& tree = w_.Tree(*it.table);
    const uint64_t merges = tree.stats().leaf_merges;
    Status s = co_await tree.Delete(TreeKeyOf(*it.table, it.lk.key), removed_at);
    w_.stats().tree_leaf_merges += tree.stats().leaf_merges - merges;
    if (s.ok()) {
      w_.stats().tree_entries_removed++;
    } else if (s.code() != Code::kNotFound) {
      w_.stats().tree_entries_kept++;
    }
  }
}

Task<void> TxnState::AwaitPredecessor() {
  if (answered_early_ == nullptr) co_return;
  std::shared_ptr<TxnState> prev = answered_early_->lock();
  if (prev == nullptr || prev.get() == this || !prev->publishing()) co_return;
  bool shares = false;
  for (const Item& it : items_) {
    const Item* p = prev->Find(it.lk.table, it.lk.key);
    shares = shares || (p != nullptr && p->pending != Pending::kNone);
  }
  while (shares && prev->publishing()) co_await w_.sched().SleepFor(kVisibleGatePollNs);
}

Task<Status> TxnState::ExecuteAll() {
  co_await AwaitPredecessor();
  // At most two rounds: a stripe with no row yet is inserted by a second Execute.
  while (true) {
    if (Status s = co_await Execute(); !s.ok()) co_return s;
    bool again = false;
    for (StripeRow& st : stripes_) {
      if (st.written) continue;
      st.written = true;
      // Any new version of the row makes a concurrent scanner of its stripe conflict; the count
      // of changes it holds is for people reading the table.
      Result<std::span<const std::byte>> v = Read(st.table, st.key);
      uint64_t count = 0;
      if (v.ok() && v->size() >= sizeof(count)) std::memcpy(&count, v->data(), sizeof(count));
      count++;
      std::byte bytes[sizeof(count)];
      std::memcpy(bytes, &count, sizeof(count));
      if (v.ok()) {
        if (Status s = Write(st.table, st.key, bytes); !s.ok()) {
          co_return Fail(s, &w_.stats().aborts.user);
        }
      } else {
        Add(st.table, st.key, AddOp::kInsert, bytes);
        again = true;
      }
    }
    if (any_index_pending_) {
      if (Status s = co_await IndexInserts(); !s.ok()) co_return s;
    }
    if (!again) co_return Status::Ok();
  }
}

Task<Result<std::vector<ScanRow>>> TxnState::Scan(uint16_t table, uint64_t low, uint64_t high,
                                                  size_t limit, ScanOrder order) {
  if (Status s = BeginExecute(); !s.ok()) co_return s;
  const store::TableInfo* t = w_.Table(table);
  if (t == nullptr || !t->ordered) {
    Refuse(InvalidArgument("scan of a table that is not ordered"));
  } else if (low >= high || !OrderedKeyAllowed(low)) {
    Refuse(InvalidArgument("scan range must be low < high, low 1 or more"));
  } else if (t->critical_field && ((low ^ high) & (lock::kShards - 1)) != 0) {
    Refuse(InvalidArgument("scan range of a table with a critical field must be in one shard"));
  }
  if (Status s = BeginExecute(); !s.ok()) co_return s;
  // In tree keys: on a critical-field table, [low, high) is the shard's keys whose bits above the
  // shard lie between low's and high's, one run of tree keys.
  const uint64_t begin = TreeKeyOf(*t, low);
  const uint64_t end = TreeKeyOf(*t, high);
  const uint64_t first_stripe = StripeOf(*t, low);
  const uint64_t last_stripe = StripeOf(*t, KeyOfTreeKey(*t, end - 1));
  if (last_stripe - first_stripe >= kScanStripesMax) {
    Refuse(InvalidArgument("scan range covers too many stripes (widen stripe_bits)"));
    co_return FailDeferred();
  }

  // Under SR the range's stripe rows are read like any key (a read lock under lotus, validated at
  // commit under motor and ford): an insert or delete in the range writes one of them. A snapshot
  // read (SI, or a read-only transaction on the multi-version store) needs none.
  const bool protect = isolation_ == Isolation::kSerializable &&
                       (kind_ == TxnKind::kReadWrite || protocol().single_version) &&
                       !scans_skip_stripes.load(std::memory_order_relaxed);
  if (protect) {
    for (uint64_t st = first_stripe; st <= last_stripe; st++) {
      Add(t->stripe_table, StripeRowKey(*t, low, st), AddOp::kReadOnly);
    }
  }
  // Also executes what the caller added: its own inserts enter the tree before the walk. And it
  // takes the start timestamp before the walk, which the SI argument needs.
  if (Status s = co_await ExecuteAll(); !s.ok()) co_return s;

  btree::BTree& tree = w_.Tree(*t);
  std::vector<ScanRow> rows;
  std::vector<btree::KeyValue> batch;
  // A scan with a small limit reads (and, under lotus, read-locks) about as many keys as it
  // returns; rounds double while they meet absent keys. A descending one walks down from `end`
  // (BTree::ScanDescending): `bound` is the edge of what is still to walk, from either side.
  const bool up = order == ScanOrder::kAscending;
  uint64_t bound = up ? begin : end;
  size_t batch_max = std::clamp<size_t>(limit, 1, kScanBatch);
  while ((up ? bound < end : bound > begin) && rows.size() < limit) {
    batch.clear();
    uint64_t removed_at = 0;
    const uint64_t leaves_before = tree.stats().leaves_read;
    // (Not one co_await per arm of a ?: — GCC 12 destroys a temporary of the wrong arm.)
    Status walked;
    if (up) {
      walked = co_await tree.Scan(bound, end, batch_max, &batch, &removed_at);
    } else {
      walked = co_await tree.ScanDescending(begin, bound, batch_max, &batch, &removed_at);
    }
    w_.stats().scan_leaves_read += tree.stats().leaves_read - leaves_before;
    if (!walked.ok()) co_return Fail(walked, &w_.stats().aborts.user);
    // A snapshot scan (no stripe rows) must not trust a leaf from which an entry was removed
    // by a delete at or after its snapshot: the key existed at the snapshot and is no longer
    // there to be found (docs/btree.md "The tree cleans itself"). A protected scan needs no
    // such care: that delete wrote a stripe row this transaction read.
    if (!protect && removed_at != 0 && removed_at >= start_ts_) {
      co_return Fail(AbortedBecause("snapshot too old for a cleaned leaf"),
                     &w_.stats().aborts.snapshot_too_old);
    }
    for (const btree::KeyValue& kv : batch) {
      Add(table, KeyOfTreeKey(*t, kv.first), AddOp::kReadOnly);
    }
    if (Status s = co_await ExecuteAll(); !s.ok()) co_return s;
    for (const btree::KeyValue& kv : batch) {
      const uint64_t key = KeyOfTreeKey(*t, kv.first);
      Result<std::span<const std::byte>> v = Read(table, key);
      if (v.status().code() == Code::kNotFound) {  // an aborted insert, or deleted
        w_.stats().scan_entries_absent++;
        continue;
      }
      if (!v.ok()) co_return Fail(v.status(), &w_.stats().aborts.user);
      rows.push_back({key, std::vector<std::byte>(v->begin(), v->end())});
      if (rows.size() == limit) break;
    }
    if (batch.size() < batch_max) break;
    bound = up ? batch.back().first + 1 : batch.back().first;
    batch_max = std::min(kScanBatch, batch_max * 2);
  }
  co_return rows;
}

}  // namespace pond::txn
