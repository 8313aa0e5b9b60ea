#include "pond/check/history.h"

#include <gtest/gtest.h>

#include <sstream>

namespace pond::check {
namespace {

Result<History> ParseText(const std::string& text) {
  std::istringstream in(text);
  return ParseHistory(in, "h.jsonl");
}

// Parses a history whose given line is bad; returns the error message.
std::string ErrorOf(const std::string& text) {
  Result<History> h = ParseText(text);
  EXPECT_FALSE(h.ok()) << text;
  if (h.ok()) return "";
  EXPECT_EQ(h.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(h.status().message().find('\n'), std::string::npos);  // one line
  return h.status().message();
}

const char* kInvoke =
    R"({"type":"invoke","process":0,"time":1,"f":"txn","value":[["append",1,2],["r",1,null]]})";

TEST(HistoryTest, ParsesElleFormat) {
  // Keywords with or without their colon, a nemesis line to skip, extra fields to ignore,
  // blank lines, and an invocation never completed (an info).
  std::string text = std::string(kInvoke) + "\n" +
                     R"({"type":"info","process":"nemesis","f":"start","value":null,"time":2})"
                     "\n"
                     "\n" +
                     R"({"type":":ok","process":0,"time":3,"index":7,"f":":txn","node":"n1",)"
                     R"("value":[["append",1,2],["r",1,[5,2]]]})"
                     "\n" +
                     R"({"type":"invoke","process":1,"time":4,"f":"txn","value":[["append",-3,9]]})"
                     "\n";
  Result<History> h = ParseText(text);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->txns().size(), 2u);
  const Txn& t0 = h->txns()[0];
  EXPECT_EQ(t0.type, TxnType::kOk);
  EXPECT_EQ(t0.id, 7u);
  EXPECT_EQ(t0.invoke_ns, 1);
  EXPECT_EQ(t0.complete_ns, 3);
  EXPECT_EQ(t0.invoke_line, 1u);
  EXPECT_EQ(t0.complete_line, 4u);
  auto mops = h->mops(t0);
  ASSERT_EQ(mops.size(), 2u);
  EXPECT_TRUE(mops[0].is_append);
  EXPECT_EQ(mops[0].value, 2u);
  ASSERT_TRUE(mops[1].read_known);
  auto read = h->read(mops[1]);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0], 5u);
  const AppendRef* ref = h->Appender(mops[0].key, 2);
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(ref->txn, 0u);
  EXPECT_EQ(h->Appender(mops[0].key, 5), nullptr);
  const Txn& t1 = h->txns()[1];
  EXPECT_EQ(t1.type, TxnType::kInfo);  // never completed
  EXPECT_EQ(t1.complete_line, 0u);
  EXPECT_EQ(h->FormatValue(h->key_value(h->mops(t1)[0].key)), "-3");
  EXPECT_EQ(h->key_count(), 2u);
}

TEST(HistoryTest, KeepsInvocationAppendsOfValuelessFailure) {
  std::string text = std::string(kInvoke) + "\n" +
                     R"({"type":"fail","process":0,"time":3,"f":"txn","value":null})"
                     "\n";
  Result<History> h = ParseText(text);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->txns()[0].type, TxnType::kFail);
  EXPECT_NE(h->Appender(h->mops(h->txns()[0])[0].key, 2), nullptr);
}

TEST(HistoryTest, RejectsMalformedLinesWithTheirNumber) {
  std::string ok_line =
      R"({"type":"ok","process":0,"time":3,"f":"txn","value":[["append",1,2],["r",1,[2]]]})";
  std::string first = std::string(kInvoke) + "\n";
  struct Case {
    std::string text;
    std::string want;
  };
  std::vector<Case> cases = {
      {first + "{not json\n", "h.jsonl:2: not valid JSON"},
      {first + "[1,2]\n", "h.jsonl:2: not a JSON object"},
      {R"({"type":"begin","process":0,"time":1,"f":"txn","value":[]})"
       "\n",
       "h.jsonl:1: \"type\""},
      {R"({"type":"invoke","process":"p","time":1,"f":"txn","value":[]})"
       "\n",
       "\"process\""},
      {R"({"type":"invoke","process":0,"f":"txn","value":[]})"
       "\n",
       "\"time\""},
      {R"({"type":"invoke","process":0,"time":1,"f":"read","value":[]})"
       "\n",
       "\"f\""},
      {R"({"type":"invoke","process":0,"time":1,"f":"txn","value":[["append","k",1]]})"
       "\n",
       "h.jsonl:1: micro-op 1: key must be an integer"},
      {R"({"type":"invoke","process":0,"time":1,"f":"txn","value":[["r",1,null],["append",1,1.5]]})"
       "\n",
       "micro-op 2: element must be an integer"},
      {R"({"type":"invoke","process":0,"time":1,"f":"txn","value":[["w",1,1]]})"
       "\n",
       "f must be \"append\" or \"r\""},
      {R"({"type":"invoke","process":0,"time":1,"f":"txn","value":[["r",1]]})"
       "\n",
       "must be [f, key, value]"},
      {ok_line + "\n", "h.jsonl:1: process 0 completes without an invocation"},
      {first + first, "h.jsonl:2: process 0 invokes again"},
      {first +
           R"({"type":"ok","process":0,"time":3,"f":"txn","value":[["append",1,2],["r",1,null]]})"
           "\n",
       "h.jsonl:2: micro-op 2: an ok read needs a result"},
      {first +
           R"({"type":"ok","process":0,"time":3,"f":"txn","value":[["append",1,2],["r",1,["a"]]]})"
           "\n",
       "read element must be an integer"},
      {first +
           R"({"type":"ok","process":0,"time":3,"f":"txn","value":[["append",1,3],["r",1,[2]]]})"
           "\n",
       "differs from its invocation on line 1"},
      {first + R"({"type":"ok","process":0,"time":3,"f":"txn","value":[["append",1,2]]})"
               "\n",
       "completion has 1 micro-ops but its invocation on line 1 has 2"},
      {first + ok_line + "\n" +
           R"({"type":"invoke","process":1,"time":4,"f":"txn","value":[["append",1,2]]})"
           "\n",
       "h.jsonl:3: element 2 appended to key 1 again (first on line 1)"},
      {first +
           R"({"type":"ok","process":0,"time":0,"f":"txn","value":[["append",1,2],["r",1,[2]]]})"
           "\n",
       "h.jsonl:2: completion time 0 is before its invocation's time 1"},
      {R"({"type":"invoke","process":0,"time":1,"f":"txn","value":[["append",-1,18446744073709551615]]})"
       "\n",
       "below 0 and above 2^63-1"},
  };
  for (const Case& c : cases) {
    std::string msg = ErrorOf(c.text);
    EXPECT_NE(msg.find(c.want), std::string::npos) << "got: " << msg << "\nwant: " << c.want;
  }
}

TEST(HistoryTest, AcceptsFullUnsignedRange) {
  std::string text =
      R"({"type":"invoke","process":0,"time":1,"f":"txn","value":[["append",18446744073709551615,9223372036854775808]]})"
      "\n";
  Result<History> h = ParseText(text);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->FormatValue(h->key_value(0)), "18446744073709551615");
}

TEST(HistoryTest, ReportsUnopenableFile) {
  Result<History> h = ReadHistoryFile("/nonexistent/dir/h.jsonl");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace pond::check
