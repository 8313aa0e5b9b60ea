// MvccTxn's reads and the Endpoint buffer rule: a buffer a posted READ targets stays where it is
// until the Flush that carries the READ completes.
//
// The defect this pins down: motor's value + delta layout reads each version twice, the second
// READ into one scratch buffer per round, which was grown inside the loop that posted the READs.
// A transaction reading a key of a table with small values and then one with larger values
// posted a READ into the buffer, grew it (freeing the old memory), and the READ landed in freed
// memory at the flush. Nothing in the answers shows it; AddressSanitizer does (make asan), on the
// first such transaction, and without it the heap was corrupted a few hundred transactions later.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/txn/test_cluster.h"

namespace pond {
namespace {

using testing_cluster::AsU64;
using testing_cluster::Config;
using testing_cluster::RunOn;

uint16_t MakeTable(Cluster& c, const char* name, uint32_t value_bytes, uint64_t keys) {
  auto t = c.CreateTable({.name = name, .value_bytes = value_bytes, .capacity = 1000});
  POND_CHECK(t.ok());
  Status s = c.Load(*t, keys, [&](uint64_t i, uint64_t* key, std::span<std::byte> v) {
    *key = i;
    const uint64_t val = 1000 + i;
    std::memcpy(v.data(), &val, 8);
  });
  POND_CHECK_MSG(s.ok(), s.ToString().c_str());
  return *t;
}

class MvccReadTest : public ::testing::TestWithParam<std::string> {};

// One Execute reads a key of a small-value table, then keys of ever larger ones: every round of
// record READs posts into buffers of different sizes.
TEST_P(MvccReadTest, ReadsOfTablesWithGrowingValuesInOneExecute) {
  ClusterConfig cfg = Config(GetParam());
  auto started = Cluster::Start(cfg);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  Cluster& c = **started;
  const uint16_t small = MakeTable(c, "small", 8, 10);
  const uint16_t mid = MakeTable(c, "mid", 200, 10);
  const uint16_t big = MakeTable(c, "big", 1000, 10);
  int committed = 0;
  RunOn(c, 0, [&](Session& s) -> Task<void> {
    for (uint64_t k = 0; k < 10; k++) {
      for (TxnKind kind : {TxnKind::kReadOnly, TxnKind::kReadWrite}) {
        Txn x = s.Begin(kind);
        x.AddRO(small, k);
        x.AddRO(mid, k);
        x.AddRO(big, k);
        Status e = co_await x.Execute();
        EXPECT_TRUE(e.ok()) << e.ToString();
        if (!e.ok()) continue;
        EXPECT_EQ(AsU64(*x.Read(small, k)), 1000 + k);
        EXPECT_EQ(AsU64(*x.Read(mid, k)), 1000 + k);
        EXPECT_EQ(AsU64(*x.Read(big, k)), 1000 + k);
        if ((co_await x.Commit()).ok()) committed++;
      }
    }
  });
  EXPECT_EQ(committed, 20);
}

INSTANTIATE_TEST_SUITE_P(All, MvccReadTest,
                         ::testing::Values("motor", "+full-record", "+log-visible", "lotus"),
                         testing_cluster::ProtocolTestName);

}  // namespace
}  // namespace pond
