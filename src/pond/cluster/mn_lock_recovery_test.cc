// Recovery of a failed CN's commits under MN lock words (motor, ford), word by word: each way a
// crash can leave such a commit — record written, backups written, primaries written, some words
// freed — is laid out in memory by hand, and what recovery leaves is compared with the rule
// (cluster/mn_lock_recovery.h).
#include "pond/cluster/mn_lock_recovery.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "pond/cluster/log_recovery.h"
#include "pond/store/commit_log.h"
#include "pond/store/hash_index.h"
#include "pond/store/record.h"
#include "pond/store/store_testing.h"
#include "pond/store/sv_slot.h"

namespace pond::cluster {
namespace {

using store::Cell;
using store::CvtCell;
using store::testing::FormattedPool;
using store::testing::Worker;

constexpr uint16_t kCn = 2;
constexpr uint16_t kWorker = 1;
constexpr uint64_t kLogBytes = 64 * 1024;
constexpr int kCells = 2;
constexpr uint16_t kMvcc = 1, kSv = 2;

uint64_t TxnId(uint64_t seq) { return (uint64_t{kWorker} << 48) | seq; }
uint64_t Tag(uint64_t seq) { return store::WriterTag(kCn, kWorker, TxnId(seq)); }
uint64_t Owner(uint64_t seq) { return store::LockOwnerWord(kCn, TxnId(seq)); }

class MnLockRecoveryTest : public ::testing::Test {
 protected:
  MnLockRecoveryTest() : pool_(FormattedPool(3, 16 << 20, 1 << 20, 3)), w_(*pool_, {0, 0}) {
    store::TableSpec mvcc{.id = kMvcc, .name = "m", .versions = kCells, .capacity = 1000};
    store::TableSpec sv{.id = kSv, .name = "s", .capacity = 1000, .single_version = true};
    POND_CHECK(w_.Run(store::CreateTable(*w_.ep, pool_.layout, mvcc)).ok());
    POND_CHECK(w_.Run(store::CreateTable(*w_.ep, pool_.layout, sv)).ok());
    Result<store::Catalog> cat = w_.Run(store::LoadCatalog(*w_.ep));
    POND_CHECK(cat.ok());
    catalog_ = std::move(cat).value();
    Result<uint64_t> area = w_.Run(store::CarveHeap(*w_.ep, pool_.layout, 1, kLogBytes));
    POND_CHECK(area.ok());
    area_ = GAddr::Make(1, *area);
  }

  const store::TableInfo& T(uint16_t id) { return *catalog_.Find(id); }
  std::byte* At(MnId mn, GAddr a) { return pool_->region(mn) + a.offset(); }
  std::byte* Slot(uint16_t t, uint64_t key, store::SlotRef ref, int rep) {
    const MnId mn = placement_.Replica(key, rep);
    return At(mn, T(t).SlotAddr(mn, rep, ref.bucket, ref.slot));
  }
  uint64_t& LockWord(uint16_t t, uint64_t key, store::SlotRef ref) {
    return reinterpret_cast<store::CvtHeader*>(Slot(t, key, ref, 0))->lock;
  }
  // The insert lock of key's home bucket, on its primary.
  uint64_t& BucketWord(uint16_t t, uint64_t key) {
    const MnId mn = placement_.Primary(key);
    const GAddr word =
        T(t).BucketAddr(mn, 0, store::HomeBucket(T(t), key)) + offsetof(store::CvtHeader, lock);
    return *reinterpret_cast<uint64_t*>(At(mn, word));
  }
  store::SlotRef Claim(uint16_t t, uint64_t key) {
    Result<store::SlotRef> ref =
        w_.Run(store::ClaimSlot(*w_.ep, T(t), placement_, key));
    POND_CHECK(ref.ok());
    return *ref;
  }

  // MVCC: a live key whose cells start as `initial` on every replica.
  store::SlotRef MvccKey(uint64_t key, const Cell& initial) {
    store::SlotRef ref = Claim(kMvcc, key);
    for (int r = 0; r < 3; r++) {
      auto* h = reinterpret_cast<store::CvtHeader*>(Slot(kMvcc, key, ref, r));
      h->key = key;
      h->meta = store::PackMeta(store::kSlotLive, kMvcc, kCells, T(kMvcc).value_bytes);
      for (int c = 0; c < kCells; c++) SetCell(key, ref, r, c, initial);
    }
    return ref;
  }
  void SetCell(uint64_t key, store::SlotRef ref, int rep, int cell, const Cell& c) {
    CvtCell raw = store::EncodeCell(c);
    std::memcpy(Slot(kMvcc, key, ref, rep) + sizeof(store::CvtHeader) + cell * sizeof(CvtCell),
                &raw, sizeof(raw));
  }
  Cell GetCell(uint64_t key, store::SlotRef ref, int rep, int cell) {
    CvtCell raw;
    std::memcpy(&raw,
                Slot(kMvcc, key, ref, rep) + sizeof(store::CvtHeader) + cell * sizeof(CvtCell),
                sizeof(raw));
    Result<Cell> c = store::DecodeCell(raw);
    POND_CHECK(c.ok());
    return *c;
  }
  // A committed motor cell on replica `rep`, its record at lane offset `lane_rel`.
  Cell MotorCell(uint64_t seq, int rep, uint64_t lane_rel, uint8_t cv = 2) {
    return Cell{.cv = cv,
                .valid = true,
                .commit_ts = 50,
                .record = pool_.layout.RecordOffset(rep, lane_rel),
                .writer = Tag(seq)};
  }

  // Single version: a live key holding `value` at `version` on every replica.
  store::SlotRef SvKey(uint64_t key, uint64_t version, uint8_t value) {
    store::SlotRef ref = Claim(kSv, key);
    for (int r = 0; r < 3; r++) PutSv(key, ref, r, version, value, false);
    return ref;
  }
  void PutSv(uint64_t key, store::SlotRef ref, int rep, uint64_t version, uint8_t value,
             bool deleted) {
    store::SvHeader h{};
    h.key = key;
    h.meta = store::PackMeta(store::kSlotLive, kSv, 1, T(kSv).value_bytes);
    h.version = version;
    h.deleted = deleted ? 1 : 0;
    const uint64_t lock = LockWord(kSv, key, ref);
    std::vector<std::byte> v(T(kSv).value_bytes, std::byte{value});
    std::vector<std::byte> image(T(kSv).cvt_bytes);
    store::EncodeSvSlot(T(kSv), h, v, image);
    std::memcpy(Slot(kSv, key, ref, rep), image.data(), image.size());
    if (rep == 0) LockWord(kSv, key, ref) = lock;
  }
  store::SvHeader GetSv(uint64_t key, store::SlotRef ref, int rep, uint8_t* value) {
    store::SvHeader h;
    std::vector<std::byte> v(T(kSv).value_bytes);
    EXPECT_TRUE(
        store::DecodeSvSlot(T(kSv), {Slot(kSv, key, ref, rep), T(kSv).cvt_bytes}, &h, v).ok());
    *value = static_cast<uint8_t>(v[0]);
    return h;
  }

  struct Named {
    uint64_t key;
    store::SlotRef ref;
    int cell = 0;
    uint8_t flags = 0;
    uint64_t old_version = 0;  // undo records
    uint8_t old_value = 0;
  };
  // Appends a sealed record (motor's, or ford's undo record) of transaction `seq`.
  void Log(uint32_t magic, uint64_t seq, const std::vector<Named>& items) {
    const bool undo = magic == store::kUndoLogMagic;
    const uint32_t value = (T(kSv).value_bytes + 7) & ~7u;
    size_t bytes = sizeof(store::LogRecordHeader) + items.size() * sizeof(store::LogItem);
    if (undo) bytes += items.size() * (8 + value);
    std::vector<std::byte> rec(bytes);
    store::LogRecordHeader h{magic,   static_cast<uint16_t>(items.size()),         kCn, TxnId(seq),
                             kWorker, static_cast<uint16_t>(undo ? bytes / 8 : 0), 0};
    std::memcpy(rec.data(), &h, sizeof(h));
    size_t tail = sizeof(h) + items.size() * sizeof(store::LogItem);
    for (size_t i = 0; i < items.size(); i++) {
      store::LogItem li{items[i].key,
                        items[i].ref.bucket,
                        undo ? kSv : kMvcc,
                        static_cast<uint16_t>(items[i].ref.slot),
                        static_cast<uint8_t>(items[i].cell),
                        items[i].flags,
                        0};
      std::memcpy(rec.data() + sizeof(h) + i * sizeof(li), &li, sizeof(li));
      if (undo) {
        std::memcpy(rec.data() + tail, &items[i].old_version, 8);
        std::memset(rec.data() + tail + 8, items[i].old_value, T(kSv).value_bytes);
        tail += 8 + value;
      }
    }
    store::SealLogRecord(rec);
    std::memcpy(At(1, area_) + log_cursor_, rec.data(), rec.size());
    log_cursor_ += (rec.size() + 7) & ~size_t{7};
  }
  Result<LogRecoveryStats> Recover() {
    return w_.Run(RecoverCommitLog(*w_.ep, catalog_, placement_, {area_}, kLogBytes, kCn, kWorker));
  }

  store::testing::Pool pool_;
  Worker w_;
  store::Catalog catalog_;
  store::Placement placement_{3, 3};
  GAddr area_;
  uint64_t log_cursor_ = 0;
};

const Cell kOld = Cell{.cv = 1, .valid = true, .commit_ts = 10, .record = 0, .writer = 77};

// Motor died after its record and backups, before any primary: every word still its own, no
// primary shows the write. Nobody can have used it — it is undone on every replica.
TEST_F(MnLockRecoveryTest, MotorWithEveryWordHeldAndNoPrimaryWrittenIsUndone) {
  const uint64_t key = 100;
  store::SlotRef a = MvccKey(key, kOld);
  for (int r = 1; r < 3; r++) SetCell(key, a, r, 1, MotorCell(5, r, 0));
  LockWord(kMvcc, key, a) = Owner(5);
  Log(store::kMotorLogMagic, 5, {{key, a, 1}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->mn_lock_records, 1u);
  EXPECT_EQ(s->rolled_back, 1u);
  EXPECT_EQ(s->rolled_forward, 0u);
  EXPECT_EQ(s->lock_words_freed, 1u);
  for (int r = 0; r < 3; r++) {
    EXPECT_FALSE(GetCell(key, a, r, 1).valid) << "replica " << r;
    EXPECT_EQ(GetCell(key, a, r, 0).commit_ts, 10u) << "the other cell stays";
  }
  EXPECT_EQ(LockWord(kMvcc, key, a), 0u);
}

// Motor died in the round that frees its words: key A's primary has the write and its word is
// free, key B's primary has neither. A reader may have seen A: B is finished from a backup —
// cell, record bytes (moved to the primary's lane) — and its word freed.
TEST_F(MnLockRecoveryTest, MotorWithAWordFreedIsFinishedFromABackup) {
  const uint64_t ka = 200, kb = 201;
  store::SlotRef a = MvccKey(ka, kOld), b = MvccKey(kb, kOld);
  const uint64_t lane_rel = 4096;
  for (int r = 0; r < 3; r++) SetCell(ka, a, r, 1, MotorCell(6, r, lane_rel));
  for (int r = 1; r < 3; r++) {
    SetCell(kb, b, r, 1, MotorCell(6, r, lane_rel + 1024));
    std::memset(At(placement_.Replica(kb, r),
                   GAddr::Make(0, pool_.layout.RecordOffset(r, lane_rel + 1024))),
                0x5a, T(kMvcc).record_stride);
  }
  LockWord(kMvcc, kb, b) = Owner(6);
  Log(store::kMotorLogMagic, 6, {{ka, a, 1}, {kb, b, 1}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_forward, 1u);
  const Cell c = GetCell(kb, b, 0, 1);
  EXPECT_TRUE(c.valid);
  EXPECT_EQ(c.writer, Tag(6));
  EXPECT_EQ(c.commit_ts, 50u);
  EXPECT_EQ(c.record, pool_.layout.RecordOffset(0, lane_rel + 1024)) << "the primary's own lane";
  EXPECT_EQ(*At(placement_.Replica(kb, 0), GAddr::Make(0, c.record)), std::byte{0x5a});
  EXPECT_EQ(LockWord(kMvcc, kb, b), 0u);
}

// A record none of whose words names its transaction is old: its cells may be later writers'.
TEST_F(MnLockRecoveryTest, AMotorRecordWhoseWordsAreAllFreeIsLeftAlone) {
  const uint64_t key = 300;
  store::SlotRef a = MvccKey(key, kOld);
  SetCell(key, a, 1, 1, MotorCell(7, 1, 0));  // a later writer's, mid-commit
  LockWord(kMvcc, key, a) = Owner(99);        // its word, not the record's
  Log(store::kMotorLogMagic, 7, {{key, a, 1}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_back + s->rolled_forward, 0u);
  EXPECT_TRUE(GetCell(key, a, 1, 1).valid);
  EXPECT_EQ(LockWord(kMvcc, key, a), Owner(99));
}

// Ford died after its undo record and some backups: its words all held, the primary at the old
// version. The undo record's images go back on every replica.
TEST_F(MnLockRecoveryTest, FordWithEveryWordHeldIsUndoneFromItsUndoRecord) {
  const uint64_t key = 400;
  store::SlotRef a = SvKey(key, 3, 0x11);
  LockWord(kSv, key, a) = Owner(8);
  PutSv(key, a, 1, 4, 0x22, false);  // one backup has the new image
  Log(store::kUndoLogMagic, 8, {{key, a, 0, 0, 3, 0x11}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_back, 1u);
  for (int r = 0; r < 3; r++) {
    uint8_t v = 0;
    store::SvHeader h = GetSv(key, a, r, &v);
    EXPECT_EQ(h.version, 3u) << "replica " << r;
    EXPECT_EQ(v, 0x11) << "replica " << r;
    EXPECT_EQ(h.deleted, 0u);
  }
  EXPECT_EQ(LockWord(kSv, key, a), 0u);
}

// Ford inserted a new key: its slot shows live on the primary, where no word of the key guards it
// (the transaction holds the home bucket's word) — a reader may have seen it, so the commit is
// finished from a backup, not undone; and the bucket's word goes free.
TEST_F(MnLockRecoveryTest, AFordInsertShownOnThePrimaryIsFinished) {
  const uint64_t key = 500;
  store::SlotRef a = Claim(kSv, key);
  uint64_t& word = BucketWord(kSv, key);
  for (int r = 0; r < 3; r++) PutSv(key, a, r, 1, 0x33, false);
  word = Owner(9);
  Log(store::kUndoLogMagic, 9,
      {{key, a, 0, store::kLogItemInsert | store::kLogItemWasAbsent, 0, 0}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_forward, 1u);
  for (int r = 0; r < 3; r++) {
    uint8_t v = 0;
    store::SvHeader h = GetSv(key, a, r, &v);
    EXPECT_EQ(h.deleted, 0u) << "replica " << r;
    EXPECT_EQ(v, 0x33) << "replica " << r;
  }
  EXPECT_EQ(word, 0u);
}

// The same insert, not yet on the primary (and so seen by no one): undone, the slot left as its
// key's tombstone on every replica.
TEST_F(MnLockRecoveryTest, AFordInsertNotOnThePrimaryIsUndoneToATombstone) {
  const uint64_t key = 600;
  store::SlotRef a = Claim(kSv, key);
  BucketWord(kSv, key) = Owner(10);
  PutSv(key, a, 1, 1, 0x44, false);
  Log(store::kUndoLogMagic, 10,
      {{key, a, 0, store::kLogItemInsert | store::kLogItemWasAbsent, 0, 0}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_back, 1u);
  for (int r = 0; r < 3; r++) {
    uint8_t v = 0;
    store::SvHeader h = GetSv(key, a, r, &v);
    EXPECT_EQ(h.deleted, 1u) << "replica " << r;
    EXPECT_EQ(h.key, key);
    EXPECT_EQ(store::MetaState(h.meta), store::kSlotLive);
  }
  EXPECT_EQ(BucketWord(kSv, key), 0u);
}

}  // namespace
}  // namespace pond::cluster
