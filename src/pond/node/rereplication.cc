#include "pond/node/rereplication.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "pond/base/assert.h"
#include "pond/lock/lock_client.h"
#include "pond/node/worker_context.h"
#include "pond/store/catalog.h"
#include "pond/store/layout.h"
#include "pond/store/record.h"
#include "pond/store/sv_slot.h"

namespace pond::node {
namespace {

// A bucket whose locks were refused is tried again after this; one whose MN did not answer,
// after the poll below (by then the MN may be declared down and another replica the source).
constexpr uint64_t kLockRetryNs = 20'000;
constexpr uint64_t kUnreachablePollNs = 100'000;

MnId ReplicaOfGroup(const store::Placement& pl, MnId primary, int i) {
  return static_cast<MnId>((primary + static_cast<unsigned>(i)) % pl.num_mns());
}

bool Held(const std::vector<lock::LockRequest>& locked, uint64_t key) {
  for (const lock::LockRequest& r : locked) {
    if (r.key.key == key) return true;
  }
  return false;
}

// CopyLocked for single-version slots (ford), whose value is in the slot itself: each slot
// whole, in one WRITE, with its lock word free on `mn` (the copier's own word, if the source
// holds the key's words, must not come along).
Task<Result<uint64_t>> CopySvLocked(WorkerContext& w, const store::TableInfo& t, MnId mn, int rep,
                                    uint64_t b, const std::vector<std::byte>& bucket,
                                    const std::vector<lock::LockRequest>& locked) {
  Endpoint& ep = w.ep();
  std::vector<std::byte> value(t.value_bytes);
  std::vector<std::vector<std::byte>> out;
  std::vector<int> index;
  for (int s = 0; s < t.slots_per_bucket; s++) {
    const std::byte* at = bucket.data() + static_cast<size_t>(s) * t.cvt_bytes;
    store::SvHeader h;
    std::memcpy(&h, at, sizeof(h));
    if (store::MetaState(h.meta) != store::kSlotLive || !Held(locked, h.key)) continue;
    // Nobody writes a slot whose key's lock word we hold: a torn slot is not a race.
    if (!store::DecodeSvSlot(t, std::span(at, t.cvt_bytes), &h, value).ok()) {
      co_return Corruption("a single-version slot torn under its key's lock word");
    }
    out.emplace_back(at, at + t.cvt_bytes);
    const uint64_t free_word = 0;
    std::memcpy(out.back().data() + offsetof(store::SvHeader, lock), &free_word, 8);
    index.push_back(s);
  }
  for (size_t i = 0; i < out.size(); i++) {
    ep.Write(t.SlotAddr(mn, rep, b, index[i]), out[i].data(), t.cvt_bytes);
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  co_return static_cast<uint64_t>(out.size());
}

// The slots of bucket `b` whose keys this worker holds write locks on are copied from `src`
// (replica `src_rep`) to `mn` (replica `rep`). Slots that went live after the locks were asked
// for are left alone: their inserts wrote `mn` too.
Task<Result<uint64_t>> CopyLocked(WorkerContext& w, const store::TableInfo& t, MnId mn, int rep,
                                  MnId src, int src_rep, uint64_t b,
                                  const std::vector<lock::LockRequest>& locked) {
  Endpoint& ep = w.ep();
  const store::PoolLayout& layout = w.cluster().layout();
  std::vector<std::byte> bucket(t.bucket_bytes());
  ep.Read(t.BucketAddr(src, src_rep, b), bucket.data(), t.bucket_bytes());
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  if (t.single_version) co_return co_await CopySvLocked(w, t, mn, rep, b, bucket, locked);

  struct Slot {
    int index;
    store::CvtHeader header;
    std::vector<store::Cell> cells;
  };
  std::vector<Slot> slots;
  std::vector<std::vector<std::byte>> records;
  std::vector<std::pair<size_t, size_t>> record_of;  // (slot, cell) per entry of `records`
  for (int s = 0; s < t.slots_per_bucket; s++) {
    const std::byte* at = bucket.data() + static_cast<size_t>(s) * t.cvt_bytes;
    store::CvtHeader h;
    std::memcpy(&h, at, sizeof(h));
    if (store::MetaState(h.meta) != store::kSlotLive || !Held(locked, h.key)) continue;
    Slot slot{s, h, {}};
    for (int c = 0; c < t.versions; c++) {
      store::CvtCell raw;
      std::memcpy(&raw, at + sizeof(h) + static_cast<size_t>(c) * sizeof(raw), sizeof(raw));
      Result<store::Cell> cell = store::DecodeCell(raw);
      // Nobody writes a slot whose key's write lock we hold: a torn cell is not a race.
      if (!cell.ok()) co_return Corruption("a cell torn under its key's write lock");
      if (cell->valid && !cell->tombstone && cell->record != 0) {
        records.emplace_back(t.record_stride);
        record_of.emplace_back(slots.size(), static_cast<size_t>(c));
        ep.Read(GAddr::Make(src, cell->record), records.back().data(), t.record_stride);
      }
      slot.cells.push_back(*cell);
    }
    slots.push_back(std::move(slot));
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;

  // Records first, then each slot whole in one WRITE: header and cells with their record
  // offsets moved to `mn`'s lane. (A commit writes the meta last so that a reader never sees a
  // live slot without its cells; nobody reads a rejoining MN, and nobody else touches these
  // slots while we hold their keys' locks, so one WRITE per slot is enough.)
  auto to_rep = [&](uint64_t record) {
    return record == 0 ? 0 : layout.RecordOffset(rep, record - layout.RecordOffset(src_rep, 0));
  };
  for (size_t k = 0; k < records.size(); k++) {
    const store::Cell& c = slots[record_of[k].first].cells[record_of[k].second];
    ep.Write(GAddr::Make(mn, to_rep(c.record)), records[k].data(), t.record_stride);
  }
  std::vector<std::byte> out(slots.size() * t.cvt_bytes);
  for (size_t i = 0; i < slots.size(); i++) {
    std::byte* at = out.data() + i * t.cvt_bytes;
    // Free on `mn`: with lock words on MNs the source's may be the copier's own (CopyUnderMnWords).
    slots[i].header.lock = 0;
    std::memcpy(at, &slots[i].header, sizeof(store::CvtHeader));
    for (size_t c = 0; c < slots[i].cells.size(); c++) {
      store::Cell cell = slots[i].cells[c];
      cell.record = to_rep(cell.record);
      const store::CvtCell raw = store::EncodeCell(cell);
      std::memcpy(at + sizeof(store::CvtHeader) + c * sizeof(raw), &raw, sizeof(raw));
    }
    ep.Write(t.SlotAddr(mn, rep, b, slots[i].index), at, t.cvt_bytes);
  }
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  co_return static_cast<uint64_t>(slots.size());
}

// With lock words on MNs (motor and the ablation steps before +lock-sharding) writers keep out
// of a key by its slot's own word where the key's words are (store::Placement::LockReplica), not
// by the CN lock tables: the copier takes those words, as a writer would, for the keys `reqs`
// names (live in slots `live` of bucket `b`), copies, and frees them.
Task<Result<uint64_t>> CopyUnderMnWords(WorkerContext& w, const store::TableInfo& t, MnId mn,
                                        int rep, MnId src, int src_rep, uint64_t b,
                                        const std::vector<lock::LockRequest>& reqs,
                                        const std::vector<int>& live) {
  Endpoint& ep = w.ep();
  const store::Placement& pl = w.placement();
  const uint64_t self =
      store::LockOwnerWord(w.cn_id(), (uint64_t{w.index()} << 48) | w.NextTxnId());
  std::vector<GAddr> words(reqs.size());
  std::vector<uint64_t> old(reqs.size(), 0);
  for (size_t i = 0; i < reqs.size(); i++) {
    const uint64_t key = reqs[i].key.key;
    const int lr = pl.LockReplica(key);
    // Changing hands (an MN leaving, or a restarted one frozen): tried again later.
    if (lr < 0) co_return Unavailable("the key's lock words are changing hands");
    words[i] = t.SlotAddr(pl.Replica(key, lr), lr, b, live[i]) + offsetof(store::CvtHeader, lock);
  }
  for (size_t i = 0; i < reqs.size(); i++) ep.Cas(words[i], 0, self, &old[i]);
  Endpoint::FlushResult f = co_await ep.FlushReporting();
  // A word a failed and recovered CN incarnation left guards nothing (store::GoneHolders): it is
  // taken from it, as a writer takes it, or the copy would wait for it for good.
  std::vector<uint64_t> gone(reqs.size(), 0);
  for (size_t i = 0; i < reqs.size(); i++) {
    if (f.status.ok() && old[i] != 0 && w.HolderGone(old[i])) {
      gone[i] = old[i];
      ep.Cas(words[i], gone[i], self, &old[i]);
    }
  }
  if (std::any_of(gone.begin(), gone.end(), [](uint64_t g) { return g != 0; })) {
    Endpoint::FlushResult g = co_await ep.FlushReporting();
    f.unreachable |= g.unreachable;
    if (!g.status.ok()) f.status = g.status;
    // A CAS that returned the gone holder's word won: the word is now this copier's.
    for (size_t i = 0; i < reqs.size(); i++) {
      if (gone[i] != 0 && old[i] == gone[i]) old[i] = 0;
    }
  }
  std::vector<GAddr> won;
  for (size_t i = 0; i < reqs.size(); i++) {
    if (old[i] == 0 && ((f.unreachable >> words[i].mn()) & 1) == 0) won.push_back(words[i]);
  }
  Result<uint64_t> r = Conflict("a key's lock word is held");
  if (!f.status.ok()) {
    r = f.status;
  } else if (won.size() == reqs.size()) {
    r = co_await CopyLocked(w, t, mn, rep, src, src_rep, b, reqs);
  }
  const uint64_t zero = 0;
  for (GAddr a : won) ep.Write(a, &zero, sizeof(zero));
  if (Status s = co_await ep.Flush(); !s.ok() && r.ok()) co_return s;
  co_return r;
}

Task<Result<uint64_t>> CopyBucket(WorkerContext& w, const store::TableInfo& t, MnId mn, int rep,
                                  MnId src, int src_rep, uint64_t b) {
  Endpoint& ep = w.ep();
  std::vector<std::byte> bucket(t.bucket_bytes());
  ep.Read(t.BucketAddr(src, src_rep, b), bucket.data(), t.bucket_bytes());
  if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  std::vector<lock::LockRequest> reqs;
  // Claimed slots (an insert under way, or one that never ended) go over as claims: the bucket
  // must look as full on `mn` as on the source, or a lookup there would stop short of a key
  // inserted past it (store::ClaimSlot). By CAS from empty: the insert may have written its slot
  // on `mn` since the read, and a later state is never taken back.
  std::vector<uint64_t> claim_old(static_cast<size_t>(t.slots_per_bucket));
  std::vector<int> live;
  bool claims = false;
  for (int s = 0; s < t.slots_per_bucket; s++) {
    store::CvtHeader h;
    std::memcpy(&h, bucket.data() + static_cast<size_t>(s) * t.cvt_bytes, sizeof(h));
    if (store::MetaState(h.meta) == store::kSlotClaimed) {
      ep.Cas(t.SlotAddr(mn, rep, b, s) + offsetof(store::CvtHeader, meta), 0, h.meta,
             &claim_old[static_cast<size_t>(s)]);
      claims = true;
    }
    if (store::MetaState(h.meta) != store::kSlotLive) continue;
    reqs.push_back({lock::LockKey::Record(t.id, h.key), lock::LockMode::kWrite});
    live.push_back(s);
  }
  if (claims) {
    if (Status st = co_await ep.Flush(); !st.ok()) co_return st;
  }
  if (reqs.empty()) co_return uint64_t{0};
  if (!w.config().protocol.cn_locks) {
    co_return co_await CopyUnderMnWords(w, t, mn, rep, src, src_rep, b, reqs, live);
  }
  // The copier takes the locks as a transaction of this worker would, so the lock tables, the
  // ends and the worker's floor treat it as one.
  const lock::LockOwner owner{w.cn_id(), (uint64_t{w.index()} << 48) | w.NextTxnId()};
  w.locks().Start(owner);
  Status s = co_await w.locks().Acquire(owner, reqs);
  if (!s.ok()) {
    w.locks().Finish(owner, {});
    co_return s;
  }
  Result<uint64_t> r = co_await CopyLocked(w, t, mn, rep, src, src_rep, b, reqs);
  w.locks().Finish(owner, reqs);
  co_return r;
}

// A tree unit: each line under the line's own lock (btree::BTree::CopyToJoining), which refuses
// nothing for long: a unit cut short by a wait is begun again where it stopped.
Task<Result<uint64_t>> CopyTreeLines(WorkerContext& w, const store::TableInfo& t, MnId range_mn,
                                     CopyUnit u, const std::atomic<bool>* stop) {
  POND_CHECK(t.ordered);
  if (stop != nullptr && stop->load()) co_return Aborted("the copy stopped: its CN stops");
  co_return co_await w.Tree(t).CopyToJoining(range_mn, u.replica, static_cast<uint32_t>(u.first),
                                             static_cast<uint32_t>(u.end));
}

}  // namespace

Task<Result<uint64_t>> CopyToRejoining(WorkerContext& w, MnId mn, CopyUnit u,
                                       const std::atomic<bool>* stop) {
  const store::TableInfo* t = w.cluster().catalog().Find(u.table);
  const store::Placement& pl = w.placement();
  const MnId primary = static_cast<MnId>((mn + pl.num_mns() - u.replica) % pl.num_mns());
  if (u.tree) co_return co_await CopyTreeLines(w, *t, primary, u, stop);
  POND_CHECK(t != nullptr);
  uint64_t copied = 0;
  for (uint64_t b = u.first; b < u.end;) {
    if (!pl.IsJoining(mn)) {
      co_return Unavailable("MN " + std::to_string(mn) + " is not rejoining any more");
    }
    if (stop != nullptr && stop->load()) co_return Aborted("the copy stopped: its CN stops");
    int src_rep = -1;
    for (int j = 0; j < pl.replication() && src_rep < 0; j++) {
      if (j != u.replica && pl.Readable(ReplicaOfGroup(pl, primary, j))) src_rep = j;
    }
    POND_CHECK_MSG(src_rep >= 0, "a rejoining MN's group has no readable replica to copy");
    Result<uint64_t> r =
        co_await CopyBucket(w, *t, mn, u.replica, ReplicaOfGroup(pl, primary, src_rep), src_rep, b);
    if (r.ok()) {
      copied += *r;
      b++;
      continue;
    }
    switch (r.status().code()) {
      case Code::kConflict:
      case Code::kWrongShard:
        co_await w.sched().SleepFor(kLockRetryNs);
        break;
      case Code::kUnavailable:
        co_await w.sched().SleepFor(kUnreachablePollNs);
        break;
      default:
        co_return r.status();
    }
  }
  co_return copied;
}

Task<Status> LayOutRestarted(WorkerContext& w, MnId mn) {
  const store::Catalog& catalog = w.cluster().catalog();
  const uint64_t head = catalog.layout().heap_begin;
  std::vector<std::byte> image(head);
  store::RestoreRegion(image.data(), catalog, mn);
  // The superblock and the catalog; not the lease page between them, which beats use.
  Endpoint& ep = w.ep();
  ep.Write(GAddr::Make(mn, store::kCatalogOffset), image.data() + store::kCatalogOffset,
           static_cast<uint32_t>(head - store::kCatalogOffset));
  ep.Write(GAddr::Make(mn, 0), image.data(), sizeof(store::Superblock));
  co_return co_await ep.Flush();
}

Task<Status> SyncLaneCursors(WorkerContext& w, MnId mn) {
  const store::Placement& pl = w.placement();
  Endpoint& ep = w.ep();
  // Replicas past the last mirror take no part in carves (store::CarveLane).
  const int reps = std::min(pl.replication(), store::kLaneMirrorsMax + 1);
  auto field = [](int i) {
    return i == 0 ? offsetof(store::Superblock, lane_cursor)
                  : offsetof(store::Superblock, lane_mirror) +
                        static_cast<size_t>(i - 1) * sizeof(uint64_t);
  };
  for (int i = 0; i < reps; i++) {
    const MnId primary = static_cast<MnId>((mn + pl.num_mns() - i) % pl.num_mns());
    int from = -1;
    for (int j = i + 1; j < reps && from < 0; j++) {
      if (pl.Readable(ReplicaOfGroup(pl, primary, j))) from = j;
    }
    for (int j = i - 1; j >= 0 && from < 0; j--) {
      if (pl.Readable(ReplicaOfGroup(pl, primary, j))) from = j;
    }
    POND_CHECK_MSG(from >= 0, "a rejoining MN's group has no readable replica");
    uint64_t cursor = 0;
    ep.Read(GAddr::Make(ReplicaOfGroup(pl, primary, from), field(from)), &cursor, sizeof(cursor));
    if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
    ep.Write(GAddr::Make(mn, field(i)), &cursor, sizeof(cursor));
    if (Status s = co_await ep.Flush(); !s.ok()) co_return s;
  }
  co_return Status::Ok();
}

}  // namespace pond::node
