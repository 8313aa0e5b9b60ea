// TestHistory: builds small histories in Elle's JSON-lines format for the checker's tests, so
// that every planted anomaly also goes through the real parser. Test-only; single-threaded.
//
//   TestHistory h;
//   h.Txn(1, "ok", R"([["append", 1, 1]])");       // invoke at t, complete at t+1
//   h.Invoke(2, R"([["r", 1, null]])");             // overlapping transactions: invoke ...
//   h.Complete(2, "ok", R"([["r", 1, [1]]])");      // ... and complete separately
//   CheckResult r = h.Check(Model::kSerializable);
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "pond/check/checker.h"
#include "pond/check/history.h"

namespace pond::check {

class TestHistory {
 public:
  // Writes an invocation; its reads are nulled as Jepsen does.
  TestHistory& Invoke(int64_t process, const std::string& mops) {
    nlohmann::json value = nlohmann::json::parse(mops);
    for (auto& m : value) {
      if (m[0] == "r") m[2] = nullptr;
    }
    Line(process, "invoke", value);
    return *this;
  }
  TestHistory& Complete(int64_t process, const std::string& type, const std::string& mops) {
    Line(process, type, mops == "null" ? nlohmann::json() : nlohmann::json::parse(mops));
    return *this;
  }
  // A transaction that completes before the next line.
  TestHistory& Txn(int64_t process, const std::string& type, const std::string& mops) {
    Invoke(process, mops);
    return Complete(process, type, mops);
  }
  // Moves the clock forward, so that what follows is later in real time.
  TestHistory& Wait(int64_t ns) {
    time_ += ns;
    return *this;
  }

  std::string text() const { return text_.str(); }

  History Parse() const {
    std::istringstream in(text());
    Result<History> h = ParseHistory(in, "test.jsonl");
    EXPECT_TRUE(h.ok()) << h.status().ToString() << "\n" << text();
    return h.ok() ? std::move(h).value() : History();
  }

  CheckResult Check(Model model, uint32_t examples = 3) const {
    History h = Parse();
    CheckerOptions o;
    o.model = model;
    o.examples_per_anomaly_max = examples;
    CheckResult r = pond::check::Check(h, o);
    last_report_ = FormatText(h, r);
    return r;
  }
  // The text report of the last Check, for failure messages.
  const std::string& report() const { return last_report_; }

 private:
  void Line(int64_t process, const std::string& type, const nlohmann::json& value) {
    nlohmann::json j = {{"type", type}, {"process", process}, {"time", time_},
                        {"f", "txn"},   {"index", index_++},  {"value", value}};
    time_ += 10;
    text_ << j.dump() << "\n";
  }

  std::ostringstream text_;
  int64_t time_ = 0;
  uint64_t index_ = 0;
  mutable std::string last_report_;
};

}  // namespace pond::check
