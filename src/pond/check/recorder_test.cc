#include "pond/check/recorder.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>
#include <vector>

#include "pond/check/checker.h"
#include "pond/check/history.h"

namespace pond::check {
namespace {

TEST(RecorderTest, DisabledRecorderRecordsNothing) {
  Recorder off;
  EXPECT_FALSE(off.enabled());
  TxnRecorder t = off.Begin(1, 10);
  EXPECT_FALSE(t.enabled());
  uint64_t elems[] = {1, 2};
  t.Read(1, elems);
  t.Append(1, 3);
  t.Finish(Outcome::kOk, 20);
  EXPECT_TRUE(off.Close().ok());
}

TEST(RecorderTest, WritesElleFormatThatParsesBack) {
  std::ostringstream out;
  {
    Recorder rec(&out);
    TxnRecorder t = rec.Begin(3, 100);
    t.Append(7, 1);
    uint64_t seen[] = {1};
    t.Read(7, seen);
    t.Finish(Outcome::kOk, 150);
    TxnRecorder f = rec.Begin(4, 120);
    f.Append(7, 2);
    f.Finish(Outcome::kFail, 160);
    ASSERT_TRUE(rec.Close().ok());
  }
  EXPECT_EQ(
      out.str(),
      R"({"index":0,"type":"invoke","process":3,"time":100,"f":"txn","value":[["append",7,1],["r",7,null]]})"
      "\n"
      R"({"index":1,"type":"ok","process":3,"time":150,"f":"txn","value":[["append",7,1],["r",7,[1]]]})"
      "\n"
      R"({"index":2,"type":"invoke","process":4,"time":120,"f":"txn","value":[["append",7,2]]})"
      "\n"
      R"({"index":3,"type":"fail","process":4,"time":160,"f":"txn","value":[["append",7,2]]})"
      "\n");
  std::istringstream in(out.str());
  Result<History> h = ParseHistory(in, "rec");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->txns().size(), 2u);
}

TEST(RecorderTest, ManyThreadsProduceAValidHistory) {
  // Each thread runs serial read-modify-write transactions on its own key, so the recorded
  // history is strictly serializable whatever the interleaving of lines.
  constexpr int kThreads = 4, kTxns = 500;
  std::ostringstream out;
  Recorder rec(&out, RecorderOptions{.buffer_bytes_max = 4096});
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; th++) {
    threads.emplace_back([&rec, th] {
      std::vector<uint64_t> list;
      uint64_t now = 0;
      for (int i = 0; i < kTxns; i++) {
        TxnRecorder t = rec.Begin(th, now++);
        t.Read(th, list);
        list.push_back(i + 1);
        t.Append(th, i + 1);
        t.Finish(Outcome::kOk, now++);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(rec.Close().ok());
  std::istringstream in(out.str());
  Result<History> h = ParseHistory(in, "rec");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->txns().size(), size_t{kThreads * kTxns});
  CheckResult r = Check(*h, CheckerOptions{.model = Model::kStrictSerializable});
  EXPECT_TRUE(r.valid) << FormatText(*h, r);
}

TEST(RecorderTest, FlushesWhenTheBufferFills) {
  // Bounded memory: with a small buffer, lines reach the stream before Close.
  std::ostringstream out;
  Recorder rec(&out, RecorderOptions{.buffer_bytes_max = 256});
  for (int i = 0; i < 20; i++) {
    TxnRecorder t = rec.Begin(0, 2 * i);
    t.Append(1, i);
    t.Finish(Outcome::kOk, 2 * i + 1);
  }
  EXPECT_GT(out.str().size(), 0u);
  size_t before = out.str().size();
  ASSERT_TRUE(rec.Close().ok());
  EXPECT_GE(out.str().size(), before);
  std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 40);
}

TEST(RecorderTest, OversizedTransactionFailsTheRecording) {
  std::ostringstream out;
  Recorder rec(&out);
  TxnRecorder t = rec.Begin(0, 1);
  for (uint32_t i = 0; i <= kMopsPerTxnMax; i++) t.Append(1, i);
  t.Finish(Outcome::kOk, 2);
  Status s = rec.Close();
  EXPECT_EQ(s.code(), Code::kOutOfSpace);
  EXPECT_EQ(out.str(), "");  // dropped, not truncated
}

TEST(RecorderTest, OpenFileReportsBadPath) {
  auto rec = Recorder::OpenFile("/nonexistent/dir/h.jsonl");
  EXPECT_FALSE(rec.ok());
}

}  // namespace
}  // namespace pond::check
