#include "pond/sim/fault_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pond::sim {
namespace {

uint64_t TestSeed() {
  int s = ::testing::UnitTest::GetInstance()->random_seed();
  uint64_t seed = s == 0 ? 20240601 : static_cast<uint64_t>(s);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

constexpr uint64_t kMs = 1'000'000, kUs = 1'000;

FaultSchedule MustParse(std::string_view spec) {
  Result<FaultSchedule> s = FaultSchedule::Parse(spec);
  EXPECT_TRUE(s.ok()) << spec << ": " << s.status().ToString();
  return s.value_or(FaultSchedule{});
}

// The error of a spec that must not parse; empty (and a test failure) if it parses.
std::string ParseError(std::string_view spec) {
  Result<FaultSchedule> s = FaultSchedule::Parse(spec);
  EXPECT_FALSE(s.ok()) << spec << " parsed";
  if (s.ok()) return "";
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << spec;
  EXPECT_EQ(s.status().message().find('\n'), std::string::npos) << s.status().message();
  return s.status().message();
}

std::string ValidateError(std::string_view spec, const FaultLimits& limits) {
  Status st = MustParse(spec).Validate(limits);
  EXPECT_FALSE(st.ok()) << spec << " validated";
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << spec;
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  return st.message();
}

FaultLimits Cluster(uint16_t cns, uint16_t mns) {
  FaultLimits l;
  l.cns = cns;
  l.mns = mns;
  return l;
}

TEST(FaultScheduleTest, ParsesTheExample) {
  FaultSchedule s =
      MustParse("crash-cn:2@5ms,crash-cn:5@5ms,restart-cn:2@40ms,crash-mn:1@12ms,drop:0.01");
  std::vector<FaultEvent> want = {{FaultKind::kCrashCn, 2, 5 * kMs},
                                  {FaultKind::kCrashCn, 5, 5 * kMs},
                                  {FaultKind::kCrashMn, 1, 12 * kMs},
                                  {FaultKind::kRestartCn, 2, 40 * kMs}};
  EXPECT_EQ(s.events, want);
  EXPECT_EQ(s.messages.drop_probability, 0.01);
  EXPECT_EQ(s.messages.duplicate_probability, 0);
  EXPECT_EQ(s.messages.delay_probability, 0);
  EXPECT_FALSE(s.empty());
}

TEST(FaultScheduleTest, ParsesEveryKind) {
  const std::vector<std::pair<std::string, FaultKind>> kinds = {
      {"crash-cn", FaultKind::kCrashCn},
      {"restart-cn", FaultKind::kRestartCn},
      {"crash-mn", FaultKind::kCrashMn},
      {"restart-mn", FaultKind::kRestartMn},
      {"partition-cn", FaultKind::kPartitionCn},
      {"heal-cn", FaultKind::kHealCn},
      {"partition-host", FaultKind::kPartitionHost},
      {"heal-host", FaultKind::kHealHost}};
  // + the service's two and the two that name two hosts (below)
  ASSERT_EQ(kinds.size() + 4, static_cast<size_t>(kFaultKindCount));
  for (const auto& [name, kind] : kinds) {
    FaultSchedule s = MustParse(name + ":3@7us");
    ASSERT_EQ(s.events.size(), 1u) << name;
    EXPECT_EQ(s.events[0], (FaultEvent{kind, 3, 7 * kUs})) << name;
    EXPECT_EQ(FaultKindName(kind), name);
    EXPECT_EQ(IsCnFault(kind), name.ends_with("-cn")) << name;
    EXPECT_EQ(IsHostFault(kind), name.ends_with("-host")) << name;
  }
}

// Two hosts cut apart name both, in either order; they print lower first and round-trip.
TEST(FaultScheduleTest, ParsesTwoHostsCutApartAndPrintsThemBack) {
  FaultSchedule s = MustParse("heal-hosts:2-1@7ms,cut-hosts:1-2@2ms");
  std::vector<FaultEvent> want = {{FaultKind::kCutHosts, 1, 2 * kMs, FaultStep::kNone, 2},
                                  {FaultKind::kHealHosts, 1, 7 * kMs, FaultStep::kNone, 2}};
  EXPECT_EQ(s.events, want);
  EXPECT_EQ(s.ToString(), "cut-hosts:1-2@2ms,heal-hosts:1-2@7ms");
  EXPECT_EQ(MustParse(s.ToString()), s);
  EXPECT_TRUE(IsHostPairFault(FaultKind::kCutHosts) && IsHostPairFault(FaultKind::kHealHosts));
  EXPECT_FALSE(IsHostFault(FaultKind::kCutHosts) || IsCnFault(FaultKind::kCutHosts));
  EXPECT_NE(ParseError("cut-hosts:1@2ms").find("missing '-' between the two hosts"),
            std::string::npos);
  EXPECT_NE(ParseError("cut-hosts:2-2@2ms").find("host 2 named twice"), std::string::npos);
  EXPECT_NE(ParseError("cut-hosts:1-x@2ms").find("bad node 'x'"), std::string::npos);
  FaultLimits l = Cluster(5, 3);
  l.min_cns_up = 2;
  l.max_mns_down = 1;
  EXPECT_TRUE(s.Validate(l).ok());
  EXPECT_NE(ValidateError("heal-hosts:1-2@2ms", l).find("hosts 1-2 are not cut apart"),
            std::string::npos);
  EXPECT_NE(ValidateError("cut-hosts:1-3@2ms", l).find("no host 3"), std::string::npos);
  EXPECT_NE(ValidateError("cut-hosts:1-2@2ms,heal-cn:1@3ms", l)
                .find("CN 1 is cut from host 2, and only heal-hosts heals it"),
            std::string::npos);
  EXPECT_NE(ValidateError("crash-mn:0@1ms,cut-hosts:1-2@2ms", l)
                .find("leaves 2 MNs down (two hosts cut apart count one)"),
            std::string::npos);
  l.min_cns_up = 3;
  EXPECT_NE(ValidateError("crash-cn:0@1ms,cut-hosts:1-2@2ms", l)
                .find("leaves 2 CNs up and unpartitioned"),
            std::string::npos);
  l.min_cns_up = 2;
  EXPECT_NE(ValidateError("crash-mn:1@1ms,cut-hosts:1-2@2ms", l)
                .find("MN 1 is down, and cut-hosts needs every node of hosts 1-2 up"),
            std::string::npos);
}

// A host is CN N with MN N: its faults name one number, and round-trip as they came.
TEST(FaultScheduleTest, ParsesHostFaultsAndPrintsThemBack) {
  FaultSchedule s = MustParse("heal-host:2@7500us,partition-host:2@2ms,crash-cn:1@3ms");
  std::vector<FaultEvent> want = {{FaultKind::kPartitionHost, 2, 2 * kMs},
                                  {FaultKind::kCrashCn, 1, 3 * kMs},
                                  {FaultKind::kHealHost, 2, 7500 * kUs}};
  EXPECT_EQ(s.events, want);
  EXPECT_EQ(s.ToString(), "partition-host:2@2ms,crash-cn:1@3ms,heal-host:2@7500us");
  EXPECT_EQ(MustParse(s.ToString()), s);
  EXPECT_NE(ParseError("partition-host@2ms").find("missing ':'"),
            std::string::npos);  // a host is named
  EXPECT_NE(ParseError("heal-host:1@2ms+step=logged").find("only crash-cn may be aimed"),
            std::string::npos);
}

// The coordination service is one: its faults name no node, and round-trip without one.
TEST(FaultScheduleTest, ParsesCoordinationServiceFaults) {
  FaultSchedule s = MustParse("restart-coord@9ms,crash-coord@2ms,crash-cn:1@3ms");
  std::vector<FaultEvent> want = {{FaultKind::kCrashCoord, 0, 2 * kMs},
                                  {FaultKind::kCrashCn, 1, 3 * kMs},
                                  {FaultKind::kRestartCoord, 0, 9 * kMs}};
  EXPECT_EQ(s.events, want);
  EXPECT_EQ(s.ToString(), "crash-coord@2ms,crash-cn:1@3ms,restart-coord@9ms");
  EXPECT_TRUE(IsCoordFault(FaultKind::kCrashCoord) && IsCoordFault(FaultKind::kRestartCoord));
  EXPECT_FALSE(IsCnFault(FaultKind::kCrashCoord) || IsCoordFault(FaultKind::kCrashMn));
  EXPECT_TRUE(s.Validate(Cluster(3, 3)).ok());
}

TEST(FaultScheduleTest, ParsesEveryUnitAndFractions) {
  const std::vector<std::pair<std::string, uint64_t>> times = {
      {"7ns", 7},
      {"3us", 3'000},
      {"2ms", 2'000'000},
      {"1s", 1'000'000'000},
      {"0s", 0},
      {"1.5ms", 1'500'000},
      {"0.25us", 250},
      {"3.000ns", 3},  // trailing zeros keep a time whole
      {"2.000000001s", 2'000'000'001},
      {"0.000001ms", 1},
      {"007ms", 7'000'000},
      {"10s", kFaultTimeNsLimit},  // the limit itself is allowed
      {"9999999999ns", 9'999'999'999}};
  for (const auto& [text, ns] : times) {
    FaultSchedule s = MustParse("crash-cn:0@" + text);
    ASSERT_EQ(s.events.size(), 1u) << text;
    EXPECT_EQ(s.events[0].at_ns, ns) << text;
  }
}

TEST(FaultScheduleTest, ParsesMessageFaults) {
  FaultSchedule s = MustParse("drop:0.001,duplicate:1,delay:0.5@1.5us-0.2ms");
  EXPECT_TRUE(s.events.empty());
  EXPECT_EQ(s.messages.drop_probability, 0.001);
  EXPECT_EQ(s.messages.duplicate_probability, 1.0);
  EXPECT_EQ(s.messages.delay_probability, 0.5);
  EXPECT_EQ(s.messages.delay_distribution, DelayDistribution::kUniform);
  EXPECT_EQ(s.messages.delay_ns_min, 1'500u);
  EXPECT_EQ(s.messages.delay_ns_max, 200'000u);
  EXPECT_TRUE(s.messages.Validate().ok());
  EXPECT_FALSE(s.empty());
  // Equal bounds are a fixed delay.
  EXPECT_EQ(MustParse("delay:1@5us-5us").messages.delay_ns_min, 5'000u);
}

TEST(FaultScheduleTest, EmptySpecIsTheEmptySchedule) {
  FaultSchedule s = MustParse("");
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.ToString(), "");
  // A probability of 0 is allowed and changes nothing.
  EXPECT_TRUE(MustParse("drop:0,duplicate:0").empty());
}

TEST(FaultScheduleTest, BadItemsAreNamedWithTheReason) {
  struct Case {
    std::string spec;
    std::string item;    // "item N 'text'" the message must name; "item 1": the whole spec
    std::string reason;  // a part of the reason
  };
  const std::vector<Case> cases = {
      {"crash-cn:1@5ms,,drop:0.1", "item 2 ''", "empty item"},
      {"crash-cn:1@5ms,", "item 2 ''", "empty item"},  // trailing comma
      {",crash-cn:1@5ms", "item 1 ''", "empty item"},
      {"crash-cn:1@5ms, drop:0.1", "item 2 ' drop:0.1'", "spaces"},
      {"crash-cn1@5ms", "item 1 'crash-cn1@5ms'", "missing ':'"},
      {"crash-coord:0@5ms", "item 1 'crash-coord:0@5ms'", "crash-coord names no node"},
      {"restart-coord", "item 1 'restart-coord'", "missing '@' (restart-coord@TIME"},
      {"crash-coord@step=logged", "item 1 'crash-coord@step=logged'", "only crash-cn"},
      {"crash-coord@5", "item 1 'crash-coord@5'", "bad unit"},
      {"drop:0.1,crash-cn:1", "item 2 'crash-cn:1'", "missing '@'"},
      {"crash-xx:1@5ms", "item 1 'crash-xx:1@5ms'", "unknown kind 'crash-xx' (kinds: crash-cn,"},
      {"Crash-CN:1@5ms", "item 1 'Crash-CN:1@5ms'", "unknown kind"},
      {"crash-cn:x@5ms", "item 1 'crash-cn:x@5ms'", "bad node 'x'"},
      {"crash-cn:@5ms", "item 1 'crash-cn:@5ms'", "bad node ''"},
      {"crash-cn:-1@5ms", "item 1 'crash-cn:-1@5ms'", "bad node '-1'"},
      {"crash-cn:65536@5ms", "item 1 'crash-cn:65536@5ms'", "bad node '65536'"},
      {"crash-cn:1@5m", "item 1 'crash-cn:1@5m'", "bad unit 'm'"},
      {"crash-cn:1@5", "item 1 'crash-cn:1@5'", "bad unit ''"},
      {"crash-cn:1@5sec", "item 1 'crash-cn:1@5sec'", "bad unit 'sec'"},
      {"crash-cn:1@ms", "item 1 'crash-cn:1@ms'", "bad time 'ms'"},
      {"crash-cn:1@.5ms", "item 1 'crash-cn:1@.5ms'", "bad time"},
      {"crash-cn:1@1e3us", "item 1 'crash-cn:1@1e3us'", "bad unit"},
      {"crash-cn:1@-5ms", "item 1 'crash-cn:1@-5ms'", "negative time '-5ms'"},
      {"crash-cn:1@10.000000001s", "item 1", "exceeds the limit of 10s"},
      {"crash-cn:1@11s", "item 1", "exceeds the limit"},
      {"crash-cn:1@99999999999999999999999999s", "item 1", "exceeds the limit"},
      {"crash-cn:1@1.5ns", "item 1 'crash-cn:1@1.5ns'", "not a whole number of nanoseconds"},
      {"crash-cn:1@0.0000000001s", "item 1", "not a whole number of nanoseconds"},
      {"drop:1.5", "item 1 'drop:1.5'", "not in [0, 1]"},
      {"drop:-0.1", "item 1 'drop:-0.1'", "negative probability"},
      {"duplicate:1e-3", "item 1 'duplicate:1e-3'", "bad probability"},
      {"duplicate:nan", "item 1 'duplicate:nan'", "bad probability"},
      {"drop:", "item 1 'drop:'", "bad probability ''"},
      {"delay:0.1@200us-1us", "item 1 'delay:0.1@200us-1us'",
       "minimum 200us exceeds the maximum 1us"},
      {"delay:0.1@1us", "item 1 'delay:0.1@1us'", "missing '-'"},
      {"delay:0.1", "item 1 'delay:0.1'", "missing '@'"},
      {"delay:2@1us-2us", "item 1", "not in [0, 1]"},
      {"delay:0.1@-1us-2us", "item 1", "negative time '-1us'"},
      {"delay:0.1@1us--2us", "item 1", "negative time '-2us'"},
      {"delay:0.1@0ns-0ns", "item 1", "a delay needs a maximum above 0"},
      {"delay:0.1@1us-11s", "item 1", "exceeds the limit"},
      {"drop:0.1,crash-cn:1@1ms,drop:0.2", "item 3 'drop:0.2'",
       "drop given twice (first as item 1)"},
      {"restart-cn:1@step=logged", "item 1", "only crash-cn may be aimed at a step"},
      {"crash-mn:1@5ms+step=logged", "item 1", "only crash-cn may be aimed at a step"},
      {"crash-cn:1@step=landed", "item 1", "unknown step 'landed' (steps: locked,"},
      {"crash-cn:1@5msstep=read", "item 1", "TIME+step=STEP"},
      {"crash-cn:1@5xs+step=read", "item 1", "bad unit"},
      {"jitter:1", "item 1 'jitter:1'", "bad unit"},
      {"jitter:11ms", "item 1 'jitter:11ms'", "jitter above 10ms"},
      {"jitter:1us,jitter:2us", "item 2 'jitter:2us'", "jitter given twice (first as item 1)"},
      {"random", "item 1 'random'", "'random' stands alone"},
      {"crash-cn:1@5ms,random", "item 2 'random'", "'random' stands alone"},
  };
  for (const Case& c : cases) {
    std::string msg = ParseError(c.spec);
    std::string item = c.item == "item 1" ? "item 1 '" + c.spec + "'" : c.item;
    EXPECT_TRUE(msg.starts_with("--faults " + item + ": ")) << c.spec << " -> " << msg;
    EXPECT_NE(msg.find(c.reason), std::string::npos) << c.spec << " -> " << msg;
  }
}

// A crash aimed at a commit step: armed from the start or from a time, printed back alike; and
// one-sided jitter as an item of its own.
TEST(FaultScheduleTest, ParsesCrashesAimedAtStepsAndJitter) {
  Result<FaultSchedule> s =
      FaultSchedule::Parse("crash-cn:1@step=logged,crash-cn:2@5ms+step=visible,jitter:2us");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->events.size(), 2u);
  EXPECT_EQ(s->events[0], (FaultEvent{FaultKind::kCrashCn, 1, 0, FaultStep::kLogged}));
  EXPECT_EQ(s->events[1], (FaultEvent{FaultKind::kCrashCn, 2, 5 * kMs, FaultStep::kVisible}));
  EXPECT_EQ(s->jitter_ns, 2 * kUs);
  EXPECT_FALSE(s->empty());
  EXPECT_EQ(s->ToString(), "crash-cn:1@step=logged,crash-cn:2@5ms+step=visible,jitter:2us");
  for (int i = 1; i < kFaultStepCount; i++) {
    const std::string spec =
        "crash-cn:0@1ms+step=" + std::string(FaultStepName(static_cast<FaultStep>(i)));
    Result<FaultSchedule> one = FaultSchedule::Parse(spec);
    ASSERT_TRUE(one.ok()) << spec;
    EXPECT_EQ(one->ToString(), spec);
  }
  EXPECT_TRUE(FaultSchedule::Parse("jitter:0ns")->empty());
}

// Found by fault_spec_fuzz (docs/checker.md "Fuzzing"): a bad item was quoted raw, so a newline
// or control byte in it broke the one-line error in two.
TEST(FaultScheduleTest, ABadItemIsQuotedOnOneLine) {
  Result<FaultSchedule> s = FaultSchedule::Parse("crash-cn:1@5ms,par\nti\x01,rew");
  ASSERT_FALSE(s.ok());
  const std::string m(s.status().message());
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_NE(m.find("item 2 'par\\x0ati\\x01'"), std::string::npos) << m;
}

TEST(FaultScheduleTest, SortsByTimeKeepingSpecOrderAmongEqualTimes) {
  FaultSchedule s = MustParse(
      "restart-cn:3@2ms,crash-cn:1@1ms,crash-cn:0@2ms,heal-cn:2@1ms,crash-mn:0@2ms,"
      "crash-cn:7@0.5ms");
  std::vector<FaultEvent> want = {
      {FaultKind::kCrashCn, 7, 500 * kUs}, {FaultKind::kCrashCn, 1, 1 * kMs},
      {FaultKind::kHealCn, 2, 1 * kMs},    {FaultKind::kRestartCn, 3, 2 * kMs},
      {FaultKind::kCrashCn, 0, 2 * kMs},   {FaultKind::kCrashMn, 0, 2 * kMs}};
  EXPECT_EQ(s.events, want);
  // Spec order among equal times decides validity: the crash must come before the restart.
  FaultLimits l = Cluster(4, 3);
  EXPECT_TRUE(MustParse("crash-cn:1@5ms,restart-cn:1@5ms").Validate(l).ok());
  EXPECT_NE(ValidateError("restart-cn:1@5ms,crash-cn:1@5ms", l).find("CN 1 is up"),
            std::string::npos);
}

TEST(FaultScheduleTest, ValidateAcceptsTheExampleOnABigEnoughCluster) {
  FaultLimits l = Cluster(6, 3);
  l.max_mns_down = 1;
  l.horizon_ns = 50 * kMs;
  EXPECT_TRUE(MustParse("crash-cn:2@5ms,crash-cn:5@5ms,restart-cn:2@40ms,crash-mn:1@12ms,drop:0.01")
                  .Validate(l)
                  .ok());
  EXPECT_TRUE(FaultSchedule{}.Validate(Cluster(0, 0)).ok());  // nothing to check
  // A full cycle of every kind.
  EXPECT_TRUE(MustParse("partition-cn:1@1ms,heal-cn:1@2ms,crash-cn:1@3ms,restart-cn:1@4ms,"
                        "crash-mn:0@1ms,restart-mn:0@2ms,crash-mn:0@3ms")
                  .Validate(l)
                  .ok());
}

TEST(FaultScheduleTest, ValidateRefusesEventsThatDoNotFitTheCluster) {
  FaultLimits l = Cluster(4, 3);
  l.max_mns_down = 1;
  struct Case {
    std::string spec;
    std::string item;    // the event the message must name
    std::string reason;  // a part of the reason
  };
  const std::vector<Case> cases = {
      {"restart-cn:1@5ms", "restart-cn:1@5ms", "CN 1 is up, and restart-cn needs it down"},
      {"restart-mn:2@5ms", "restart-mn:2@5ms", "MN 2 is up, and restart-mn needs it down"},
      {"crash-cn:1@5ms,crash-cn:1@6ms", "crash-cn:1@6ms", "CN 1 is down, and crash-cn needs it up"},
      {"crash-mn:0@5ms,crash-mn:0@6ms", "crash-mn:0@6ms", "MN 0 is down"},
      {"crash-cn:4@5ms", "crash-cn:4@5ms", "no CN 4 (the cluster has 4 CNs)"},
      {"crash-mn:3@5ms", "crash-mn:3@5ms", "no MN 3 (the cluster has 3 MNs)"},
      {"heal-cn:1@5ms", "heal-cn:1@5ms", "CN 1 is up, and heal-cn needs it partitioned"},
      {"partition-cn:1@1ms,partition-cn:1@2ms", "partition-cn:1@2ms", "CN 1 is partitioned"},
      {"crash-cn:1@1ms,partition-cn:1@2ms", "partition-cn:1@2ms", "CN 1 is down"},
      // A partitioned CN is not up: heal it before crashing it.
      {"partition-cn:1@1ms,crash-cn:1@2ms", "crash-cn:1@2ms", "CN 1 is partitioned"},
      {"crash-cn:1@1ms,heal-cn:1@2ms", "heal-cn:1@2ms", "CN 1 is down"},
      // Too many MNs down at once (max 1), though each crash alone is fine.
      {"crash-mn:0@1ms,crash-mn:1@2ms", "crash-mn:1@2ms", "leaves 2 MNs down, more than the 1"},
      {"restart-coord@1ms", "restart-coord@1ms", "the coordination service is up"},
      {"crash-coord@1ms,crash-coord@2ms,restart-coord@3ms", "crash-coord@2ms", "is down"},
      // Without the service no failure is declared: a run that never gets it back cannot end.
      {"crash-coord@1ms", "crash-coord@1ms", "needs a restart-coord after it"},
      {"crash-coord@1ms,restart-coord@2ms,crash-coord@3ms", "crash-coord@3ms", "needs a restart"},
  };
  for (const Case& c : cases) {
    std::string msg = ValidateError(c.spec, l);
    EXPECT_TRUE(msg.starts_with("--faults item '" + c.item + "': ")) << c.spec << " -> " << msg;
    EXPECT_NE(msg.find(c.reason), std::string::npos) << c.spec << " -> " << msg;
  }
  // After a restart the MN count goes down again, so a second MN may crash.
  EXPECT_TRUE(MustParse("crash-mn:0@1ms,restart-mn:0@2ms,crash-mn:1@3ms").Validate(l).ok());
  // With the default max_mns_down of 0 no MN may crash at all.
  EXPECT_NE(ValidateError("crash-mn:0@1ms", Cluster(4, 3)).find("leaves 1 MNs down"),
            std::string::npos);
}

TEST(FaultScheduleTest, ValidateKeepsEnoughCnsUp) {
  FaultLimits l = Cluster(4, 1);
  l.min_cns_up = 2;
  EXPECT_TRUE(MustParse("crash-cn:0@1ms,crash-cn:1@2ms").Validate(l).ok());
  std::string msg = ValidateError("crash-cn:0@1ms,crash-cn:1@2ms,crash-cn:2@3ms", l);
  EXPECT_NE(msg.find("'crash-cn:2@3ms': leaves 1 CNs up and unpartitioned, fewer than the 2"),
            std::string::npos)
      << msg;
  // A partitioned CN counts as away.
  msg = ValidateError("crash-cn:0@1ms,partition-cn:1@2ms,partition-cn:2@3ms", l);
  EXPECT_NE(msg.find("'partition-cn:2@3ms': leaves 1 CNs"), std::string::npos) << msg;
  // ...and comes back when healed; a restart brings one back too.
  EXPECT_TRUE(MustParse("crash-cn:0@1ms,partition-cn:1@2ms,heal-cn:1@3ms,partition-cn:2@4ms,"
                        "restart-cn:0@5ms,crash-cn:3@6ms")
                  .Validate(l)
                  .ok());
}

TEST(FaultScheduleTest, ValidateGivesTheCallersReasons) {
  FaultLimits l = Cluster(4, 3);
  l.max_mns_down = 1;
  l.refused = {{FaultKind::kCrashMn, "MN crashes are not survived yet"},
               {FaultKind::kPartitionCn, "partitions need leases"}};
  l.protected_cns = {{0, "it hosts the timestamp oracle"}};
  std::string msg = ValidateError("crash-cn:2@5ms,crash-mn:1@12ms", l);
  EXPECT_EQ(msg, "--faults item 'crash-mn:1@12ms': crash-mn: MN crashes are not survived yet");
  msg = ValidateError("partition-cn:1@1ms", l);
  EXPECT_EQ(msg, "--faults item 'partition-cn:1@1ms': partition-cn: partitions need leases");
  msg = ValidateError("crash-cn:0@1ms", l);
  EXPECT_EQ(msg,
            "--faults item 'crash-cn:0@1ms': CN 0 may not be crashed or partitioned: it hosts the "
            "timestamp oracle");
  // The refusal holds even where the event would be wrong anyway: the reason is the news.
  msg = ValidateError("crash-mn:9@1ms", l);
  EXPECT_NE(msg.find("not survived yet"), std::string::npos) << msg;
  // Other CNs and kinds are not affected.
  EXPECT_TRUE(MustParse("crash-cn:1@1ms,restart-cn:1@2ms").Validate(l).ok());
}

// A host cut counts as a CN partition and as an MN down, for every count; its two nodes move
// together, and only heal-host heals them.
TEST(FaultScheduleTest, ValidateHoldsHostCutsToTheCnAndMnRules) {
  FaultLimits l = Cluster(4, 3);
  l.max_mns_down = 1;
  EXPECT_TRUE(MustParse("partition-host:1@1ms,heal-host:1@3ms,partition-host:1@4ms,heal-host:1@5ms,"
                        "crash-mn:1@6ms,crash-cn:1@7ms")
                  .Validate(l)
                  .ok());
  EXPECT_TRUE(MustParse("partition-host:2@1ms").Validate(l).ok());  // never healed: allowed
  struct Case {
    std::string spec, error;
  };
  const std::vector<Case> cases = {
      {"partition-host:3@1ms",
       "--faults item 'partition-host:3@1ms': no host 3 (host N is CN N with MN N: the cluster "
       "has 4 CNs and 3 MNs, so hosts 0 to 2)"},
      {"heal-host:1@1ms",
       "--faults item 'heal-host:1@1ms': host 1 is not cut off, and heal-host needs it "
       "partitioned by partition-host"},
      {"partition-cn:1@1ms,heal-host:1@2ms", "host 1 is not cut off"},
      {"partition-host:1@1ms,heal-cn:1@2ms",
       "CN 1 is cut off with its host, and only heal-host heals it"},
      {"partition-host:1@1ms,crash-cn:1@2ms", "CN 1 is partitioned, and crash-cn needs it up"},
      {"partition-host:1@1ms,partition-cn:1@2ms",
       "CN 1 is partitioned, and partition-cn needs it up"},
      {"partition-host:1@1ms,crash-mn:1@2ms", "MN 1 is partitioned, and crash-mn needs it up"},
      {"partition-host:1@1ms,restart-mn:1@2ms",
       "MN 1 is partitioned, and restart-mn needs it down"},
      {"partition-host:1@1ms,partition-host:1@2ms",
       "CN 1 is partitioned, and partition-host needs both nodes of host 1 up"},
      {"crash-mn:1@1ms,partition-host:1@2ms",
       "MN 1 is down, and partition-host needs both nodes of host 1 up"},
      {"crash-cn:1@1ms,partition-host:1@2ms",
       "CN 1 is down, and partition-host needs both nodes of host 1 up"},
      {"crash-mn:0@1ms,partition-host:1@2ms",
       "leaves 2 MNs down (a cut host's counts), more than the 1 the cluster survives"},
      {"partition-host:1@1ms,crash-mn:0@2ms",
       "leaves 2 MNs down, more than the 1 the cluster survives"},
  };
  for (const Case& c : cases) {
    const std::string error = ValidateError(c.spec, l);
    EXPECT_NE(error.find(c.error), std::string::npos) << c.spec << ": " << error;
  }
  // An MN down for every count: none may be, by default.
  EXPECT_NE(ValidateError("partition-host:1@1ms", Cluster(4, 3)).find("leaves 1 MNs down"),
            std::string::npos);
  // The lease quorum's count, beside a CN away (the cut one itself) or an outage.
  FaultLimits q = Cluster(4, 3);
  q.max_mns_down = 2;
  q.max_mns_down_quorum = 1;
  EXPECT_NE(ValidateError("crash-mn:0@1ms,partition-host:1@2ms", q)
                .find("2 MNs down while a CN is down or cut off, more than the 1"),
            std::string::npos);
  EXPECT_NE(ValidateError("crash-coord@1ms,crash-mn:0@2ms,restart-mn:0@3ms,partition-host:1@4ms,"
                          "restart-coord@5ms",
                          q)
                .find("2 MNs down while the coordination service is down"),
            std::string::npos);
  q.max_mns_down_quorum = 0;
  EXPECT_NE(ValidateError("partition-host:1@1ms", q)
                .find("1 MNs down while a CN is down or cut off, more than the 0"),
            std::string::npos);
  // Its CN counts as partitioned.
  FaultLimits two = Cluster(2, 2);
  two.min_cns_up = 2;
  two.max_mns_down = 1;
  EXPECT_NE(ValidateError("partition-host:1@1ms", two)
                .find("leaves 1 CNs up and unpartitioned, fewer than the 2 the cluster needs"),
            std::string::npos);
  // The cluster's reasons.
  FaultLimits r = l;
  r.protected_cns = {{0, "it hosts the timestamp oracle"}};
  r.refused = {{FaultKind::kHealHost, "no heals here"}};
  EXPECT_NE(ValidateError("partition-host:0@1ms", r)
                .find("CN 0 may not be crashed or partitioned: it hosts the timestamp oracle"),
            std::string::npos);
  EXPECT_NE(ValidateError("partition-host:1@1ms,heal-host:1@2ms", r)
                .find("'heal-host:1@2ms': heal-host: no heals here"),
            std::string::npos);
}

TEST(FaultScheduleTest, ValidateHoldsEventsToTheHorizonAndOrder) {
  FaultLimits l = Cluster(4, 3);
  l.horizon_ns = 10 * kMs;
  EXPECT_TRUE(MustParse("crash-cn:1@9.999999ms").Validate(l).ok());
  std::string msg = ValidateError("crash-cn:1@10ms", l);
  EXPECT_NE(msg.find("at or after the end of the run (10ms)"), std::string::npos) << msg;

  // Hand-built schedules are checked for what Parse() guarantees.
  FaultSchedule s;
  s.events = {{FaultKind::kCrashCn, 1, 2 * kMs}, {FaultKind::kRestartCn, 1, 1 * kMs}};
  Status st = s.Validate(Cluster(4, 3));
  EXPECT_NE(st.message().find("'restart-cn:1@1ms': out of time order"), std::string::npos)
      << st.message();
  s.events = {{FaultKind::kCrashCn, 1, kFaultTimeNsLimit + 1}};
  st = s.Validate(Cluster(4, 3));
  EXPECT_NE(st.message().find("exceeds the limit"), std::string::npos) << st.message();
  s.events.clear();
  s.messages.drop_probability = 2;
  st = s.Validate(Cluster(4, 3));
  EXPECT_NE(st.message().find("--faults message faults: drop_probability"), std::string::npos)
      << st.message();
  s.messages = {};
  s.messages.delay_probability = 0.1;
  s.messages.delay_ns_max = 10;
  s.messages.delay_ns_mean = 5;
  s.messages.delay_distribution = DelayDistribution::kExponential;
  EXPECT_FALSE(s.Validate(Cluster(4, 3)).ok());  // a spec cannot say it
}

TEST(FaultScheduleTest, ToStringIsCanonical) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"crash-cn:1@1.5ms", "crash-cn:1@1500us"},
      {"crash-cn:1@2000ms", "crash-cn:1@2s"},
      {"crash-cn:1@0.000001s", "crash-cn:1@1us"},
      {"crash-cn:1@1234567ns", "crash-cn:1@1234567ns"},
      {"crash-cn:01@0ms", "crash-cn:1@0s"},
      {"drop:0.0100", "drop:0.01"},
      {"delay:0.25@1000ns-0.2ms,duplicate:1.0,drop:1", "drop:1,duplicate:1,delay:0.25@1us-200us"},
      {"drop:0", ""},
      {"delay:0@1us-2us", "delay:0@1us-2us"},  // bounds without a probability still round-trip
      {"restart-cn:2@40ms,drop:0.01,crash-cn:2@5ms", "crash-cn:2@5ms,restart-cn:2@40ms,drop:0.01"},
  };
  for (const auto& [spec, canonical] : cases) {
    FaultSchedule s = MustParse(spec);
    EXPECT_EQ(s.ToString(), canonical) << spec;
    EXPECT_EQ(MustParse(s.ToString()), s) << spec;
  }
}

TEST(FaultScheduleTest, ToStringRoundTripsAwkwardValues) {
  // Probabilities that are not short decimals, and the extreme node and time.
  for (double p : {1.0 / 3, 0.1 + 0.2, 1e-300, 5e-324, 0.9999999999999999, 0.0001}) {
    FaultSchedule s;
    s.events = {{FaultKind::kCrashCn, 65535, kFaultTimeNsLimit},
                {FaultKind::kRestartCn, 65535, kFaultTimeNsLimit}};
    s.messages.drop_probability = p;
    s.messages.delay_probability = p;
    s.messages.delay_ns_min = 1;
    s.messages.delay_ns_max = kFaultTimeNsLimit;
    Result<FaultSchedule> back = FaultSchedule::Parse(s.ToString());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, s) << s.ToString();
    EXPECT_EQ(back->messages.drop_probability, p);
  }
  // Equality sees every field.
  FaultSchedule a = MustParse("crash-cn:1@1ms,drop:0.1"), b = a;
  b.messages.delay_ns_mean = 1;
  EXPECT_FALSE(a == b);
  b = a;
  b.events[0].node = 2;
  EXPECT_FALSE(a == b);
}

// The limits RandomSchedule() is tried on: from one CN that must stay up to a large cluster
// with refusals and protected CNs.
std::vector<FaultLimits> SomeLimits() {
  std::vector<FaultLimits> all;
  FaultLimits l = Cluster(8, 4);
  l.max_mns_down = 1;
  l.horizon_ns = 50 * kMs;
  all.push_back(l);
  l = Cluster(3, 3);
  l.min_cns_up = 2;
  l.horizon_ns = 10 * kMs;
  l.refused = {{FaultKind::kCrashMn, "MN crashes are not survived yet"}};
  l.protected_cns = {{0, "it hosts the timestamp oracle"}};
  all.push_back(l);
  l = Cluster(3, 1);
  l.horizon_ns = 0;  // the default horizon
  l.refused = {{FaultKind::kRestartCn, "restarts are not survived yet"},
               {FaultKind::kHealCn, "heals are not survived yet"}};
  all.push_back(l);
  l = Cluster(1, 2);  // the one CN must stay up: no CN events at all
  l.max_mns_down = 2;
  l.horizon_ns = 100;  // a window too short for whole microseconds
  all.push_back(l);
  l = Cluster(16, 6);
  l.min_cns_up = 12;
  l.max_mns_down = 2;
  l.horizon_ns = 60'000'000'000;  // beyond the time limit: drawn within it
  all.push_back(l);
  return all;
}

TEST(FaultScheduleTest, RandomSchedulesValidateAndRoundTrip) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::vector<FaultLimits> all = SomeLimits();
  for (size_t li = 0; li < all.size(); li++) {
    const FaultLimits& l = all[li];
    uint64_t horizon =
        std::min(l.horizon_ns ? l.horizon_ns : kRandomFaultHorizonNsDefault, kFaultTimeNsLimit);
    std::set<FaultKind> seen;
    std::set<FaultStep> steps;
    int with_messages = 0, with_jitter = 0;
    for (int i = 0; i < 1000; i++) {
      FaultSchedule s = RandomSchedule(rng, l);
      const std::string spec = s.ToString();
      SCOPED_TRACE("limits " + std::to_string(li) + " draw " + std::to_string(i) + ": " + spec);
      Status st = s.Validate(l);
      ASSERT_TRUE(st.ok()) << st.ToString();
      Result<FaultSchedule> back = FaultSchedule::Parse(spec);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      ASSERT_EQ(*back, s);
      int counts[kFaultKindCount] = {};
      for (const FaultEvent& e : s.events) {
        ASSERT_GE(e.at_ns, horizon / 10);
        ASSERT_LE(e.at_ns, horizon * 9 / 10);
        counts[static_cast<int>(e.kind)]++;
        seen.insert(e.kind);
        if (e.step != FaultStep::kNone) {
          ASSERT_EQ(e.kind, FaultKind::kCrashCn);
          steps.insert(e.step);
        }
      }
      ASSERT_LE(s.jitter_ns, 4 * kUs);
      with_jitter += s.jitter_ns != 0;
      ASSERT_LE(counts[static_cast<int>(FaultKind::kCrashCn)], 4);
      ASSERT_LE(counts[static_cast<int>(FaultKind::kPartitionCn)] +
                    counts[static_cast<int>(FaultKind::kPartitionHost)] +
                    counts[static_cast<int>(FaultKind::kCutHosts)],
                1);
      ASSERT_LE(counts[static_cast<int>(FaultKind::kCrashMn)], 1);
      ASSERT_LE(counts[static_cast<int>(FaultKind::kCrashCoord)], 1);
      ASSERT_EQ(counts[static_cast<int>(FaultKind::kCrashCoord)],
                counts[static_cast<int>(FaultKind::kRestartCoord)]);
      ASSERT_LE(s.messages.drop_probability, 0.01);
      ASSERT_LE(s.messages.duplicate_probability, 0.01);
      ASSERT_LE(s.messages.delay_probability, 0.01);
      if (s.messages.delay_probability > 0) {
        ASSERT_GE(s.messages.delay_ns_min, 1 * kUs);
        ASSERT_LE(s.messages.delay_ns_max, 200 * kUs);
      }
      with_messages += s.messages.enabled();
    }
    // Every kind the limits allow is drawn somewhere in 1000 draws, and no other.
    for (int k = 0; k < kFaultKindCount; k++) {
      auto kind = static_cast<FaultKind>(k);
      bool refused = false;
      for (const auto& [r, why] : l.refused) refused |= r == kind;
      bool possible = !refused;
      if (IsCnFault(kind)) possible &= l.cns > l.min_cns_up;
      if (!IsCnFault(kind) && !IsCoordFault(kind)) possible &= l.max_mns_down >= 1 && l.mns >= 1;
      // A crash-cn refusal takes its restart along, and so on.
      if (kind == FaultKind::kRestartCn) possible &= seen.count(FaultKind::kCrashCn) > 0;
      if (kind == FaultKind::kHealCn) possible &= seen.count(FaultKind::kPartitionCn) > 0;
      if (kind == FaultKind::kRestartMn) possible &= seen.count(FaultKind::kCrashMn) > 0;
      // A host cut is a partition with an MN down; its CN and MN must be able to go.
      if (IsHostFault(kind)) {
        possible &= l.cns > l.min_cns_up && l.max_mns_down >= 1 && l.mns >= 1;
        for (const auto& [r, why] : l.refused) possible &= r != FaultKind::kPartitionCn;
      }
      if (kind == FaultKind::kHealHost) possible &= seen.count(FaultKind::kPartitionHost) > 0;
      // Two hosts cut apart: two CNs away and an MN down, hosts enough and no CN partition refused.
      if (IsHostPairFault(kind)) {
        possible &= std::min(l.cns, l.mns) >= 2 && l.cns >= l.min_cns_up + 2 &&
                    l.max_mns_down >= 1 && seen.count(FaultKind::kPartitionHost) > 0;
      }
      if (kind == FaultKind::kHealHosts) possible &= seen.count(FaultKind::kCutHosts) > 0;
      EXPECT_EQ(seen.count(kind) > 0, possible) << "limits " << li << " " << FaultKindName(kind);
    }
    // Where CN crashes are drawn, every step is aimed at somewhere in 1000 draws.
    if (seen.count(FaultKind::kCrashCn) > 0) {
      EXPECT_EQ(steps.size(), static_cast<size_t>(kFaultStepCount - 1)) << "limits " << li;
    } else {
      EXPECT_TRUE(steps.empty()) << "limits " << li;
    }
    EXPECT_GT(with_jitter, 400) << "limits " << li;  // half of the draws on average
    EXPECT_LT(with_jitter, 600) << "limits " << li;
    EXPECT_GT(with_messages, 700) << "limits " << li;  // 1 - 1/8 of draws on average
    EXPECT_LT(with_messages, 1000) << "limits " << li;
  }
}

TEST(FaultScheduleTest, RandomScheduleIsDeterministicPerSeed) {
  FaultLimits l = SomeLimits()[0];
  std::set<std::string> specs;
  for (uint64_t seed = 1; seed <= 100; seed++) {
    Rng a(seed), b(seed);
    std::string sa = RandomSchedule(a, l).ToString();
    EXPECT_EQ(sa, RandomSchedule(b, l).ToString()) << seed;
    EXPECT_EQ(a.Next(), b.Next()) << seed;  // and leaves the streams alike
    specs.insert(sa);
  }
  EXPECT_GE(specs.size(), 95u);  // different seeds, different schedules
}

TEST(FaultScheduleTest, RefusedKindsAndProtectedCnsAreNeverDrawn) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  FaultLimits l = Cluster(6, 3);
  l.max_mns_down = 1;
  l.horizon_ns = 20 * kMs;
  l.refused = {{FaultKind::kPartitionCn, "no"}, {FaultKind::kRestartMn, "no"}};
  l.protected_cns = {{1, "no"}, {4, "no"}};
  int crashes = 0, mn_crashes = 0;
  for (int i = 0; i < 1000; i++) {
    FaultSchedule s = RandomSchedule(rng, l);
    for (const FaultEvent& e : s.events) {
      ASSERT_NE(e.kind, FaultKind::kPartitionCn) << s.ToString();
      ASSERT_NE(e.kind, FaultKind::kHealCn) << s.ToString();
      ASSERT_NE(e.kind, FaultKind::kRestartMn) << s.ToString();
      if (e.kind == FaultKind::kCrashCn) {
        ASSERT_NE(e.node, 1) << s.ToString();
        ASSERT_NE(e.node, 4) << s.ToString();
        crashes++;
      }
      mn_crashes += e.kind == FaultKind::kCrashMn;
    }
  }
  EXPECT_GT(crashes, 1000);  // the allowed kinds are still drawn
  EXPECT_GT(mn_crashes, 300);
}

TEST(FaultScheduleTest, RefusingOneKindLeavesTheOtherDrawsAlone) {
  FaultLimits all = Cluster(6, 3), no_partition;
  all.max_mns_down = 1;
  all.horizon_ns = 20 * kMs;
  // A host cut counts as an MN down, and so may leave no room for the MN crash: compare draws
  // without them.
  all.refused = {{FaultKind::kPartitionHost, "no"}};
  no_partition = all;
  no_partition.refused.push_back({FaultKind::kPartitionCn, "no"});
  for (uint64_t seed = 1; seed <= 50; seed++) {
    Rng a(seed), b(seed);
    FaultSchedule x = RandomSchedule(a, all), y = RandomSchedule(b, no_partition);
    std::erase_if(x.events, [](const FaultEvent& e) {
      return e.kind == FaultKind::kPartitionCn || e.kind == FaultKind::kHealCn;
    });
    // Partitions are drawn after the crashes, from their own stream, so leaving them out
    // changes nothing else.
    EXPECT_EQ(x, y) << seed << ": " << x.ToString() << " vs " << y.ToString();
  }
}

// Half the partitions drawn where an MN may be down cut a whole host; refused, every partition
// is a CN's alone, drawn as before host cuts existed (the coin has a stream of its own).
TEST(FaultScheduleTest, HalfThePartitionsCutAHostWhereAnMnMayBeDown) {
  FaultLimits l = Cluster(6, 3);
  l.max_mns_down = 1;
  l.horizon_ns = 20 * kMs;
  l.protected_cns = {{0, "no"}};
  FaultLimits no_host = l;
  no_host.refused = {{FaultKind::kPartitionHost, "no"}};
  int host = 0, cn = 0, healed = 0;
  for (uint64_t seed = 1; seed <= 1000; seed++) {
    Rng a(seed), b(seed);
    FaultSchedule s = RandomSchedule(a, l);
    for (const FaultEvent& e : s.events) {
      if (e.kind == FaultKind::kPartitionHost) {
        host++;
        ASSERT_NE(e.node, 0) << s.ToString();  // its CN is protected
        ASSERT_LT(e.node, 3) << s.ToString();  // a host has an MN
      }
      cn += e.kind == FaultKind::kPartitionCn;
      healed += e.kind == FaultKind::kHealHost;
    }
    for (const FaultEvent& e : RandomSchedule(b, no_host).events) {
      ASSERT_NE(e.kind, FaultKind::kPartitionHost);
      ASSERT_NE(e.kind, FaultKind::kHealHost);
    }
  }
  // Half of 1000 draw a partition; half of those a host (less what the limits refuse beside a
  // crashed MN, which fall back to the CN alone); three in four are healed.
  EXPECT_GT(host, 150);
  EXPECT_LT(host, 300);
  EXPECT_GT(cn, 200);
  EXPECT_GT(healed, host / 2);
  EXPECT_LT(healed, host);
  // Without MNs that may be down, no host is ever cut.
  FaultLimits none = l;
  none.max_mns_down = 0;
  for (uint64_t seed = 1; seed <= 200; seed++) {
    Rng r(seed);
    for (const FaultEvent& e : RandomSchedule(r, none).events) {
      ASSERT_NE(e.kind, FaultKind::kPartitionHost);
    }
  }
}

}  // namespace
}  // namespace pond::sim
