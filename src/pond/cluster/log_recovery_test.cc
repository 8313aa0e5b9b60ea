// Recovery of a failed CN's commit log, cell by cell: every way a crash can leave a commit
// (Lotus write-invisible + log, timestamp, write-visible replica by replica) is laid out in
// memory by hand, and the recovered cells are compared with what the rule says.
#include "pond/cluster/log_recovery.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "pond/store/commit_log.h"
#include "pond/store/hash_index.h"
#include "pond/store/record.h"
#include "pond/store/store_testing.h"

namespace pond::cluster {
namespace {

using store::Cell;
using store::CvtCell;
using store::kInvisible;
using store::testing::FormattedPool;
using store::testing::Worker;

constexpr uint16_t kCn = 2;
constexpr uint16_t kWorker = 1;
constexpr uint64_t kLogBytes = 64 * 1024;
constexpr int kCells = 4;

uint64_t TxnId(uint64_t seq) { return (uint64_t{kWorker} << 48) | seq; }
uint64_t Tag(uint64_t seq) { return store::WriterTag(kCn, kWorker, TxnId(seq)); }

class LogRecoveryTest : public ::testing::Test {
 protected:
  LogRecoveryTest() : pool_(FormattedPool(3, 16 << 20, 1 << 20, 3)), w_(*pool_, {0, 0}) {
    store::TableSpec spec{.id = 1, .name = "t", .versions = kCells, .capacity = 1000};
    POND_CHECK(w_.Run(store::CreateTable(*w_.ep, pool_.layout, spec)).ok());
    Result<store::Catalog> cat = w_.Run(store::LoadCatalog(*w_.ep));
    POND_CHECK(cat.ok());
    catalog_ = std::move(cat).value();
    table_ = catalog_.Find(1);
    Result<uint64_t> area = w_.Run(store::CarveHeap(*w_.ep, pool_.layout, 1, kLogBytes));
    POND_CHECK(area.ok());
    area_ = GAddr::Make(1, *area);
  }

  // Claims key's slot; its cells start out as `initial` on every replica.
  store::SlotRef Key(uint64_t key, const Cell& initial) {
    Result<store::SlotRef> ref = w_.Run(store::ClaimSlot(*w_.ep, *table_, placement_, key));
    POND_CHECK(ref.ok());
    for (int r = 0; r < 3; r++) {
      for (int c = 0; c < kCells; c++) SetCell(key, *ref, r, c, initial);
    }
    return *ref;
  }
  GAddr CellAddr(uint64_t key, store::SlotRef ref, int replica, int cell) {
    return ref.Addr(*table_, placement_.Replica(key, replica), replica) + sizeof(store::CvtHeader) +
           cell * sizeof(CvtCell);
  }
  // The cell in the pool's memory.
  std::byte* At(uint64_t key, store::SlotRef ref, int replica, int cell) {
    return pool_->region(placement_.Replica(key, replica)) +
           CellAddr(key, ref, replica, cell).offset();
  }
  void SetCell(uint64_t key, store::SlotRef ref, int replica, int cell, const Cell& c) {
    Cut(key, ref, replica, cell, c, sizeof(CvtCell));
  }
  // The first `bytes` of a WRITE of `c` over the cell, as a writer that died mid-WRITE leaves it.
  void Cut(uint64_t key, store::SlotRef ref, int replica, int cell, const Cell& c, size_t bytes) {
    CvtCell raw = store::EncodeCell(c);
    std::memcpy(At(key, ref, replica, cell), &raw, bytes);
  }
  Result<Cell> Decode(uint64_t key, store::SlotRef ref, int replica, int cell) {
    CvtCell raw;
    std::memcpy(&raw, At(key, ref, replica, cell), sizeof(raw));
    return store::DecodeCell(raw);
  }
  bool Torn(uint64_t key, store::SlotRef ref, int replica, int cell) {
    return !Decode(key, ref, replica, cell).ok();
  }
  Cell GetCell(uint64_t key, store::SlotRef ref, int replica, int cell) {
    Result<Cell> c = Decode(key, ref, replica, cell);
    POND_CHECK(c.ok());
    return *c;
  }
  // Appends a sealed commit record of transaction `seq` naming (key, ref, cell) items.
  struct Named {
    uint64_t key;
    store::SlotRef ref;
    int cell;
    uint8_t flags = 0;  // store::kLogItemInsert, kLogItemDelete
  };
  void Log(uint64_t seq, const std::vector<Named>& items, uint16_t worker = kWorker) {
    std::vector<std::byte> rec(sizeof(store::LogRecordHeader) +
                               items.size() * sizeof(store::LogItem));
    store::LogRecordHeader h{
        store::kLogMagic, static_cast<uint16_t>(items.size()), kCn, TxnId(seq), worker, 0, 0};
    std::memcpy(rec.data(), &h, sizeof(h));
    for (size_t i = 0; i < items.size(); i++) {
      store::LogItem li{items[i].key,
                        items[i].ref.bucket,
                        1,
                        static_cast<uint16_t>(items[i].ref.slot),
                        static_cast<uint8_t>(items[i].cell),
                        items[i].flags,
                        0};
      std::memcpy(rec.data() + sizeof(h) + i * sizeof(li), &li, sizeof(li));
    }
    store::SealLogRecord(rec);
    std::memcpy(pool_->region(1) + area_.offset() + log_cursor_, rec.data(), rec.size());
    log_cursor_ += (rec.size() + 7) & ~size_t{7};
  }
  store::CvtHeader& Header(uint64_t key, store::SlotRef ref, int replica) {
    MnId mn = placement_.Replica(key, replica);
    return *reinterpret_cast<store::CvtHeader*>(pool_->region(mn) +
                                                ref.Addr(*table_, mn, replica).offset());
  }
  Result<LogRecoveryStats> Recover() {
    return w_.Run(RecoverCommitLog(*w_.ep, catalog_, placement_, {area_}, kLogBytes, kCn, kWorker));
  }

  static Cell Committed(uint64_t ts, uint64_t writer, uint8_t cv = 1) {
    return Cell{.cv = cv, .valid = true, .commit_ts = ts, .record = 4096, .writer = writer};
  }
  static Cell Invisible(uint64_t writer, uint8_t cv = 2) {
    return Cell{.cv = cv, .valid = true, .commit_ts = kInvisible, .record = 8192, .writer = writer};
  }

  store::testing::Pool pool_;
  Worker w_;
  store::Catalog catalog_;
  const store::TableInfo* table_ = nullptr;
  store::Placement placement_{3, 3};
  GAddr area_;
  uint64_t log_cursor_ = 0;
};

const Cell kOld = Cell{.cv = 1, .valid = true, .commit_ts = 10, .record = 4096, .writer = 77};

TEST_F(LogRecoveryTest, AllInvisibleIsRolledBackAndOtherCellsStay) {
  store::SlotRef a = Key(100, kOld);
  for (int r = 0; r < 3; r++) SetCell(100, a, r, 2, Invisible(Tag(5)));
  Log(5, {{100, a, 2}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->records, 1u);
  EXPECT_EQ(s->rolled_back, 1u);
  EXPECT_EQ(s->rolled_forward, 0u);
  EXPECT_EQ(s->cells_written, 3u);
  for (int r = 0; r < 3; r++) {
    Cell c = GetCell(100, a, r, 2);
    EXPECT_FALSE(c.valid) << "replica " << r;
    EXPECT_EQ(c.record, 8192u) << "the record buffer is kept for the next writer";
    for (int other : {0, 1, 3}) EXPECT_EQ(GetCell(100, a, r, other).commit_ts, 10u);
  }
}

// An insert's write-invisible reached the primary (cell, record, then key and meta = live) and
// no backup; no timestamp anywhere, so it is rolled back — and its slot, live on the primary,
// must be live on every replica too, with the cell empty, or the replicas disagree for good.
TEST_F(LogRecoveryTest, AnInsertRolledBackLeavesItsSlotLiveAndEmptyOnEveryReplica) {
  const uint64_t key = 300;
  store::SlotRef a = Key(key, Cell{});
  const uint64_t live = store::PackMeta(store::kSlotLive, 1, kCells, table_->value_bytes);
  Header(key, a, 0).key = key;
  Header(key, a, 0).meta = live;
  SetCell(key, a, 0, 0, Invisible(Tag(8)));
  for (int r = 1; r < 3; r++) Header(key, a, r) = store::CvtHeader{};
  Log(8, {{key, a, 0, store::kLogItemInsert}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_back, 1u);
  for (int r = 0; r < 3; r++) {
    EXPECT_EQ(Header(key, a, r).key, key) << "replica " << r;
    EXPECT_EQ(Header(key, a, r).meta, live) << "replica " << r;
    Cell c = GetCell(key, a, r, 0);
    EXPECT_FALSE(c.valid) << "replica " << r;
    EXPECT_EQ(c.cv, 2) << "replica " << r << ": emptied alike";
  }
}

TEST_F(LogRecoveryTest, CrashBetweenWriteVisibleOnReplicasRollsForward) {
  store::SlotRef a = Key(100, kOld);
  SetCell(100, a, 0, 1, Committed(50, Tag(6), 2));  // write-visible reached replica 0 only
  SetCell(100, a, 1, 1, Invisible(Tag(6)));
  SetCell(100, a, 2, 1, Invisible(Tag(6)));
  Log(6, {{100, a, 1}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_forward, 1u);
  EXPECT_EQ(s->cells_written, 2u);
  for (int r = 0; r < 3; r++) {
    Cell c = GetCell(100, a, r, 1);
    EXPECT_TRUE(c.visible()) << "replica " << r;
    EXPECT_EQ(c.commit_ts, 50u);
    EXPECT_EQ(c.record, r == 0 ? 4096u : 8192u) << "only the timestamp word is written";
  }
}

TEST_F(LogRecoveryTest, TimestampOnOneItemFinishesTheOthers) {
  store::SlotRef a = Key(100, kOld);
  store::SlotRef b = Key(200, kOld);
  for (int r = 0; r < 3; r++) {
    SetCell(100, a, r, 3, Committed(60, Tag(7)));
    SetCell(200, b, r, 0, Invisible(Tag(7)));
  }
  Log(7, {{100, a, 3}, {200, b, 0}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_forward, 1u);
  for (int r = 0; r < 3; r++) EXPECT_EQ(GetCell(200, b, r, 0).commit_ts, 60u);
}

TEST_F(LogRecoveryTest, FinishedAndForeignCellsAreNotTouched) {
  store::SlotRef a = Key(100, kOld);
  store::SlotRef b = Key(200, kOld);
  for (int r = 0; r < 3; r++) {
    SetCell(100, a, r, 0, Committed(70, Tag(8)));  // finished on every replica
    // The cell was written since by another transaction, still INVISIBLE: not ours to touch.
    SetCell(200, b, r, 1, Invisible(store::WriterTag(3, 0, 99)));
  }
  Log(8, {{100, a, 0}});
  Log(9, {{200, b, 1}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->records, 2u);
  EXPECT_EQ(s->cells_written, 0u);
  for (int r = 0; r < 3; r++) {
    EXPECT_EQ(GetCell(100, a, r, 0).commit_ts, 70u);
    EXPECT_EQ(GetCell(200, b, r, 1).commit_ts, kInvisible);
  }
}

TEST_F(LogRecoveryTest, AWriteThatReachedSomeReplicasIsRolledBackOnAllAlike) {
  store::SlotRef a = Key(100, kOld);
  SetCell(100, a, 2, 0, Invisible(Tag(10)));  // replicas 0 and 1 still hold the old version
  Log(10, {{100, a, 0}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_back, 1u);
  EXPECT_EQ(s->cells_written, 3u);
  for (int r = 0; r < 3; r++) {
    Cell c = GetCell(100, a, r, 0);
    EXPECT_FALSE(c.valid) << "replica " << r << ": the oldest version goes on every replica";
    EXPECT_EQ(c.cv, 2) << "one cacheline version on every replica";
  }
  EXPECT_EQ(GetCell(100, a, 0, 1).commit_ts, 10u) << "the other cells stay";
}

// A restarted MN rejoining holds, until its copy ends, whatever CNs wrote into it — here
// transaction 11's write-invisible, landed there from a CN that still knew the MN as leaving and
// then skipped it, knowing it down, at write-visible. Transaction 11 committed on the other
// replicas, and transaction 12 has overwritten the cell there since. That INVISIBLE cell
// decides nothing: read with the others, it would roll transaction 11 back and empty
// transaction 12's committed cell on every replica (fault seed 62, histories under SR). Where
// the replicas read agree that the write is unfinished, the rejoining one is rolled back with
// them.
TEST_F(LogRecoveryTest, ARejoiningMnsCellsDecideNothing) {
  store::SlotRef a = Key(100, kOld);
  store::SlotRef b = Key(200, kOld);
  const MnId rejoining = placement_.Replica(100, 2);
  ASSERT_EQ(placement_.Replica(200, 2), rejoining) << "both keys' third replica";
  placement_.SetRejoining(rejoining);
  SetCell(100, a, 0, 0, Committed(90, store::WriterTag(3, 0, 12)));
  SetCell(100, a, 1, 0, Committed(90, store::WriterTag(3, 0, 12)));
  SetCell(100, a, 2, 0, Invisible(Tag(11)));
  Log(11, {{100, a, 0}});
  for (int r = 0; r < 3; r++) SetCell(200, b, r, 0, Invisible(Tag(13)));  // unfinished
  Log(13, {{200, b, 0}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_back, 1u) << "transaction 13 alone";
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(GetCell(100, a, r, 0).commit_ts, 90u) << "transaction 12's commit stays";
    EXPECT_FALSE(GetCell(200, b, r, 0).valid);
  }
  EXPECT_FALSE(GetCell(200, b, 2, 0).valid) << "the rejoining replica is rolled back alike";
}

TEST_F(LogRecoveryTest, RecoveryIsIdempotentAndConsumesTheLog) {
  store::SlotRef a = Key(100, kOld);
  SetCell(100, a, 0, 1, Committed(50, Tag(6), 2));
  SetCell(100, a, 1, 1, Invisible(Tag(6)));
  SetCell(100, a, 2, 1, Invisible(Tag(6)));
  Log(6, {{100, a, 1}});
  // A recovery cut short after its cell writes, before zeroing, is the same as a second run
  // over the same log: it finds the record finished.
  std::vector<std::byte> log(pool_->region(1) + area_.offset(),
                             pool_->region(1) + area_.offset() + kLogBytes);
  ASSERT_TRUE(Recover().ok());
  std::memcpy(pool_->region(1) + area_.offset(), log.data(), log.size());
  Result<LogRecoveryStats> again = Recover();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->records, 1u);
  EXPECT_EQ(again->cells_written, 0u);
  Result<LogRecoveryStats> third = Recover();
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->records, 0u) << "the log was zeroed";
  for (int r = 0; r < 3; r++) EXPECT_EQ(GetCell(100, a, r, 1).commit_ts, 50u);
}

TEST_F(LogRecoveryTest, OnlySealedRecordsOfTheWorkerCount) {
  store::SlotRef a = Key(100, kOld);
  for (int r = 0; r < 3; r++) SetCell(100, a, r, 2, Invisible(Tag(5)));
  Log(5, {{100, a, 2}}, /*worker=*/3);  // another worker's record
  uint64_t broken = log_cursor_;
  Log(5, {{100, a, 2}});
  pool_->region(1)[area_.offset() + broken + sizeof(store::LogRecordHeader)] ^= std::byte{1};
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->records, 0u);
  EXPECT_EQ(GetCell(100, a, 0, 2).commit_ts, kInvisible);
}

TEST_F(LogRecoveryTest, TwoTimestampsUnderOneTagIsCorruption) {
  store::SlotRef a = Key(100, kOld);
  SetCell(100, a, 0, 1, Committed(50, Tag(6)));
  SetCell(100, a, 1, 1, Committed(51, Tag(6)));
  SetCell(100, a, 2, 1, Invisible(Tag(6)));
  Log(6, {{100, a, 1}});
  EXPECT_EQ(Recover().status().code(), Code::kCorruption);
}

// The failed CN died in the middle of its 24-byte WRITE of a cell (on shared memory its stores
// stop wherever the process does): the cell's first 16 bytes are the new version's, the rest the
// old one's, and it stays torn for good. It is this record's write — the record had not reached
// write-visible — so the record rolls back, and the torn cell is rewritten whole, empty, like the
// replicas the write did reach (pond_kill_tpcc under CI: recovery stopped at the torn cell for
// good, and CN 2's locks were never freed).
TEST_F(LogRecoveryTest, ACellTheFailedCnDiedWritingIsRolledBackWhole) {
  store::SlotRef a = Key(100, kOld);
  store::SlotRef b = Key(200, kOld);
  SetCell(100, a, 0, 1, Invisible(Tag(12)));
  Cut(100, a, 1, 1, Invisible(Tag(12)), 16);
  Cut(200, b, 0, 3, Invisible(Tag(12), 5), 8);  // the batch for key 200 stopped there
  Log(12, {{100, a, 1}, {200, b, 3}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_back, 1u);
  EXPECT_EQ(s->cells_cut_short, 2u);
  ASSERT_FALSE(Torn(200, b, 0, 3)) << "a cell cut short where nothing else landed is rewritten";
  for (int r = 0; r < 3; r++) {
    ASSERT_FALSE(Torn(100, a, r, 1));
    Cell c = GetCell(100, a, r, 1);
    EXPECT_FALSE(c.valid) << "replica " << r;
    EXPECT_EQ(c.cv, 2) << "replica " << r << ": the write's cacheline version, on every replica";
    c = GetCell(200, b, r, 3);
    EXPECT_FALSE(c.valid) << "replica " << r;
    EXPECT_EQ(c.cv, 5) << "replica " << r;
  }
}

// The same, with an older record of the same worker naming the same cell (its ring still holds
// it): to that record the torn cell is a later writer's, and it decides nothing there.
TEST_F(LogRecoveryTest, ACutShortCellIsOnlyItsOwnRecordsWrite) {
  store::SlotRef a = Key(100, kOld);
  for (int r = 0; r < 2; r++) SetCell(100, a, r, 1, Invisible(Tag(12)));
  Cut(100, a, 2, 1, Invisible(Tag(12)), 8);
  Log(11, {{100, a, 1}});  // finished long ago; its cell was recycled by 12
  Log(12, {{100, a, 1}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_back, 1u);
  EXPECT_EQ(s->cells_cut_short, 1u);
  for (int r = 0; r < 3; r++) EXPECT_FALSE(GetCell(100, a, r, 1).valid) << "replica " << r;
}

// A cell torn for good whose first word no record of this log wrote was cut short by another
// failed CN, after this log's record of the key had finished (a writer needs the key's lock): it
// decides nothing here and is left for that CN's recovery. And a cell an earlier recovery died
// emptying (its first word empty) decides nothing either: the record rolls back again, from the
// replicas still tagged, and the cell is rewritten whole.
TEST_F(LogRecoveryTest, ACellTornByAnotherWriterDecidesNothing) {
  store::SlotRef a = Key(100, kOld);
  for (int r = 0; r < 3; r++) SetCell(100, a, r, 1, Committed(40, Tag(11), 2));
  Cut(100, a, 0, 1, Invisible(store::WriterTag(3, 0, 99), 3), 16);
  Log(11, {{100, a, 1}});
  store::SlotRef b = Key(200, kOld);
  for (int r = 1; r < 3; r++) SetCell(200, b, r, 0, Invisible(Tag(12)));
  Cut(200, b, 0, 0, Cell{.cv = 2, .record = 4096}, 16);  // the rollback's WRITE, cut short
  Log(12, {{200, b, 0}});
  Result<LogRecoveryStats> s = Recover();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rolled_forward, 0u);
  EXPECT_EQ(s->rolled_back, 1u);
  EXPECT_EQ(s->cells_cut_short, 0u);
  EXPECT_TRUE(Torn(100, a, 0, 1)) << "another CN's torn cell is left to its recovery";
  for (int r = 1; r < 3; r++) EXPECT_EQ(GetCell(100, a, r, 1).commit_ts, 40u);
  for (int r = 0; r < 3; r++) {
    ASSERT_FALSE(Torn(200, b, r, 0)) << "replica " << r << ": rewritten whole";
    Cell c = GetCell(200, b, r, 0);
    EXPECT_FALSE(c.valid) << "replica " << r;
    EXPECT_EQ(c.cv, 2) << "replica " << r;
  }
}

// A timestamp under the tag means every cell write of the record had completed, so a cell of the
// record cut short beside it cannot be: corruption, not a rollback.
TEST_F(LogRecoveryTest, ATimestampBesideACutShortCellIsCorruption) {
  store::SlotRef a = Key(100, kOld);
  SetCell(100, a, 0, 1, Committed(50, Tag(6), 2));
  SetCell(100, a, 1, 1, Invisible(Tag(6)));
  Cut(100, a, 2, 1, Invisible(Tag(6)), 16);
  Log(6, {{100, a, 1}});
  EXPECT_EQ(Recover().status().code(), Code::kCorruption);
}

}  // namespace
}  // namespace pond::cluster
