// The served list-append's wire forms and its remote driver, without a network: plans and logs
// survive the trip and nothing else decodes as one (a served procedure reads what any client
// sends), and the driver starts past lists an earlier run touched and records what it is told.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pond/bench/list_append.h"
#include "pond/bench/list_append_plan.h"
#include "pond/check/history.h"

namespace pond::bench {
namespace {

Plan SamplePlan() {
  Plan p;
  p.upfront = true;
  p.mops = {{PlanMop::kRead, 3, 0}, {PlanMop::kAppend, 4, 17}, {PlanMop::kDelete, 5, 18}};
  return p;
}

TEST(ListAppendServedTest, PlansRoundTripAndCarryNoPointer) {
  const std::vector<std::byte> bytes = EncodePlan(SamplePlan());
  Plan back;
  ASSERT_TRUE(DecodePlan(bytes, &back).ok());
  ASSERT_EQ(back.mops.size(), 3u);
  EXPECT_TRUE(back.upfront);
  EXPECT_EQ(back.mops[1].kind, PlanMop::kAppend);
  EXPECT_EQ(back.mops[2].element, 18u);

  // An in-process call's bytes carry the caller's log pointer: never accepted from a client.
  PlanLog log;
  EXPECT_FALSE(DecodePlan(EncodeCall(SamplePlan(), &log), &back).ok());
  Plan empty;
  EXPECT_FALSE(DecodePlan(EncodePlan(empty), &back).ok());
  std::vector<std::byte> cut(bytes.begin(), bytes.end() - 1);
  EXPECT_FALSE(DecodePlan(cut, &back).ok());
}

TEST(ListAppendServedTest, LogsRoundTripAndGarbageIsRejected) {
  PlanLog log;
  log.mops.push_back(LoggedMop{.append = false, .key = 3, .element = 0, .list = {1, 2}});
  log.mops.push_back(LoggedMop{.append = true, .key = 4, .element = 17, .list = {}});
  log.full = {3};
  const std::vector<std::byte> bytes = EncodeLog(log);
  PlanLog back;
  ASSERT_TRUE(DecodeLog(bytes, &back).ok());
  ASSERT_EQ(back.mops.size(), 2u);
  EXPECT_EQ(back.mops[0].list, (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(back.mops[1].append);
  EXPECT_EQ(back.full, std::vector<uint64_t>{3});
  for (size_t n = 0; n < bytes.size(); n++) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_FALSE(DecodeLog(cut, &back).ok()) << n;
  }
  Rng rng(5);
  Plan plan;
  for (int i = 0; i < 2000; i++) {
    std::vector<std::byte> junk(rng.Uniform(96));
    for (std::byte& b : junk) b = static_cast<std::byte>(rng.Uniform(256));
    (void)DecodeLog(junk, &back);  // must not crash or allocate without bound
    (void)DecodePlan(junk, &plan);
  }
}

TEST(ListAppendServedTest, AListRowThatHoldsNoListIsCorruption) {
  std::vector<std::byte> v(24);
  EncodeList({7, 8}, &v);
  ASSERT_TRUE(DecodeList(v).ok());
  v[0] = std::byte{3};  // three elements do not fit 16 bytes
  EXPECT_EQ(DecodeList(v).status().code(), Code::kCorruption);
  EXPECT_EQ(DecodeList(std::span<const std::byte>(v.data(), 4)).status().code(), Code::kCorruption);
}

// A fake server: the lists table as loaded, with list 10 touched by an earlier run.
std::optional<std::string> Row(uint64_t row) {
  const uint64_t key = row / 2;
  const bool live = row % 2 == 0;
  std::vector<std::byte> v(ListValueBytes(4));
  if (key == 10 && live) {
    EncodeList({99}, &v);
  } else if (!(live && key % 2 == 0)) {
    return std::nullopt;
  }
  return std::string(reinterpret_cast<const char*>(v.data()), v.size());
}

TEST(ListAppendServedTest, TheDriverStartsPastTouchedListsAndRecordsEveryCall) {
  ListAppendOptions o;
  o.window = 4;
  auto driver = ListAppendWorkload(o).Remote({{"lists", ListValueBytes(4), 4 * 64}});
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  RemoteDriver& d = **driver;
  int reads = 0;
  RemoteStore store;
  store.read =
      [&](std::string_view table,
          const std::vector<uint64_t>& rows) -> Result<std::vector<std::optional<std::string>>> {
    EXPECT_EQ(table, "lists");
    reads++;
    std::vector<std::optional<std::string>> out;
    for (uint64_t r : rows) out.push_back(Row(r));
    return out;
  };
  ASSERT_TRUE(d.Start(store).ok());
  EXPECT_EQ(reads, 1);
  Rng rng(1);
  for (uint64_t n = 1; n <= 40; n++) {
    RemoteCall call = d.Next(rng, n % 3, n);
    Plan plan;
    ASSERT_TRUE(
        DecodePlan(std::span<const std::byte>(reinterpret_cast<const std::byte*>(call.args.data()),
                                              call.args.size()),
                   &plan)
            .ok());
    for (const PlanMop& m : plan.mops) EXPECT_GT(m.key, 10u);
    call.invoke_ns = 10 * n;
    call.done_ns = 10 * n + 5;
    // Every third call's CN died; the rest aborted (a log is only needed when it committed).
    d.Book(call, n % 3 == 0 ? RemoteOutcome::kUnknown : RemoteOutcome::kAborted, "");
  }
  RunResult r;
  ASSERT_TRUE(d.Finish(RemoteStore{}, &r).ok());
  std::optional<std::string> text = d.TakeHistory();
  ASSERT_TRUE(text.has_value());
  std::istringstream in(*text);
  Result<check::History> h = check::ParseHistory(in, "driver");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->txns().size(), 40u);
}

}  // namespace
}  // namespace pond::bench
