// A replicated B+Tree (R copies of every range) on the simulated transport, message by message:
// write-backs reach every copy, reads fail over when an MN is declared down, a dead holder's
// half-written line is made one again by whoever takes its word, and a restarted MN gets every
// copy back under the lines' locks while inserts go on (docs/btree.md "Replicated nodes").
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "pond/btree/btree.h"
#include "pond/btree/btree_testing.h"
#include "pond/store/gone_holders.h"
#include "pond/store/layout.h"
#include "pond/store/placement.h"

namespace pond::btree {
namespace {

using testing::SimCluster;

constexpr uint16_t kMns = 3;
constexpr int kCopies = 3;
constexpr uint64_t kRegion = 8 << 20;
constexpr uint64_t kSpan = 2 << 20;

// One range of kSpan on every MN, each followed by its two copy slots.
TreeSpace ReplicatedSpace() {
  TreeSpace s;
  for (MnId m = 0; m < kMns; m++) s.ranges.push_back(MnRange{m, 4096, 4096 + kSpan});
  s.lock_count = 256;
  s.chunk_bytes = 16 << 10;
  s.replication = kCopies;
  return s;
}

TreeOptions Options(const store::Placement* p, const store::GoneHolders* gone = nullptr) {
  TreeOptions o{.leaf_fill_max = 8, .internal_fill_max = 6};
  o.placement = p;
  o.gone = gone;
  return o;
}

// Runs `body` on CN `cn`'s worker to its end.
template <typename F>
void On(SimCluster& c, int cn, F body) {
  c.workers[static_cast<size_t>(cn)].sched->Spawn(body());
  c.Run();
}

// The copies of every range on the MNs in `mns` hold the same bytes, lock words and all.
void ExpectCopiesAgree(SimCluster& c, const TreeSpace& s, std::vector<MnId> mns, const char* when) {
  const SpaceLayout layout(s);
  for (size_t r = 0; r < s.ranges.size(); r++) {
    const GAddr begin = layout.Header(r);
    const std::byte* first = nullptr;
    for (int k = 0; k < kCopies; k++) {
      const GAddr a = layout.Copy(begin, k);
      if (std::find(mns.begin(), mns.end(), a.mn()) == mns.end()) continue;
      const std::byte* bytes = c.fabric->region(a.mn()) + a.offset();
      if (first == nullptr) {
        first = bytes;
        continue;
      }
      EXPECT_EQ(std::memcmp(first, bytes, kSpan), 0)
          << when << ": copy " << k << " of MN " << r << "'s range differs";
    }
  }
}

Task<void> InsertAll(BTree* t, std::vector<uint64_t> keys, int* failed) {
  for (uint64_t k : keys) {
    Status st = co_await t->Insert(k, k * 7);
    if (!st.ok()) {
      ADD_FAILURE() << "insert " << k << ": " << st.ToString();
      ++*failed;
    }
  }
}

Task<void> LookUpAll(BTree* t, std::vector<uint64_t> keys, int* missing) {
  for (uint64_t k : keys) {
    Result<uint64_t> v = co_await t->Lookup(k);
    if (!v.ok() || *v != k * 7) {
      if (*missing < 3) ADD_FAILURE() << "key " << k << ": " << v.status().ToString();
      ++*missing;
    }
  }
}

std::vector<uint64_t> Keys(uint64_t from, int n) {
  std::vector<uint64_t> keys;
  for (int i = 0; i < n; i++) keys.push_back(1 + (from + static_cast<uint64_t>(i)) * 7919 % 100003);
  return keys;
}

// A replicated tree, created through CN 0, on a cluster of two CNs and kMns MNs.
struct ReplicatedTree {
  explicit ReplicatedTree(uint64_t seed) : c(2, kMns, kRegion, seed) {
    On(c, 0, [this]() -> Task<void> {
      EXPECT_TRUE((co_await CreateTree(*c.workers[0].ep, space)).ok());
    });
  }
  // CN `cn`'s handle on it.
  std::unique_ptr<BTree> Open(int cn) {
    return std::make_unique<BTree>(*c.workers[static_cast<size_t>(cn)].ep, space,
                                   Options(&placement, &gone));
  }
  SimCluster c;
  const TreeSpace space = ReplicatedSpace();
  const SpaceLayout layout{space};
  store::Placement placement{kMns, kCopies};
  store::GoneHolders gone;
};

TEST(BTreeCopiesTest, WritesReachEveryCopyAndReadsFailOverOnceAnMnIsDeclaredDown) {
  ReplicatedTree tree(1);
  SimCluster& c = tree.c;
  store::Placement& placement = tree.placement;
  std::unique_ptr<BTree> t0 = tree.Open(0), t1 = tree.Open(1);
  int failed = 0, missing = 0;
  const std::vector<uint64_t> before = Keys(0, 400), after = Keys(400, 400);
  for (int co = 0; co < 4; co++) {
    c.workers[0].sched->Spawn(InsertAll(
        t0.get(), std::vector<uint64_t>(before.begin() + co * 100, before.begin() + co * 100 + 100),
        &failed));
  }
  c.Run();
  ASSERT_EQ(failed, 0);
  ExpectCopiesAgree(c, tree.space, {0, 1, 2}, "after the inserts");
  EXPECT_GT(t0->stats().leaf_splits, 10u);
  c.workers[0].sched->Spawn(LookUpAll(t0.get(), before, &missing));
  c.Run();
  EXPECT_EQ(missing, 0);

  // MN 1 crashes while CN 1 inserts; it is declared 1 ms later. The write-backs that meet it
  // wait until then, and reads of its range go to the next copy.
  uint64_t done_ns = 0;
  c.workers[1].sched->Spawn([](BTree* t, std::vector<uint64_t> keys, int* failed, SimCluster* c,
                               uint64_t* done) -> Task<void> {
    co_await InsertAll(t, std::move(keys), failed);
    *done = c->engine.now();
  }(t1.get(), after, &failed, &c, &done_ns));
  c.RunFor(2000);
  const uint64_t crash_ns = c.engine.now();
  c.fabric->CrashMn(1);
  c.engine.At(crash_ns + 1'000'000, [&placement] { placement.SetDown(1); });
  c.Run();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(done_ns, crash_ns + 1'000'000) << "the inserts ended before MN 1 was declared";
  EXPECT_TRUE(placement.IsDown(1));
  c.workers[0].sched->Spawn(LookUpAll(t0.get(), before, &missing));
  c.workers[1].sched->Spawn(LookUpAll(t1.get(), after, &missing));
  c.Run();
  EXPECT_EQ(missing, 0);
  ExpectCopiesAgree(c, tree.space, {0, 2}, "after MN 1 was declared down");
}

TEST(BTreeCopiesTest, ADeadHoldersHalfWrittenLineIsMadeOneAgainByWhoeverTakesItsWord) {
  ReplicatedTree tree(2);
  SimCluster& c = tree.c;
  const SpaceLayout& layout = tree.layout;
  std::unique_ptr<BTree> t0 = tree.Open(0);
  int failed = 0;
  c.workers[0].sched->Spawn(InsertAll(t0.get(), {10, 20, 30}, &failed));
  c.Run();
  ASSERT_EQ(failed, 0);

  // CN 5 (incarnation 0) died holding the root leaf's word on every copy, having written its
  // insert of key 40 to copy 1 only (a write-back goes to the copies readers do not use first).
  const GAddr leaf = GAddr::Make(0, layout.NodesBegin(0));
  const GAddr word = layout.LockFor(leaf);
  const uint64_t dead =
      store::LockOwnerWord(5, uint64_t{layout.LineOf(leaf)} << 8 | 1);  // worker 0, line, nonce
  NodeBuffer n;
  std::memcpy(&n, c.fabric->region(0) + leaf.offset(), kNodeBytes);
  for (LeafEntry& e : n.leaf.entries) {
    if (!e.empty()) continue;
    e.set_key(40);
    e.set_value(280);
    e.BumpVersion();
    break;
  }
  const GAddr copy1 = layout.Copy(leaf, 1);
  std::memcpy(c.fabric->region(copy1.mn()) + copy1.offset(), &n, kNodeBytes);
  for (int k = 0; k < kCopies; k++) {
    const GAddr w = layout.Copy(word, k);
    std::memcpy(c.fabric->region(w.mn()) + w.offset(), &dead, 8);
  }

  // Until its failure is recovered the word is waited on; then CN 1 takes it on every copy and
  // first makes the leaf what the copy readers use holds, everywhere.
  std::unique_ptr<BTree> t1 = tree.Open(1);
  Status inserted = Internal("not run");
  c.workers[1].sched->Spawn([](BTree* t, Status* out) -> Task<void> {
    *out = co_await t->Insert(50, 350);
  }(t1.get(), &inserted));
  c.RunFor(20000);
  EXPECT_EQ(inserted.code(), Code::kInternal) << "took a word whose holder is not gone yet";
  tree.gone.GoneBelow(5, 1);
  c.Run();
  ASSERT_TRUE(inserted.ok()) << inserted.ToString();
  EXPECT_EQ(t1->stats().gone_words_taken, static_cast<uint64_t>(kCopies));
  EXPECT_EQ(t1->stats().lines_repaired, 1u);
  ExpectCopiesAgree(c, tree.space, {0, 1, 2}, "after the dead holder's word was taken");
  Result<uint64_t> forty = NotFound(""), fifty = NotFound("");
  c.workers[1].sched->Spawn([](BTree* t, Result<uint64_t>* a, Result<uint64_t>* b) -> Task<void> {
    *a = co_await t->Lookup(40);
    *b = co_await t->Lookup(50);
  }(t1.get(), &forty, &fifty));
  c.Run();
  EXPECT_EQ(forty.status().code(), Code::kNotFound) << "the half-written insert survived";
  ASSERT_TRUE(fifty.ok());
  EXPECT_EQ(*fifty, 350u);
}

// A write-back goes to the copies readers do not use, then to the one they use. If a joining MN
// comes up between the two rounds, readers move to its copy, which the first round wrote: the
// second must still write the copy they used before, else that one is left behind for good.
// MN 0 joins while CN 1 inserts into the root leaf (copy 0 on MN 0; read from copy 1 while it
// joins), and comes up after each number of events in turn, until the insert is over first.
TEST(BTreeCopiesTest, AJoiningMnComingUpBetweenAWriteBacksRoundsLeavesNoCopyBehind) {
  int in_flight = 0;
  for (uint64_t events = 0;; events++) {
    ReplicatedTree tree(4);
    SimCluster& c = tree.c;
    std::unique_ptr<BTree> t1 = tree.Open(1);
    int failed = 0;
    c.workers[1].sched->Spawn(InsertAll(t1.get(), {10, 20, 30}, &failed));
    c.Run();
    ASSERT_EQ(failed, 0);
    tree.placement.SetDown(0);
    tree.placement.SetJoining(0);
    c.workers[1].sched->Spawn(InsertAll(t1.get(), {40}, &failed));
    const bool during = c.RunFor(events);
    tree.placement.SetUp(0);
    c.Run();
    ASSERT_EQ(failed, 0);
    ExpectCopiesAgree(c, tree.space, {0, 1, 2}, "after MN 0 came up");
    if (HasFailure()) {
      ADD_FAILURE() << "MN 0 came up " << events << " events into the insert";
      return;
    }
    if (!during) break;
    in_flight++;
  }
  EXPECT_GT(in_flight, 10) << "the insert took too few events to be cut between its rounds";
}

TEST(BTreeCopiesTest, ARestartedMnGetsEveryCopyBackWhileInsertsGoOn) {
  ReplicatedTree tree(3);
  SimCluster& c = tree.c;
  store::Placement& placement = tree.placement;
  std::unique_ptr<BTree> t0 = tree.Open(0), t1 = tree.Open(1);
  int failed = 0, missing = 0;
  const std::vector<uint64_t> before = Keys(0, 500), during = Keys(500, 300);
  c.workers[0].sched->Spawn(InsertAll(t0.get(), before, &failed));
  c.Run();
  ASSERT_EQ(failed, 0);

  // MN 2 comes back blank and joins: written by every write-back, read by none, while CN 0 copies
  // its three slots (copy 0 of its own range, 1 of MN 1's, 2 of MN 0's) and CN 1 inserts.
  placement.SetDown(2);
  c.fabric->CrashMn(2);
  c.fabric->RestartMn(2);
  std::memset(c.fabric->region(2), 0, kRegion);
  placement.SetJoining(2);
  uint64_t copied = 0;
  c.workers[1].sched->Spawn(InsertAll(t1.get(), during, &failed));
  c.workers[0].sched->Spawn([](BTree* t, uint64_t* copied) -> Task<void> {
    for (int k = 0; k < kCopies; k++) {
      const MnId range = static_cast<MnId>((2 + kMns - k) % kMns);
      Result<uint64_t> r = co_await t->CopyToJoining(range, k, 0, 1 << 20);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) *copied += *r;
    }
  }(t0.get(), &copied));
  c.Run();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(copied, 3u * 10);
  ExpectCopiesAgree(c, tree.space, {0, 1, 2}, "after the copy");

  // Read from MN 2's copies alone: every key is there.
  placement.SetUp(2);
  placement.SetDown(0);
  placement.SetDown(1);
  c.workers[1].sched->Spawn(LookUpAll(t1.get(), before, &missing));
  c.workers[1].sched->Spawn(LookUpAll(t1.get(), during, &missing));
  c.Run();
  EXPECT_EQ(missing, 0);
}

}  // namespace
}  // namespace pond::btree
