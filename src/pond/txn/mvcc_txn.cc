// MvccTxn's Commit (write invisible + log or committed cells, timestamps, validation, write
// visible, unlock) and Abort; Execute and its reads are in mvcc_read.cc.
#include "pond/txn/mvcc_txn.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/store/record.h"

namespace pond::txn {

using store::Cell;
using store::kInvisible;
using store::kLogItemDelete;
using store::kLogItemInsert;
using store::kLogMagic;
using store::LogItem;
using store::LogRecordHeader;

MvccTxn::~MvccTxn() {
  if (!finished_) Abort();
}

void MvccTxn::ToPrimaryLane(store::Cvt& cvt, int rep) const {
  if (rep == 0) return;
  const store::PoolLayout& layout = w_.layout();
  for (int c = 0; c < cvt.versions; c++) {
    Cell& cell = cvt.cells[c];
    if (cell.record != 0) {
      cell.record = layout.RecordOffset(0, cell.record - layout.RecordOffset(rep, 0));
    }
  }
}

GAddr MvccTxn::RecordAddr(const Item& it, const Cell& cell) const {
  const int rep = ReaderReplica(it);
  const uint64_t lane_rel = cell.record - w_.layout().RecordOffset(0, 0);
  return GAddr::Make(w_.placement().Replica(it.lk.key, rep),
                     w_.layout().RecordOffset(rep, lane_rel));
}

void MvccTxn::PostVisible(const std::vector<size_t>& writes, bool read_replica) {
  const store::Placement& placement = w_.placement();
  for (size_t i : writes) {
    Item& it = items_[i];
    it.new_cell.commit_ts = commit_ts_;
    // The second round goes to the replica readers used at the first, and to the one they use
    // now if an MN was declared down in between (that one had the first round already).
    const int read_rep = ReaderReplica(it);
    if (!read_replica) it.visible_read_rep = read_rep;
    for (int r = 0; r < placement.replication(); r++) {
      MnId mn = placement.Replica(it.lk.key, r);
      const bool reads_here = r == it.visible_read_rep || (read_replica && r == read_rep);
      if (reads_here != read_replica || placement.IsDown(mn)) continue;
      // Only where the cell is: an MN this CN still knew down at write-invisible may be
      // rejoining by now, and the timestamp word alone would stamp a cell another transaction
      // wrote there — recovery then finds that one with two commit timestamps. The rejoin's copy,
      // taken under this transaction's locks once it ends, brings that MN the whole cell.
      if ((it.invisible_reps & (uint32_t{1} << r)) == 0) continue;
      // The timestamp word alone: a reader sees the cell INVISIBLE or committed, never torn.
      w_.ep().Write(it.ref.Addr(*it.table, mn, r) + sizeof(store::CvtHeader) +
                        it.write_cell * sizeof(store::CvtCell) +
                        offsetof(store::CvtCell, commit_ts),
                    &commit_ts_, sizeof(commit_ts_));
    }
  }
}

bool MvccTxn::BackupsHoldTimestamp(const std::vector<size_t>& writes) const {
  const store::Placement& placement = w_.placement();
  for (size_t i : writes) {
    const Item& it = items_[i];
    bool held = false;
    for (int r = 0; r < placement.replication() && !held; r++) {
      held = r != it.visible_read_rep && (it.invisible_reps & (uint32_t{1} << r)) != 0 &&
             !placement.IsDown(placement.Replica(it.lk.key, r));
    }
    if (!held) return false;
  }
  return true;
}

bool MvccTxn::AnyReadReplicaOffPrimary(const std::vector<size_t>& writes) const {
  for (size_t i : writes) {
    if (ReaderReplica(items_[i]) != items_[i].lock_rep) return true;
  }
  return false;
}

Task<Status> MvccTxn::PrepareWrites(const std::vector<size_t>& writes) {
  Endpoint& ep = w_.ep();
  // A new key's slot is claimed by CAS on the primary's bucket, which must be readable for it:
  // down, its buckets are gone; joining, they are not all copied yet. (Record space is carved
  // from a backup's cursor mirror meanwhile.) Every new key is checked before any slot is
  // claimed, and the claims come last, after record space: a claimed slot stays claimed
  // (hash_index.h), so a transaction that claimed and then aborted would leave it to nobody —
  // and its retry, inserting the same keys, would claim more, until their buckets ran out.
  for (size_t i : writes) {
    const Item& it = items_[i];
    if (!it.have_slot && !w_.placement().Readable(w_.placement().Primary(it.lk.key))) {
      co_return Unavailable("the key's primary MN is down or rejoining: no insert");
    }
  }
  std::vector<size_t> claims;
  for (size_t i : writes) {
    Item& it = items_[i];
    MnId primary = w_.placement().Primary(it.lk.key);
    if (!it.have_slot) {
      claims.push_back(i);
      it.cvt = store::Cvt{};
      it.cvt.key = it.lk.key;
      it.cvt.versions = it.table->versions;
      it.live_meta =
          store::PackMeta(store::kSlotLive, it.table->id, static_cast<uint8_t>(it.table->versions),
                          it.table->value_bytes);
    }
    // The cell to write: an empty one, else the oldest version (Lotus §7.1). With N >= 2 the
    // oldest is never the newest, which this transaction read and other readers need most.
    int target = -1;
    for (int c = 0; c < it.cvt.versions && target < 0; c++) {
      if (!it.cvt.cells[c].valid) target = c;
    }
    if (target < 0) {
      target = 0;
      for (int c = 1; c < it.cvt.versions; c++) {
        if (it.cvt.cells[c].commit_ts < it.cvt.cells[target].commit_ts) target = c;
      }
    }
    it.write_cell = target;
    const Cell& old = it.cvt.cells[target];
    uint64_t record = old.record;
    const bool erase = it.pending == Pending::kErase;
    if (record == 0 && !erase) {
      // Handed out of a chunk this worker holds, or carved; no carve while a rejoining MN's
      // cursors are brought into step (Placement::CarveFrozen): the transaction aborts.
      Result<uint64_t> lane = co_await w_.alloc().Alloc(ep, primary, it.table->record_stride,
                                                        w_.placement().carve_skip_mask(),
                                                        w_.placement().CarveFrozen(primary));
      if (!lane.ok()) co_return lane.status();
      record = w_.layout().RecordOffset(0, *lane);
    }
    it.new_cell = Cell{.cv = static_cast<uint8_t>(old.cv + 1),
                       .valid = true,
                       .tombstone = erase,
                       .commit_ts = kInvisible,
                       .record = record,
                       .writer = store::WriterTag(w_.cn_id(), w_.index(), owner_.txn_id)};
  }
  for (size_t i : claims) {
    Item& it = items_[i];
    Result<store::SlotRef> ref =
        co_await store::ClaimSlot(ep, *it.table, w_.placement(), it.lk.key);
    if (!ref.ok()) co_return ref.status();
    it.ref = *ref;
    it.have_slot = true;
  }
  co_return Status::Ok();
}

void MvccTxn::PostWrites(const std::vector<size_t>& writes, uint64_t ts, Replicas which) {
  Endpoint& ep = w_.ep();
  const store::PoolLayout& layout = w_.layout();
  // Per MN in this order: cell and record (below), and for new keys the key and meta=live after
  // the cell, so a slot that reads live has its cell.
  for (size_t i : writes) {
    Item& it = items_[i];
    it.new_cell.commit_ts = ts;
    uint64_t lane_rel =
        it.new_cell.record == 0 ? 0 : it.new_cell.record - layout.RecordOffset(0, 0);
    if (!it.new_cell.tombstone) {
      it.record_buf.resize(it.table->record_stride);
      store::EncodeRecord(it.new_value, it.new_cell.cv, it.record_buf);
    }
    if (ts == kInvisible) it.invisible_reps = 0;
    for (int r = 0; r < w_.placement().replication(); r++) {
      MnId mn = w_.placement().Replica(it.lk.key, r);
      if (!Includes(which, it, r) || w_.placement().IsDown(mn)) continue;
      if (ts == kInvisible) it.invisible_reps |= uint32_t{1} << r;
      Cell c = it.new_cell;
      if (c.record != 0) c.record = layout.RecordOffset(r, lane_rel);
      it.raw_cells[r] = store::EncodeCell(c);
      GAddr slot = it.ref.Addr(*it.table, mn, r);
      const GAddr cell = slot + sizeof(store::CvtHeader) + it.write_cell * sizeof(store::CvtCell);
      // An INVISIBLE cell goes before its record: the record is rewritten in place, so a batch
      // cut short between the two by the writer's death would otherwise leave the cell's old
      // version with half a new record, and no tag to tell recovery (docs/recovery.md "A cell
      // the failed CN died writing"). Readers lose nothing: they read no record of an INVISIBLE
      // cell, and the cvs catch one read meanwhile.
      if (ts == kInvisible) ep.Write(cell, &it.raw_cells[r], sizeof(store::CvtCell));
      if (!c.tombstone) {
        GAddr rec = GAddr::Make(mn, c.record);
        // Motor's value + delta layout writes the value package and the attributes.
        if (!protocol().full_record_store) {
          ep.Write(rec, it.record_buf.data(), it.table->record_stride);
        }
        ep.Write(rec, it.record_buf.data(), it.table->record_stride);
      }
      if (ts != kInvisible) ep.Write(cell, &it.raw_cells[r], sizeof(store::CvtCell));
      if (it.live_meta != 0) {
        ep.Write(slot + offsetof(store::CvtHeader, key), &it.lk.key, sizeof(uint64_t));
        ep.Write(slot + offsetof(store::CvtHeader, meta), &it.live_meta, sizeof(uint64_t));
      }
    }
  }
}

void MvccTxn::PostLogRecord(const std::vector<size_t>& writes, uint32_t magic) {
  log_buf_.assign(sizeof(LogRecordHeader) + writes.size() * sizeof(LogItem), std::byte{0});
  LogRecordHeader h{
      magic, static_cast<uint16_t>(writes.size()), w_.cn_id(), owner_.txn_id, w_.index(), 0, 0};
  std::memcpy(log_buf_.data(), &h, sizeof(h));
  for (size_t k = 0; k < writes.size(); k++) {
    const Item& it = items_[writes[k]];
    LogItem li{it.lk.key,
               it.ref.bucket,
               it.lk.table,
               static_cast<uint16_t>(it.ref.slot),
               static_cast<uint8_t>(it.write_cell),
               static_cast<uint8_t>(it.live_meta != 0       ? kLogItemInsert
                                    : it.new_cell.tombstone ? kLogItemDelete
                                                            : 0),
               0};
    std::memcpy(log_buf_.data() + sizeof(h) + k * sizeof(LogItem), &li, sizeof(li));
  }
  store::SealLogRecord(log_buf_);
  // A copy on every MN that gets a cell, posted before the cells (store/commit_log.h). Motor's
  // primaries get theirs in the backups' round, ahead of their cells: on the backups' MNs alone
  // the record would be lost with them, and a dead CN's commit left half-landed on the
  // primaries with nothing to finish it (docs/recovery.md, "Lock words on MNs").
  NodeSet mns;
  for (size_t i : writes) {
    for (int r = 0; r < w_.placement().replication(); r++) {
      mns.Add(w_.placement().Replica(items_[i].lk.key, r));
    }
  }
  for (const size_t m : mns.Without(NodeSet::FromWord(w_.placement().down_mask()))) {
    const auto mn = static_cast<MnId>(m);
    w_.ep().Write(w_.log().Reserve(mn, log_buf_.size()), log_buf_.data(),
                  static_cast<uint32_t>(log_buf_.size()));
  }
}

Task<Status> MvccTxn::Validate() {
  Endpoint& ep = w_.ep();
  std::vector<size_t> check = Unprotected();
  for (int attempt = 0; !check.empty(); attempt++) {
    if (attempt >= kReadAttemptsMax) co_return AbortedBecause("validation: torn reads");
    // Every item pinned before any READ is posted: a READ left posted when this returns would go
    // out with some later Flush, into buffers gone by then.
    for (size_t i : check) {
      if (Status s = PinLockReplica(items_[i]); !s.ok()) co_return s;
    }
    std::vector<std::vector<std::byte>> bufs(check.size());
    std::vector<uint64_t> lock_seen(check.size(), 0);
    const uint64_t gone_at = w_.gone_generation();
    for (size_t k = 0; k < check.size(); k++) {
      Item& it = items_[check[k]];
      const MnId primary = w_.placement().Replica(it.lk.key, it.lock_rep);
      if (it.have_slot) {
        bufs[k].resize(it.table->cvt_bytes);
        // The lock word first, by itself: see ReadItems.
        GAddr cvt_addr = it.ref.Addr(*it.table, primary, it.lock_rep);
        ep.Read(cvt_addr + offsetof(store::CvtHeader, lock), &lock_seen[k], sizeof(uint64_t));
        ep.Read(cvt_addr, bufs[k].data(), it.table->cvt_bytes);
      } else {
        // Absent when read: the bucket's insert lock first (see ReadItems), then the bucket.
        bufs[k].resize(it.table->bucket_bytes());
        ep.Read(BucketLockWord(it), &lock_seen[k], sizeof(uint64_t));
        ep.Read(it.table->BucketAddr(primary, it.lock_rep, store::HomeBucket(*it.table, it.lk.key)),
                bufs[k].data(), it.table->bucket_bytes());
      }
    }
    if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
    std::vector<size_t> retry;
    for (size_t k = 0; k < check.size(); k++) {
      Item& it = items_[check[k]];
      if (!it.have_slot) {
        // Absent when read: it must still be absent, with no insert of it under way.
        if (HeldByOther(lock_seen[k], gone_at)) co_return AbortedBecause("validation");
        store::BucketScan scan = store::ScanBucket(*it.table, bufs[k], it.lk.key);
        if (scan.match >= 0) co_return AbortedBecause("validation");
        if (scan.first_empty < 0) {
          // A full home bucket: the key may have been inserted into a later one.
          Result<store::Found> f =
              co_await store::Lookup(ep, *it.table, w_.placement().Replica(it.lk.key, it.lock_rep),
                                     it.lock_rep, it.lk.key);
          if (f.ok()) co_return AbortedBecause("validation");
          if (f.status().code() == Code::kUnavailable) co_return f.status();
          if (f.status().code() == Code::kTornRead) {
            retry.push_back(check[k]);
            continue;
          }
          POND_CHECK(f.status().code() == Code::kNotFound);
        }
        continue;
      }
      Result<store::Cvt> cvt = store::DecodeCvt(bufs[k], it.table->versions);
      if (!cvt.ok()) {
        retry.push_back(check[k]);
        continue;
      }
      // Changed: locked by a writer, or a version this transaction should have read (committed
      // between the one it read and its commit timestamp, or not yet known: INVISIBLE).
      bool changed = HeldByOther(lock_seen[k], gone_at);
      // Recycling overwrites the oldest cell first, so while the version read is still there,
      // every newer version is too. Once it is gone (or, for a key read as absent, once no cell
      // is free), a version in between may have come and gone: that counts as a change.
      bool read_version_kept = false, any_empty = false;
      for (int c = 0; c < cvt->versions; c++) {
        const Cell& cell = cvt->cells[c];
        if (!cell.valid) any_empty = true;
        if (cell.valid && cell.commit_ts == it.read_ts) read_version_kept = true;
        if (cell.valid && cell.commit_ts > it.read_ts && cell.commit_ts < commit_ts_) {
          changed = true;
        }
        if (cell.valid && cell.commit_ts == kInvisible) changed = true;
      }
      if (it.read_ts != 0 ? !read_version_kept : !any_empty) changed = true;
      if (changed) co_return AbortedBecause("validation");
    }
    check = std::move(retry);
  }
  co_return Status::Ok();
}

void MvccTxn::UpdateVtCache(const std::vector<size_t>& writes) {
  if (vt() == nullptr) return;
  for (size_t i : writes) {
    Item& it = items_[i];
    if (!LocalShard(it)) continue;
    it.cvt.state = store::kSlotLive;
    it.cvt.cells[it.write_cell] = it.new_cell;
    cache::CachedCvt e{it.ref, it.cvt};
    // Once the version has its timestamp it is the newest, and its value is what this
    // transaction wrote (value_cache); while INVISIBLE no reader gets past the cell anyway.
    if (protocol().value_cache && it.new_cell.commit_ts != kInvisible && !it.new_cell.tombstone &&
        it.new_value.size() == it.table->value_bytes &&
        it.table->value_bytes <= cache::kCachedValueBytesMax) {
      e.value_cell = it.write_cell;
      e.value_cv = it.new_cell.cv;
      e.value_bytes = it.table->value_bytes;
      std::copy(it.new_value.begin(), it.new_value.end(), e.value.begin());
    }
    vt()->Put(it.lk, e);
  }
}

Task<Status> MvccTxn::Commit() {
  if (Status s = CheckCommittable(); !s.ok()) co_return s;
  if (kind_ == TxnKind::kReadOnly) {
    finished_ = true;
    CountCommit();
    co_return Status::Ok();
  }
  std::vector<size_t> writes = Writes();
  if (protocol().cn_locks) {
    // Lotus: write-invisible and the commit log in one round trip, then the timestamp.
    if (!writes.empty()) {
      Status s = co_await PrepareWrites(writes);
      if (s.code() == Code::kUnavailable) co_return FailUnreachable(s);
      if (!s.ok()) co_return Fail(s, &w_.stats().aborts.user);
      BeginRound();
      PostLogRecord(writes, kLogMagic);
      PostWrites(writes, kInvisible, Replicas::kAll);
      co_await CommitFlush();
      w_.Reached(CommitStep::kLogged);
      // VT cache rule 2: the cache shows the new cell INVISIBLE before the commit timestamp is
      // granted, and the timestamp before the MN does, so the cache is never older than memory.
      UpdateVtCache(writes);
    }
    commit_ts_ = co_await w_.tso().Get();
    w_.Reached(CommitStep::kTimestamped);
  } else {
    // Locks on MNs: the timestamp first, then validation, before anything is written — readers
    // that must not miss this transaction's versions see its lock words instead (ReadItems).
    commit_ts_ = co_await w_.tso().Get();
    w_.Reached(CommitStep::kTimestamped);
    if (isolation_ == Isolation::kSerializable) {
      Status v = co_await Validate();
      if (v.code() == Code::kUnavailable) co_return FailUnreachable(v);
      if (!v.ok()) co_return Fail(v, &w_.stats().aborts.validation);
    }
    // Slots for new keys only now that nothing can abort the commit: a slot claimed stays
    // claimed (hash_index.h), so a claim by a transaction that then failed validation would be
    // lost to the table for good.
    if (!writes.empty()) {
      Status s = co_await PrepareWrites(writes);
      if (s.code() == Code::kUnavailable) co_return FailUnreachable(s);
      if (!s.ok()) co_return Fail(s, &w_.stats().aborts.user);
    }
    if (protocol().log_and_visible && !writes.empty()) {
      PostLogRecord(writes, kLogMagic);
      PostWrites(writes, kInvisible, Replicas::kAll);
      co_await CommitFlush();
      w_.Reached(CommitStep::kLogged);
    }
  }
  if (protocol().log_and_visible) {
    // Write-visible reaches the replicas readers do not use before the one they do (FaRM's
    // COMMIT-BACKUP before COMMIT-PRIMARY): a timestamp a reader saw is then on every replica
    // up, so recovery of this CN finds it even if that MN dies too (docs/recovery.md).
    // A rejoining MN turns readable, and becomes the replica readers use for its keys, only at
    // an instant when no commit is between these rounds: else a reader could find the
    // timestamp there before the replica that was read so far has it (the machine waits for
    // that instant, holding new commits here meanwhile: recovery/mn_rejoin.h).
    while (w_.visible_gate_closed()) {
      co_await w_.sched().SleepFor(kVisibleGatePollNs);
    }
    w_.commits_mid_visible()++;
    mid_visible_ = true;
    BeginRound();
    PostVisible(writes, false);
    co_await CommitFlush();
    w_.Reached(CommitStep::kVisible);
    if (protocol().early_ack && !writes.empty() && BackupsHoldTimestamp(writes)) {
      // Every backup has the timestamp: recovery of this CN would roll the commit forward
      // (cluster/log_recovery.h), so it can be answered now. Readers of the primaries wait on
      // INVISIBLE and the locks stay held until the tail has published and unlocked, so no
      // reader or writer can tell the answer came early (docs/protocols.md "pond").
      Answer(writes);
      tail_ = true;
      w_.commits_publishing()++;
      if (answered_early_ != nullptr) *answered_early_ = weak_from_this();
      w_.sched().Spawn(Publish(shared_from_this(), std::move(writes)));
      co_return Status::Ok();
    }
  } else {
    // Motor: committed cells directly. The backups first and complete, then the primary in the
    // batch that frees its lock word: the next writer, who locks at the primary, can then never
    // be overtaken on a backup by this one's late WRITE (docs/protocols.md "Replica order").
    // Readers use the primary, so a version they see is on every replica up.
    //
    // The record naming the cells goes ahead of them on every MN they are on (Motor keeps an
    // operation log for coordinator failures; here it is in the memory pool, as lotus's): should
    // this CN die mid-commit, recovery finds which cells it wrote and, from the lock words it
    // still holds, whether to finish the commit from the backups or undo it
    // (cluster/mn_lock_recovery.h).
    BeginRound();
    if (!writes.empty()) PostLogRecord(writes, store::kMotorLogMagic);
    PostWrites(writes, commit_ts_, Replicas::kBackups);
    co_await CommitFlush();
    // A crash aimed at "logged" must find a record to recover, as under lotus and ford.
    if (!writes.empty()) w_.Reached(CommitStep::kLogged);
    BeginRound();
    PostWrites(writes, commit_ts_, Replicas::kPrimary);
    // Only a primary showing the write makes recovery finish this commit rather than undo it.
    if (DeletesIndexedKeys(writes)) co_await CommitFlush();
  }
  co_await Finish(writes);
  Answer(writes);
  co_return Status::Ok();
}

void MvccTxn::Answer(const std::vector<size_t>& writes) {
  finished_ = true;
  CountCommit();
  for (size_t i : writes) w_.Acknowledged(items_[i].lk.table, items_[i].lk.key, commit_ts_);
}

Task<void> MvccTxn::Publish(std::shared_ptr<TxnState> self, std::vector<size_t> writes) {
  auto& t = static_cast<MvccTxn&>(*self);
  co_await t.Finish(writes);
  t.tail_ = false;
  t.w_.commits_publishing()--;
}

Task<void> MvccTxn::Finish(const std::vector<size_t>& writes) {
  if (protocol().log_and_visible) {
    BeginRound();
    PostVisible(writes, true);
    UpdateVtCache(writes);
    // With MN lock words (+log-visible) the round just posted may share a batch with their
    // release only if it goes to the words' MNs, the primaries (PostUnlocks).
    if (!mn_held_.empty() && AnyReadReplicaOffPrimary(writes)) co_await CommitFlush();
    // Taking deleted keys out of trees flushes by itself, and frees the node locks it takes:
    // the round that holds their commit timestamps is carried out whole before it.
    if (DeletesIndexedKeys(writes)) co_await CommitFlush();
  }
  // The commit stands from here: deleted keys leave their trees, under their locks.
  if (DeletesIndexedKeys(writes)) co_await UnindexDeletes(writes, commit_ts_);
  // MN lock words go free after the writes to the same MN (the batch keeps posting order);
  // CN locks only after the flush: a transaction that locks next must find the versions
  // visible.
  BeginRound();  // (kept on from the primaries' writes if nothing flushed since)
  PostUnlocks();
  co_await CommitFlush();
  POND_ASSERT(round_.empty());
  if (mid_visible_) {
    w_.commits_mid_visible()--;
    mid_visible_ = false;
  }
  EndLocks(held_);
  held_.clear();
  w_.Reached(CommitStep::kUnlocked);
}

void MvccTxn::Abort() {
  if (tail_) return;  // answered: the tail publishes and unlocks
  EndLocks(held_);
  held_.clear();
  ReleaseMnLocksDetached();
  finished_ = true;
}

}  // namespace pond::txn
