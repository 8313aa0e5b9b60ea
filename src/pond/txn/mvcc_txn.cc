#include "pond/txn/mvcc_txn.h"

#include <algorithm>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/store/record.h"

namespace pond::txn {

namespace {

using store::Cell;
using store::kInvisible;

// Aborts carry short fixed messages: they are frequent under contention, and a message that
// fits std::string's inline buffer costs no allocation.
Status AbortedBecause(const char* why) { return Aborted(why); }

void CheckOk(const Status& s) { POND_CHECK_MSG(s.ok(), s.ToString().c_str()); }

}  // namespace

MvccTxn::~MvccTxn() {
  if (!finished_) Abort();
}

bool MvccTxn::LocalShard(const Item& it) const {
  return w_.cluster.shard_map.CnOf(it.lk) == w_.cn_id();
}

Task<Status> MvccTxn::LockOnCns(std::vector<size_t>& todo) {
  std::vector<lock::LockRequest> reqs;
  auto want = [&](const lock::LockKey& k, lock::LockMode mode) {
    for (auto& r : reqs) {
      if (r.key == k) {
        if (mode == lock::LockMode::kWrite) r.mode = mode;
        return;
      }
    }
    for (auto& h : held_) {
      if (h.key == k && (h.mode == lock::LockMode::kWrite || mode == lock::LockMode::kRead)) {
        return;  // already held in this or a stronger mode
      }
    }
    reqs.push_back({k, mode});
  };
  for (size_t i : todo) {
    Item& it = items_[i];
    if (it.access == Access::kRead) {
      if (isolation_ == Isolation::kSerializable) want(it.lk, lock::LockMode::kRead);
    } else {
      want(it.lk, lock::LockMode::kWrite);
    }
    if (it.access == Access::kInsert) {
      // Two inserts into one index bucket must exclude each other (Lotus §4.1).
      want(lock::LockKey::IndexBucket(it.lk.table, store::HomeBucket(*it.table, it.lk.key)),
           lock::LockMode::kWrite);
    }
  }
  if (reqs.empty()) co_return Status::Ok();
  Status s = co_await w_.locks->Acquire(owner_, reqs);
  if (!s.ok()) co_return Fail(AbortedBecause("lock conflict"), &w_.stats.aborts.lock_conflict);
  for (auto& r : reqs) {
    bool upgraded = false;
    for (auto& h : held_) {
      if (h.key == r.key) {
        h.mode = r.mode;
        upgraded = true;
      }
    }
    if (!upgraded) held_.push_back(r);
  }
  for (size_t i : todo) {
    Item& it = items_[i];
    it.locked = it.access != Access::kRead || isolation_ == Isolation::kSerializable;
  }
  co_return Status::Ok();
}

Task<Status> MvccTxn::Execute() {
  if (Status s = BeginExecute(); !s.ok()) co_return s;
  if (start_ts_ == 0) start_ts_ = co_await w_.tso->Get();
  std::vector<size_t> todo = Unexecuted();
  if (todo.empty()) co_return Status::Ok();
  if (kind_ == TxnKind::kReadWrite && protocol().cn_locks) {
    Status s = co_await LockOnCns(todo);
    if (!s.ok()) co_return s;
  }
  Status s = co_await ReadItems(todo);
  if (!s.ok()) co_return s;
  for (size_t i : todo) {
    Item& it = items_[i];
    it.executed = true;
    if (Status c = CheckRead(it); !c.ok()) co_return c;
  }
  co_return Status::Ok();
}

Status MvccTxn::ChooseVersion(Item& it) {
  // The caller has made sure no cell is INVISIBLE.
  it.read_cell = -1;
  it.read_ts = 0;
  uint64_t best = 0, newest = 0;
  int valid = 0;
  for (int c = 0; c < it.cvt.versions; c++) {
    const Cell& cell = it.cvt.cells[c];
    if (!cell.valid) continue;
    valid++;
    newest = std::max(newest, cell.commit_ts);
    if (cell.commit_ts < start_ts_ && cell.commit_ts >= best) {
      best = cell.commit_ts;
      it.read_cell = c;
    }
  }
  // A locked item must not have changed since the snapshot: its lock keeps it unchanged from
  // now to commit, so the transaction then reads as of its commit timestamp (docs/protocol.md).
  if (it.locked && newest > start_ts_) {
    return Fail(AbortedBecause("newer version"), &w_.stats.aborts.newer_version);
  }
  if (it.read_cell < 0 && valid == it.cvt.versions) {
    // Every cell is newer than the snapshot: the version it needs was recycled.
    return Fail(AbortedBecause("snapshot too old"), &w_.stats.aborts.snapshot_too_old);
  }
  it.read_ts = best;
  if (it.read_cell >= 0 && it.cvt.cells[it.read_cell].tombstone) it.read_cell = -1;
  return Status::Ok();
}

Task<Status> MvccTxn::ReadItems(std::vector<size_t> todo) {
  ClusterImpl& cl = w_.cluster;
  Endpoint& ep = *w_.ep;
  const bool mn_locks = MnLocks();
  // With locks on MNs a writer takes its commit timestamp before it writes anything, so a
  // reader that finds a lock word taken may be looking at a writer with a timestamp below its
  // snapshot whose versions are not there yet. A read-only transaction waits for the word, as a
  // lotus reader waits for INVISIBLE; a read-write one aborts under SI (waiting while holding
  // locks could deadlock) and reads on under SR, where validation at commit catches the writer.
  const bool lock_word_matters =
      !protocol().cn_locks && (kind_ == TxnKind::kReadOnly || isolation_ == Isolation::kSnapshot);
  const uint64_t self = OwnerWord();
  std::vector<std::vector<std::byte>> bufs(items_.size());
  std::vector<std::byte> delta_buf;  // motor's second record READ lands here
  std::vector<char> whole_bucket(items_.size(), 0);
  std::vector<char> read_cvt(items_.size(), 0);  // this attempt READs the item's CVT
  std::vector<uint64_t> cas_old(items_.size(), 0);
  std::vector<GAddr> cas_word(items_.size());
  std::vector<char> cas_posted(items_.size(), 0);
  // The lock word as read by its own READ, posted before the CVT's (see below).
  std::vector<uint64_t> lock_seen(items_.size(), 0);
  // Found absent by a bucket READ that was not preceded by a READ of the bucket's insert lock:
  // read both again (see below). Absent keys are rare, so only they pay that round trip.
  std::vector<char> guard_absent(items_.size(), 0);
  int invisible_waits = 0;
  for (int attempt = 0; !todo.empty(); attempt++) {
    if (attempt >= kReadAttemptsMax) {
      co_return Fail(AbortedBecause("torn reads"), &w_.stats.aborts.torn_read);
    }
    // 2. CVTs: cache, or one READ each, all in one batch. With MN locks, a read-write item's
    // CAS goes first in the batch, so the READ behind it sees the CVT as locked.
    std::vector<size_t> need_cvt;
    for (size_t i : todo) {
      Item& it = items_[i];
      read_cvt[i] = 0;
      cas_posted[i] = 0;
      lock_seen[i] = 0;
      MnId primary = cl.placement.Primary(it.lk.key);
      if (vt() != nullptr && LocalShard(it)) {
        if (auto hit = vt()->Get(it.lk)) {
          it.have_slot = true;
          it.ref = hit->ref;
          it.cvt = hit->cvt;
          continue;
        }
      }
      const bool want_bucket_lock = mn_locks && it.access == Access::kInsert && !it.bucket_locked;
      const bool want_lock = mn_locks && it.access != Access::kRead && !it.locked;
      std::optional<store::SlotRef> addr;
      if (it.have_slot) {
        addr = it.ref;
      } else if (w_.cn.addr != nullptr) {
        addr = w_.cn.addr->Get(it.lk);
      }
      if (want_bucket_lock) {
        cas_word[i] = BucketLockWord(it);
        ep.Cas(cas_word[i], 0, self, &cas_old[i]);
        cas_posted[i] = 1;
        addr.reset();  // an insert must see the whole home bucket under its lock
      } else if (want_lock && addr) {
        cas_word[i] = addr->Addr(*it.table, primary, 0) + offsetof(store::CvtHeader, lock);
        ep.Cas(cas_word[i], 0, self, &cas_old[i]);
        cas_posted[i] = 1;
      }
      if (addr) {
        bufs[i].resize(it.table->cvt_bytes);
        whole_bucket[i] = 0;
        it.ref = *addr;
        GAddr cvt_addr = addr->Addr(*it.table, primary, 0);
        // A READ copies from the end backwards (docs/formats.md), so the lock word inside the
        // CVT's copy is read *after* its cells and may show a writer's unlock without its cell.
        // Read first, in its own READ, a free lock word means: no writer with an older
        // timestamp is still to write, and the cells read next show what such writers wrote.
        if (lock_word_matters && !it.locked) {
          ep.Read(cvt_addr + offsetof(store::CvtHeader, lock), &lock_seen[i], sizeof(uint64_t));
        }
        ep.Read(cvt_addr, bufs[i].data(), it.table->cvt_bytes);
      } else {
        bufs[i].resize(it.table->bucket_bytes());
        whole_bucket[i] = 1;
        // A key found absent: an insert of it holds the bucket's insert lock from before it
        // takes its commit timestamp until its slot is live, so that word, read first, says
        // whether an insert the snapshot must see may still be on its way.
        if (guard_absent[i] && !want_bucket_lock) {
          ep.Read(BucketLockWord(it), &lock_seen[i], sizeof(uint64_t));
        }
        ep.Read(it.table->BucketAddr(primary, 0, store::HomeBucket(*it.table, it.lk.key)),
                bufs[i].data(), it.table->bucket_bytes());
      }
      read_cvt[i] = 1;
      need_cvt.push_back(i);
    }
    if (!need_cvt.empty()) CheckOk(co_await ep.Flush());
    // Locks first: a refused CAS aborts; a granted one is held whatever the READ shows.
    bool refused = false;
    for (size_t i : need_cvt) {
      if (!cas_posted[i]) continue;
      Item& it = items_[i];
      if (cas_old[i] != 0 && cas_old[i] != self) {
        refused = true;
        continue;
      }
      if (cas_old[i] == 0) mn_held_.push_back(cas_word[i]);
      if (it.access == Access::kInsert && !it.bucket_locked) {
        it.bucket_locked = true;
      } else {
        it.locked = true;
      }
    }
    if (refused) {
      co_return Fail(AbortedBecause("lock conflict"), &w_.stats.aborts.lock_conflict);
    }
    std::vector<size_t> retry, to_read;
    bool wait = false;
    // An absent key whose bucket's insert lock another transaction holds: a read-only reader
    // waits for it as for a locked CVT; a read-write one aborts (see lock_word_matters).
    bool absent_but_locked = false;
    auto absent = [&](Item& it, size_t i) {
      it.have_slot = false;
      it.read_cell = -1;
      it.read_ts = 0;
      // An insert holding the bucket's insert lock needs no guard: no other insert can be on
      // its way.
      if (it.bucket_locked) return;
      if (lock_word_matters && !it.locked && !guard_absent[i]) {
        guard_absent[i] = 1;  // read again, the insert lock first; not a failed attempt
        retry.push_back(i);
        attempt--;
        return;
      }
      if (lock_word_matters && !it.locked && lock_seen[i] != 0 && lock_seen[i] != self) {
        if (kind_ == TxnKind::kReadWrite) {
          absent_but_locked = true;
          return;
        }
        wait = true;
        retry.push_back(i);
      }
    };
    for (size_t i : need_cvt) {
      Item& it = items_[i];
      std::span<const std::byte> cvt_bytes;
      if (whole_bucket[i]) {
        store::BucketScan scan = store::ScanBucket(*it.table, bufs[i], it.lk.key);
        if (scan.match >= 0) {
          it.ref = store::SlotRef{store::HomeBucket(*it.table, it.lk.key), scan.match};
          cvt_bytes = std::span(bufs[i]).subspan(
              static_cast<size_t>(scan.match) * it.table->cvt_bytes, it.table->cvt_bytes);
        } else if (scan.first_empty < 0) {
          // The home bucket is full: the key may have overflowed into a later bucket.
          Result<store::Found> f =
              co_await store::Lookup(ep, *it.table, cl.placement.Primary(it.lk.key), 0, it.lk.key);
          if (f.ok()) {
            it.ref = f->ref;
            it.have_slot = true;
            it.cvt = f->cvt;
            if (w_.cn.addr != nullptr) w_.cn.addr->Put(it.lk, it.ref);
            if ((mn_locks && it.access != Access::kRead && !it.locked) ||
                (lock_word_matters && !it.locked)) {
              // Lock the slot, or read its lock word first, now that it is known.
              retry.push_back(i);
              attempt--;
            } else {
              to_read.push_back(i);
            }
            continue;
          }
          if (f.status().code() == Code::kTornRead) {
            retry.push_back(i);
            continue;
          }
          POND_CHECK(f.status().code() == Code::kNotFound);
          absent(it, i);
          continue;
        } else {
          absent(it, i);  // not in the index: nothing to read
          continue;
        }
      } else {
        cvt_bytes = bufs[i];
      }
      Result<store::Cvt> cvt = store::DecodeCvt(cvt_bytes, it.table->versions);
      if (!cvt.ok()) {
        retry.push_back(i);  // a cell caught mid-write
        continue;
      }
      if (!whole_bucket[i] && (cvt->state != store::kSlotLive || cvt->key != it.lk.key)) {
        // A stale cached address: forget it and find the key in its bucket. A lock word taken
        // there guards another key; it stays held (a spurious conflict at worst) until the end.
        if (w_.cn.addr != nullptr) w_.cn.addr->Invalidate(it.lk);
        it.have_slot = false;
        if (cas_posted[i]) it.locked = false;
        retry.push_back(i);
        continue;
      }
      it.have_slot = true;
      it.cvt = *cvt;
      if (w_.cn.addr != nullptr) w_.cn.addr->Put(it.lk, it.ref);
      if ((mn_locks && it.access != Access::kRead && !it.locked) ||
          (whole_bucket[i] && lock_word_matters && !it.locked)) {
        // Found by a bucket READ: lock the slot, or read its lock word first, on the next attempt.
        retry.push_back(i);
        attempt--;
        continue;
      }
      to_read.push_back(i);
    }
    if (absent_but_locked) {
      co_return Fail(AbortedBecause("lock conflict"), &w_.stats.aborts.lock_conflict);
    }
    // Items served from the VT cache go straight to version choice.
    for (size_t i : todo) {
      if (!read_cvt[i]) to_read.push_back(i);
    }

    // 3. Choose versions. A cell between write-invisible and write-visible may get a commit
    // timestamp below ours, so its reader must wait to see which (docs/protocol.md).
    std::vector<size_t> fetch;
    for (size_t i : to_read) {
      Item& it = items_[i];
      bool busy = false;
      if (lock_word_matters && !it.locked && lock_seen[i] != 0 && lock_seen[i] != self) {
        if (kind_ == TxnKind::kReadWrite) {
          co_return Fail(AbortedBecause("lock conflict"), &w_.stats.aborts.lock_conflict);
        }
        busy = true;
      }
      for (int c = 0; c < it.cvt.versions; c++) {
        if (it.cvt.cells[c].valid && it.cvt.cells[c].commit_ts == kInvisible) busy = true;
      }
      if (busy) {
        wait = true;
        retry.push_back(i);
        continue;
      }
      Status s = ChooseVersion(it);
      if (!s.ok()) co_return s;
      // Rule 1 of the VT cache: only a lock holder fills it.
      if (vt() != nullptr && it.locked && LocalShard(it)) {
        vt()->Put(it.lk, cache::CachedCvt{it.ref, it.cvt});
      }
      if (it.exists()) fetch.push_back(i);
    }

    // 4. Records, one batch. Motor's layout keeps a full value plus per-version deltas, so a
    // version costs a second READ of the same size (docs/protocols.md "Value + delta").
    for (size_t i : fetch) {
      Item& it = items_[i];
      const Cell& cell = it.cvt.cells[it.read_cell];
      GAddr rec = GAddr::Make(cl.placement.Primary(it.lk.key), cell.record);
      bufs[i].resize(it.table->record_stride);
      if (!protocol().full_record_store) {
        delta_buf.resize(std::max<size_t>(delta_buf.size(), it.table->record_stride));
        ep.Read(rec, delta_buf.data(), it.table->record_stride);
      }
      ep.Read(rec, bufs[i].data(), it.table->record_stride);
    }
    if (!fetch.empty()) CheckOk(co_await ep.Flush());
    for (size_t i : fetch) {
      Item& it = items_[i];
      it.value.resize(it.table->value_bytes);
      Status s = store::DecodeRecord(bufs[i], it.cvt.cells[it.read_cell].cv, it.value);
      if (!s.ok()) {
        // The version was overwritten while we read it (its cell recycled): read the CVT again;
        // if the version is gone, ChooseVersion aborts.
        if (vt() != nullptr) vt()->Invalidate(it.lk);
        retry.push_back(i);
      }
    }
    if (wait) {
      if (++invisible_waits > kInvisibleWaitsMax) {
        co_return Fail(AbortedBecause("invisible too long"), &w_.stats.aborts.invisible_wait);
      }
      attempt--;  // waiting for a writer is not a failed attempt
      co_await w_.sched.SleepFor(kInvisibleWaitNs);
    }
    todo = std::move(retry);
  }
  co_return Status::Ok();
}

Task<Status> MvccTxn::PrepareWrites(const std::vector<size_t>& writes) {
  ClusterImpl& cl = w_.cluster;
  Endpoint& ep = *w_.ep;
  for (size_t i : writes) {
    Item& it = items_[i];
    MnId primary = cl.placement.Primary(it.lk.key);
    if (!it.have_slot) {
      Result<store::SlotRef> ref = co_await store::ClaimSlot(ep, *it.table, primary, it.lk.key);
      if (!ref.ok()) co_return ref.status();
      it.ref = *ref;
      it.have_slot = true;
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
      Result<uint64_t> lane = co_await w_.alloc->Alloc(ep, primary, it.table->record_stride);
      if (!lane.ok()) co_return lane.status();
      record = cl.layout.RecordOffset(0, *lane);
    }
    it.new_cell = Cell{.cv = static_cast<uint8_t>(old.cv + 1),
                       .valid = true,
                       .tombstone = erase,
                       .commit_ts = kInvisible,
                       .record = record};
  }
  co_return Status::Ok();
}

void MvccTxn::PostWrites(const std::vector<size_t>& writes, uint64_t ts) {
  ClusterImpl& cl = w_.cluster;
  Endpoint& ep = *w_.ep;
  const store::PoolLayout& layout = cl.layout;
  // Per MN in this order: record, cell, and for new keys the key and meta=live after the cell,
  // so a slot that reads live has its cell.
  for (size_t i : writes) {
    Item& it = items_[i];
    it.new_cell.commit_ts = ts;
    uint64_t lane_rel =
        it.new_cell.record == 0 ? 0 : it.new_cell.record - layout.RecordOffset(0, 0);
    if (!it.new_cell.tombstone) {
      it.record_buf.resize(it.table->record_stride);
      store::EncodeRecord(it.new_value, it.new_cell.cv, it.record_buf);
    }
    for (int r = 0; r < cl.placement.replication(); r++) {
      MnId mn = cl.placement.Replica(it.lk.key, r);
      Cell c = it.new_cell;
      if (c.record != 0) c.record = layout.RecordOffset(r, lane_rel);
      it.raw_cells[r] = store::EncodeCell(c);
      GAddr slot = it.ref.Addr(*it.table, mn, r);
      if (!c.tombstone) {
        GAddr rec = GAddr::Make(mn, c.record);
        // Motor's value + delta layout writes the value package and the attributes.
        if (!protocol().full_record_store) {
          ep.Write(rec, it.record_buf.data(), it.table->record_stride);
        }
        ep.Write(rec, it.record_buf.data(), it.table->record_stride);
      }
      ep.Write(slot + sizeof(store::CvtHeader) + it.write_cell * sizeof(store::CvtCell),
               &it.raw_cells[r], sizeof(store::CvtCell));
      if (it.live_meta != 0) {
        ep.Write(slot + offsetof(store::CvtHeader, key), &it.lk.key, sizeof(uint64_t));
        ep.Write(slot + offsetof(store::CvtHeader, meta), &it.live_meta, sizeof(uint64_t));
      }
    }
  }
}

void MvccTxn::PostLogRecord(const std::vector<size_t>& writes) {
  log_buf_.assign(sizeof(LogRecordHeader) + writes.size() * sizeof(LogItem), std::byte{0});
  LogRecordHeader h{kLogMagic,  static_cast<uint16_t>(writes.size()),
                    w_.cn_id(), owner_.txn_id,
                    w_.index,   {0, 0, 0}};
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
  w_.ep->Write(w_.log->Reserve(log_buf_.size()), log_buf_.data(),
               static_cast<uint32_t>(log_buf_.size()));
}

Task<Status> MvccTxn::Validate() {
  ClusterImpl& cl = w_.cluster;
  Endpoint& ep = *w_.ep;
  const uint64_t self = OwnerWord();
  std::vector<size_t> check = Unprotected();
  for (int attempt = 0; !check.empty(); attempt++) {
    if (attempt >= kReadAttemptsMax) co_return AbortedBecause("validation: torn reads");
    std::vector<std::vector<std::byte>> bufs(check.size());
    std::vector<uint64_t> lock_seen(check.size(), 0);
    for (size_t k = 0; k < check.size(); k++) {
      Item& it = items_[check[k]];
      MnId primary = cl.placement.Primary(it.lk.key);
      if (it.have_slot) {
        bufs[k].resize(it.table->cvt_bytes);
        // The lock word first, by itself: see ReadItems.
        GAddr cvt_addr = it.ref.Addr(*it.table, primary, 0);
        ep.Read(cvt_addr + offsetof(store::CvtHeader, lock), &lock_seen[k], sizeof(uint64_t));
        ep.Read(cvt_addr, bufs[k].data(), it.table->cvt_bytes);
      } else {
        // Absent when read: the bucket's insert lock first (see ReadItems), then the bucket.
        bufs[k].resize(it.table->bucket_bytes());
        ep.Read(BucketLockWord(it), &lock_seen[k], sizeof(uint64_t));
        ep.Read(it.table->BucketAddr(primary, 0, store::HomeBucket(*it.table, it.lk.key)),
                bufs[k].data(), it.table->bucket_bytes());
      }
    }
    CheckOk(co_await ep.Flush());
    std::vector<size_t> retry;
    for (size_t k = 0; k < check.size(); k++) {
      Item& it = items_[check[k]];
      if (!it.have_slot) {
        // Absent when read: it must still be absent, with no insert of it under way.
        if (lock_seen[k] != 0 && lock_seen[k] != self) co_return AbortedBecause("validation");
        store::BucketScan scan = store::ScanBucket(*it.table, bufs[k], it.lk.key);
        if (scan.match >= 0) co_return AbortedBecause("validation");
        if (scan.first_empty < 0) {
          // A full home bucket: the key may have been inserted into a later one.
          Result<store::Found> f =
              co_await store::Lookup(ep, *it.table, cl.placement.Primary(it.lk.key), 0, it.lk.key);
          if (f.ok()) co_return AbortedBecause("validation");
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
      bool changed = lock_seen[k] != 0 && lock_seen[k] != self;
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
    vt()->Put(it.lk, cache::CachedCvt{it.ref, it.cvt});
  }
}

Task<Status> MvccTxn::Commit() {
  if (Status s = CheckCommittable(); !s.ok()) co_return s;
  if (kind_ == TxnKind::kReadOnly) {
    finished_ = true;
    w_.stats.committed_read_only++;
    co_return Status::Ok();
  }
  std::vector<size_t> writes = Writes();
  if (protocol().cn_locks) {
    // Lotus: write-invisible and the commit log in one round trip, then the timestamp.
    if (!writes.empty()) {
      Status s = co_await PrepareWrites(writes);
      if (!s.ok()) co_return Fail(s, &w_.stats.aborts.user);
      PostWrites(writes, kInvisible);
      PostLogRecord(writes);
      CheckOk(co_await w_.ep->Flush());
      // VT cache rule 2: the cache shows the new cell INVISIBLE before the commit timestamp is
      // granted, and the timestamp before the MN does, so the cache is never older than memory.
      UpdateVtCache(writes);
    }
    commit_ts_ = co_await w_.tso->Get();
  } else {
    // Locks on MNs: the timestamp first, then validation, before anything is written — readers
    // that must not miss this transaction's versions see its lock words instead (ReadItems).
    commit_ts_ = co_await w_.tso->Get();
    if (isolation_ == Isolation::kSerializable) {
      Status v = co_await Validate();
      if (!v.ok()) co_return Fail(v, &w_.stats.aborts.validation);
    }
    // Slots for new keys only now that nothing can abort the commit: a slot claimed stays
    // claimed (hash_index.h), so a claim by a transaction that then failed validation would be
    // lost to the table for good.
    if (!writes.empty()) {
      Status s = co_await PrepareWrites(writes);
      if (!s.ok()) co_return Fail(s, &w_.stats.aborts.user);
    }
    if (protocol().log_and_visible && !writes.empty()) {
      PostWrites(writes, kInvisible);
      PostLogRecord(writes);
      CheckOk(co_await w_.ep->Flush());
    }
  }
  if (protocol().log_and_visible) {
    for (size_t i : writes) {
      Item& it = items_[i];
      it.new_cell.commit_ts = commit_ts_;
      for (int r = 0; r < w_.cluster.placement.replication(); r++) {
        MnId mn = w_.cluster.placement.Replica(it.lk.key, r);
        w_.ep->Write(it.ref.Addr(*it.table, mn, r) + sizeof(store::CvtHeader) +
                         it.write_cell * sizeof(store::CvtCell) +
                         offsetof(store::CvtCell, commit_ts),
                     &commit_ts_, sizeof(commit_ts_));
      }
    }
    UpdateVtCache(writes);
  } else {
    // Motor: committed cells directly (it relies on battery-backed MN memory, not a log).
    PostWrites(writes, commit_ts_);
  }
  // MN lock words go free after the writes to the same MN (the batch keeps posting order);
  // CN locks only after the flush: a transaction that locks next must find the versions
  // visible.
  PostUnlocks();
  CheckOk(co_await w_.ep->Flush());
  if (!held_.empty()) w_.locks->Release(owner_, held_);
  held_.clear();
  finished_ = true;
  w_.stats.committed++;
  co_return Status::Ok();
}

void MvccTxn::Abort() {
  if (!held_.empty()) w_.locks->Release(owner_, held_);
  held_.clear();
  ReleaseMnLocksDetached();
  finished_ = true;
}

}  // namespace pond::txn
