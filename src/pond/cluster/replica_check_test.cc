// The after-run replica check finds each kind of damage it promises to find, and nothing on a
// healthy pool.
#include "pond/cluster/replica_check.h"

#include <gtest/gtest.h>

#include <cstring>

#include "pond/store/hash_index.h"
#include "pond/store/record.h"
#include "pond/store/store_testing.h"

namespace pond::cluster {
namespace {

using store::Cell;
using store::CvtCell;
using store::testing::FormattedPool;
using store::testing::Worker;

class ReplicaCheckTest : public ::testing::Test {
 protected:
  ReplicaCheckTest() : pool_(FormattedPool(3, 16 << 20, 1 << 20, 3)), w_(*pool_, {0, 0}) {
    store::TableSpec spec{.id = 1, .name = "t", .value_bytes = 40, .versions = 2, .capacity = 100};
    POND_CHECK(w_.Run(store::CreateTable(*w_.ep, pool_.layout, spec)).ok());
    catalog_ = w_.Run(store::LoadCatalog(*w_.ep)).value();
    table_ = catalog_.Find(1);
    // One key, one committed version at ts 10, identical on the three replicas.
    ref_ = w_.Run(store::ClaimSlot(*w_.ep, *table_, placement_, kKey)).value();
    for (int r = 0; r < 3; r++) {
      const MnId mn = placement_.Replica(kKey, r);
      std::byte* slot = pool_->region(mn) + ref_.Addr(*table_, mn, r).offset();
      store::CvtHeader h{kKey, store::PackMeta(store::kSlotLive, 1, 2, 40), 0};
      std::memcpy(slot, &h, sizeof(h));
      const uint64_t rec = pool_.layout.RecordOffset(r, 128);
      CvtCell c = store::EncodeCell(
          Cell{.cv = 1, .valid = true, .commit_ts = 10, .record = rec, .writer = 5});
      std::memcpy(slot + sizeof(h), &c, sizeof(c));
      std::memset(pool_->region(mn) + rec, 0x11, table_->record_stride);
    }
  }
  ReplicaReport Check(const std::vector<AckedWrite>& acked = {}) {
    return CheckReplicas(
        catalog_, placement_, [this](MnId mn) -> const std::byte* { return pool_->region(mn); },
        acked);
  }
  std::byte* CellOf(int replica) {
    const MnId mn = placement_.Replica(kKey, replica);
    return pool_->region(mn) + ref_.Addr(*table_, mn, replica).offset() + sizeof(store::CvtHeader);
  }

  static constexpr uint64_t kKey = 42;
  store::testing::Pool pool_;
  Worker w_;
  store::Catalog catalog_;
  const store::TableInfo* table_ = nullptr;
  store::Placement placement_{3, 3};
  store::SlotRef ref_;
};

TEST_F(ReplicaCheckTest, AHealthyPoolPasses) {
  ReplicaReport r = Check({{1, kKey, 10}});
  EXPECT_TRUE(r.ok()) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.slots, 1u);
  EXPECT_EQ(r.versions, 1u);
  EXPECT_EQ(r.acked, 1u);
}

TEST_F(ReplicaCheckTest, ACellThatDiffersOnOneReplicaIsFound) {
  CvtCell c = store::EncodeCell(Cell{.cv = 1,
                                     .valid = true,
                                     .commit_ts = 11,
                                     .record = pool_.layout.RecordOffset(2, 128),
                                     .writer = 5});
  std::memcpy(CellOf(2), &c, sizeof(c));
  ReplicaReport r = Check();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.disagreements, 1u);
}

TEST_F(ReplicaCheckTest, ARecordThatDiffersOnOneReplicaIsFound) {
  pool_->region(placement_.Replica(kKey, 1))[pool_.layout.RecordOffset(1, 128) + 5] =
      std::byte{0x22};
  EXPECT_EQ(Check().disagreements, 1u);
}

TEST_F(ReplicaCheckTest, AnInvisibleCellLeftBehindIsFound) {
  for (int r = 0; r < 3; r++) {
    CvtCell c = store::EncodeCell(Cell{.cv = 2,
                                       .valid = true,
                                       .commit_ts = store::kInvisible,
                                       .record = pool_.layout.RecordOffset(r, 256),
                                       .writer = 6});
    std::memcpy(CellOf(r) + sizeof(CvtCell), &c, sizeof(c));
  }
  ReplicaReport r = Check();
  EXPECT_EQ(r.invisible, 1u);
  EXPECT_EQ(r.disagreements, 0u);
}

TEST_F(ReplicaCheckTest, ACommittedWriteThatIsNotThereIsALostCommit) {
  ReplicaReport r = Check({{1, kKey, 12}, {1, kKey + 1, 3}});
  EXPECT_EQ(r.lost_commits, 2u) << "a newer version than any stored, and a key not stored";
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems[0].find("committed at 12"), std::string::npos) << r.problems[0];
}

TEST_F(ReplicaCheckTest, AHeldLockWordIsFound) {
  const MnId mn = placement_.Replica(kKey, 0);
  uint64_t owner = 99;
  std::memcpy(
      pool_->region(mn) + ref_.Addr(*table_, mn, 0).offset() + offsetof(store::CvtHeader, lock),
      &owner, sizeof(owner));
  EXPECT_EQ(Check().locked, 1u);
}

}  // namespace
}  // namespace pond::cluster
