// The region estimate holds both ways: served workloads and a table filled to its capacity fit
// the size RegionNeedFor gives, and do not fit just below its least, so that `pond serve` and
// `pond up` neither start with a region that will run out nor refuse one that would do.
#include "pond/bench/region_size.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pond/bench/kvs_bench.h"
#include "pond/bench/list_append.h"
#include "pond/bench/smallbank.h"
#include "pond/bench/tatp.h"
#include "pond/server/service_directory.h"

namespace pond::bench {
namespace {

struct Served {
  std::vector<std::unique_ptr<Workload>> workloads;
  TableOptions filled{.name = "kv", .value_bytes = 16, .capacity = 40'000};
};

Served Some() {
  Served s;
  SmallBankParams sb;
  sb.accounts = 20'000;
  s.workloads.push_back(std::make_unique<SmallBankWorkload>(sb));
  TatpParams tatp;
  tatp.subscribers = 4'000;
  s.workloads.push_back(std::make_unique<TatpWorkload>(tatp));
  KvsParams kvs;
  kvs.keys = 20'000;
  s.workloads.push_back(std::make_unique<KvsWorkload>(kvs));
  ListAppendOptions lists;
  lists.keys = 4'000;
  s.workloads.push_back(std::make_unique<ListAppendWorkload>(lists));
  return s;
}

ClusterConfig Config(uint64_t region_mib) {
  ClusterConfig c;
  c.mns = 3;
  c.cns = 2;
  c.workers_per_cn = 1;
  c.replication = 3;
  c.region_mib = region_mib;
  c.lock_buckets = 1 << 12;
  c.vt_cache_entries = 1 << 12;
  c.addr_cache_entries = 1 << 12;
  return c;
}

RegionNeed Need(const Served& s, const ClusterConfig& c) {
  std::vector<TableNeed> tables;
  for (const auto& w : s.workloads) {
    for (const TableNeed& t : w->ServedTables()) tables.push_back(t);
  }
  tables.push_back({s.filled, s.filled.capacity});
  return RegionNeedFor(tables, c);
}

// Serves every workload, then fills the table to its capacity: OK, or the first failure.
Status ServeAll(Served& s, const ClusterConfig& c) {
  Result<std::unique_ptr<Cluster>> cluster = Cluster::Start(c);
  if (!cluster.ok()) return cluster.status();
  server::ServiceDirectory dir;
  Status st = Status::Ok();
  for (auto& w : s.workloads) {
    st = w->Serve(**cluster, &dir);
    if (!st.ok()) break;
  }
  if (st.ok()) {
    Result<uint16_t> kv = (*cluster)->CreateTable(s.filled);
    st = kv.ok() ? (*cluster)->Load(*kv, s.filled.capacity,
                                    [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                                      *key = i;
                                      std::memset(v.data(), 0, v.size());
                                    })
                 : kv.status();
  }
  (*cluster)->StopServing();
  return st;
}

TEST(RegionSizeTest, ServedTablesFitTheSizeGivenAndNotMuchBelowTheLeast) {
  Served s = Some();
  const RegionNeed need = Need(s, Config(0));
  ASSERT_GT(need.least_mib, 0u);
  EXPECT_GE(need.mib, need.least_mib);
  EXPECT_EQ(need.mib % 256, 0u);
  // The size given, and a tenth over the least (this mix: least 142 MiB; 141 failed, 145 fit).
  for (const uint64_t mib : {need.mib, need.least_mib + need.least_mib / 10}) {
    Served again = Some();
    Status fits = ServeAll(again, Config(mib));
    EXPECT_TRUE(fits.ok()) << mib << " MiB: " << fits.ToString();
  }
  // A twentieth under the least runs out: the least is no looser than that.
  const uint64_t under = need.least_mib - need.least_mib / 20;
  Served again = Some();
  Status short_of = ServeAll(again, Config(under));
  EXPECT_NE(short_of.ToString().find("OutOfSpace"), std::string::npos)
      << under << " MiB, under the least of " << need.least_mib << ": " << short_of.ToString();
}

TEST(RegionSizeTest, MoreMnsNeedLessEachAndMoreCopiesMore) {
  Served s = Some();
  ClusterConfig c = Config(0);
  const uint64_t three = Need(s, c).least_mib;
  c.mns = 6;
  EXPECT_LT(Need(s, c).least_mib, three);
  c.mns = 3;
  c.replication = 1;
  EXPECT_LT(Need(s, c).least_mib, three);
}

}  // namespace
}  // namespace pond::bench
