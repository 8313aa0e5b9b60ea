// KvsSweep: the --sweep grammar of `pond bench|sim kvs`, its cartesian order and its refusals.
#include "pond/tools/kvs_sweep.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pond/bench/kvs_bench.h"
#include "pond/bench/smallbank.h"
#include "pond/bench/tatp.h"

namespace pond::tools {
namespace {

std::vector<std::vector<double>> Points(const KvsSweep& s) {
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < s.PointCount(); i++) out.push_back(s.Point(i));
  return out;
}

TEST(KvsSweepTest, OneKeyListOrRange) {
  Result<KvsSweep> s = ParseKvsSweep("coros=1..3");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->axes.size(), 1u);
  EXPECT_EQ(s->axes[0].values, (std::vector<double>{1, 2, 3}));
  s = ParseKvsSweep("theta=0,0.5,0.99");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->axes[0].values, (std::vector<double>{0, 0.5, 0.99}));
  // Ranges and single values mix within a key.
  s = ParseKvsSweep("coros=1..2,8");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->axes[0].values, (std::vector<double>{1, 2, 8}));
}

TEST(KvsSweepTest, SeveralKeysRunTheProductFirstKeyOutermost) {
  Result<KvsSweep> s = ParseKvsSweep("coros=1,2,4,threads=1..2");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->axes.size(), 2u);
  EXPECT_EQ(s->axes[1].name, "threads");  // the header shows the key as typed
  EXPECT_EQ(s->axes[1].key, "workers");
  EXPECT_EQ(Points(*s),
            (std::vector<std::vector<double>>{{1, 1}, {1, 2}, {2, 1}, {2, 2}, {4, 1}, {4, 2}}));
  bench::RunOptions base, p;
  bench::KvsWorkload w(bench::KvsParams{});
  ASSERT_TRUE(s->Apply(3, &p, &w).ok());  // coros=2, threads=2
  EXPECT_EQ(p.coros, 2);
  EXPECT_EQ(p.cluster.workers_per_cn, 2);
  EXPECT_EQ(p.cluster.cns, base.cluster.cns);
}

TEST(KvsSweepTest, AppliesEveryKey) {
  Result<KvsSweep> s = ParseKvsSweep("cns=5,workers=3,coros=7,rw-ratio=0.25,theta=0.9");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->PointCount(), 1u);
  bench::RunOptions p;
  bench::KvsWorkload w(bench::KvsParams{});
  ASSERT_TRUE(s->Apply(0, &p, &w).ok());
  EXPECT_EQ(p.cluster.cns, 5);
  EXPECT_EQ(p.cluster.workers_per_cn, 3);
  EXPECT_EQ(p.coros, 7);
  EXPECT_EQ(w.params().rw_ratio, 0.25);
  EXPECT_EQ(w.params().theta, 0.9);
}

// Each bad spec is refused with one line that names what is wrong.
TEST(KvsSweepTest, BadSpecsAreRefusedByName) {
  struct Case {
    const char* spec;
    const char* says;
  };
  const Case cases[] = {
      {"", "--sweep must be KEY="},
      {"nothing", "--sweep must be KEY="},
      {"1,coros=2", "--sweep must be KEY="},
      {"color=1,2", "sweep key must be"},
      {"=1", "sweep key must be"},
      {"coros=", "empty value"},
      {"coros=1,,2", "empty value"},
      {"coros=1,", "empty value"},
      {"coros=two", "'two' is not a number"},
      {"coros=1.5", "'1.5' is not an integer"},
      {"coros=3..1", "is empty"},
      {"coros=1..x", "must be A..B"},
      {"theta=0.1..0.5", "must be A..B"},
      {"coros=1..1000", "more than 256 values"},
      {"coros=1..2,workers=3,coros=4", "names coros twice"},
      {"workers=1,threads=2", "names workers twice"},
      {"coros=1..16,workers=1..16,cns=1..2", "more than 256 points"},
      {"theta=nan", "not a number"},
  };
  for (const Case& c : cases) {
    Result<KvsSweep> s = ParseKvsSweep(c.spec);
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.says), std::string::npos)
        << c.spec << " -> " << s.status().message();
    EXPECT_EQ(s.status().message().find('\n'), std::string::npos);
  }
}

TEST(KvsSweepTest, OltpWorkloadsTakeOnlyConcurrencyKeys) {
  Result<KvsSweep> s = ParseKvsSweep("coros=1..2,cns=3");
  ASSERT_TRUE(s.ok());
  const bench::KvsWorkload kvs(bench::KvsParams{});
  const bench::SmallBankWorkload smallbank(bench::SmallBankParams{});
  const bench::TatpWorkload tatp(bench::TatpParams{});
  EXPECT_TRUE(s->CheckWorkload(kvs).ok());
  EXPECT_TRUE(s->CheckWorkload(smallbank).ok());
  // The KVS mix and skew have no meaning for SmallBank or TATP: refused, naming the key.
  s = ParseKvsSweep("coros=1,theta=0.5");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->CheckWorkload(kvs).ok());
  Status st = s->CheckWorkload(tatp);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("theta"), std::string::npos) << st.message();
}

TEST(KvsSweepTest, ExactlyTheCapIsAllowed) {
  Result<KvsSweep> s = ParseKvsSweep("coros=1..16,workers=1..16");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->PointCount(), kSweepPointsMax);
  EXPECT_EQ(s->Point(255), (std::vector<double>{16, 16}));
}

}  // namespace
}  // namespace pond::tools
