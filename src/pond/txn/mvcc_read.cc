// MvccTxn's Execute: locks on CN lock tables, then the reads of CVTs and records in rounds
// (mvcc_txn.h; the argument for each step is in docs/protocol.md and docs/protocols.md).
#include "pond/txn/mvcc_txn.h"

#include <algorithm>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/base/node_set.h"
#include "pond/store/record.h"

namespace pond::txn {

using store::Cell;
using store::kInvisible;

bool MvccTxn::LocalShard(const Item& it) const {
  // Managed here, not only named here by the map: a shard given to this CN by a failure's
  // hand-over is in the map before it opens, and this CN may hold VT-cache entries from an
  // earlier time it managed the shard (before a restarted CN took it home), stale since. The
  // opening drops them (the CN's controls, OpenShard); until then a snapshot reader, which takes no
  // lock, must not use them.
  const uint32_t shard = it.lk.shard();
  return w_.shard_map().CnOf(shard) == w_.cn_id() && w_.cn_locks().Manages(shard);
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
  Status s = co_await w_.locks().Acquire(owner_, reqs);
  if (!s.ok()) co_return Fail(AbortedBecause("lock conflict"), &w_.stats().aborts.lock_conflict);
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
  std::vector<size_t> todo = Unexecuted();
  if (start_ts_ == 0) {
    if (MayReadLatest(todo)) {
      reads_latest_ = true;
    } else {
      if (reads_latest_) {
        // A read-only transaction that read one key at its newest executes more: that key is
        // read again at the snapshot, and must not have changed (as a promoted key: CheckRead).
        for (size_t i = 0; i < items_.size(); i++) {
          Item& it = items_[i];
          if (!it.executed) continue;
          it.executed = false;
          it.reread = true;
          it.first_exists = it.exists();
          it.first_version = it.read_ts;
          todo.push_back(i);
        }
        std::sort(todo.begin(), todo.end());
        reads_latest_ = false;
      }
      start_ts_ = co_await w_.tso().Get();
    }
  }
  if (todo.empty()) co_return Status::Ok();
  if (kind_ == TxnKind::kReadWrite && protocol().cn_locks) {
    Status s = co_await LockOnCns(todo);
    if (!s.ok()) co_return s;
    w_.Reached(CommitStep::kLocked);
  }
  Status s = co_await ReadItems(todo);
  if (!s.ok()) co_return s;
  if (kind_ == TxnKind::kReadWrite) w_.Reached(CommitStep::kRead);
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
  // Reading the newest version: every cell is older than a snapshot that has not begun.
  const uint64_t snapshot = reads_latest_ ? kInvisible : start_ts_;
  for (int c = 0; c < it.cvt.versions; c++) {
    const Cell& cell = it.cvt.cells[c];
    if (!cell.valid) continue;
    valid++;
    newest = std::max(newest, cell.commit_ts);
    if (cell.commit_ts < snapshot && cell.commit_ts >= best) {
      best = cell.commit_ts;
      it.read_cell = c;
    }
  }
  // A locked item must not have changed since the snapshot: its lock keeps it unchanged from
  // now to commit, so the transaction then reads as of its commit timestamp (docs/protocol.md).
  if (it.locked && newest > snapshot) {
    return Fail(AbortedBecause("newer version"), &w_.stats().aborts.newer_version);
  }
  if (it.read_cell < 0 && valid > 0) {
    // Every version is newer than the snapshot. With every cell full, the version it needs was
    // recycled. With a cell empty, either the key was inserted after the snapshot or recovery
    // rolled back a write into the cell that held the oldest version (docs/recovery.md): the two
    // look alike, and answering "absent" in the second would be wrong, so both abort; the retry
    // reads a newer snapshot.
    return Fail(AbortedBecause("snapshot too old"), &w_.stats().aborts.snapshot_too_old);
  }
  it.read_ts = best;
  if (it.read_cell >= 0 && it.cvt.cells[it.read_cell].tombstone) it.read_cell = -1;
  return Status::Ok();
}

// ReadItems runs rounds until every item is read. A round: PostCvtReads (one batch: locks, lock
// words, CVTs or buckets), BookLocks, DecodeCvts, ChooseVersions, ReadRecords (one batch). An item
// that needs more goes to the next round: to take a lock or read a lock word now that its slot is
// known, to guard an absent key, to wait for a writer — progress, not failure — or because it was
// read torn or at a stale address, which makes the round a failed attempt. kReadAttemptsMax
// failed attempts abort ("torn reads").
Task<Status> MvccTxn::ReadItems(std::vector<size_t> todo) {
  ReadPass p;
  p.mn_locks = MnLocks();
  // With locks on MNs a writer takes its commit timestamp before it writes anything, so a
  // reader that finds a lock word taken may be looking at a writer with a timestamp below its
  // snapshot whose versions are not there yet. A read-only transaction waits for the word, as a
  // lotus reader waits for INVISIBLE; a read-write one aborts under SI (waiting while holding
  // locks could deadlock) and reads on under SR, where validation at commit catches the writer.
  p.lock_word_matters =
      !protocol().cn_locks && (kind_ == TxnKind::kReadOnly || isolation_ == Isolation::kSnapshot);
  p.self = OwnerWord();
  p.items.resize(items_.size());
  int failed_attempts = 0, invisible_waits = 0;
  while (!todo.empty()) {
    if (failed_attempts >= kReadAttemptsMax) {
      co_return Fail(AbortedBecause("torn reads"), &w_.stats().aborts.torn_read);
    }
    p.NewRound();
    if (!protocol().cn_locks) {
      for (size_t i : todo) {
        if (Status s = PinLockReplica(items_[i]); !s.ok()) co_return FailUnreachable(s);
      }
    }
    PostCvtReads(todo, p);
    if (!p.need_cvt.empty()) {
      if (Endpoint::FlushResult f = co_await w_.ep().FlushReporting(); !f.status.ok()) {
        // The words won on the MNs that answered are released with the rest; those on an MN
        // that did not answer may have been won too, its acknowledgement lost (mn_unknown_).
        for (size_t i : p.need_cvt) {
          const ItemRead& r = p.items[i];
          if (!r.cas_posted) continue;
          if (MaskHas(f.unreachable, r.cas_word.mn())) {
            mn_unknown_.push_back(r.cas_word);
          } else if (r.cas_old == 0) {
            mn_held_.push_back(r.cas_word);
          }
        }
        co_return FailUnreachable(f.status);
      }
    }
    if (Status s = BookLocks(p); !s.ok()) co_return s;
    if (Status s = co_await DecodeCvts(p); !s.ok()) co_return s;
    // Items served from the VT cache go straight to version choice.
    for (size_t i : todo) {
      if (!p.items[i].read_cvt) p.to_read.push_back(i);
    }
    if (Status s = ChooseVersions(p); !s.ok()) co_return s;
    if (Status s = co_await ReadRecords(p); !s.ok()) co_return s;
    if (p.failed) failed_attempts++;
    if (p.wait) {
      if (++invisible_waits > kInvisibleWaitsMax) {
        co_return Fail(AbortedBecause("invisible too long"), &w_.stats().aborts.invisible_wait);
      }
      co_await w_.sched().SleepFor(kInvisibleWaitNs);
    }
    todo = std::move(p.retry);
  }
  co_return Status::Ok();
}

void MvccTxn::PostCvtReads(const std::vector<size_t>& todo, ReadPass& p) {
  // CVTs: from the VT cache, or one READ each, all in one batch. With MN locks, a read-write
  // item's CAS goes first in the batch, so the READ behind it sees the CVT as locked.
  Endpoint& ep = w_.ep();
  p.gone_at = w_.gone_generation();
  for (size_t i : todo) {
    Item& it = items_[i];
    ItemRead& r = p.items[i];
    r.read_cvt = false;
    r.cas_posted = false;
    r.lock_seen = 0;
    r.cached_cell = -1;
    // With MN locks (motor) every access goes to the replica of the key's lock words; lotus
    // reads the first replica up.
    r.rep = protocol().cn_locks ? w_.placement().ReadReplica(it.lk.key) : it.lock_rep;
    const MnId primary = w_.placement().Replica(it.lk.key, r.rep);
    if (vt() != nullptr && LocalShard(it)) {
      if (auto hit = vt()->Get(it.lk)) {
        it.have_slot = true;
        it.ref = hit->ref;
        it.cvt = hit->cvt;
        if (hit->value_cell >= 0 && hit->value_bytes == it.table->value_bytes) {
          it.value.assign(hit->value.begin(), hit->value.begin() + hit->value_bytes);
          r.cached_cell = hit->value_cell;
          r.cached_cv = hit->value_cv;
        }
        continue;
      }
    }
    const bool want_bucket_lock = p.mn_locks && it.access == Access::kInsert && !it.bucket_locked;
    const bool want_lock = p.mn_locks && it.access != Access::kRead && !it.locked;
    std::optional<store::SlotRef> addr;
    if (it.have_slot) {
      addr = it.ref;
    } else if (w_.addr_cache() != nullptr) {
      addr = w_.addr_cache()->Get(it.lk);
    }
    if (want_bucket_lock) {
      r.cas_word = BucketLockWord(it);
      r.cas_posted = true;
      addr.reset();  // an insert must see the whole home bucket under its lock
    } else if (want_lock && addr) {
      r.cas_word = addr->Addr(*it.table, primary, r.rep) + offsetof(store::CvtHeader, lock);
      r.cas_posted = true;
    }
    r.cas_old = 0;
    if (r.cas_posted) ep.Cas(r.cas_word, 0, p.self, &r.cas_old);
    if (addr) {
      r.buf.resize(it.table->cvt_bytes);
      r.whole_bucket = false;
      it.ref = *addr;
      GAddr cvt_addr = addr->Addr(*it.table, primary, r.rep);
      // A READ copies from the end backwards (docs/formats.md), so the lock word inside the
      // CVT's copy is read *after* its cells and may show a writer's unlock without its cell.
      // Read first, in its own READ, a free lock word means: no writer with an older timestamp
      // is still to write, and the cells read next show what such writers wrote.
      if (p.lock_word_matters && !it.locked) {
        ep.Read(cvt_addr + offsetof(store::CvtHeader, lock), &r.lock_seen, sizeof(uint64_t));
      }
      ep.Read(cvt_addr, r.buf.data(), it.table->cvt_bytes);
    } else {
      r.buf.resize(it.table->bucket_bytes());
      r.whole_bucket = true;
      // A key found absent: an insert of it holds the bucket's insert lock from before it takes
      // its commit timestamp until its slot is live, so that word, read first, says whether an
      // insert the snapshot must see may still be on its way.
      if (r.guard_absent && !want_bucket_lock) {
        ep.Read(BucketLockWord(it), &r.lock_seen, sizeof(uint64_t));
      }
      ep.Read(it.table->BucketAddr(primary, r.rep, store::HomeBucket(*it.table, it.lk.key)),
              r.buf.data(), it.table->bucket_bytes());
    }
    r.read_cvt = true;
    p.need_cvt.push_back(i);
  }
}

Status MvccTxn::BookLocks(ReadPass& p) {
  // A refused CAS aborts; a granted one is held whatever the READ behind it shows.
  bool refused = false;
  for (size_t i : p.need_cvt) {
    ItemRead& r = p.items[i];
    if (!r.cas_posted) continue;
    Item& it = items_[i];
    if (r.cas_old != 0 && r.cas_old != p.self) {
      if (w_.HolderGone(r.cas_old)) FreeGoneWord(r.cas_word, r.cas_old);
      refused = true;
      continue;
    }
    if (r.cas_old == 0) mn_held_.push_back(r.cas_word);
    if (it.access == Access::kInsert && !it.bucket_locked) {
      it.bucket_locked = true;
    } else {
      it.locked = true;
    }
  }
  if (refused) return Fail(AbortedBecause("lock conflict"), &w_.stats().aborts.lock_conflict);
  return Status::Ok();
}

void MvccTxn::Absent(size_t i, ReadPass& p) {
  Item& it = items_[i];
  ItemRead& r = p.items[i];
  it.have_slot = false;
  it.read_cell = -1;
  it.read_ts = 0;
  // Only a reader that watches lock words (see ReadItems) must rule out an insert under way, and
  // one holding the bucket's insert lock knows there is none.
  if (!p.lock_word_matters || it.locked || it.bucket_locked) return;
  if (!r.guard_absent) {
    r.guard_absent = true;  // read again, the insert lock first
    p.retry.push_back(i);
    return;
  }
  if (HeldByOther(r.lock_seen, p.gone_at)) {
    if (kind_ == TxnKind::kReadWrite) {
      p.absent_but_locked = true;
      return;
    }
    p.wait = true;
    p.retry.push_back(i);
  }
}

Task<Status> MvccTxn::DecodeCvts(ReadPass& p) {
  // A slot just found by a bucket READ: to be locked (MN locks), or its lock word read first,
  // next round.
  auto slot_needs_round = [&](const Item& it, bool whole_bucket) {
    return (p.mn_locks && it.access != Access::kRead && !it.locked) ||
           (whole_bucket && p.lock_word_matters && !it.locked);
  };
  for (size_t i : p.need_cvt) {
    Item& it = items_[i];
    ItemRead& r = p.items[i];
    std::span<const std::byte> cvt_bytes = r.buf;
    if (r.whole_bucket) {
      store::BucketScan scan = store::ScanBucket(*it.table, r.buf, it.lk.key);
      if (scan.match < 0 && scan.first_empty >= 0) {
        Absent(i, p);  // not in the index: nothing to read
        continue;
      }
      if (scan.match < 0) {
        // The home bucket is full: the key may have overflowed into a later bucket.
        Result<store::Found> f = co_await store::Lookup(
            w_.ep(), *it.table, w_.placement().Replica(it.lk.key, r.rep), r.rep, it.lk.key);
        if (f.ok()) {
          it.ref = f->ref;
          it.have_slot = true;
          it.cvt = f->cvt;
          ToPrimaryLane(it.cvt, r.rep);
          if (w_.addr_cache() != nullptr) w_.addr_cache()->Put(it.lk, it.ref);
          (slot_needs_round(it, true) ? p.retry : p.to_read).push_back(i);
        } else if (f.status().code() == Code::kTornRead) {
          p.retry.push_back(i);
          p.failed = true;
        } else if (f.status().code() == Code::kUnavailable) {
          co_return FailUnreachable(f.status());
        } else {
          POND_CHECK(f.status().code() == Code::kNotFound);
          Absent(i, p);
        }
        continue;
      }
      it.ref = store::SlotRef{store::HomeBucket(*it.table, it.lk.key), scan.match};
      cvt_bytes = std::span(r.buf).subspan(static_cast<size_t>(scan.match) * it.table->cvt_bytes,
                                           it.table->cvt_bytes);
    }
    Result<store::Cvt> cvt = store::DecodeCvt(cvt_bytes, it.table->versions);
    if (!cvt.ok()) {
      p.retry.push_back(i);  // a cell caught mid-write
      p.failed = true;
      continue;
    }
    if (!r.whole_bucket && (cvt->state != store::kSlotLive || cvt->key != it.lk.key)) {
      // A stale cached address: forget it and find the key in its bucket. A lock word taken
      // there guards another key; it stays held (a spurious conflict at worst) until the end.
      if (w_.addr_cache() != nullptr) w_.addr_cache()->Invalidate(it.lk);
      it.have_slot = false;
      if (r.cas_posted) it.locked = false;
      p.retry.push_back(i);
      p.failed = true;
      continue;
    }
    it.have_slot = true;
    it.cvt = *cvt;
    ToPrimaryLane(it.cvt, r.rep);
    if (w_.addr_cache() != nullptr) w_.addr_cache()->Put(it.lk, it.ref);
    (slot_needs_round(it, r.whole_bucket) ? p.retry : p.to_read).push_back(i);
  }
  if (p.absent_but_locked) {
    co_return Fail(AbortedBecause("lock conflict"), &w_.stats().aborts.lock_conflict);
  }
  co_return Status::Ok();
}

Status MvccTxn::ChooseVersions(ReadPass& p) {
  // A cell between write-invisible and write-visible may get a commit timestamp below ours, so
  // its reader must wait to see which (docs/protocol.md); so must one behind a taken lock word.
  for (size_t i : p.to_read) {
    Item& it = items_[i];
    const ItemRead& r = p.items[i];
    bool busy = false;
    if (p.lock_word_matters && !it.locked && HeldByOther(r.lock_seen, p.gone_at)) {
      if (kind_ == TxnKind::kReadWrite) {
        return Fail(AbortedBecause("lock conflict"), &w_.stats().aborts.lock_conflict);
      }
      busy = true;
    }
    for (int c = 0; c < it.cvt.versions; c++) {
      if (it.cvt.cells[c].valid && it.cvt.cells[c].commit_ts == kInvisible) busy = true;
    }
    if (busy) {
      p.wait = true;
      p.retry.push_back(i);
      continue;
    }
    if (Status s = ChooseVersion(it); !s.ok()) return s;
    // Rule 1 of the VT cache: only a lock holder fills it (from a CVT it READ: one the cache
    // gave is there already, perhaps with its value).
    if (vt() != nullptr && it.locked && r.read_cvt && LocalShard(it)) {
      vt()->Put(it.lk, cache::CachedCvt{it.ref, it.cvt});
    }
    if (it.exists()) p.fetch.push_back(i);
  }
  return Status::Ok();
}

Task<Status> MvccTxn::ReadRecords(ReadPass& p) {
  // One batch. Motor's layout keeps a full value plus per-version deltas, so a version costs a
  // second READ of the same size (docs/protocols.md "Value + delta").
  Endpoint& ep = w_.ep();
  // The delta READs share one scratch buffer, sized for the largest before the first is posted:
  // growing it between two posts would move it under a READ already aimed at it (the buffer rule
  // in transport/endpoint.h).
  if (!protocol().full_record_store) {
    size_t need = 0;
    for (size_t i : p.fetch) need = std::max<size_t>(need, items_[i].table->record_stride);
    if (p.delta_buf.size() < need) p.delta_buf.resize(need);
  }
  size_t posted = 0;
  for (size_t i : p.fetch) {
    Item& it = items_[i];
    ItemRead& r = p.items[i];
    if (r.cached_cell >= 0 && r.cached_cell == it.read_cell &&
        r.cached_cv == it.cvt.cells[it.read_cell].cv) {
      continue;  // the VT cache gave this version's value (value_cache)
    }
    r.cached_cell = -1;
    posted++;
    const GAddr rec = RecordAddr(it, it.cvt.cells[it.read_cell]);
    r.buf.resize(it.table->record_stride);
    if (!protocol().full_record_store) {
      ep.Read(rec, p.delta_buf.data(), it.table->record_stride);
    }
    ep.Read(rec, r.buf.data(), it.table->record_stride);
  }
  if (posted == 0) co_return Status::Ok();
  if (Status s = co_await ep.Flush(); !s.ok()) co_return FailUnreachable(s);
  for (size_t i : p.fetch) {
    Item& it = items_[i];
    if (p.items[i].cached_cell >= 0) continue;
    it.value.resize(it.table->value_bytes);
    if (!store::DecodeRecord(p.items[i].buf, it.cvt.cells[it.read_cell].cv, it.value).ok()) {
      // The version was overwritten while we read it (its cell recycled): read the CVT again;
      // if the version is gone, ChooseVersion aborts.
      if (vt() != nullptr) vt()->Invalidate(it.lk);
      p.retry.push_back(i);
      p.failed = true;
      continue;
    }
    CacheValue(it);
  }
  co_return Status::Ok();
}

void MvccTxn::CacheValue(const Item& it) {
  if (!protocol().value_cache || vt() == nullptr || !it.locked || !LocalShard(it)) return;
  if (it.table->value_bytes > cache::kCachedValueBytesMax) return;
  // A locked key's chosen version is its newest (ChooseVersion aborts otherwise): the one the
  // lock keeps newest, and the one the next holder will choose.
  cache::CachedCvt e{it.ref, it.cvt};
  e.value_cell = it.read_cell;
  e.value_cv = it.cvt.cells[it.read_cell].cv;
  e.value_bytes = it.table->value_bytes;
  std::copy(it.value.begin(), it.value.end(), e.value.begin());
  vt()->Put(it.lk, e);
}

}  // namespace pond::txn
