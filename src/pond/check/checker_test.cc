#include "pond/check/checker.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pond/check/test_history.h"

namespace pond::check {
namespace {

constexpr Model kSer = Model::kSerializable;
constexpr Model kSi = Model::kSnapshotIsolation;
constexpr Model kStrict = Model::kStrictSerializable;

uint64_t Count(const CheckResult& r, Anomaly a) { return r[a].count; }

TEST(CheckerTest, AcceptsSerialHistoryUnderEveryModel) {
  TestHistory h;
  h.Txn(1, "ok", R"([["append", 1, 1], ["r", 2, []]])");
  h.Txn(2, "ok", R"([["r", 1, [1]], ["append", 2, 1]])");
  h.Txn(1, "ok", R"([["append", 1, 2], ["r", 1, [1, 2]], ["r", 2, [1]]])");
  h.Txn(3, "fail", R"([["append", 1, 3]])");
  h.Txn(2, "ok", R"([["r", 1, [1, 2]]])");
  for (Model m : {kSer, kSi, kStrict}) {
    CheckResult r = h.Check(m);
    EXPECT_TRUE(r.valid) << h.report();
    EXPECT_EQ(r.txn_count, 5u);
    EXPECT_EQ(r.ok_count, 4u);
    EXPECT_EQ(r.fail_count, 1u);
    EXPECT_GT(r.edge_count, 0u);  // the graph was built; it just has no cycle
  }
}

TEST(CheckerTest, DetectsG0) {
  // x's order says T1 before T2; y's says T2 before T1: a write cycle.
  TestHistory h;
  h.Txn(1, "ok", R"([["append", 1, 1], ["append", 2, 1]])");
  h.Txn(2, "ok", R"([["append", 1, 2], ["append", 2, 2]])");
  h.Txn(3, "ok", R"([["r", 1, [1, 2]], ["r", 2, [2, 1]]])");
  for (Model m : {kSer, kSi, kStrict}) {
    CheckResult r = h.Check(m);
    EXPECT_FALSE(r.valid);
    EXPECT_EQ(Count(r, Anomaly::kG0), 1u) << h.report();
    ASSERT_EQ(r[Anomaly::kG0].examples.size(), 1u);
    const AnomalyExample& ex = r[Anomaly::kG0].examples[0];
    ASSERT_EQ(ex.cycle.size(), 2u);
    for (const CycleStep& s : ex.cycle) {
      EXPECT_EQ(s.kind, EdgeKind::kWw);
      EXPECT_FALSE(s.why.empty());
    }
  }
}

TEST(CheckerTest, DetectsG1a) {
  TestHistory h;
  h.Txn(1, "fail", R"([["append", 1, 1]])");
  h.Txn(2, "ok", R"([["r", 1, [1]]])");
  for (Model m : {kSer, kSi, kStrict}) {
    CheckResult r = h.Check(m);
    EXPECT_FALSE(r.valid);
    EXPECT_EQ(Count(r, Anomaly::kG1a), 1u) << h.report();
  }
}

TEST(CheckerTest, DetectsG1b) {
  // T2 saw x = [1], a state T1 passed through on its way to [1 2].
  TestHistory h;
  h.Txn(1, "ok", R"([["append", 1, 1], ["append", 1, 2]])");
  h.Txn(2, "ok", R"([["r", 1, [1]]])");
  h.Txn(3, "ok", R"([["r", 1, [1, 2]]])");
  CheckResult r = h.Check(kSi);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(Count(r, Anomaly::kG1b), 1u) << h.report();
  // The writer reading its own intermediate state is fine.
  TestHistory own;
  own.Txn(1, "ok", R"([["append", 1, 1], ["r", 1, [1]], ["append", 1, 2]])");
  EXPECT_TRUE(own.Check(kStrict).valid) << own.report();
}

TEST(CheckerTest, DetectsG1c) {
  // Each transaction read the other's write: circular information flow.
  TestHistory h;
  h.Invoke(1, R"([["append", 1, 1], ["r", 2, null]])");
  h.Invoke(2, R"([["append", 2, 1], ["r", 1, null]])");
  h.Complete(1, "ok", R"([["append", 1, 1], ["r", 2, [1]]])");
  h.Complete(2, "ok", R"([["append", 2, 1], ["r", 1, [1]]])");
  for (Model m : {kSer, kSi, kStrict}) {
    CheckResult r = h.Check(m);
    EXPECT_FALSE(r.valid);
    EXPECT_EQ(Count(r, Anomaly::kG1c), 1u) << h.report();
    EXPECT_EQ(Count(r, Anomaly::kG0), 0u);
  }
}

TEST(CheckerTest, DetectsGSingleReadSkew) {
  // T2 saw T1's append to key 2 but not its append to key 1.
  TestHistory h;
  h.Invoke(2, R"([["r", 1, null], ["r", 2, null]])");
  h.Txn(1, "ok", R"([["append", 1, 1], ["append", 2, 1]])");
  h.Complete(2, "ok", R"([["r", 1, []], ["r", 2, [1]]])");
  for (Model m : {kSer, kSi, kStrict}) {
    CheckResult r = h.Check(m);
    EXPECT_FALSE(r.valid) << h.report();
    EXPECT_EQ(Count(r, Anomaly::kGSingle), 1u) << h.report();
    const AnomalyExample& ex = r[Anomaly::kGSingle].examples.at(0);
    ASSERT_EQ(ex.cycle.size(), 2u);
    EXPECT_EQ(ex.cycle[0].kind == EdgeKind::kRw ? ex.cycle[1].kind : ex.cycle[0].kind,
              EdgeKind::kWr);
  }
}

TEST(CheckerTest, DetectsGNonadjacentUnderSnapshotIsolation) {
  // T1 -rw-> T2 -wr-> T3 -rw-> T4 -wr-> T1: two rw edges, never adjacent. SI forbids it
  // (Elle's G-nonadjacent) although it has two rw edges.
  TestHistory h;
  h.Invoke(1, R"([["r", 1, null], ["r", 4, null]])");
  h.Invoke(3, R"([["r", 2, null], ["r", 3, null]])");
  h.Txn(2, "ok", R"([["append", 1, 1], ["append", 2, 1]])");
  h.Txn(4, "ok", R"([["append", 3, 1], ["append", 4, 1]])");
  h.Complete(1, "ok", R"([["r", 1, []], ["r", 4, [1]]])");
  h.Complete(3, "ok", R"([["r", 2, [1]], ["r", 3, []]])");
  for (Model m : {kSer, kSi, kStrict}) {
    CheckResult r = h.Check(m);
    EXPECT_FALSE(r.valid) << h.report();
    EXPECT_EQ(Count(r, Anomaly::kGNonadjacent), 1u) << h.report();
    EXPECT_EQ(Count(r, Anomaly::kGSingle), 0u);
    EXPECT_EQ(Count(r, Anomaly::kG2Item), 0u);
  }
}

TEST(CheckerTest, WriteSkewAllowedBySnapshotIsolationOnly) {
  // Both read x and y empty; one appends to x, the other to y: rw edges both ways (G2-item).
  TestHistory h;
  h.Invoke(1, R"([["r", 1, null], ["r", 2, null], ["append", 1, 1]])");
  h.Invoke(2, R"([["r", 1, null], ["r", 2, null], ["append", 2, 1]])");
  h.Complete(1, "ok", R"([["r", 1, []], ["r", 2, []], ["append", 1, 1]])");
  h.Complete(2, "ok", R"([["r", 1, []], ["r", 2, []], ["append", 2, 1]])");
  h.Txn(3, "ok", R"([["r", 1, [1]], ["r", 2, [1]]])");
  CheckResult si = h.Check(kSi);
  EXPECT_TRUE(si.valid) << h.report();
  EXPECT_EQ(Count(si, Anomaly::kG2Item), 1u) << h.report();  // reported, but allowed
  EXPECT_EQ(Count(si, Anomaly::kLostUpdate), 0u);
  CheckResult ser = h.Check(kSer);
  EXPECT_FALSE(ser.valid);
  EXPECT_EQ(Count(ser, Anomaly::kG2Item), 1u);
  const AnomalyExample& ex = ser[Anomaly::kG2Item].examples.at(0);
  ASSERT_EQ(ex.cycle.size(), 2u);
  EXPECT_EQ(ex.cycle[0].kind, EdgeKind::kRw);
  EXPECT_EQ(ex.cycle[1].kind, EdgeKind::kRw);
  EXPECT_FALSE(h.Check(kStrict).valid);
}

TEST(CheckerTest, DetectsLostUpdate) {
  // Both read x = [] and appended to it; nobody read x afterwards, so only the direct check
  // (not a version order) can tell. SI forbids it even though the cycle is a G2-item.
  TestHistory h;
  h.Invoke(1, R"([["r", 1, null], ["append", 1, 1]])");
  h.Invoke(2, R"([["r", 1, null], ["append", 1, 2]])");
  h.Complete(1, "ok", R"([["r", 1, []], ["append", 1, 1]])");
  h.Complete(2, "ok", R"([["r", 1, []], ["append", 1, 2]])");
  for (Model m : {kSer, kSi, kStrict}) {
    CheckResult r = h.Check(m);
    EXPECT_FALSE(r.valid) << h.report();
    EXPECT_EQ(Count(r, Anomaly::kLostUpdate), 1u) << h.report();
    EXPECT_EQ(r[Anomaly::kLostUpdate].examples.at(0).txns.size(), 2u);
  }
}

TEST(CheckerTest, DetectsInternalInconsistency) {
  TestHistory h;
  h.Txn(1, "ok", R"([["append", 1, 1], ["r", 1, []]])");  // did not see its own append
  CheckResult r = h.Check(kSer);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(Count(r, Anomaly::kInternal), 1u) << h.report();

  TestHistory reread;  // two reads of one key disagree with nothing in between
  reread.Txn(1, "ok", R"([["append", 1, 1]])");
  reread.Txn(2, "ok", R"([["r", 1, []], ["r", 1, [1]]])");
  EXPECT_EQ(Count(reread.Check(kSer), Anomaly::kInternal), 1u) << reread.report();

  TestHistory future;  // read an element it appends only later
  future.Txn(1, "ok", R"([["r", 1, [5]], ["append", 1, 5]])");
  EXPECT_EQ(Count(future.Check(kSer), Anomaly::kInternal), 1u) << future.report();

  TestHistory fine;  // sees its own appends after what it read
  fine.Txn(1, "ok", R"([["append", 1, 1]])");
  fine.Txn(2, "ok", R"([["r", 1, [1]], ["append", 1, 2], ["r", 1, [1, 2]]])");
  EXPECT_TRUE(fine.Check(kStrict).valid) << fine.report();
}

TEST(CheckerTest, DetectsIncompatibleOrder) {
  TestHistory h;
  h.Txn(1, "ok", R"([["append", 1, 1]])");
  h.Txn(2, "ok", R"([["append", 1, 2]])");
  h.Txn(3, "ok", R"([["r", 1, [1, 2]]])");
  h.Txn(4, "ok", R"([["r", 1, [2, 1]]])");
  CheckResult r = h.Check(kSi);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(Count(r, Anomaly::kIncompatibleOrder), 1u) << h.report();
}

TEST(CheckerTest, DetectsDuplicateElements) {
  TestHistory h;
  h.Txn(1, "ok", R"([["append", 1, 1]])");
  h.Txn(2, "ok", R"([["r", 1, [1, 1]]])");
  CheckResult r = h.Check(kSer);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(Count(r, Anomaly::kDuplicateElements), 1u) << h.report();
}

TEST(CheckerTest, DetectsGarbageRead) {
  TestHistory h;
  h.Txn(1, "ok", R"([["append", 1, 1]])");
  h.Txn(2, "ok", R"([["r", 1, [1, 99]]])");
  CheckResult r = h.Check(kSer);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(Count(r, Anomaly::kGarbageRead), 1u) << h.report();
}

TEST(CheckerTest, StaleReadAfterCompletedWriteIsOnlyNonStrict) {
  // T1 completes its append before T2 is invoked, yet T2 reads the old state. Serializable
  // (T2 can go first), not strictly serializable.
  TestHistory h;
  h.Txn(1, "ok", R"([["append", 1, 1]])");
  h.Wait(100);
  h.Txn(2, "ok", R"([["r", 1, []]])");
  h.Txn(3, "ok", R"([["r", 1, [1]]])");
  EXPECT_TRUE(h.Check(kSer).valid) << h.report();
  EXPECT_TRUE(h.Check(kSi).valid) << h.report();
  CheckResult r = h.Check(kStrict);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(Count(r, Anomaly::kGSingleRealtime), 1u) << h.report();
  const AnomalyExample& ex = r[Anomaly::kGSingleRealtime].examples.at(0);
  bool has_realtime = false;
  for (const CycleStep& s : ex.cycle) has_realtime |= s.kind == EdgeKind::kRealtime;
  EXPECT_TRUE(has_realtime);
}

TEST(CheckerTest, ConcurrentStaleReadIsStrict) {
  // The same reads, but T2 was invoked before T1 completed: T2 may be ordered first.
  TestHistory h;
  h.Invoke(2, R"([["r", 1, null]])");
  h.Txn(1, "ok", R"([["append", 1, 1]])");
  h.Complete(2, "ok", R"([["r", 1, []]])");
  EXPECT_TRUE(h.Check(kStrict).valid) << h.report();
}

TEST(CheckerTest, InfoWithObservedAppendJoinsTheGraph) {
  // T1's outcome is unknown, but T2 saw its append to key 1: T1 committed. T2 also missed its
  // append to key 2, so T1 -wr-> T2 -rw-> T1 is a G-single. (Were T1 failed, it would be G1a
  // and no cycle.)
  TestHistory h;
  h.Txn(1, "info", R"([["append", 1, 1], ["append", 2, 1]])");
  h.Txn(2, "ok", R"([["r", 1, [1]], ["r", 2, []]])");
  CheckResult r = h.Check(kSer);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(Count(r, Anomaly::kG1a), 0u);
  EXPECT_EQ(Count(r, Anomaly::kGSingle), 1u) << h.report();
  EXPECT_EQ(r.graph_txn_count, 2u);

  TestHistory failed;
  failed.Txn(1, "fail", R"([["append", 1, 1], ["append", 2, 1]])");
  failed.Txn(2, "ok", R"([["r", 1, [1]], ["r", 2, []]])");
  CheckResult f = failed.Check(kSer);
  EXPECT_EQ(Count(f, Anomaly::kG1a), 1u) << failed.report();
  EXPECT_EQ(Count(f, Anomaly::kGSingle), 0u);
}

TEST(CheckerTest, InfoWithUnobservedAppendsIsLeftOut) {
  // Nobody saw T1's appends: it may never have happened, so missing them is no anomaly. Had it
  // committed, T2 -rw-> T1 and T3 -rw-> T1 would be harmless anyway; what matters is that T1
  // (with a pending invoke never completed, also an info) adds no cycle.
  TestHistory h;
  h.Txn(1, "info", R"([["append", 1, 1]])");
  h.Invoke(4, R"([["append", 2, 1], ["r", 1, null]])");  // never completes: info
  h.Txn(2, "ok", R"([["r", 1, []], ["append", 2, 2]])");
  h.Txn(3, "ok", R"([["r", 1, []], ["r", 2, [2]]])");
  for (Model m : {kSer, kSi, kStrict}) {
    CheckResult r = h.Check(m);
    EXPECT_TRUE(r.valid) << h.report();
    EXPECT_EQ(r.info_count, 2u);
    EXPECT_EQ(r.graph_txn_count, 2u);
  }
}

TEST(CheckerTest, LimitsExamplesButCountsAll) {
  TestHistory h;
  h.Txn(1, "fail", R"([["append", 1, 1]])");
  for (int i = 0; i < 10; i++) h.Txn(2, "ok", R"([["r", 1, [1]]])");
  CheckResult r = h.Check(kSer, /*examples=*/2);
  EXPECT_EQ(Count(r, Anomaly::kG1a), 10u);
  EXPECT_EQ(r[Anomaly::kG1a].examples.size(), 2u);
}

TEST(CheckerTest, ReportsReadableTextAndJson) {
  TestHistory h;
  h.Invoke(2, R"([["r", 1, null], ["r", 2, null]])");
  h.Txn(1, "ok", R"([["append", 1, 1], ["append", 2, 1]])");
  h.Complete(2, "ok", R"([["r", 1, []], ["r", 2, [1]]])");
  History hist = h.Parse();
  CheckerOptions o;
  o.model = kSer;
  CheckResult r = Check(hist, o);
  std::string text = FormatText(hist, r);
  EXPECT_NE(text.find("valid: no"), std::string::npos) << text;
  EXPECT_NE(text.find("G-single: 1 (forbidden"), std::string::npos) << text;
  EXPECT_NE(text.find("-rw->"), std::string::npos) << text;
  EXPECT_NE(text.find("misses T"), std::string::npos) << text;
  nlohmann::json j = ToJson(hist, r);
  EXPECT_EQ(j["valid"], false);
  EXPECT_EQ(j["model"], "serializable");
  EXPECT_EQ(j["counts"]["G-single"], 1);
  EXPECT_EQ(j["forbidden"], nlohmann::json::array({"G-single"}));
  EXPECT_EQ(j["anomalies"]["G-single"]["examples"][0]["cycle"].size(), 2u);
}

TEST(CheckerTest, ModelsForbidWhatElleSays) {
  EXPECT_FALSE(Forbids(kSi, Anomaly::kG2Item));
  EXPECT_TRUE(Forbids(kSer, Anomaly::kG2Item));
  EXPECT_TRUE(Forbids(kSi, Anomaly::kGNonadjacent));
  EXPECT_TRUE(Forbids(kSi, Anomaly::kGSingle));
  EXPECT_TRUE(Forbids(kSi, Anomaly::kLostUpdate));
  EXPECT_FALSE(Forbids(kSer, Anomaly::kGSingleRealtime));
  EXPECT_TRUE(Forbids(kStrict, Anomaly::kG2ItemRealtime));
  for (size_t a = 0; a < kAnomalyCount; a++) {
    EXPECT_NE(AnomalyName(static_cast<Anomaly>(a)), "?");
    EXPECT_TRUE(Forbids(kStrict, static_cast<Anomaly>(a)));
  }
  EXPECT_EQ(ParseModel("snapshot-isolation").value(), kSi);
  EXPECT_FALSE(ParseModel("read-committed").ok());
}

}  // namespace
}  // namespace pond::check
