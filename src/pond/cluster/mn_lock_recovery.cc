#include "pond/cluster/mn_lock_recovery.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>

#include "pond/store/hash_index.h"
#include "pond/store/record.h"
#include "pond/store/sv_slot.h"

namespace pond::cluster {

namespace {

using store::Cell;
using store::CvtCell;
using store::CvtHeader;

// Lock words are read in batches of this many, so that a long log does not post one huge batch.
constexpr size_t kReadsPerBatch = 1024;
// A slot caught mid-write is read again, at most this often.
constexpr int kTornRetries = 100;
constexpr uint32_t kLockAt = offsetof(CvtHeader, lock);
static_assert(offsetof(store::SvHeader, lock) == kLockAt);

uint32_t Padded8(uint32_t n) { return (n + 7) & ~uint32_t{7}; }

struct ItemState {
  const store::LogItem* li = nullptr;
  const store::TableInfo* t = nullptr;
  // Its words on each replica (0 where its MN is out of reach), and the replica holding the
  // record's owner word in either (only one can: words move only while nobody holds them).
  std::vector<GAddr> slot_word, bucket_word;
  std::vector<uint64_t> slot_seen, bucket_seen;
  int held_at = -1;
  // Held nowhere that can be read, while a replica of it is on a leaving MN, where its words
  // may have been: held or freed, nobody can tell (docs/recovery.md "Lock words on MNs").
  bool unknown = false;
  std::vector<std::vector<std::byte>> slots;  // by replica, once read
  bool held() const { return held_at >= 0; }
  bool acted_on() const { return held() || unknown; }
};

struct RecordState {
  const store::ParsedLogRecord* rec = nullptr;
  uint64_t owner = 0;  // its lock owner word
  uint64_t tag = 0;    // its writer tag
  std::vector<ItemState> items;
  bool any_held = false, any_freed = false, any_unknown = false;
};

// Out of reach: down, or leaving (crashed, perhaps, and not yet declared down).
bool OutOfReach(const store::Placement& placement, MnId mn) {
  return placement.IsDown(mn) || placement.IsLeaving(mn);
}

std::string Describe(const RecordState& r, uint16_t cn) {
  return "transaction " + std::to_string(r.rec->header.txn_id) + " of CN " + std::to_string(cn);
}

// Reads every replica in reach of the items `r` may still hold, again while any is caught
// mid-write.
Task<Status> ReadHeldSlots(Endpoint& ep, const store::Placement& placement, RecordState& r) {
  for (int attempt = 0;; attempt++) {
    if (attempt == kTornRetries) co_return Unavailable("slots stayed torn during log recovery");
    for (ItemState& it : r.items) {
      if (!it.acted_on()) continue;
      it.slots.assign(static_cast<size_t>(placement.replication()),
                      std::vector<std::byte>(it.t->cvt_bytes));
      for (int rep = 0; rep < placement.replication(); rep++) {
        const MnId mn = placement.Replica(it.li->key, rep);
        if (OutOfReach(placement, mn)) continue;
        ep.Read(it.t->SlotAddr(mn, rep, it.li->bucket, it.li->slot), it.slots[rep].data(),
                it.t->cvt_bytes);
      }
    }
    if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
    bool torn = false;
    for (const ItemState& it : r.items) {
      if (!it.acted_on()) continue;
      for (int rep = 0; rep < placement.replication() && !torn; rep++) {
        if (OutOfReach(placement, placement.Replica(it.li->key, rep))) continue;
        if (it.t->single_version) {
          store::SvHeader h;
          std::vector<std::byte> value(it.t->value_bytes);
          torn = !store::DecodeSvSlot(*it.t, it.slots[rep], &h, value).ok();
        } else {
          torn = !store::DecodeCvt(it.slots[rep], it.t->versions).ok();
        }
      }
    }
    if (!torn) co_return Status::Ok();
  }
}

store::SvHeader SvHeaderOf(const std::vector<std::byte>& slot) {
  store::SvHeader h;
  std::memcpy(&h, slot.data(), sizeof(h));
  return h;
}

Cell CellOf(const ItemState& it, int rep) {
  CvtCell raw;
  std::memcpy(&raw, it.slots[rep].data() + sizeof(CvtHeader) + it.li->cell * sizeof(CvtCell),
              sizeof(raw));
  Result<Cell> c = store::DecodeCell(raw);
  return c.ok() ? *c : Cell{};
}

GAddr CellAddr(const ItemState& it, MnId mn, int rep) {
  return it.t->SlotAddr(mn, rep, it.li->bucket, it.li->slot) + sizeof(CvtHeader) +
         it.li->cell * sizeof(CvtCell);
}

// A slot image, all of it but the lock word (another transaction's, for slot 0 of a bucket a new
// key overflowed into: its bucket's insert lock).
void WriteAroundLockWord(Endpoint& ep, GAddr slot, const std::byte* image, uint32_t bytes) {
  ep.Write(slot, image, kLockAt);
  ep.Write(slot + kLockAt + 8, image + kLockAt + 8, bytes - kLockAt - 8);
}

// Whether replica `rep` of item `k` carries the record's write.
bool HasWrite(const RecordState& r, size_t k, int rep, const std::vector<uint64_t>& old_versions) {
  const ItemState& it = r.items[k];
  if (it.t->single_version) {
    // Its commit image: the version after the one it read; a new key's slot that an aborting
    // commit leaves behind carries that version too, but deleted.
    const store::SvHeader h = SvHeaderOf(it.slots[rep]);
    const bool inserted = (it.li->flags & store::kLogItemInsert) != 0;
    return h.version == old_versions[k] + 1 && !(inserted && h.deleted != 0);
  }
  const Cell c = CellOf(it, rep);
  return c.valid && c.writer == r.tag;
}

// Whether a reader may have used the transaction's writes, all its words known: see the header.
bool MayBeSeen(const RecordState& r, const std::vector<uint64_t>& old_versions) {
  if (r.any_freed) return true;
  for (size_t k = 0; k < r.items.size(); k++) {
    if (r.items[k].held() && HasWrite(r, k, r.items[k].held_at, old_versions)) return true;
  }
  return false;
}

// With words unknown: whether every replica in reach of every item acted on carries the
// write, but the one holding its word (docs/recovery.md "Lock words on MNs", item 5). A
// rejoining MN decides nothing: its copy is overwritten under the key's word once recovery
// frees it.
bool OnEveryBackup(const store::Placement& placement, const RecordState& r,
                   const std::vector<uint64_t>& old_versions) {
  for (size_t k = 0; k < r.items.size(); k++) {
    const ItemState& it = r.items[k];
    if (!it.acted_on()) continue;
    for (int rep = 0; rep < placement.replication(); rep++) {
      const MnId mn = placement.Replica(it.li->key, rep);
      if (rep == it.held_at || OutOfReach(placement, mn) || placement.IsRejoining(mn)) continue;
      if (!HasWrite(r, k, rep, old_versions)) return false;
    }
  }
  return true;
}

// With words unknown and none held where it can be read: whether the record is an old one whose
// keys were written again since (item 4). Motor: a named cell holding another writer's version
// committed after the record's. Ford: a replica at neither the old version nor the one after
// (an abort voids its record, so every record found was a commit's).
bool WrittenSince(const store::Placement& placement, const RecordState& r,
                  const std::vector<uint64_t>& old_versions) {
  uint64_t ts = 0;
  for (const ItemState& it : r.items) {
    if (!it.acted_on() || it.t->single_version) continue;
    for (int rep = 0; rep < placement.replication(); rep++) {
      if (it.slots[rep].empty() || OutOfReach(placement, placement.Replica(it.li->key, rep))) {
        continue;
      }
      const Cell c = CellOf(it, rep);
      if (c.valid && c.writer == r.tag) ts = std::max(ts, c.commit_ts);
    }
  }
  for (size_t k = 0; k < r.items.size(); k++) {
    const ItemState& it = r.items[k];
    if (!it.acted_on()) continue;
    for (int rep = 0; rep < placement.replication(); rep++) {
      const MnId mn = placement.Replica(it.li->key, rep);
      if (OutOfReach(placement, mn) || placement.IsRejoining(mn)) continue;
      if (it.t->single_version) {
        const uint64_t v = SvHeaderOf(it.slots[rep]).version;
        if (v != old_versions[k] && v != old_versions[k] + 1) return true;
      } else if (ts != 0) {
        // Any cell of the key, not only the named one: a later writer may have used another.
        for (int cell = 0; cell < it.t->versions; cell++) {
          CvtCell raw;
          std::memcpy(&raw, it.slots[rep].data() + sizeof(CvtHeader) + cell * sizeof(CvtCell),
                      sizeof(raw));
          Result<Cell> c = store::DecodeCell(raw);
          if (c.ok() && c->valid && c->writer != r.tag && c->commit_ts != store::kInvisible &&
              c->commit_ts > ts) {
            return true;
          }
        }
      }
    }
  }
  return false;
}

Task<Status> RollForward(Endpoint& ep, const store::Catalog& catalog,
                         const store::Placement& placement, RecordState& r,
                         const std::vector<uint64_t>& old_versions, uint16_t cn,
                         LogRecoveryStats* stats) {
  if (placement.replication() < 2) {
    co_return Corruption(Describe(r, cn) +
                         " must be finished, and there is no backup to finish it from");
  }
  const store::PoolLayout& layout = catalog.layout();
  // What the WRITEs posted point to, kept until they are flushed.
  std::deque<std::vector<std::byte>> records;
  std::deque<CvtCell> cells;
  std::deque<uint64_t> metas;
  // Each key it holds gets the write where its word is (the primary while all are up): the
  // replica a commit writes last. A key whose word is unknown has it on every backup in reach.
  for (size_t k = 0; k < r.items.size(); k++) {
    ItemState& it = r.items[k];
    if (!it.held()) continue;
    const int dst = it.held_at;
    const MnId dst_mn = placement.Replica(it.li->key, dst);
    // Written there already (its batch landed, its release did not): nothing to copy, and
    // perhaps no backup in reach to copy from (both of R = 3 leaving beside the CN failure).
    if (HasWrite(r, k, dst, old_versions)) continue;
    int src = -1;
    for (int rep = 0; rep < placement.replication() && src < 0; rep++) {
      const MnId mn = placement.Replica(it.li->key, rep);
      if (rep != dst && !OutOfReach(placement, mn) && !placement.IsRejoining(mn)) src = rep;
    }
    if (src < 0) co_return Corruption(Describe(r, cn) + ": every backup of a key is down");
    if (it.t->single_version) {
      WriteAroundLockWord(ep, it.t->SlotAddr(dst_mn, dst, it.li->bucket, it.li->slot),
                          it.slots[src].data(), it.t->cvt_bytes);
      stats->cells_written++;
      continue;
    }
    if (CellOf(it, dst).writer == r.tag) continue;  // it has it already
    const Cell c = CellOf(it, src);
    if (!c.valid || c.writer != r.tag) {
      co_return Corruption(Describe(r, cn) + " wrote key " + std::to_string(it.li->key) +
                           ", and its backup does not have the write");
    }
    Cell to_primary = c;
    if (c.record != 0) {
      const uint64_t lane_rel = c.record - layout.RecordOffset(src, 0);
      to_primary.record = layout.RecordOffset(dst, lane_rel);
      if (!c.tombstone) {
        // As the commit writes them: the record, then the cell, then a new key's key and meta.
        std::vector<std::byte>& record = records.emplace_back(it.t->record_stride);
        ep.Read(GAddr::Make(placement.Replica(it.li->key, src), c.record), record.data(),
                it.t->record_stride);
        if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
        ep.Write(GAddr::Make(dst_mn, to_primary.record), record.data(), it.t->record_stride);
      }
    }
    const CvtCell& raw = cells.emplace_back(store::EncodeCell(to_primary));
    ep.Write(CellAddr(it, dst_mn, dst), &raw, sizeof(raw));
    if (it.li->flags & store::kLogItemInsert) {
      const uint64_t& meta = metas.emplace_back(store::PackMeta(
          store::kSlotLive, it.t->id, static_cast<uint8_t>(it.t->versions), it.t->value_bytes));
      const GAddr slot = it.t->SlotAddr(dst_mn, dst, it.li->bucket, it.li->slot);
      ep.Write(slot + offsetof(CvtHeader, key), &it.li->key, sizeof(uint64_t));
      ep.Write(slot + offsetof(CvtHeader, meta), &meta, sizeof(uint64_t));
    }
    stats->cells_written++;
  }
  co_return co_await ep.Flush();
}

Task<Status> RollBack(Endpoint& ep, const store::Placement& placement, RecordState& r,
                      const std::vector<uint64_t>& old_versions,
                      const std::vector<std::span<const std::byte>>& old_values,
                      LogRecoveryStats* stats) {
  // What the WRITEs posted point to, kept until they are flushed.
  std::deque<std::vector<std::byte>> images;
  std::deque<CvtCell> cells;
  std::deque<uint64_t> metas;
  struct Late {
    GAddr addr;
    const CvtCell* raw;
    const ItemState* it;
    GAddr slot;
  };
  std::vector<Late> tagged_last;
  const auto write_empty = [&](const Late& l) {
    ep.Write(l.addr, l.raw, sizeof(CvtCell));
    // As lotus's rollback: a new key's slot live on every replica, its cell empty.
    if (l.it->li->flags & store::kLogItemInsert) {
      const uint64_t& meta = metas.emplace_back(
          store::PackMeta(store::kSlotLive, l.it->t->id, static_cast<uint8_t>(l.it->t->versions),
                          l.it->t->value_bytes));
      ep.Write(l.slot + offsetof(CvtHeader, key), &l.it->li->key, sizeof(uint64_t));
      ep.Write(l.slot + offsetof(CvtHeader, meta), &meta, sizeof(uint64_t));
    }
    stats->cells_written++;
  };
  for (size_t k = 0; k < r.items.size(); k++) {
    const ItemState& it = r.items[k];
    if (!it.acted_on()) continue;
    if (it.t->single_version) {
      // The image before the transaction; a new key's slot stays claimed for good
      // (store/hash_index.h) and becomes its tombstone, as an aborting commit leaves it.
      const bool inserted = (it.li->flags & store::kLogItemInsert) != 0;
      const bool absent = inserted || (it.li->flags & store::kLogItemWasAbsent) != 0;
      store::SvHeader h{};
      h.key = it.li->key;
      h.meta = store::PackMeta(store::kSlotLive, it.t->id, 1, it.t->value_bytes);
      h.version = inserted ? old_versions[k] + 1 : old_versions[k];
      h.deleted = absent ? 1 : 0;
      const std::vector<std::byte> zeros(it.t->value_bytes);
      images.emplace_back(it.t->cvt_bytes);
      store::EncodeSvSlot(*it.t, h, absent ? std::span<const std::byte>(zeros) : old_values[k],
                          images.back());
      for (int rep = 0; rep < placement.replication(); rep++) {
        const MnId mn = placement.Replica(it.li->key, rep);
        if (OutOfReach(placement, mn)) continue;
        WriteAroundLockWord(ep, it.t->SlotAddr(mn, rep, it.li->bucket, it.li->slot),
                            images.back().data(), it.t->cvt_bytes);
        stats->cells_written++;
      }
      continue;
    }
    // Motor: the cell it wrote emptied on every replica, as lotus's rollback does it — those
    // without its tag first, those with it once they are done (log_recovery.cc says why).
    int cv = -1;
    for (int rep = 0; rep < placement.replication(); rep++) {
      if (OutOfReach(placement, placement.Replica(it.li->key, rep))) continue;
      const Cell c = CellOf(it, rep);
      if (c.valid && c.writer == r.tag) cv = c.cv;
    }
    if (cv < 0) continue;  // its write landed nowhere
    for (int rep = 0; rep < placement.replication(); rep++) {
      const MnId mn = placement.Replica(it.li->key, rep);
      if (OutOfReach(placement, mn)) continue;
      const Cell c = CellOf(it, rep);
      cells.push_back(store::EncodeCell(Cell{.cv = static_cast<uint8_t>(cv), .record = c.record}));
      const Late l{CellAddr(it, mn, rep), &cells.back(), &it,
                   it.t->SlotAddr(mn, rep, it.li->bucket, it.li->slot)};
      if (c.valid && c.writer == r.tag) {
        tagged_last.push_back(l);
      } else {
        write_empty(l);
      }
    }
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  for (const Late& l : tagged_last) write_empty(l);
  co_return co_await ep.Flush();
}

}  // namespace

Task<Status> RecoverMnLockRecords(Endpoint& ep, const store::Catalog& catalog,
                                  const store::Placement& placement,
                                  const std::vector<store::ParsedLogRecord>& records, uint16_t cn,
                                  uint16_t worker, LogRecoveryStats* stats) {
  // The lock words of every item of every record, read in batches.
  std::vector<RecordState> states(records.size());
  size_t posted = 0;
  for (size_t i = 0; i < records.size(); i++) {
    RecordState& r = states[i];
    r.rec = &records[i];
    r.owner = store::LockOwnerWord(cn, r.rec->header.txn_id);
    r.tag = store::WriterTag(cn, worker, r.rec->header.txn_id);
    const bool undo = r.rec->header.magic == store::kUndoLogMagic;
    r.items.resize(r.rec->items.size());
    for (size_t k = 0; k < r.items.size(); k++) {
      ItemState& it = r.items[k];
      it.li = &r.rec->items[k];
      it.t = catalog.Find(it.li->table);
      if (it.t == nullptr || it.t->single_version != undo ||
          (!undo && it.li->cell >= it.t->versions)) {
        co_return Corruption("log of CN " + std::to_string(cn) + " worker " +
                             std::to_string(worker) + " names table " +
                             std::to_string(it.li->table) + " cell " + std::to_string(it.li->cell) +
                             ", which does not exist");
      }
      // Its words on every replica in reach: the primary's while all are up, a backup's
      // while the primary is down (Placement::LockReplica).
      const auto reps = static_cast<size_t>(placement.replication());
      it.slot_word.assign(reps, GAddr{});
      it.bucket_word.assign(reps, GAddr{});
      it.slot_seen.assign(reps, 0);
      it.bucket_seen.assign(reps, 0);
      for (int rep = 0; rep < placement.replication(); rep++) {
        const MnId mn = placement.Replica(it.li->key, rep);
        if (OutOfReach(placement, mn)) continue;
        it.slot_word[rep] = it.t->SlotAddr(mn, rep, it.li->bucket, it.li->slot) + kLockAt;
        it.bucket_word[rep] =
            it.t->BucketAddr(mn, rep, store::HomeBucket(*it.t, it.li->key)) + kLockAt;
        ep.Read(it.slot_word[rep], &it.slot_seen[rep], sizeof(uint64_t));
        ep.Read(it.bucket_word[rep], &it.bucket_seen[rep], sizeof(uint64_t));
        if ((posted += 2) % kReadsPerBatch == 0) {
          if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
        }
      }
    }
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;

  for (RecordState& r : states) {
    stats->mn_lock_records++;
    for (ItemState& it : r.items) {
      bool leaving = false;
      for (int rep = 0; rep < placement.replication(); rep++) {
        const MnId mn = placement.Replica(it.li->key, rep);
        if (placement.IsLeaving(mn)) leaving = true;
        if (OutOfReach(placement, mn)) continue;
        if (it.slot_seen[rep] == r.owner || it.bucket_seen[rep] == r.owner) it.held_at = rep;
      }
      it.unknown = !it.held() && leaving;
      r.any_held |= it.held();
      r.any_unknown |= it.unknown;
      r.any_freed |= !it.held() && !it.unknown;
    }
    if (!r.any_held && !r.any_unknown) continue;  // finished, or aborted before it wrote
    if (Status s = co_await ReadHeldSlots(ep, placement, r); !s.ok()) co_return s;
    // An undo record's old versions and values, after its items.
    std::vector<uint64_t> old_versions(r.items.size(), 0);
    std::vector<std::span<const std::byte>> old_values(r.items.size());
    if (r.rec->header.magic == store::kUndoLogMagic) {
      size_t off = 0;
      for (size_t k = 0; k < r.items.size(); k++) {
        const uint32_t value_bytes = r.items[k].t->value_bytes;
        if (off + 8 + Padded8(value_bytes) > r.rec->tail.size()) {
          co_return Corruption(Describe(r, cn) + ": its undo record is shorter than its items");
        }
        std::memcpy(&old_versions[k], r.rec->tail.data() + off, sizeof(uint64_t));
        old_values[k] = std::span(r.rec->tail).subspan(off + 8, value_bytes);
        off += 8 + Padded8(value_bytes);
      }
    }
    // A key written since by another transaction had its word freed, which this one does only
    // once every write of its commit has landed: as good as a freed word (item 4). With a word
    // held as well, the record is live and finished; with none, it is an old one.
    const bool freed = r.any_freed || (r.any_unknown && WrittenSince(placement, r, old_versions));
    if (!r.any_held && freed) continue;
    const bool forward = freed || (r.any_unknown ? OnEveryBackup(placement, r, old_versions)
                                                 : MayBeSeen(r, old_versions));
    if (forward) {
      stats->rolled_forward++;
      if (Status s = co_await RollForward(ep, catalog, placement, r, old_versions, cn, stats);
          !s.ok()) {
        co_return s;
      }
    } else {
      stats->rolled_back++;
      if (Status s = co_await RollBack(ep, placement, r, old_versions, old_values, stats);
          !s.ok()) {
        co_return s;
      }
    }
    // Its keys are as they must stay: its words go free (those on a leaving MN are lost with
    // it, and come back free on a backup once it is down).
    std::vector<GAddr> words;
    for (const ItemState& it : r.items) {
      if (!it.held()) continue;
      if (it.slot_seen[it.held_at] == r.owner) words.push_back(it.slot_word[it.held_at]);
      if (it.bucket_seen[it.held_at] == r.owner) words.push_back(it.bucket_word[it.held_at]);
    }
    std::sort(words.begin(), words.end(), [](GAddr a, GAddr b) { return a.raw < b.raw; });
    words.erase(std::unique(words.begin(), words.end()), words.end());
    std::vector<uint64_t> was(words.size());
    for (size_t k = 0; k < words.size(); k++) ep.Cas(words[k], r.owner, 0, &was[k]);
    if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
    stats->lock_words_freed += words.size();
  }
  co_return Status::Ok();
}

}  // namespace pond::cluster
