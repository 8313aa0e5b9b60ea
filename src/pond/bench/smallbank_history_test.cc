// SmallBankHistory: recorded SmallBank transactions become a list-append history whose verdict
// is known — a serial run passes, and each way a protocol can break shows up as the anomaly
// the checker names for it.
#include "pond/bench/smallbank_history.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "pond/check/checker.h"
#include "pond/check/history.h"

namespace pond::bench {
namespace {

constexpr uint64_t kA = 1, kB = 2;  // two rows

SmallBankRecordedTxn Txn(int64_t process, uint64_t from_ns, uint64_t to_ns, bool committed,
                         std::vector<SmallBankOp> ops) {
  return SmallBankRecordedTxn{process, from_ns, to_ns, committed, std::move(ops)};
}
SmallBankOp R(uint64_t key, uint64_t tag) { return {key, tag, false}; }
SmallBankOp W(uint64_t key, uint64_t tag) { return {key, tag, true}; }

check::CheckResult Judge(const std::vector<SmallBankRecordedTxn>& txns, std::string* text) {
  std::ostringstream out;
  check::Recorder rec(&out);
  Status st = WriteSmallBankHistory(txns, rec);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(rec.Close().ok());
  *text = out.str();
  std::istringstream in(*text);
  Result<check::History> h = check::ParseHistory(in, "test");
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  check::CheckerOptions co;
  co.model = check::Model::kStrictSerializable;
  return check::Check(*h, co);
}

TEST(SmallBankHistoryTest, ASerialRunReadsItsChains) {
  // T1 moves money A -> B, T2 then changes A again, T3 reads both.
  std::vector<SmallBankRecordedTxn> txns = {
      Txn(0, 10, 20, true, {R(kA, 0), R(kB, 0), W(kA, 11), W(kB, 11)}),
      Txn(1, 30, 40, true, {R(kA, 11), W(kA, 21)}),
      Txn(0, 50, 60, true, {R(kA, 21), R(kB, 11)}),
  };
  std::string text;
  check::CheckResult c = Judge(txns, &text);
  EXPECT_TRUE(c.valid) << text;
  // The last read of A is the whole chain: loaded value (empty), then T1's tag, then T2's.
  EXPECT_NE(text.find("[\"r\",1,[11,21]]"), std::string::npos) << text;
}

// Caught mid-commit by a crash: written as info, so a later read of its write (recovery rolled
// it forward) is valid, and so is a history where nobody saw it (rolled back).
TEST(SmallBankHistoryTest, AnUnknownOutcomeIsInfoWhetherOrNotItsWriteWasSeen) {
  SmallBankRecordedTxn caught = Txn(1 << 20, 10, 100, false, {R(kA, 0), W(kA, 11)});
  caught.unknown = true;
  for (bool seen : {true, false}) {
    std::vector<SmallBankRecordedTxn> txns = {
        caught, Txn(0, 50, 60, true, {R(kA, seen ? 11 : 0), W(kA, 21)}),
        Txn(0, 70, 80, true, {R(kA, 21)})};
    std::string text;
    check::CheckResult c = Judge(txns, &text);
    EXPECT_TRUE(c.valid) << text;
    EXPECT_EQ(c.info_count, 1u) << text;
    EXPECT_NE(text.find("\"type\":\"info\""), std::string::npos) << text;
  }
}

TEST(SmallBankHistoryTest, TwoWritersOfOneVersionAreALostUpdate) {
  // Both read A's loaded value and both wrote it: one update is lost.
  std::vector<SmallBankRecordedTxn> txns = {
      Txn(0, 10, 40, true, {R(kA, 0), W(kA, 11)}),
      Txn(1, 10, 40, true, {R(kA, 0), W(kA, 21)}),
      Txn(2, 50, 60, true, {R(kA, 21)}),
  };
  std::string text;
  check::CheckResult c = Judge(txns, &text);
  EXPECT_FALSE(c.valid) << text;
  EXPECT_GT(c[check::Anomaly::kLostUpdate].count, 0u);
}

TEST(SmallBankHistoryTest, AReadOfAnAbortedWriteIsG1a) {
  std::vector<SmallBankRecordedTxn> txns = {
      Txn(0, 10, 20, false, {R(kA, 0), W(kA, 11)}),  // aborted
      Txn(1, 30, 40, true, {R(kA, 11)}),             // yet its write was seen
  };
  std::string text;
  check::CheckResult c = Judge(txns, &text);
  EXPECT_FALSE(c.valid) << text;
  EXPECT_GT(c[check::Anomaly::kG1a].count, 0u);
}

TEST(SmallBankHistoryTest, AStaleReadAfterACommitBreaksRealTime) {
  // T2 starts after T1 committed but reads A's loaded value: serializable, not strictly.
  std::vector<SmallBankRecordedTxn> txns = {
      Txn(0, 10, 20, true, {R(kA, 0), W(kA, 11)}),
      Txn(1, 30, 40, true, {R(kA, 0)}),
  };
  std::string text;
  check::CheckResult c = Judge(txns, &text);
  EXPECT_FALSE(c.valid) << text;
}

TEST(SmallBankHistoryTest, ATagNobodyWroteIsAGarbageRead) {
  std::vector<SmallBankRecordedTxn> txns = {Txn(0, 10, 20, true, {R(kB, 99)})};
  std::string text;
  check::CheckResult c = Judge(txns, &text);
  EXPECT_FALSE(c.valid) << text;
  EXPECT_GT(c[check::Anomaly::kGarbageRead].count, 0u);
}

TEST(SmallBankHistoryTest, RefusesRecordingsItCannotTurnIntoChains) {
  std::ostringstream out;
  check::Recorder rec(&out);
  // A write with no read of its row before it has no predecessor.
  EXPECT_FALSE(WriteSmallBankHistory({Txn(0, 1, 2, true, {W(kA, 11)})}, rec).ok());
  // One tag written twice to one row.
  EXPECT_FALSE(WriteSmallBankHistory({Txn(0, 1, 2, true, {R(kA, 0), W(kA, 11)}),
                                      Txn(1, 1, 2, true, {R(kA, 0), W(kA, 11)})},
                                     rec)
                   .ok());
}

}  // namespace
}  // namespace pond::bench
