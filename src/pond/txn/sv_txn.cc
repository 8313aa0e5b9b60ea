#include "pond/txn/sv_txn.h"

#include <algorithm>
#include <cstring>

#include "pond/base/assert.h"
#include "pond/store/sv_slot.h"

namespace pond::txn {

namespace {

using store::SvHeader;

uint32_t Padded8(uint32_t n) { return (n + 7) & ~uint32_t{7}; }

}  // namespace

SvTxn::~SvTxn() {
  if (!finished_) Abort();
}

Task<Status> SvTxn::Execute() {
  if (Status s = BeginExecute(); !s.ok()) co_return s;
  Endpoint& ep = w_.ep();
  const bool rw = kind_ == TxnKind::kReadWrite;
  const uint64_t self = OwnerWord();
  std::vector<size_t> todo = Unexecuted();
  const std::vector<size_t> executing = todo;
  std::vector<std::vector<std::byte>> bufs(items_.size());
  std::vector<char> whole_bucket(items_.size(), 0);
  std::vector<uint64_t> cas_old(items_.size(), 0);
  std::vector<GAddr> cas_word(items_.size());
  std::vector<char> cas_posted(items_.size(), 0);
  for (int attempt = 0; !todo.empty(); attempt++) {
    if (attempt >= kReadAttemptsMax) {
      co_return Fail(AbortedBecause("torn reads"), &w_.stats().aborts.torn_read);
    }
    // One batch: for each item a READ of its slot (address known) or of its home bucket, with a
    // read-write item's CAS on the slot's lock word (or an insert's on the bucket's) before it.
    for (size_t i : todo) {
      if (Status s = PinLockReplica(items_[i]); !s.ok()) co_return FailUnreachable(s);
    }
    const uint64_t gone_at = w_.gone_generation();
    for (size_t i : todo) {
      Item& it = items_[i];
      // Every access goes to the replica of the key's lock words (the primary while it is up).
      const int rep = it.lock_rep;
      const MnId primary = w_.placement().Replica(it.lk.key, rep);
      cas_posted[i] = 0;
      std::optional<store::SlotRef> addr;
      if (it.have_slot) {
        addr = it.ref;
      } else if (w_.addr_cache() != nullptr) {
        addr = w_.addr_cache()->Get(it.lk);
      }
      if (rw && it.access == Access::kInsert && !it.bucket_locked) {
        cas_word[i] = BucketLockWord(it);
        cas_posted[i] = 1;
        addr.reset();
      } else if (rw && it.access != Access::kRead && !it.locked && addr) {
        cas_word[i] = addr->Addr(*it.table, primary, rep) + offsetof(SvHeader, lock);
        cas_posted[i] = 1;
      }
      cas_old[i] = 0;
      if (cas_posted[i]) ep.Cas(cas_word[i], 0, self, &cas_old[i]);
      if (addr) {
        it.ref = *addr;
        whole_bucket[i] = 0;
        bufs[i].resize(it.table->cvt_bytes);
        ep.Read(addr->Addr(*it.table, primary, rep), bufs[i].data(), it.table->cvt_bytes);
      } else {
        whole_bucket[i] = 1;
        bufs[i].resize(it.table->bucket_bytes());
        ep.Read(it.table->BucketAddr(primary, rep, store::HomeBucket(*it.table, it.lk.key)),
                bufs[i].data(), it.table->bucket_bytes());
      }
    }
    if (Endpoint::FlushResult f = co_await ep.FlushReporting(); !f.status.ok()) {
      // The words won on the MNs that answered are released with the rest; those on an MN that
      // did not answer may have been won too, its acknowledgement lost (TxnState::mn_unknown_).
      for (size_t i : todo) {
        if (!cas_posted[i]) continue;
        if ((f.unreachable >> cas_word[i].mn()) & 1) {
          mn_unknown_.push_back(cas_word[i]);
        } else if (cas_old[i] == 0) {
          mn_held_.push_back(cas_word[i]);
        }
      }
      co_return FailUnreachable(f.status);
    }
    bool refused = false;
    for (size_t i : todo) {
      if (!cas_posted[i]) continue;
      Item& it = items_[i];
      if (cas_old[i] != 0 && cas_old[i] != self) {
        if (w_.HolderGone(cas_old[i])) FreeGoneWord(cas_word[i], cas_old[i]);
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
    if (refused) co_return Fail(AbortedBecause("lock conflict"), &w_.stats().aborts.lock_conflict);

    std::vector<size_t> retry;
    for (size_t i : todo) {
      Item& it = items_[i];
      std::span<const std::byte> slot;
      if (whole_bucket[i]) {
        store::BucketScan scan = store::ScanBucket(*it.table, bufs[i], it.lk.key);
        if (scan.match < 0 && scan.first_empty < 0) {
          // A full home bucket: the key may have overflowed into a later one.
          Result<store::SlotRef> f = co_await store::SvLocate(
              ep, *it.table, w_.placement().Replica(it.lk.key, it.lock_rep), it.lock_rep,
              it.lk.key);
          if (f.ok()) {
            it.ref = *f;
            it.have_slot = true;
            retry.push_back(i);
            attempt--;
            continue;
          }
          if (f.status().code() == Code::kUnavailable) co_return FailUnreachable(f.status());
          POND_CHECK(f.status().code() == Code::kNotFound);
        }
        if (scan.match < 0) {
          it.have_slot = false;
          it.read_cell = -1;
          it.sv_version = 0;
          it.executed = true;
          continue;
        }
        it.ref = store::SlotRef{store::HomeBucket(*it.table, it.lk.key), scan.match};
        it.have_slot = true;
        if (rw && it.access != Access::kRead && !it.locked) {
          retry.push_back(i);  // lock the slot, now that it is known, on the next attempt
          attempt--;
          continue;
        }
        slot = std::span(bufs[i]).subspan(static_cast<size_t>(scan.match) * it.table->cvt_bytes,
                                          it.table->cvt_bytes);
      } else {
        slot = bufs[i];
      }
      SvHeader h;
      it.value.resize(it.table->value_bytes);
      Status d = store::DecodeSvSlot(*it.table, slot, &h, it.value);
      if (store::MetaState(h.meta) != store::kSlotLive || h.key != it.lk.key) {
        // A stale cached address (a lock word taken there stays held until the end).
        if (w_.addr_cache() != nullptr) w_.addr_cache()->Invalidate(it.lk);
        it.have_slot = false;
        if (cas_posted[i]) it.locked = false;
        retry.push_back(i);
        continue;
      }
      if (!d.ok()) {
        retry.push_back(i);  // caught mid-write
        continue;
      }
      if (HeldByOther(h.lock, gone_at)) {
        // FORD cannot read a record that is being written.
        co_return Fail(AbortedBecause("locked"), &w_.stats().aborts.lock_conflict);
      }
      if (w_.addr_cache() != nullptr) w_.addr_cache()->Put(it.lk, it.ref);
      it.have_slot = true;
      it.sv_version = h.version;
      it.read_cell = h.deleted != 0 ? -1 : 0;
      it.executed = true;
    }
    todo = std::move(retry);
  }
  for (size_t i : executing) {
    if (Status c = CheckRead(items_[i]); !c.ok()) co_return c;
  }
  if (rw) w_.Reached(CommitStep::kRead);
  co_return Status::Ok();
}

Task<Status> SvTxn::Commit() {
  if (Status s = CheckCommittable(); !s.ok()) co_return s;
  Endpoint& ep = w_.ep();
  std::vector<size_t> writes = kind_ == TxnKind::kReadWrite ? Writes() : std::vector<size_t>{};

  // New keys get their slots first (store::ClaimSlot: two round trips each, and one to mark the
  // claim on the backups), under their buckets' insert locks.
  // The primary's buckets are where a slot is claimed: down, they are gone; rejoining, not all
  // copied yet (docs/recovery.md "MN crash").
  for (size_t i : writes) {
    const Item& it = items_[i];
    if (!it.have_slot && !w_.placement().Readable(w_.placement().Primary(it.lk.key))) {
      co_return FailUnreachable(
          Unavailable("the key's primary MN is down or rejoining: no insert"));
    }
  }
  for (size_t i : writes) {
    Item& it = items_[i];
    if (it.have_slot) continue;
    Result<store::SlotRef> ref =
        co_await store::ClaimSlot(ep, *it.table, w_.placement(), it.lk.key);
    if (ref.status().code() == Code::kUnavailable) co_return FailUnreachable(ref.status());
    if (!ref.ok()) co_return Fail(ref.status(), &w_.stats().aborts.user);
    it.ref = *ref;
    it.have_slot = true;
    it.sv_version = 0;
    it.live_meta = store::PackMeta(store::kSlotLive, it.table->id, 1, it.table->value_bytes);
  }

  // Validation of the read-only items and the undo log, in one round trip: every read-only
  // item's header must be as read (unlocked, same version) or the key still absent.
  std::vector<size_t> check = Unprotected();
  std::vector<std::vector<std::byte>> bufs(check.size());
  std::vector<uint64_t> lock_seen(check.size(), 0);
  const uint64_t gone_at = w_.gone_generation();
  Status unreachable = Status::Ok();
  for (size_t k = 0; k < check.size() && unreachable.ok(); k++) {
    Item& it = items_[check[k]];
    unreachable = PinLockReplica(it);
    const MnId primary = w_.placement().Replica(it.lk.key, it.lock_rep);
    if (it.have_slot) {
      bufs[k].resize(sizeof(SvHeader));
      ep.Read(it.ref.Addr(*it.table, primary, it.lock_rep), bufs[k].data(), sizeof(SvHeader));
    } else {
      // Absent when read: an insert of it holds the bucket's insert lock until its slot is
      // written on every MN, so that word is read first (a READ copies backwards).
      bufs[k].resize(it.table->bucket_bytes());
      ep.Read(BucketLockWord(it), &lock_seen[k], sizeof(uint64_t));
      ep.Read(it.table->BucketAddr(primary, it.lock_rep, store::HomeBucket(*it.table, it.lk.key)),
              bufs[k].data(), it.table->bucket_bytes());
    }
  }
  // Once a pin failed the transaction aborts after this round, so it logs nothing for recovery.
  if (!writes.empty() && unreachable.ok()) {
    // The undo record (docs/formats.md "Commit log"): the items, then each one's version and
    // value before this transaction, for recovery to put back should this CN die before it
    // frees any of its lock words (cluster/mn_lock_recovery.h).
    size_t bytes = sizeof(store::LogRecordHeader);
    for (size_t i : writes) {
      bytes += sizeof(store::LogItem) + sizeof(uint64_t) + Padded8(items_[i].table->value_bytes);
    }
    POND_CHECK_MSG(bytes / 8 <= UINT16_MAX, "ford undo record longer than 512 KiB");
    log_buf_.assign(bytes, std::byte{0});
    store::LogRecordHeader h{
        store::kUndoLogMagic, static_cast<uint16_t>(writes.size()), w_.cn_id(), owner_.txn_id,
        w_.index(),           static_cast<uint16_t>(bytes / 8),     0};
    std::memcpy(log_buf_.data(), &h, sizeof(h));
    size_t item_at = sizeof(h);
    size_t off = sizeof(h) + writes.size() * sizeof(store::LogItem);
    for (size_t i : writes) {
      const Item& it = items_[i];
      const auto flags = static_cast<uint8_t>((it.live_meta != 0 ? store::kLogItemInsert : 0) |
                                              (it.exists() ? 0 : store::kLogItemWasAbsent));
      store::LogItem li{
          it.lk.key, it.ref.bucket, it.lk.table, static_cast<uint16_t>(it.ref.slot), 0, flags, 0};
      std::memcpy(log_buf_.data() + item_at, &li, sizeof(li));
      item_at += sizeof(li);
      std::memcpy(log_buf_.data() + off, &it.sv_version, sizeof(uint64_t));
      off += sizeof(uint64_t);
      if (it.exists()) std::memcpy(log_buf_.data() + off, it.value.data(), it.value.size());
      off += Padded8(it.table->value_bytes);
    }
    store::SealLogRecord(log_buf_);
    // R copies, complete before anything is written, on the readable MNs from one chosen by
    // worker on: so that recovery finds one after any R - 1 MN failures (docs/recovery.md).
    const int mns = static_cast<int>(w_.config().mns);
    const int home =
        static_cast<int>((w_.cn_id() * w_.config().workers_per_cn + w_.index()) % w_.config().mns);
    int copies = 0;
    undo_at_.clear();
    for (int k = 0; k < mns && copies < w_.placement().replication(); k++) {
      const auto mn = static_cast<MnId>((home + k) % mns);
      if (!w_.placement().Readable(mn)) continue;
      const GAddr at = w_.log().Reserve(mn, log_buf_.size());
      ep.Write(at, log_buf_.data(), static_cast<uint32_t>(log_buf_.size()));
      undo_at_.push_back(at);
      copies++;
    }
  }
  if (!check.empty() || !writes.empty()) {
    if (Status f = co_await ep.Flush(); !f.ok() && unreachable.ok()) unreachable = f;
  }
  if (!writes.empty() && unreachable.ok()) w_.Reached(CommitStep::kLogged);
  if (!unreachable.ok()) {
    co_await BeforeAbort(writes);
    co_return FailUnreachable(unreachable);
  }
  for (size_t k = 0; k < check.size(); k++) {
    Item& it = items_[check[k]];
    bool changed;
    if (it.have_slot) {
      SvHeader h;
      std::memcpy(&h, bufs[k].data(), sizeof(h));
      changed = HeldByOther(h.lock, gone_at) || h.version != it.sv_version ||
                (h.deleted != 0) != !it.exists();
    } else {
      store::BucketScan scan = store::ScanBucket(*it.table, bufs[k], it.lk.key);
      changed = HeldByOther(lock_seen[k], gone_at) || scan.match >= 0;
      if (!changed && scan.first_empty < 0) {
        // A full home bucket: the key may have been inserted into a later one.
        Result<store::SlotRef> f = co_await store::SvLocate(
            ep, *it.table, w_.placement().Replica(it.lk.key, it.lock_rep), it.lock_rep, it.lk.key);
        if (f.status().code() == Code::kUnavailable) {
          co_await BeforeAbort(writes);
          co_return FailUnreachable(f.status());
        }
        changed = f.ok();
      }
    }
    if (changed) {
      co_await BeforeAbort(writes);
      co_return Fail(AbortedBecause("validation"), &w_.stats().aborts.validation);
    }
  }
  if (kind_ == TxnKind::kReadOnly) {
    finished_ = true;
    EndLocks({});
    CountCommit();
    co_return Status::Ok();
  }

  // The backups first and complete, then the primary in the batch that frees its lock word: a
  // late backup WRITE could otherwise land after the next writer's (docs/protocols.md "Replica
  // order").
  std::vector<std::vector<std::byte>> images;
  if (w_.placement().replication() > 1 && !writes.empty()) {
    BeginRound();
    PostSlotImages(writes, /*tombstones=*/false, Replicas::kBackups, &images);
    co_await CommitFlush();
    w_.Reached(CommitStep::kVisible);
  }
  BeginRound();
  PostSlotImages(writes, /*tombstones=*/false, Replicas::kPrimary, &images);
  if (DeletesIndexedKeys(writes)) {
    // Once the primaries show the deletes recovery would finish this commit, not undo it:
    // deleted keys leave their trees then, under their lock words (no snapshots to stamp for).
    co_await CommitFlush();
    co_await UnindexDeletes(writes, 0);
  }
  BeginRound();  // (kept on from the primaries' writes if nothing flushed since)
  PostUnlocks();
  co_await CommitFlush();
  w_.Reached(CommitStep::kUnlocked);
  finished_ = true;
  EndLocks({});
  CountCommit();
  // For the check after a faulty run that no acknowledged write is lost: the version it made.
  for (size_t i : writes) {
    w_.Acknowledged(items_[i].lk.table, items_[i].lk.key, items_[i].sv_version + 1);
  }
  co_return Status::Ok();
}

Task<void> SvTxn::BeforeAbort(const std::vector<size_t>& writes) {
  // A claimed slot stays claimed for good (store/hash_index.h): each one this transaction
  // claimed is left as its key's tombstone, live and deleted — as if inserted and deleted —
  // which a later insert of the key reuses. The bucket's insert lock is still held.
  std::vector<size_t> claimed;
  for (size_t i : writes) {
    if (items_[i].live_meta != 0) claimed.push_back(i);
  }
  // A record whose first word is zero is no record (store::ParseLogArea).
  static constexpr uint64_t kVoid = 0;
  if (claimed.empty() && undo_at_.empty()) co_return;
  // (Not before that return: a round begun and never flushed would leave the endpoint keeping
  // whatever WRITEs the worker posts next into this transaction's round, after it is gone.)
  // The backups' tombstones first and complete, as a commit's images (docs/protocols.md
  // "Replica order"): the primary's makes the slot live, and the next inserter of the key, which
  // finds it there and holds nothing this transaction holds, writes its own version to the
  // backups at once — a late tombstone there would put the older image back.
  std::vector<std::vector<std::byte>> images;
  if (!claimed.empty() && w_.placement().replication() > 1) {
    BeginRound();
    PostSlotImages(claimed, /*tombstones=*/true, Replicas::kBackups, &images);
    co_await CommitFlush();
  }
  BeginRound();
  for (GAddr at : undo_at_) w_.ep().Write(at, &kVoid, sizeof(kVoid));
  undo_at_.clear();
  PostSlotImages(claimed, /*tombstones=*/true, Replicas::kPrimary, &images);
  co_await CommitFlush();
}

void SvTxn::PostSlotImages(const std::vector<size_t>& items, bool tombstones, Replicas which,
                           std::vector<std::vector<std::byte>>* images) {
  Endpoint& ep = w_.ep();
  const uint64_t self = OwnerWord();
  images->reserve(items.size() * static_cast<size_t>(w_.placement().replication()));
  std::vector<std::byte> zeros;
  for (size_t i : items) {
    Item& it = items_[i];
    const bool del = tombstones || it.pending == Pending::kErase;
    SvHeader h{};
    h.key = it.lk.key;
    h.meta = store::PackMeta(it.live_meta != 0 ? store::kSlotClaimed : store::kSlotLive,
                             it.table->id, 1, it.table->value_bytes);
    h.version = it.sv_version + 1;
    h.deleted = del ? 1 : 0;
    zeros.assign(it.table->value_bytes, std::byte{0});
    std::span<const std::byte> value = del ? std::span<const std::byte>(zeros) : it.new_value;
    for (int r = 0; r < w_.placement().replication(); r++) {
      const MnId mn = w_.placement().Replica(it.lk.key, r);
      if (!Includes(which, it, r) || w_.placement().IsDown(mn)) continue;
      GAddr slot = it.ref.Addr(*it.table, mn, r);
      GAddr word = slot + offsetof(SvHeader, lock);
      const bool held = std::find(mn_held_.begin(), mn_held_.end(), word) != mn_held_.end();
      const bool words_here = r == it.lock_rep;
      h.lock = words_here && held ? self : 0;
      images->emplace_back(it.table->cvt_bytes);
      store::EncodeSvSlot(*it.table, h, value, images->back());
      const std::byte* image = images->back().data();
      if (words_here && !held) {
        // A new key's slot whose lock word is not this transaction's: slot 0 of a bucket it
        // overflowed into, whose word is that bucket's insert lock and may be another
        // inserter's. Everything but the word.
        constexpr uint32_t kWordEnd = offsetof(SvHeader, lock) + sizeof(uint64_t);
        ep.Write(slot, image, offsetof(SvHeader, lock));
        ep.Write(slot + kWordEnd, image + kWordEnd, it.table->cvt_bytes - kWordEnd);
      } else {
        ep.Write(slot, image, it.table->cvt_bytes);
      }
      if (it.live_meta != 0) ep.Write(slot + offsetof(SvHeader, meta), &it.live_meta, 8);
    }
  }
}

void SvTxn::Abort() {
  ReleaseMnLocksDetached();
  finished_ = true;
  EndLocks({});
}

}  // namespace pond::txn
