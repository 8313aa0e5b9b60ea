#include "pond/cluster/log_recovery.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include "pond/cluster/mn_lock_recovery.h"
#include "pond/store/commit_log.h"
#include "pond/store/record.h"

namespace pond::cluster {

namespace {

using store::Cell;
using store::CvtCell;
using store::kInvisible;

// Reads are posted in batches of this many cells, so a long log does not post one huge batch.
constexpr size_t kCellsPerBatch = 1024;
// Zeroing the area goes in pieces of this size.
constexpr uint32_t kZeroChunk = 64 * 1024;
// A cell caught mid-write by someone else's WRITE is read again, at most this often; one still
// torn after that has a writer that died in its WRITE.
constexpr int kTornRetries = 100;

struct CellRef {
  size_t record;  // index into the parsed records
  GAddr addr;     // the cell on one replica
  Cell cell;
  bool down;  // its MN is down: neither read nor written, and it decides nothing
  // Its MN is not a restarted one rejoining (Placement::IsRejoining), which is read and written
  // but decides nothing: it may hold a cell a CN that still knew it as leaving wrote into it
  // and then skipped, knowing it down, at write-visible — the same cell overwritten since, on
  // the replicas read, by a later commit that would be rolled back with it. Its copy replaces
  // such a cell later, under the locks this recovery frees. The others decide as before: what
  // a reader saw of this log's commits is on them, for a rejoining MN is read only once its
  // copy ends, and that copy needs this log's locks.
  bool votes;
  GAddr slot;  // the slot the cell is in
  const store::LogItem* item;
  uint64_t live_meta;      // the slot's meta once live, for an insert's rollback to write
  bool cut_short = false;  // torn for good by the failed CN dying mid-WRITE
};

// A cell still torn after every retry was cut short by a writer that died in its WRITE — on
// shared memory (CXL, UCX's shm) the CPU's stores stop wherever the process does. Its first word
// (head_cv, valid and the writer's low 48 bits) is stored first (docs/formats.md "Cell"), so it
// names the write. If that is a write of transaction `tag`, true.
bool IsWriteOf(const CvtCell& raw, uint64_t tag) {
  uint64_t writer = 0;
  for (int i = 0; i < 6; i++) writer |= uint64_t{raw.writer[i]} << (8 * i);
  return raw.valid != store::kCellEmpty && writer == (tag & ((uint64_t{1} << 48) - 1));
}

}  // namespace

LogRecoveryStats& LogRecoveryStats::operator+=(const LogRecoveryStats& o) {
  records += o.records;
  rolled_forward += o.rolled_forward;
  rolled_back += o.rolled_back;
  cells_written += o.cells_written;
  cells_cut_short += o.cells_cut_short;
  mn_lock_records += o.mn_lock_records;
  lock_words_freed += o.lock_words_freed;
  return *this;
}

Task<Result<LogRecoveryStats>> RecoverCommitLog(Endpoint& ep, const store::Catalog& catalog,
                                                const store::Placement& placement,
                                                std::vector<GAddr> areas, uint64_t bytes,
                                                uint16_t cn, uint16_t worker) {
  LogRecoveryStats stats;
  std::vector<std::vector<std::byte>> copies(areas.size(), std::vector<std::byte>(bytes));
  for (size_t a = 0; a < areas.size(); a++) {
    // Its copies are gone, or may be (leaving: perhaps crashed, and not declared down before
    // this recovery ends under MN lock words); the others have them.
    if (placement.IsDown(areas[a].mn()) || placement.IsLeaving(areas[a].mn())) continue;
    for (uint64_t off = 0; off < bytes; off += kZeroChunk) {
      uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(kZeroChunk, bytes - off));
      ep.Read(areas[a] + off, copies[a].data() + off, n);
    }
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  // The same record may have a copy in several rings: one of each transaction is enough.
  std::vector<store::ParsedLogRecord> records, mn_lock_records;
  std::set<uint64_t> seen;
  for (const auto& copy : copies) {
    for (store::ParsedLogRecord& r : store::ParseLogArea(copy, cn, worker)) {
      if (!seen.insert(r.header.txn_id).second) continue;
      (r.header.magic == store::kLogMagic ? records : mn_lock_records).push_back(std::move(r));
    }
  }
  stats.records = records.size() + mn_lock_records.size();
  if (Status s = co_await RecoverMnLockRecords(ep, catalog, placement, mn_lock_records, cn, worker,
                                               &stats);
      !s.ok()) {
    co_return s;
  }

  // Every cell every record names, on every replica.
  std::vector<CellRef> cells;
  for (size_t r = 0; r < records.size(); r++) {
    for (const store::LogItem& li : records[r].items) {
      const store::TableInfo* t = catalog.Find(li.table);
      if (t == nullptr || li.cell >= t->versions) {
        co_return Corruption("commit log of CN " + std::to_string(cn) + " worker " +
                             std::to_string(worker) + " names table " + std::to_string(li.table) +
                             " cell " + std::to_string(li.cell) + ", which does not exist");
      }
      for (int rep = 0; rep < placement.replication(); rep++) {
        MnId mn = placement.Replica(li.key, rep);
        GAddr slot = t->SlotAddr(mn, rep, li.bucket, li.slot);
        cells.push_back(
            CellRef{r, slot + sizeof(store::CvtHeader) + li.cell * sizeof(CvtCell), Cell{},
                    placement.IsDown(mn), !placement.IsRejoining(mn), slot, &li,
                    store::PackMeta(store::kSlotLive, t->id, static_cast<uint8_t>(t->versions),
                                    t->value_bytes)});
      }
    }
  }
  std::vector<CvtCell> raw(cells.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < cells.size(); i++) {
    if (!cells[i].down) todo.push_back(i);
  }
  for (int attempt = 0; !todo.empty(); attempt++) {
    if (attempt == kTornRetries) {
      // A cell torn for good was cut short by a writer that died in its WRITE. If that is one of
      // this log's records (the cell's first word names it), the record had not reached
      // write-visible, which is posted only once every cell write is complete: the cell counts
      // as its INVISIBLE cell, so the record rolls back and the rollback rewrites the cell whole.
      // To every other record it is a later writer's and decides nothing: such a record's locks
      // were gone when that writer came (or, an empty first word, it was an earlier rollback of
      // the record's own, cut short: whichever record it was, it rolls back again and rewrites
      // the cell). A cell torn by another failed CN is left to that CN's recovery.
      auto tag_of = [&](size_t i) {
        return store::WriterTag(cn, worker, records[cells[i].record].header.txn_id);
      };
      for (size_t i : todo) {
        std::optional<uint64_t> writer;
        for (size_t j : todo) {
          if (cells[j].addr == cells[i].addr && IsWriteOf(raw[i], tag_of(j))) writer = tag_of(j);
        }
        cells[i].cell = writer ? Cell{.cv = raw[i].head_cv,
                                      .valid = true,
                                      .commit_ts = kInvisible,
                                      .writer = *writer}
                               : Cell{.cv = raw[i].head_cv};
        cells[i].cut_short = writer == tag_of(i);
        stats.cells_cut_short += cells[i].cut_short ? 1 : 0;
      }
      break;
    }
    for (size_t b = 0; b < todo.size(); b += kCellsPerBatch) {
      for (size_t k = b; k < std::min(todo.size(), b + kCellsPerBatch); k++) {
        ep.Read(cells[todo[k]].addr, &raw[todo[k]], sizeof(CvtCell));
      }
      if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
    }
    std::vector<size_t> torn;
    for (size_t i : todo) {
      Result<Cell> c = store::DecodeCell(raw[i]);
      if (c.ok()) {
        cells[i].cell = *c;
      } else {
        torn.push_back(i);
      }
    }
    todo = std::move(torn);
  }

  // Decide per record, then write.
  size_t at = 0;
  size_t posted = 0;
  std::vector<size_t> tagged_last;  // rolled-back cells that carry their record's tag
  // Empties cell `i` as raw[i] says (a rollback).
  auto empty = [&](size_t i) -> Task<Status> {
    const CellRef& c = cells[i];
    ep.Write(c.addr, &raw[i], sizeof(CvtCell));
    // An insert whose slot went live on some replica but not all: live on every one (the key,
    // then the meta, as the commit writes them), with the cell empty — the key is absent either
    // way, and the replicas agree. (Unclaiming the slot instead could cut the probe chain of a
    // key inserted past it.)
    if (c.item->flags & store::kLogItemInsert) {
      ep.Write(c.slot + offsetof(store::CvtHeader, key), &c.item->key, sizeof(uint64_t));
      ep.Write(c.slot + offsetof(store::CvtHeader, meta), &c.live_meta, sizeof(uint64_t));
    }
    stats.cells_written++;
    if (++posted % kCellsPerBatch == 0) co_return co_await ep.Flush();
    co_return Status::Ok();
  };
  for (size_t r = 0; r < records.size(); r++) {
    const store::ParsedLogRecord& rec = records[r];
    const uint64_t tag = store::WriterTag(cn, worker, rec.header.txn_id);
    size_t end = at;
    while (end < cells.size() && cells[end].record == r) end++;
    bool invisible = false;
    uint64_t ts = kInvisible;
    for (size_t i = at; i < end; i++) {
      const Cell& c = cells[i].cell;
      if (!cells[i].votes || !c.valid || c.writer != tag) continue;
      if (c.commit_ts == kInvisible) {
        invisible = true;
      } else if (ts == kInvisible) {
        ts = c.commit_ts;
      } else if (ts != c.commit_ts) {
        co_return Corruption("transaction " + std::to_string(rec.header.txn_id) + " of CN " +
                             std::to_string(cn) + " has two commit timestamps in its cells");
      }
    }
    if (invisible && ts != kInvisible) {
      for (size_t i = at; i < end; i++) {
        if (cells[i].cut_short) {
          co_return Corruption("transaction " + std::to_string(rec.header.txn_id) + " of CN " +
                               std::to_string(cn) +
                               " has a timestamp in one cell and a cell it never finished writing");
        }
      }
      stats.rolled_forward++;
      for (size_t i = at; i < end; i++) {
        CellRef& c = cells[i];
        if (!c.cell.valid || c.cell.writer != tag || c.cell.commit_ts != kInvisible) continue;
        // As write-visible does: the timestamp word alone.
        c.cell.commit_ts = ts;
        ep.Write(c.addr + offsetof(CvtCell, commit_ts), &c.cell.commit_ts, sizeof(uint64_t));
        stats.cells_written++;
        if (++posted % kCellsPerBatch == 0) {
          if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
        }
      }
    } else if (invisible) {
      stats.rolled_back++;
      // Per item (its replicas are consecutive): where the write landed on some replica but not
      // all, the others still hold the version it was overwriting — the key's oldest, which the
      // write gave up. Every replica of the cell is emptied alike (the cacheline version of the
      // write, each replica's own record buffer), so the replicas agree again. An item whose
      // write landed nowhere is left as it is.
      //
      // The replicas that do not carry the tag are emptied first, those that do only once those
      // writes are done (`tagged_last`): should this recoverer die between its writes (some land,
      // some not), a replica still carries the tag, INVISIBLE, and whoever recovers the log again
      // rolls it back again. Emptied in the other order, the tag could be gone everywhere while a
      // replica the write missed still held the old version, and the next recovery would find
      // nothing to do (machine fault seed 374, histories).
      const size_t reps = static_cast<size_t>(placement.replication());
      for (size_t item = at; item < end; item += reps) {
        int cv = -1;
        for (size_t i = item; i < item + reps; i++) {
          if (cells[i].votes && cells[i].cell.valid && cells[i].cell.writer == tag) {
            cv = cells[i].cell.cv;
          }
        }
        if (cv < 0) continue;
        for (size_t i = item; i < item + reps; i++) {
          CellRef& c = cells[i];
          if (c.down) continue;
          const bool tagged = c.cell.valid && c.cell.writer == tag;
          c.cell = Cell{.cv = static_cast<uint8_t>(cv), .record = c.cell.record};
          raw[i] = store::EncodeCell(c.cell);
          if (tagged) {
            tagged_last.push_back(i);
          } else if (Status s = co_await empty(i); !s.ok()) {
            co_return s;
          }
        }
      }
    }
    at = end;
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  for (size_t i : tagged_last) {
    if (Status s = co_await empty(i); !s.ok()) co_return s;
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;

  // The log is consumed: only now (a crash before this point leaves it to be recovered again).
  const std::vector<std::byte> zeros(std::min<uint64_t>(kZeroChunk, bytes));
  for (const GAddr& area : areas) {
    // A leaving MN's ring is left as it is: it comes back, if ever, blank.
    if (placement.IsDown(area.mn()) || placement.IsLeaving(area.mn())) continue;
    for (uint64_t off = 0; off < bytes; off += kZeroChunk) {
      uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(kZeroChunk, bytes - off));
      ep.Write(area + off, zeros.data(), n);
    }
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  co_return stats;
}

}  // namespace pond::cluster
