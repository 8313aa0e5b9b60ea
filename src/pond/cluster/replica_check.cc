#include "pond/cluster/replica_check.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "pond/store/hash_index.h"
#include "pond/store/record.h"

namespace pond::cluster {

namespace {

std::string Where(const store::TableInfo& t, uint64_t key) {
  return "table " + t.name + " key " + std::to_string(key);
}

}  // namespace

void AddProblem(ReplicaReport& r, uint64_t* counter, std::string what) {
  constexpr size_t kProblemsKept = 8;
  ++*counter;
  if (r.problems.size() < kProblemsKept) r.problems.push_back(std::move(what));
}

ReplicaReport CheckReplicas(const store::Catalog& catalog, const store::Placement& placement,
                            const std::function<const std::byte*(MnId)>& region,
                            const std::vector<AckedWrite>& acked,
                            const std::function<bool(uint64_t)>& holder_gone) {
  ReplicaReport r;
  const store::PoolLayout& layout = catalog.layout();
  const int reps = placement.replication();
  const uint16_t mns = placement.num_mns();
  // (table, key) -> the oldest "newest visible version" over the key's replicas.
  std::map<std::pair<uint16_t, uint64_t>, uint64_t> newest;
  for (const store::TableInfo& t : catalog.tables()) {
    for (uint16_t p = 0; p < mns; p++) {
      for (uint64_t b = 0; b < t.bucket_count; b++) {
        for (int s = 0; s < t.slots_per_bucket; s++) {
          // The replicas whose MN is readable; `first` stands for them all (docs/recovery.md
          // "MN crash": a down MN's memory is gone, and its replicas with it; a rejoining MN
          // holds a full copy only once it is readable).
          std::vector<const std::byte*> slot(static_cast<size_t>(reps));
          std::vector<MnId> mn(static_cast<size_t>(reps));
          std::vector<int> up;
          for (int rep = 0; rep < reps; rep++) {
            mn[rep] = static_cast<MnId>((p + rep) % mns);
            if (!placement.Readable(mn[rep])) continue;
            up.push_back(rep);
            slot[rep] = region(mn[rep]) + t.SlotAddr(mn[rep], rep, b, s).offset();
          }
          if (up.empty()) {
            AddProblem(r, &r.lost_groups,
                       "every replica of MN " + std::to_string(p) + "'s group is down");
            continue;
          }
          const int first = up[0];
          store::CvtHeader h0;
          std::memcpy(&h0, slot[first], sizeof(h0));
          if (store::MetaState(h0.meta) != store::kSlotLive) continue;
          r.slots++;
          for (int rep : up) {
            store::CvtHeader h;
            std::memcpy(&h, slot[rep], sizeof(h));
            if (h.lock != 0 && rep == 0 && !(holder_gone && holder_gone(h.lock))) {
              AddProblem(
                  r, &r.locked,
                  Where(t, h0.key) + ": lock word still held on MN " + std::to_string(mn[rep]));
            }
            if (h.key != h0.key || h.meta != h0.meta) {
              AddProblem(r, &r.disagreements,
                         Where(t, h0.key) + ": replica " + std::to_string(rep) + " on MN " +
                             std::to_string(mn[rep]) + " holds key " + std::to_string(h.key));
            }
            // A lookup on this replica finds the key: no bucket of its probe path before this
            // one has a free slot there (store::ClaimSlot: claims reach every replica).
            for (uint64_t pb = store::HomeBucket(t, h0.key); pb != b;
                 pb = (pb + 1) % t.bucket_count) {
              const std::byte* bucket = region(mn[rep]) + t.BucketAddr(mn[rep], rep, pb).offset();
              if (store::ScanBucket(t, std::span(bucket, t.bucket_bytes()), h0.key).first_empty >=
                  0) {
                AddProblem(r, &r.disagreements,
                           Where(t, h0.key) + ": replica " + std::to_string(rep) + " on MN " +
                               std::to_string(mn[rep]) + " has a free slot in bucket " +
                               std::to_string(pb) + " of its probe path: lookups there miss it");
                break;
              }
            }
          }
          if (t.single_version) {
            // Everything but the lock word (held on the primary only, while locked).
            const size_t lock_at = offsetof(store::SvHeader, lock);
            for (int rep : up) {
              if (std::memcmp(slot[rep], slot[first], lock_at) != 0 ||
                  std::memcmp(slot[rep] + lock_at + 8, slot[first] + lock_at + 8,
                              t.cvt_bytes - lock_at - 8) != 0) {
                AddProblem(r, &r.disagreements,
                           Where(t, h0.key) + ": replica " + std::to_string(rep) + " differs");
              }
            }
            store::SvHeader sv;
            std::memcpy(&sv, slot[first], sizeof(sv));
            newest[{t.id, h0.key}] = sv.version;
            continue;
          }
          uint64_t key_newest = UINT64_MAX;
          std::vector<uint64_t> rep_newest(static_cast<size_t>(reps), 0);
          for (int c = 0; c < t.versions; c++) {
            std::vector<store::Cell> cells(static_cast<size_t>(reps));
            bool torn = false;
            for (int rep : up) {
              store::CvtCell raw;
              std::memcpy(&raw, slot[rep] + sizeof(store::CvtHeader) + c * sizeof(raw),
                          sizeof(raw));
              Result<store::Cell> cell = store::DecodeCell(raw);
              if (!cell.ok()) {
                torn = true;
                break;
              }
              cells[rep] = *cell;
            }
            if (torn) {
              AddProblem(r, &r.disagreements, Where(t, h0.key) + ": a cell is torn at rest");
              continue;
            }
            const store::Cell& c0 = cells[first];
            if (c0.valid && c0.commit_ts == store::kInvisible) {
              AddProblem(r, &r.invisible,
                         Where(t, h0.key) + ": cell " + std::to_string(c) + " left INVISIBLE");
            }
            for (int rep : up) {
              const store::Cell& cr = cells[rep];
              const bool same_record = (c0.record == 0 && cr.record == 0) ||
                                       (c0.record != 0 && cr.record != 0 &&
                                        c0.record - layout.RecordOffset(first, 0) ==
                                            cr.record - layout.RecordOffset(rep, 0));
              if (cr.valid != c0.valid || cr.tombstone != c0.tombstone || cr.cv != c0.cv ||
                  (c0.valid &&
                   (cr.commit_ts != c0.commit_ts || cr.writer != c0.writer || !same_record))) {
                AddProblem(r, &r.disagreements,
                           Where(t, h0.key) + ": cell " + std::to_string(c) + " of replica " +
                               std::to_string(rep) + " differs (ts " +
                               std::to_string(cr.commit_ts) + " vs " +
                               std::to_string(c0.commit_ts) + ")");
              }
            }
            if (!c0.visible()) continue;
            for (int rep : up) {
              if (cells[rep].visible()) {
                rep_newest[rep] = std::max(rep_newest[rep], cells[rep].commit_ts);
              }
            }
            if (c0.tombstone || c0.record == 0) continue;
            r.versions++;
            for (int rep : up) {
              if (cells[rep].record == 0) continue;
              if (std::memcmp(region(mn[rep]) + cells[rep].record, region(mn[first]) + c0.record,
                              t.record_stride) != 0) {
                AddProblem(r, &r.disagreements,
                           Where(t, h0.key) + ": the record of cell " + std::to_string(c) +
                               " differs on replica " + std::to_string(rep));
              }
            }
          }
          for (int rep : up) key_newest = std::min(key_newest, rep_newest[rep]);
          newest[{t.id, h0.key}] = key_newest;
        }
      }
    }
  }
  for (const AckedWrite& a : acked) {
    r.acked++;
    auto it = newest.find({a.table, a.key});
    const uint64_t have = it == newest.end() ? 0 : it->second;
    if (have < a.commit_ts) {
      const store::TableInfo* t = catalog.Find(a.table);
      AddProblem(r, &r.lost_commits,
                 (t != nullptr ? Where(*t, a.key) : "key " + std::to_string(a.key)) +
                     ": committed at " + std::to_string(a.commit_ts) + ", newest version found " +
                     std::to_string(have));
    }
  }
  CheckTreeCopies(catalog, placement, region, holder_gone, r);
  return r;
}

}  // namespace pond::cluster
