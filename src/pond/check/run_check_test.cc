#include "pond/check/run_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pond/check/test_history.h"

namespace pond::check {
namespace {

// The file is this test's and this process's: ctest runs each test as a process of its own,
// several at once, and with one shared name a test read a file another was rewriting.
std::string WriteFile(const std::string& name, const std::string& text) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string path =
      testing::TempDir() + "/" + test->name() + "-" + std::to_string(getpid()) + "-" + name;
  std::ofstream(path) << text;
  return path;
}

struct RunOutcome {
  int code;
  std::string out, err;
};

RunOutcome CheckFile(const std::string& path, Model model, bool json = false) {
  std::ostringstream out, err;
  CheckOptions o;
  o.history_path = path;
  o.model = model;
  o.json = json;
  int code = RunCheck(o, out, err);
  return {code, out.str(), err.str()};
}

size_t Lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

std::string WriteSkew() {
  TestHistory h;
  h.Invoke(1, R"([["r", 1, null], ["r", 2, null], ["append", 1, 1]])");
  h.Invoke(2, R"([["r", 1, null], ["r", 2, null], ["append", 2, 1]])");
  h.Complete(1, "ok", R"([["r", 1, []], ["r", 2, []], ["append", 1, 1]])");
  h.Complete(2, "ok", R"([["r", 1, []], ["r", 2, []], ["append", 2, 1]])");
  return h.text();
}

TEST(RunCheckTest, ExitsZeroWhenValid) {
  RunOutcome o = CheckFile(WriteFile("skew.jsonl", WriteSkew()), Model::kSnapshotIsolation);
  EXPECT_EQ(o.code, kExitValid) << o.out << o.err;
  EXPECT_EQ(o.err, "");
  EXPECT_EQ(o.out.rfind("valid: yes\n", 0), 0u) << o.out;
}

TEST(RunCheckTest, ExitsOneWhenInvalid) {
  RunOutcome o = CheckFile(WriteFile("skew.jsonl", WriteSkew()), Model::kSerializable);
  EXPECT_EQ(o.code, kExitInvalid);
  EXPECT_EQ(o.err, "");
  EXPECT_NE(o.out.find("G2-item: 1 (forbidden by serializable)"), std::string::npos) << o.out;
}

TEST(RunCheckTest, PrintsJsonWhenAsked) {
  RunOutcome o =
      CheckFile(WriteFile("skew.jsonl", WriteSkew()), Model::kSerializable, /*json=*/true);
  EXPECT_EQ(o.code, kExitInvalid);
  nlohmann::json j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_EQ(j["valid"], false);
  EXPECT_EQ(j["counts"]["G2-item"], 1);
}

TEST(RunCheckTest, ExitsTwoOnMalformedInputWithOneLine) {
  std::string text = WriteSkew() + R"({"type":"ok","process":9,"time":99,"f":"txn","value":[]})"
                                   "\n";
  std::string path = WriteFile("bad.jsonl", text);
  RunOutcome o = CheckFile(path, Model::kSerializable);
  EXPECT_EQ(o.code, kExitMalformed);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(Lines(o.err), 1u) << o.err;
  EXPECT_EQ(o.err, "pond check: " + path + ":5: process 9 completes without an invocation\n");

  RunOutcome garbage = CheckFile(WriteFile("garbage.jsonl", "hello\n"), Model::kSerializable);
  EXPECT_EQ(garbage.code, kExitMalformed);
  EXPECT_EQ(Lines(garbage.err), 1u);
  EXPECT_NE(garbage.err.find("garbage.jsonl:1: not valid JSON"), std::string::npos) << garbage.err;

  RunOutcome string_key = CheckFile(
      WriteFile("strkey.jsonl",
                R"({"type":"invoke","process":0,"time":1,"f":"txn","value":[["append","x",1]]})"
                "\n"),
      Model::kSerializable);
  EXPECT_EQ(string_key.code, kExitMalformed);
  EXPECT_EQ(Lines(string_key.err), 1u);

  RunOutcome missing =
      CheckFile(testing::TempDir() + "/does-not-exist.jsonl", Model::kSerializable);
  EXPECT_EQ(missing.code, kExitMalformed);
  EXPECT_EQ(Lines(missing.err), 1u);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos);
}

TEST(RunCheckTest, EmptyHistoryIsValid) {
  RunOutcome o = CheckFile(WriteFile("empty.jsonl", ""), Model::kStrictSerializable);
  EXPECT_EQ(o.code, kExitValid) << o.out;
}

}  // namespace
}  // namespace pond::check
