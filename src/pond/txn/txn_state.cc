#include "pond/txn/txn_state.h"

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

}  // namespace

TxnState::TxnState(WorkerContext& w, TxnKind kind)
    : w_(w), kind_(kind), isolation_(w.cluster.config.isolation) {
  owner_ = lock::LockOwner{w.cn_id(), (uint64_t{w.index} << 48) | w.next_txn_id++};
}

TxnState::~TxnState() {
  if (!finished_) Abort();
}

Item* TxnState::Find(uint16_t table, uint64_t key) {
  for (auto& it : items_) {
    if (it.lk.table == table && it.lk.key == key) return &it;
  }
  return nullptr;
}

const Item* TxnState::Find(uint16_t table, uint64_t key) const {
  return const_cast<TxnState*>(this)->Find(table, key);
}

bool TxnState::LocalShard(const Item& it) const {
  return w_.cluster.shard_map.CnOf(it.lk) == w_.cn_id();
}

Status TxnState::Fail(Status s, uint64_t* counter) {
  if (counter != nullptr) (*counter)++;
  Abort();
  return s;
}

void TxnState::Add(uint16_t table, uint64_t key, Access access, std::span<const std::byte> value) {
  const store::TableInfo* t = w_.cluster.Table(table);
  POND_CHECK_MSG(t != nullptr, "transaction uses a table that does not exist");
  Item* it = Find(table, key);
  if (it == nullptr) {
    items_.emplace_back();
    it = &items_.back();
    it->lk = lock::LockKey::Record(table, key);
    it->table = t;
    it->access = access;
  } else if (access != Access::kRead && it->access == Access::kRead) {
    // Promoted from read-only to read-write: lock and read it again in the next Execute.
    it->access = access;
    it->executed = false;
  } else if (access != Access::kRead) {
    it->access = access;
  }
  if (access == Access::kInsert) {
    it->new_value.assign(value.begin(), value.end());
    it->dirty = true;
  }
}

Task<Status> TxnState::Lock(std::vector<size_t>& todo) {
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

Task<Status> TxnState::Execute() {
  if (finished_) co_return InvalidArgument("transaction already finished");
  if (start_ts_ == 0) start_ts_ = co_await w_.tso->Get();
  std::vector<size_t> todo;
  for (size_t i = 0; i < items_.size(); i++) {
    if (!items_[i].executed) todo.push_back(i);
  }
  if (todo.empty()) co_return Status::Ok();
  if (kind_ == TxnKind::kReadWrite) {
    Status s = co_await Lock(todo);
    if (!s.ok()) co_return s;
  }
  Status s = co_await ReadItems(todo);
  if (!s.ok()) co_return s;
  for (size_t i : todo) {
    Item& it = items_[i];
    it.executed = true;
    if (it.access == Access::kInsert && it.exists()) {
      co_return Fail(Status(Code::kAlreadyExists, "insert of a present key"),
                     &w_.stats.aborts.duplicate_key);
    }
  }
  co_return Status::Ok();
}

Status TxnState::ChooseVersion(Item& it) {
  // The caller has made sure no cell is INVISIBLE.
  it.read_cell = -1;
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
  if (it.read_cell >= 0 && it.cvt.cells[it.read_cell].tombstone) it.read_cell = -1;
  return Status::Ok();
}

Task<Status> TxnState::ReadItems(std::vector<size_t> todo) {
  ClusterImpl& cl = w_.cluster;
  Endpoint& ep = *w_.ep;
  std::vector<std::vector<std::byte>> bufs(items_.size());
  std::vector<char> whole_bucket(items_.size(), 0);
  std::vector<char> read_cvt(items_.size(), 0);  // this attempt READs the item's CVT
  int invisible_waits = 0;
  for (int attempt = 0; !todo.empty(); attempt++) {
    if (attempt >= kReadAttemptsMax) {
      co_return Fail(AbortedBecause("torn reads"), &w_.stats.aborts.torn_read);
    }
    // 2. CVTs: cache, or one READ each, all in one batch.
    std::vector<size_t> need_cvt;
    for (size_t i : todo) {
      Item& it = items_[i];
      read_cvt[i] = 0;
      MnId primary = cl.placement.Primary(it.lk.key);
      if (w_.cn.vt != nullptr && LocalShard(it)) {
        if (auto hit = w_.cn.vt->Get(it.lk)) {
          it.have_slot = true;
          it.ref = hit->ref;
          it.cvt = hit->cvt;
          continue;
        }
      }
      std::optional<store::SlotRef> addr;
      if (w_.cn.addr != nullptr) addr = w_.cn.addr->Get(it.lk);
      if (addr) {
        bufs[i].resize(it.table->cvt_bytes);
        whole_bucket[i] = 0;
        it.ref = *addr;
        ep.Read(addr->Addr(*it.table, primary, 0), bufs[i].data(), it.table->cvt_bytes);
      } else {
        bufs[i].resize(it.table->bucket_bytes());
        whole_bucket[i] = 1;
        ep.Read(it.table->BucketAddr(primary, 0, store::HomeBucket(*it.table, it.lk.key)),
                bufs[i].data(), it.table->bucket_bytes());
      }
      read_cvt[i] = 1;
      need_cvt.push_back(i);
    }
    if (!need_cvt.empty()) {
      Status s = co_await ep.Flush();
      POND_CHECK_MSG(s.ok(), s.ToString().c_str());
    }
    std::vector<size_t> retry, to_read;
    bool wait_invisible = false;
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
            to_read.push_back(i);
            continue;
          }
          if (f.status().code() == Code::kTornRead) {
            retry.push_back(i);
            continue;
          }
          POND_CHECK(f.status().code() == Code::kNotFound);
          it.have_slot = false;
          it.read_cell = -1;
          continue;
        } else {
          it.have_slot = false;  // not in the index: nothing to read
          it.read_cell = -1;
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
        // A stale cached address: forget it and find the key in its bucket.
        w_.cn.addr->Invalidate(it.lk);
        retry.push_back(i);
        continue;
      }
      it.have_slot = true;
      it.cvt = *cvt;
      if (w_.cn.addr != nullptr) w_.cn.addr->Put(it.lk, it.ref);
      to_read.push_back(i);
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
      bool invisible = false;
      for (int c = 0; c < it.cvt.versions; c++) {
        if (it.cvt.cells[c].valid && it.cvt.cells[c].commit_ts == kInvisible) invisible = true;
      }
      if (invisible) {
        wait_invisible = true;
        retry.push_back(i);
        continue;
      }
      Status s = ChooseVersion(it);
      if (!s.ok()) co_return s;
      // Rule 1 of the VT cache: only a lock holder fills it.
      if (w_.cn.vt != nullptr && it.locked && LocalShard(it)) {
        w_.cn.vt->Put(it.lk, cache::CachedCvt{it.ref, it.cvt});
      }
      if (it.exists()) fetch.push_back(i);
    }

    // 4. Records, one batch.
    for (size_t i : fetch) {
      Item& it = items_[i];
      const Cell& cell = it.cvt.cells[it.read_cell];
      bufs[i].resize(it.table->record_stride);
      ep.Read(GAddr::Make(cl.placement.Primary(it.lk.key), cell.record), bufs[i].data(),
              it.table->record_stride);
    }
    if (!fetch.empty()) {
      Status s = co_await ep.Flush();
      POND_CHECK_MSG(s.ok(), s.ToString().c_str());
    }
    for (size_t i : fetch) {
      Item& it = items_[i];
      it.value.resize(it.table->value_bytes);
      Status s = store::DecodeRecord(bufs[i], it.cvt.cells[it.read_cell].cv, it.value);
      if (!s.ok()) {
        // The version was overwritten while we read it (its cell recycled): read the CVT again;
        // if the version is gone, ChooseVersion aborts.
        if (w_.cn.vt != nullptr) w_.cn.vt->Invalidate(it.lk);
        retry.push_back(i);
      }
    }
    if (wait_invisible) {
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

Result<std::span<const std::byte>> TxnState::Read(uint16_t table, uint64_t key) const {
  const Item* it = Find(table, key);
  if (it == nullptr || !it->executed) {
    return InvalidArgument("key was not added and executed in this transaction");
  }
  if (it->dirty) {
    if (it->access == Access::kDelete) return NotFound("deleted in this transaction");
    return std::span<const std::byte>(it->new_value);
  }
  if (!it->exists()) return NotFound("key does not exist");
  return std::span<const std::byte>(it->value);
}

Status TxnState::Write(uint16_t table, uint64_t key, std::span<const std::byte> value) {
  Item* it = Find(table, key);
  if (it == nullptr || !it->executed || it->access == Access::kRead) {
    return InvalidArgument("write of a key not added read-write and executed");
  }
  if (it->access == Access::kDelete) return InvalidArgument("write of a key being deleted");
  if (value.size() != it->table->value_bytes) {
    return InvalidArgument("value size does not match the table");
  }
  if (it->access == Access::kWrite && !it->exists()) {
    return NotFound("write of a key that does not exist (use Insert)");
  }
  it->new_value.assign(value.begin(), value.end());
  it->dirty = true;
  return Status::Ok();
}

Task<Status> TxnState::WriteInvisible(std::vector<size_t>& writes) {
  ClusterImpl& cl = w_.cluster;
  Endpoint& ep = *w_.ep;
  const store::PoolLayout& layout = cl.layout;
  int replicas = cl.placement.replication();

  // Slots for new keys and record space first: both may need round trips of their own.
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
    if (record == 0 && it.access != Access::kDelete) {
      Result<uint64_t> lane = co_await w_.alloc->Alloc(ep, primary, it.table->record_stride);
      if (!lane.ok()) co_return lane.status();
      record = layout.RecordOffset(0, *lane);
    }
    it.new_cell = Cell{.cv = static_cast<uint8_t>(old.cv + 1),
                       .valid = true,
                       .tombstone = it.access == Access::kDelete,
                       .commit_ts = kInvisible,
                       .record = record};
  }

  // One batch per MN: records, cells (INVISIBLE), and for new keys the key and meta=live after
  // the cell, so a slot that reads live has its cell.
  for (size_t i : writes) {
    Item& it = items_[i];
    uint64_t lane_rel =
        it.new_cell.record == 0 ? 0 : it.new_cell.record - layout.RecordOffset(0, 0);
    if (!it.new_cell.tombstone) {
      it.record_buf.resize(it.table->record_stride);
      store::EncodeRecord(it.new_value, it.new_cell.cv, it.record_buf);
    }
    for (int r = 0; r < replicas; r++) {
      MnId mn = cl.placement.Replica(it.lk.key, r);
      Cell c = it.new_cell;
      if (c.record != 0) c.record = layout.RecordOffset(r, lane_rel);
      it.raw_cells[r] = store::EncodeCell(c);
      GAddr slot = it.ref.Addr(*it.table, mn, r);
      if (!c.tombstone)
        ep.Write(GAddr::Make(mn, c.record), it.record_buf.data(), it.table->record_stride);
      ep.Write(slot + sizeof(store::CvtHeader) + it.write_cell * sizeof(store::CvtCell),
               &it.raw_cells[r], sizeof(store::CvtCell));
      if (it.live_meta != 0) {
        ep.Write(slot + offsetof(store::CvtHeader, key), &it.lk.key, sizeof(uint64_t));
        ep.Write(slot + offsetof(store::CvtHeader, meta), &it.live_meta, sizeof(uint64_t));
      }
    }
  }

  // The commit log record, in the same round trip.
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
  ep.Write(w_.log->Reserve(log_buf_.size()), log_buf_.data(),
           static_cast<uint32_t>(log_buf_.size()));
  Status s = co_await ep.Flush();
  POND_CHECK_MSG(s.ok(), s.ToString().c_str());
  co_return Status::Ok();
}

Task<Status> TxnState::Commit() {
  if (finished_) co_return InvalidArgument("transaction already finished");
  for (auto& it : items_) {
    if (!it.executed) co_return InvalidArgument("commit before Execute of every key");
  }
  if (kind_ == TxnKind::kReadOnly) {
    finished_ = true;
    w_.stats.committed_read_only++;
    co_return Status::Ok();
  }
  std::vector<size_t> writes;
  for (size_t i = 0; i < items_.size(); i++) {
    const Item& it = items_[i];
    if ((it.access == Access::kWrite && it.dirty) || it.access == Access::kInsert ||
        (it.access == Access::kDelete && it.exists())) {
      writes.push_back(i);
    }
  }
  if (!writes.empty()) {
    Status s = co_await WriteInvisible(writes);
    if (!s.ok()) co_return Fail(s, &w_.stats.aborts.user);

    // VT cache rule 2: the cache shows the new cell INVISIBLE before the commit timestamp is
    // granted, and the timestamp before the MN does, so the cache is never older than memory.
    auto update_cache = [&] {
      if (w_.cn.vt == nullptr) return;
      for (size_t i : writes) {
        Item& it = items_[i];
        if (!LocalShard(it)) continue;
        it.cvt.state = store::kSlotLive;
        it.cvt.cells[it.write_cell] = it.new_cell;
        w_.cn.vt->Put(it.lk, cache::CachedCvt{it.ref, it.cvt});
      }
    };
    update_cache();
    commit_ts_ = co_await w_.tso->Get();
    for (size_t i : writes) items_[i].new_cell.commit_ts = commit_ts_;
    update_cache();
    for (size_t i : writes) {
      Item& it = items_[i];
      for (int r = 0; r < w_.cluster.placement.replication(); r++) {
        MnId mn = w_.cluster.placement.Replica(it.lk.key, r);
        w_.ep->Write(it.ref.Addr(*it.table, mn, r) + sizeof(store::CvtHeader) +
                         it.write_cell * sizeof(store::CvtCell) +
                         offsetof(store::CvtCell, commit_ts),
                     &commit_ts_, sizeof(commit_ts_));
      }
    }
    Status vs = co_await w_.ep->Flush();
    POND_CHECK_MSG(vs.ok(), vs.ToString().c_str());
  }
  // Unlock only now: a transaction that locks next must find the versions visible.
  w_.locks->Release(owner_, held_);
  held_.clear();
  finished_ = true;
  w_.stats.committed++;
  co_return Status::Ok();
}

void TxnState::Abort() {
  if (!held_.empty()) w_.locks->Release(owner_, held_);
  held_.clear();
  finished_ = true;
}

}  // namespace pond::txn
