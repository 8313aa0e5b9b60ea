// LockTable: Algorithm 1's rules one by one, then threads hammering one table. The concurrent
// tests also run under ThreadSanitizer (POND_TSAN), which checks that the per-key data written
// "under" a write lock is really protected by it.
#include "pond/lock/lock_table.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pond/rng.h"

namespace pond::lock {
namespace {

constexpr LockMode R = LockMode::kRead;
constexpr LockMode W = LockMode::kWrite;

LockKey K(uint64_t key) { return LockKey::Record(1, key); }
LockOwner O(uint64_t txn, uint16_t cn = 0) { return LockOwner{cn, txn}; }

std::unique_ptr<LockTable> MakeTable(uint32_t buckets = 1024, uint16_t cn = 0) {
  auto t = std::make_unique<LockTable>(buckets, cn);
  for (uint32_t s = 0; s < kShards; s++) t->SetManaged(s, true);
  return t;
}

// The slot word of `key`, or 0 if no slot of its bucket carries its fingerprint.
uint64_t SlotOf(const LockTable& t, const LockKey& key) {
  uint32_t b = t.BucketOf(key);
  for (int i = 0; i < kSlotsPerBucket; i++) {
    uint64_t w = t.SlotWord(b, i);
    if (w != 0 && SlotFingerprint(w) == LockTable::FingerprintOf(key)) return w;
  }
  return 0;
}
uint8_t CounterOf(const LockTable& t, const LockKey& key) { return SlotCounter(SlotOf(t, key)); }

// Random tests draw from the framework's seed (printed on failure), so `--gtest_random_seed=N`
// replays the choices of a failing run (thread interleavings are not replayed, of course).
uint64_t TestSeed() {
  int s = ::testing::UnitTest::GetInstance()->random_seed();
  uint64_t seed = s == 0 ? 20240601 : static_cast<uint64_t>(s);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

TEST(LockTableTest, SlotFormatIsFingerprintAndCounter) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(7), W, O(1)).ok());
  uint64_t w = SlotOf(*t, K(7));
  EXPECT_EQ(SlotFingerprint(w), LockTable::FingerprintOf(K(7)));
  EXPECT_EQ(SlotCounter(w), kWriteLocked);
  EXPECT_NE(LockTable::FingerprintOf(K(7)), 0u);
  EXPECT_EQ(LockTable::FingerprintOf(K(7)) & ~kFingerprintMask, 0u);
}

// The load policy's heat: requests for each managed shard, counted only once asked for, refused
// ones included (a hot shard's conflicts are heat too), those for other shards not.
TEST(LockTableTest, CountsRequestsPerShardOnlyWhileAskedTo) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(1), W, O(1)).ok());
  EXPECT_EQ(t->ShardRequests()[K(1).shard()], 0u);
  t->CountShards(true);
  ASSERT_TRUE(t->Release(K(1), W, O(1)).ok());
  ASSERT_TRUE(t->Acquire(K(1), W, O(1)).ok());
  EXPECT_EQ(t->Acquire(K(1), W, O(2)).code(), Code::kConflict);
  ASSERT_TRUE(t->Acquire(K(2), R, O(1)).ok());
  t->SetManaged(K(3).shard(), false);
  EXPECT_EQ(t->Acquire(K(3), R, O(1)).code(), Code::kWrongShard);
  std::vector<uint64_t> n = t->ShardRequests();  // key k is in shard k
  EXPECT_EQ(n[1], 2u);
  EXPECT_EQ(n[2], 1u);
  EXPECT_EQ(n[3], 0u) << "a shard not managed here counted";
  t->CountShards(false);
  ASSERT_TRUE(t->Acquire(K(4), R, O(1)).ok());
  EXPECT_EQ(t->ShardRequests(), n);
}

// The locality policy's vote: by shard, the CN whose owners made more than half the requests
// is named, with a count no higher than its requests; each take starts the votes anew.
TEST(LockTableTest, VotesForTheCnThatRequestsAShardMost) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(1), R, O(1, 2)).ok());
  EXPECT_EQ(t->TakeShardMajorities()[1].count, 0u) << "voted while not counting";
  t->CountShards(true);
  // Shard 1: CN 2 three times, CN 0 twice, CN 2 once more: CN 2's majority, counted 2.
  uint64_t txn = 10;
  for (uint16_t cn : {2, 0, 2, 0, 2, 2}) ASSERT_TRUE(t->Acquire(K(1), R, O(txn++, cn)).ok());
  // Shard 2: CN 1 and CN 3 alike: the last named, with nothing to spare.
  for (uint16_t cn : {1, 3, 1, 3}) ASSERT_TRUE(t->Acquire(K(2), R, O(txn++, cn)).ok());
  // Shard 4: a refused request votes too (a conflict is a request all the same).
  ASSERT_TRUE(t->Acquire(K(4), W, O(txn++, 5)).ok());
  EXPECT_EQ(t->Acquire(K(4), W, O(txn++, 5)).code(), Code::kConflict);
  const std::vector<LockTable::Majority> v = t->TakeShardMajorities();
  EXPECT_EQ(v[1].cn, 2);
  EXPECT_EQ(v[1].count, 2u);
  EXPECT_EQ(v[2].count, 0u);
  EXPECT_EQ(v[4].cn, 5);
  EXPECT_EQ(v[4].count, 2u);
  EXPECT_EQ(v[3].count, 0u);
  ASSERT_TRUE(t->Acquire(K(1), R, O(txn++, 0)).ok());
  const std::vector<LockTable::Majority> w = t->TakeShardMajorities();
  EXPECT_EQ(w[1].cn, 0) << "the vote did not start anew";
  EXPECT_EQ(w[1].count, 1u);
}

TEST(LockTableTest, RejectsConflictingWrite) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(1), W, O(1)).ok());
  EXPECT_EQ(t->Acquire(K(1), W, O(2)).code(), Code::kConflict);  // w/w
  EXPECT_EQ(t->Acquire(K(1), R, O(3)).code(), Code::kConflict);  // w/r
  ASSERT_TRUE(t->Acquire(K(2), R, O(1)).ok());
  EXPECT_EQ(t->Acquire(K(2), W, O(2)).code(), Code::kConflict);  // r/w
  EXPECT_EQ(t->stats().conflicts.load(), 3u);
  EXPECT_EQ(CounterOf(*t, K(1)), kWriteLocked);
  EXPECT_EQ(CounterOf(*t, K(2)), 2);
  EXPECT_EQ(t->HeldLocks().size(), 2u);
  EXPECT_TRUE(t->VerifyInvariants().ok());
}

TEST(LockTableTest, ReadersShare) {
  auto t = MakeTable();
  for (uint64_t txn = 1; txn <= 5; txn++) ASSERT_TRUE(t->Acquire(K(1), R, O(txn)).ok());
  EXPECT_EQ(CounterOf(*t, K(1)), 10);
  EXPECT_EQ(t->HeldLocks().size(), 5u);
  for (uint64_t txn = 1; txn <= 5; txn++) ASSERT_TRUE(t->Release(K(1), R, O(txn)).ok());
  EXPECT_EQ(SlotOf(*t, K(1)), 0u);
  // The last reader freed the whole word, so a writer can claim it.
  EXPECT_TRUE(t->Acquire(K(1), W, O(9)).ok());
  EXPECT_TRUE(t->VerifyInvariants().ok());
}

TEST(LockTableTest, RefusesReaderBeyondCounterMax) {
  auto t = MakeTable();
  for (uint64_t txn = 1; txn <= 127; txn++) ASSERT_TRUE(t->Acquire(K(1), R, O(txn)).ok());
  EXPECT_EQ(CounterOf(*t, K(1)), kReadCounterMax);
  EXPECT_EQ(t->Acquire(K(1), R, O(128)).code(), Code::kConflict);
  EXPECT_EQ(t->stats().counter_full.load(), 1u);
  EXPECT_EQ(CounterOf(*t, K(1)), kReadCounterMax);
  // A reader already holding it repeats without touching the counter.
  EXPECT_TRUE(t->Acquire(K(1), R, O(5)).ok());
  ASSERT_TRUE(t->Release(K(1), R, O(5)).ok());
  EXPECT_TRUE(t->Acquire(K(1), R, O(128)).ok());
  EXPECT_TRUE(t->VerifyInvariants().ok());
}

TEST(LockTableTest, RefusesWhenBucketFull) {
  auto t = MakeTable(16);
  // Nine distinct keys of one bucket: eight fill it, the ninth finds no slot.
  const uint32_t b = t->BucketOf(K(0));
  std::vector<LockKey> keys;
  for (uint64_t k = 0; keys.size() < 9; k++) {
    if (t->BucketOf(K(k)) == b) keys.push_back(K(k));
  }
  for (int i = 0; i < 8; i++) ASSERT_TRUE(t->Acquire(keys[i], i % 2 ? R : W, O(i)).ok());
  EXPECT_EQ(t->Acquire(keys[8], R, O(100)).code(), Code::kConflict);
  EXPECT_EQ(t->Acquire(keys[8], W, O(100)).code(), Code::kConflict);
  EXPECT_EQ(t->stats().bucket_full.load(), 2u);
  // A reader of a key that has a slot still gets in.
  EXPECT_TRUE(t->Acquire(keys[1], R, O(101)).ok());
  // Freeing a slot makes room; the freed slot is reused.
  ASSERT_TRUE(t->Release(keys[0], W, O(0)).ok());
  EXPECT_TRUE(t->Acquire(keys[8], W, O(100)).ok());
  EXPECT_EQ(CounterOf(*t, keys[8]), kWriteLocked);
  EXPECT_TRUE(t->VerifyInvariants().ok());
}

TEST(LockTableTest, RepeatIsIdempotent) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(1), W, O(1)).ok());
  EXPECT_TRUE(t->Acquire(K(1), W, O(1)).ok());
  EXPECT_TRUE(t->Acquire(K(1), R, O(1)).ok());  // a write hold covers reads
  EXPECT_EQ(CounterOf(*t, K(1)), kWriteLocked);
  ASSERT_TRUE(t->Acquire(K(2), R, O(1)).ok());
  EXPECT_TRUE(t->Acquire(K(2), R, O(1)).ok());
  EXPECT_EQ(CounterOf(*t, K(2)), 2);  // counted once
  EXPECT_EQ(t->stats().repeated.load(), 3u);
  EXPECT_EQ(t->HeldLocks().size(), 2u);
  // One release undoes the hold however often it was requested.
  ASSERT_TRUE(t->Release(K(2), R, O(1)).ok());
  EXPECT_EQ(t->Release(K(2), R, O(1)).code(), Code::kNotFound);
  EXPECT_EQ(SlotOf(*t, K(2)), 0u);
  EXPECT_TRUE(t->VerifyInvariants().ok());
}

TEST(LockTableTest, UnlockFreesForOthers) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(1), W, O(1)).ok());
  ASSERT_TRUE(t->Release(K(1), W, O(1)).ok());
  EXPECT_EQ(SlotOf(*t, K(1)), 0u);
  EXPECT_TRUE(t->HeldLocks().empty());
  EXPECT_TRUE(t->Acquire(K(1), R, O(2)).ok());
  EXPECT_EQ(t->stats().released.load(), 1u);
}

TEST(LockTableTest, UpgradesOnlyTheSoleReader) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(1), R, O(1)).ok());
  EXPECT_TRUE(t->Acquire(K(1), W, O(1)).ok());
  EXPECT_EQ(CounterOf(*t, K(1)), kWriteLocked);
  // After the upgrade the hold is a write hold: releasing "read" finds nothing.
  EXPECT_EQ(t->Release(K(1), R, O(1)).code(), Code::kNotFound);
  ASSERT_TRUE(t->Release(K(1), W, O(1)).ok());
  EXPECT_EQ(SlotOf(*t, K(1)), 0u);

  ASSERT_TRUE(t->Acquire(K(2), R, O(1)).ok());
  ASSERT_TRUE(t->Acquire(K(2), R, O(2)).ok());
  EXPECT_EQ(t->Acquire(K(2), W, O(1)).code(), Code::kConflict);
  EXPECT_EQ(CounterOf(*t, K(2)), 4);  // the refused upgrade left both reads in place
  ASSERT_TRUE(t->Release(K(2), R, O(2)).ok());
  EXPECT_TRUE(t->Acquire(K(2), W, O(1)).ok());
  EXPECT_EQ(t->HeldLocks().size(), 1u);
  EXPECT_TRUE(t->VerifyInvariants().ok());
}

TEST(LockTableTest, StrayReleaseChangesNothing) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(1), R, O(1)).ok());
  ASSERT_TRUE(t->Acquire(K(1), R, O(2)).ok());
  const uint64_t before = SlotOf(*t, K(1));
  EXPECT_EQ(t->Release(K(1), R, O(3)).code(), Code::kNotFound);     // not a holder
  EXPECT_EQ(t->Release(K(1), W, O(1)).code(), Code::kNotFound);     // holder, other mode
  EXPECT_EQ(t->Release(K(5), R, O(1)).code(), Code::kNotFound);     // nothing on that key
  EXPECT_EQ(t->Release(K(1), R, O(1, 1)).code(), Code::kNotFound);  // same txn id, other CN
  EXPECT_EQ(SlotOf(*t, K(1)), before);
  EXPECT_EQ(t->HeldLocks().size(), 2u);
  EXPECT_EQ(t->stats().stray_releases.load(), 4u);
  EXPECT_TRUE(t->VerifyInvariants().ok());
}

TEST(LockTableTest, WrongShardWhenNotManaged) {
  LockTable t(64, 2);
  t.SetManaged(K(5).shard(), true);
  EXPECT_TRUE(t.Manages(K(5).shard()));
  EXPECT_FALSE(t.Manages(K(6).shard()));
  EXPECT_EQ(t.Acquire(K(6), R, O(1)).code(), Code::kWrongShard);
  EXPECT_EQ(SlotOf(t, K(6)), 0u);
  EXPECT_TRUE(t.HeldLocks().empty());
  EXPECT_EQ(t.stats().wrong_shard.load(), 1u);
  // A shard given up while a lock of it is held still drains: Release ignores management.
  ASSERT_TRUE(t.Acquire(K(5), W, O(1)).ok());
  t.SetManaged(K(5).shard(), false);
  EXPECT_EQ(t.Acquire(K(5), W, O(1)).code(), Code::kWrongShard);
  EXPECT_TRUE(t.Release(K(5), W, O(1)).ok());
  EXPECT_EQ(SlotOf(t, K(5)), 0u);
}

TEST(LockTableTest, ReleaseAllOfDropsOnlyThatCn) {
  auto t = MakeTable();
  ASSERT_TRUE(t->Acquire(K(1), W, O(1, 1)).ok());
  ASSERT_TRUE(t->Acquire(K(2), R, O(1, 1)).ok());
  ASSERT_TRUE(t->Acquire(K(2), R, O(1, 2)).ok());
  ASSERT_TRUE(t->Acquire(K(3), R, O(7, 1)).ok());
  ASSERT_TRUE(t->Acquire(K(4), W, O(8, 0)).ok());
  EXPECT_EQ(t->ReleaseAllOf(1), 3u);
  auto held = t->HeldLocks();
  ASSERT_EQ(held.size(), 2u);
  for (const auto& h : held) EXPECT_NE(h.owner.cn, 1);
  EXPECT_EQ(SlotOf(*t, K(1)), 0u);
  EXPECT_EQ(CounterOf(*t, K(2)), 2);
  EXPECT_EQ(SlotOf(*t, K(3)), 0u);
  EXPECT_EQ(t->ReleaseAllOf(1), 0u);
  EXPECT_TRUE(t->VerifyInvariants().ok());
  // The survivors' locks are intact and exact.
  std::map<uint64_t, LockMode> by_key;
  for (const auto& h : held) by_key[h.key.key] = h.mode;
  EXPECT_EQ(by_key.at(2), R);
  EXPECT_EQ(by_key.at(4), W);
}

TEST(LockTableTest, CollidingKeysShareASlotButNotTheirHolds) {
  // LockKey::Hash folds the table into the key's top bits, so these two keys hash alike: same
  // bucket, same fingerprint, one slot. That may refuse falsely, never grant falsely.
  auto t = MakeTable();
  const LockKey a = LockKey::Record(1, 42), b = LockKey::Record(0, 42 ^ (uint64_t{1} << 48));
  ASSERT_EQ(a.Hash(), b.Hash());
  ASSERT_TRUE(t->Acquire(a, R, O(1)).ok());
  ASSERT_TRUE(t->Acquire(b, R, O(2)).ok());
  EXPECT_EQ(CounterOf(*t, a), 4);
  EXPECT_EQ(t->Acquire(b, W, O(2)).code(), Code::kConflict);  // upgrade: not the slot's only reader
  EXPECT_EQ(t->Release(b, R, O(1)).code(), Code::kNotFound);  // O(1) holds a, not b
  ASSERT_TRUE(t->Release(a, R, O(1)).ok());
  EXPECT_TRUE(t->Acquire(b, W, O(2)).ok());
  EXPECT_EQ(t->Acquire(a, R, O(1)).code(), Code::kConflict);  // false conflict, by design
  EXPECT_TRUE(t->VerifyInvariants().ok());
}

// Four threads run short transactions (1-8 locks) on 300 keys of a tiny table (8 buckets, so
// buckets fill and freed slots are reused all the time), with repeats, upgrades and stray
// releases mixed in. Mutual exclusion is checked twice over: atomic reader/writer counts per key,
// and a plain counter per key that only write-lock holders change (a lapse is a data race
// ThreadSanitizer reports, and a lost or unexpected change the readers and writers see). Each
// violation is counted by kind with a description of its first occurrence, so a failure says
// which rule broke.
//
// Full buckets must be reached whatever the scheduler does. A full bucket needs nine keys of one
// bucket held at one moment, more than one transaction takes (at most 8), so in a free table it
// needs transactions to overlap, and how much they do is the scheduler's choice: with a second
// copy of the test beside it (as under `ctest -j` on 2 cores) the median run saw 16 full buckets
// in ~900,000 requests and 0.4-1.7% of runs none at all (failing the check below), and with the
// threads run one after another no run ever saw one.
// So the test first write-locks kBlockersPerBucket keys (outside the workers' range) in every
// bucket and holds them to the end: with 3 slots left per bucket, a transaction that draws 4 keys
// of one bucket fills it on its own (thousands of times per run, even with no overlap at all),
// and the workers' keys crowd into few slots, so freed slots change hands between threads more.
TEST(LockTableTest, ConcurrentTransactionsKeepMutualExclusion) {
  constexpr int kThreads = 4;
  constexpr uint64_t kKeys = 300;
  constexpr int kTxnsPerThread = 50000;
  constexpr uint32_t kBuckets = 8;
  constexpr int kBlockersPerBucket = kSlotsPerBucket - 3;
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto t = MakeTable(kBuckets);

  // The blockers: keys from kKeys up, the first kBlockersPerBucket of each bucket, one owner that
  // no worker is (workers run on CNs 0 and 1).
  const LockOwner blocker = O(1, 2);
  std::vector<LockKey> blocked;
  {
    std::vector<int> in_bucket(kBuckets, 0);
    for (uint64_t k = kKeys; blocked.size() < kBuckets * kBlockersPerBucket; k++) {
      const uint32_t b = t->BucketOf(K(k));
      if (in_bucket[b] == kBlockersPerBucket) continue;
      in_bucket[b]++;
      blocked.push_back(K(k));
      ASSERT_TRUE(t->Acquire(K(k), W, blocker).ok());
    }
  }

  struct PerKey {
    std::atomic<int> readers{0}, writers{0};
    uint64_t value = 0;  // protected by the key's lock only
  };
  std::vector<PerKey> keys(kKeys);

  enum Kind {
    kRefusedNotConflict,      // Acquire refused with another code than Conflict
    kWriterNotAlone,          // a new write hold found other writers or readers of its key
    kReaderWithWriter,        // a new read hold found a writer of its key
    kValueChanged,            // the key's value changed while this transaction held a lock on it
    kStrayReleaseTookEffect,  // Release of a hold the transaction lacks was not NotFound
    kReleaseFailed,           // Release of a hold the transaction has was not Ok
    kInvariantBroken,         // VerifyInvariants failed while the workers ran
    kKinds
  };
  static constexpr const char* kKindNames[kKinds] = {
      "acquire refused with a code other than Conflict",
      "write hold granted while others held the key",
      "read hold granted while a writer held the key",
      "value changed under a held lock",
      "stray release was not NotFound",
      "release of a held lock failed",
      "VerifyInvariants failed during the run",
  };
  std::array<std::atomic<uint64_t>, kKinds> violations{};
  std::mutex first_mu;
  std::array<std::string, kKinds> first;  // guarded by first_mu
  auto violated = [&](Kind kind, const std::string& what) {
    if (violations[kind].fetch_add(1) == 0) {
      std::lock_guard guard(first_mu);
      first[kind] = what;
    }
  };
  std::atomic<uint64_t> granted{0}, refused{0};

  auto worker = [&](int id) {
    Rng rng(seed * 31 + static_cast<uint64_t>(id));
    const uint16_t cn = static_cast<uint16_t>(id % 2);
    for (int n = 0; n < kTxnsPerThread; n++) {
      const LockOwner owner{cn, (uint64_t{static_cast<uint32_t>(id)} << 32) | uint64_t(n)};
      auto where = [&](uint64_t k) {
        return "thread " + std::to_string(id) + " txn " + std::to_string(n) + " key " +
               std::to_string(k);
      };
      struct Hold {
        uint64_t key;
        LockMode mode;
        uint64_t seen;
      };
      std::vector<Hold> holds;
      auto find = [&](uint64_t k) -> Hold* {
        for (auto& h : holds) {
          if (h.key == k) return &h;
        }
        return nullptr;
      };
      // A new write hold (or an upgrade, whose read was already taken off `readers`).
      auto enter_writer = [&](uint64_t k, PerKey& pk) {
        const int writers = pk.writers.fetch_add(1);
        const int readers = pk.readers.load();
        if (writers != 0 || readers != 0) {
          violated(kWriterNotAlone, where(k) + ": " + std::to_string(writers) + " other writers, " +
                                        std::to_string(readers) + " readers");
        }
      };
      bool aborted = false;
      const int wanted = 1 + static_cast<int>(rng.Uniform(8));
      for (int i = 0; i < wanted && !aborted; i++) {
        const uint64_t k = rng.Uniform(kKeys);
        const LockMode mode = rng.Chance(0.3) ? W : R;
        Hold* h = find(k);
        Status s = t->Acquire(K(k), mode, owner);
        if (!s.ok()) {
          refused++;
          if (s.code() != Code::kConflict) {
            violated(kRefusedNotConflict, where(k) + ": " + s.ToString());
          }
          aborted = true;
          break;
        }
        granted++;
        PerKey& pk = keys[k];
        if (h == nullptr) {
          if (mode == W) {
            enter_writer(k, pk);
            pk.value++;
          } else {
            pk.readers.fetch_add(1);
            const int writers = pk.writers.load();
            if (writers != 0) {
              violated(kReaderWithWriter, where(k) + ": " + std::to_string(writers) + " writers");
            }
          }
          holds.push_back(Hold{k, mode, pk.value});
        } else if (h->mode == R && mode == W) {  // upgrade
          pk.readers.fetch_sub(1);
          enter_writer(k, pk);
          if (pk.value != h->seen) {
            violated(kValueChanged, where(k) + " (upgrade): value " + std::to_string(pk.value) +
                                        ", read " + std::to_string(h->seen));
          }
          h->mode = W;
          h->seen = ++pk.value;
        }
      }
      if (rng.Chance(0.05)) {
        // A stray release: of a key this transaction does not hold, it must change nothing.
        const uint64_t k = rng.Uniform(kKeys);
        if (find(k) == nullptr) {
          Status s = t->Release(K(k), W, owner);
          if (s.code() != Code::kNotFound) {
            violated(kStrayReleaseTookEffect, where(k) + ": " + s.ToString());
          }
        }
      }
      for (const Hold& h : holds) {
        PerKey& pk = keys[h.key];
        if (pk.value != h.seen) {
          violated(kValueChanged, where(h.key) + ": value " + std::to_string(pk.value) +
                                      ", held since " + std::to_string(h.seen));
        }
        if (h.mode == W) {
          pk.writers.fetch_sub(1);
        } else {
          pk.readers.fetch_sub(1);
        }
        Status s = t->Release(K(h.key), h.mode, owner);
        if (!s.ok()) violated(kReleaseFailed, where(h.key) + ": " + s.ToString());
      }
    }
  };
  std::atomic<bool> stop{false};
  std::atomic<int> live_checks{0};
  std::thread checker([&] {
    // Invariants hold for every stripe at every moment nobody is inside it. At least one check
    // even if the workers are done before this thread first runs (a loaded machine).
    do {
      Status inv = t->VerifyInvariants();
      if (!inv.ok()) violated(kInvariantBroken, inv.ToString());
      live_checks++;
      std::this_thread::yield();
    } while (!stop.load());
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; i++) threads.emplace_back(worker, i);
  for (auto& th : threads) th.join();
  stop = true;
  checker.join();

  const LockTableStats& st = t->stats();
  const std::string counts =
      "granted " + std::to_string(granted.load()) + ", refused " + std::to_string(refused.load()) +
      " (conflicts " + std::to_string(st.conflicts.load()) + ", bucket_full " +
      std::to_string(st.bucket_full.load()) + "), upgraded " + std::to_string(st.upgraded.load()) +
      ", live checks " + std::to_string(live_checks.load());
  RecordProperty("counts", counts);
  for (int kind = 0; kind < kKinds; kind++) {
    EXPECT_EQ(violations[kind].load(), 0u) << kKindNames[kind] << "; first: " << first[kind] << "\n"
                                           << counts;
  }
  EXPECT_GT(granted.load(), 0u) << counts;
  EXPECT_GT(st.bucket_full.load(), 0u) << "the test should reach full buckets; " << counts;
  EXPECT_GT(st.upgraded.load(), 0u) << "the test should reach upgrades; " << counts;
  EXPECT_GT(live_checks.load(), 0) << counts;
  Status inv = t->VerifyInvariants();
  EXPECT_TRUE(inv.ok()) << inv.ToString();

  // Only the blockers are left; without them the table is empty.
  auto held = t->HeldLocks();
  EXPECT_EQ(held.size(), blocked.size());
  for (const auto& h : held) EXPECT_EQ(h.owner, blocker);
  for (const LockKey& k : blocked) EXPECT_TRUE(t->Release(k, W, blocker).ok());
  EXPECT_TRUE(t->HeldLocks().empty());
  for (uint32_t b = 0; b < t->buckets(); b++) {
    for (int i = 0; i < kSlotsPerBucket; i++) EXPECT_EQ(t->SlotWord(b, i), 0u);
  }
}

// Recovery racing a failed CN's late (stale) requests: threads keep taking and dropping locks as
// CN 1 while another thread releases all of CN 1's locks. Each hold must be dropped exactly once,
// by whichever comes first, so no counter drifts from its holders.
TEST(LockTableTest, ReleaseAllOfRacesWithLateRequests) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto t = MakeTable(32);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> recovered{0};
  auto late = [&](int id) {
    Rng rng(seed + static_cast<uint64_t>(id));
    for (int n = 0; n < 20000; n++) {
      const LockOwner owner{1, rng.Uniform(8)};
      const uint64_t k = rng.Uniform(64);
      const LockMode mode = rng.Chance(0.5) ? W : R;
      if (rng.Chance(0.6)) {
        (void)t->Acquire(K(k), mode, owner);
      } else {
        (void)t->Release(K(k), mode, owner);
      }
    }
  };
  std::thread recovery([&] {
    while (!stop.load()) recovered += t->ReleaseAllOf(1);
  });
  // A survivor CN's locks must be untouched by CN 1's recovery.
  ASSERT_TRUE(t->Acquire(K(1000), W, O(1, 0)).ok());
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; i++) threads.emplace_back(late, i);
  for (auto& th : threads) th.join();
  stop = true;
  recovery.join();
  recovered += t->ReleaseAllOf(1);
  EXPECT_GT(recovered.load(), 0u);
  Status inv = t->VerifyInvariants();
  EXPECT_TRUE(inv.ok()) << inv.ToString();
  auto held = t->HeldLocks();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].owner, O(1, 0));
  // Every hold but the survivor's was dropped exactly once.
  EXPECT_EQ(t->stats().released.load() + 1, t->stats().acquired.load());
}

}  // namespace
}  // namespace pond::lock
