#include "pond/store/hash_index.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "pond/store/store_testing.h"

namespace pond::store {
namespace {

using testing::FormattedPool;
using testing::Worker;

std::vector<std::byte> ValueOf(uint64_t key, uint32_t bytes) {
  std::vector<std::byte> v(bytes);
  for (uint32_t i = 0; i < bytes; i++) v[i] = static_cast<std::byte>((key * 7 + i) & 0xff);
  return v;
}

struct Fixture {
  testing::Pool pool;
  Catalog catalog;
  const TableInfo* table = nullptr;
  const PoolLayout& layout() const { return catalog.layout(); }

  Fixture(uint16_t mns, uint64_t region, TableSpec spec, int replication = 1) {
    pool = FormattedPool(mns, region, 1 << 20, replication);
    Worker w(*pool, {999, 0});
    Status s = w.Run(CreateTable(*w.ep, pool.layout, spec));
    POND_CHECK_MSG(s.ok(), s.ToString().c_str());
    Result<Catalog> c = w.Run(LoadCatalog(*w.ep));
    POND_CHECK(c.ok());
    catalog = std::move(c).value();
    table = catalog.Find(spec.id);
  }
};

TEST(HashIndexTest, FindsEveryOneOfAMillionKeysAndNoMissingOne) {
  constexpr uint64_t kKeys = 1'000'000;
  constexpr int kThreads = 2;
  Fixture fx(2, 512 << 20,
             TableSpec{.id = 1, .name = "big", .value_bytes = 8, .versions = 1, .capacity = kKeys});
  Placement placement(2, 1);
  std::vector<std::unique_ptr<Worker>> ws;
  for (int t = 0; t < kThreads; t++) {
    ws.push_back(std::make_unique<Worker>(*fx.pool, WorkerAddr{static_cast<uint16_t>(t), 0}));
  }
  // Keys are spread so that buckets fill unevenly and some overflow into their neighbours.
  auto key_of = [](uint64_t i) { return i * 0x9e3779b97f4a7c15ULL + 1; };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      Allocator alloc(fx.layout());
      Status s =
          ws[t]->Run([](Endpoint* ep, const TableInfo* tbl, const PoolLayout* l,
                        const Placement* pl, Allocator* a, int t, auto key_of) -> Task<Status> {
            for (uint64_t i = t; i < kKeys; i += kThreads) {
              auto v = ValueOf(key_of(i), 8);
              Result<SlotRef> r = co_await Insert(*ep, *tbl, *l, *pl, *a, key_of(i), v, 1);
              if (!r.ok()) co_return r.status();
            }
            co_return Status::Ok();
          }(ws[t]->ep.get(), fx.table, &fx.layout(), &placement, &alloc, t, key_of));
      EXPECT_TRUE(s.ok()) << s.ToString();
    });
  }
  for (auto& th : threads) th.join();

  Status s = ws[0]->Run(
      [](Endpoint* ep, const TableInfo* tbl, const Placement* pl, auto key_of) -> Task<Status> {
        std::vector<std::byte> out(8);
        for (uint64_t i = 0; i < kKeys; i++) {
          uint64_t key = key_of(i);
          Result<Found> f = co_await Lookup(*ep, *tbl, pl->Primary(key), 0, key);
          if (!f.ok()) co_return Internal("lost key " + std::to_string(key));
          if (f->cvt.key != key || !f->cvt.cells[0].valid || f->cvt.cells[0].commit_ts != 1) {
            co_return Internal("wrong CVT for key " + std::to_string(key));
          }
          if (i % 97 == 0) {
            Status rs = co_await ReadRecord(*ep, *tbl, pl->Primary(key), f->cvt.cells[0], out);
            if (!rs.ok() || out != ValueOf(key, 8)) co_return Internal("wrong value");
          }
        }
        for (uint64_t i = kKeys; i < kKeys + 100'000; i++) {
          Result<Found> f = co_await Lookup(*ep, *tbl, pl->Primary(key_of(i)), 0, key_of(i));
          if (f.ok() || f.status().code() != Code::kNotFound) co_return Internal("phantom key");
        }
        co_return Status::Ok();
      }(ws[0]->ep.get(), fx.table, &placement, key_of));
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(HashIndexTest, ReplicasHoldTheCvtAtTheSameSlot) {
  Fixture fx(3, 64 << 20,
             TableSpec{.id = 2, .name = "rep", .value_bytes = 100, .versions = 3, .capacity = 1000},
             3);
  Placement placement(3, 3);
  Worker w(*fx.pool, {0, 0});
  Allocator alloc(fx.layout());
  for (uint64_t key = 1; key <= 500; key++) {
    auto v = ValueOf(key, 100);
    ASSERT_TRUE(w.Run(Insert(*w.ep, *fx.table, fx.layout(), placement, alloc, key, v, 5)).ok());
  }
  std::vector<std::byte> out(100);
  for (uint64_t key = 1; key <= 500; key++) {
    Result<Found> prim = w.Run(Lookup(*w.ep, *fx.table, placement.Primary(key), 0, key));
    ASSERT_TRUE(prim.ok());
    for (int r = 0; r < 3; r++) {
      MnId mn = placement.Replica(key, r);
      Result<Found> f = w.Run(Lookup(*w.ep, *fx.table, mn, r, key));
      ASSERT_TRUE(f.ok()) << "replica " << r << " of key " << key;
      EXPECT_EQ(f->ref.bucket, prim->ref.bucket);
      EXPECT_EQ(f->ref.slot, prim->ref.slot);
      EXPECT_EQ(f->cvt.versions, 3);
      EXPECT_FALSE(f->cvt.cells[1].valid) << "only the first version exists";
      // Replica r's record sits in lane r, at the primary's lane-relative offset.
      uint64_t lane_rel = prim->cvt.cells[0].record - fx.layout().RecordOffset(0, 0);
      EXPECT_EQ(f->cvt.cells[0].record, fx.layout().RecordOffset(r, lane_rel));
      ASSERT_TRUE(w.Run(ReadRecord(*w.ep, *fx.table, mn, f->cvt.cells[0], out)).ok());
      EXPECT_EQ(out, ValueOf(key, 100));
    }
  }
}

// A claim abandoned for good (its transaction died between claim and commit) must look taken on
// every replica, not on the primary alone: a key inserted past its bucket, which looked full, is
// found on a backup too — where readers go once the primary is down — and not cut off by a slot
// the backup shows empty.
TEST(HashIndexTest, AnAbandonedClaimCutsNoBackupsProbeChain) {
  Fixture fx(
      2, 64 << 20,
      TableSpec{.id = 5, .name = "ab", .value_bytes = 8, .capacity = 64, .slots_per_bucket = 2}, 2);
  Placement placement(2, 2);
  Worker w(*fx.pool, {0, 0});
  Allocator alloc(fx.layout());
  // Three keys of one primary and one home bucket: two to claim and abandon, one to insert.
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; keys.size() < 3; k++) {
    if (placement.Primary(k) != 0) continue;
    if (!keys.empty() && HomeBucket(*fx.table, k) != HomeBucket(*fx.table, keys[0])) continue;
    keys.push_back(k);
  }
  for (int i = 0; i < 2; i++) {
    Result<SlotRef> claimed = w.Run(ClaimSlot(*w.ep, *fx.table, placement, keys[i]));
    ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
    EXPECT_EQ(claimed->bucket, HomeBucket(*fx.table, keys[0]));
  }
  auto v = ValueOf(keys[2], 8);
  Result<SlotRef> in =
      w.Run(Insert(*w.ep, *fx.table, fx.layout(), placement, alloc, keys[2], v, 1));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_NE(in->bucket, HomeBucket(*fx.table, keys[2])) << "the home bucket was full";
  for (int r = 0; r < 2; r++) {
    Result<Found> f = w.Run(Lookup(*w.ep, *fx.table, placement.Replica(keys[2], r), r, keys[2]));
    EXPECT_TRUE(f.ok()) << "replica " << r << ": " << f.status().ToString();
  }
}

TEST(HashIndexTest, DuplicateAndWrongSizeInsertsAreRefused) {
  Fixture fx(1, 64 << 20, TableSpec{.id = 3, .name = "d", .value_bytes = 16, .capacity = 100});
  Placement placement(1, 1);
  Worker w(*fx.pool, {0, 0});
  Allocator alloc(fx.layout());
  auto v = ValueOf(1, 16);
  ASSERT_TRUE(w.Run(Insert(*w.ep, *fx.table, fx.layout(), placement, alloc, 42, v, 1)).ok());
  EXPECT_EQ(
      w.Run(Insert(*w.ep, *fx.table, fx.layout(), placement, alloc, 42, v, 1)).status().code(),
      Code::kAlreadyExists);
  auto short_value = ValueOf(1, 15);
  EXPECT_EQ(w.Run(Insert(*w.ep, *fx.table, fx.layout(), placement, alloc, 43, short_value, 1))
                .status()
                .code(),
            Code::kInvalidArgument);
}

TEST(HashIndexTest, FullTableIsOutOfSpace) {
  // One slot per bucket and a small index: inserts fail with OutOfSpace once 64 buckets in a
  // row are full, and every key inserted before that is still found.
  Fixture fx(
      1, 64 << 20,
      TableSpec{.id = 4, .name = "tiny", .value_bytes = 8, .capacity = 1, .slots_per_bucket = 1});
  Placement placement(1, 1);
  Worker w(*fx.pool, {0, 0});
  Allocator alloc(fx.layout());
  auto v = ValueOf(0, 8);
  uint64_t inserted = 0;
  Status last;
  for (uint64_t key = 1; key <= fx.table->bucket_count + 1; key++) {
    Result<SlotRef> r = w.Run(Insert(*w.ep, *fx.table, fx.layout(), placement, alloc, key, v, 1));
    if (!r.ok()) {
      last = r.status();
      break;
    }
    inserted++;
  }
  EXPECT_EQ(last.code(), Code::kOutOfSpace);
  EXPECT_LE(inserted, fx.table->bucket_count);
  for (uint64_t key = 1; key <= inserted; key++) {
    EXPECT_TRUE(w.Run(Lookup(*w.ep, *fx.table, 0, 0, key)).ok()) << key;
  }
}

TEST(HashIndexTest, ConcurrentInsertsIntoFewBucketsLoseNothing) {
  // Four threads race for the slots of a small index replicated on all three MNs, so CAS claims
  // collide often, and keys of different primaries share bucket numbers: every key must come
  // back, on every replica, with its own value.
  constexpr int kThreads = 4, kPerThread = 300;
  Fixture fx(
      3, 64 << 20,
      TableSpec{.id = 5, .name = "race", .value_bytes = 8, .capacity = 1200, .slots_per_bucket = 8},
      3);
  Placement placement(3, 3);
  std::vector<std::unique_ptr<Worker>> ws;
  for (int t = 0; t < kThreads; t++) {
    ws.push_back(std::make_unique<Worker>(*fx.pool, WorkerAddr{static_cast<uint16_t>(t), 0}));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      Allocator alloc(fx.layout());
      for (int i = 0; i < kPerThread; i++) {
        uint64_t key = static_cast<uint64_t>(t * kPerThread + i + 1);
        auto v = ValueOf(key, 8);
        Result<SlotRef> r =
            ws[t]->Run(Insert(*ws[t]->ep, *fx.table, fx.layout(), placement, alloc, key, v, 1));
        EXPECT_TRUE(r.ok()) << r.status().ToString();
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::pair<uint64_t, int>> slots[3];
  std::vector<std::byte> out(8);
  for (uint64_t key = 1; key <= kThreads * kPerThread; key++) {
    for (int r = 0; r < 3; r++) {
      MnId mn = placement.Replica(key, r);
      Result<Found> f = ws[0]->Run(Lookup(*ws[0]->ep, *fx.table, mn, r, key));
      ASSERT_TRUE(f.ok()) << "key " << key << " replica " << r;
      ASSERT_TRUE(ws[0]->Run(ReadRecord(*ws[0]->ep, *fx.table, mn, f->cvt.cells[0], out)).ok());
      EXPECT_EQ(out, ValueOf(key, 8)) << "key " << key << " replica " << r;
      if (r == 0) {
        EXPECT_TRUE(slots[placement.Primary(key)].insert({f->ref.bucket, f->ref.slot}).second)
            << "two keys in one slot";
      }
    }
  }
}

}  // namespace
}  // namespace pond::store
