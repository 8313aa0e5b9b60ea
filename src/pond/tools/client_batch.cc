// `pond client batch` (client_batch.h).
#include "pond/tools/client_batch.h"

#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pond/tools/client_ops.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

// A parsed line: a request, or a call's procedure and argument bytes.
struct Item {
  size_t line = 0;
  uint32_t tries = 0;
  std::optional<client::Request> request;
  std::string procedure, args;
};

// An abort that changed nothing and may not recur: a conflict with another transaction.
bool Transient(client::AbortReason r) {
  using R = client::AbortReason;
  return r == R::kLockConflict || r == R::kNewerVersion || r == R::kSnapshotTooOld ||
         r == R::kTornRead || r == R::kInvisibleWait || r == R::kValidation;
}

Result<Item> ParseLine(size_t number, const std::string& text, const client::Description& d) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return InvalidArgument("line " + std::to_string(number) + " is blank");
  auto bad = [&](const std::string& why) {
    return InvalidArgument("line " + std::to_string(number) + ": " + why);
  };
  Item item;
  item.line = number;
  const std::string& kind = words[0];
  if (kind == "txn" || kind == "ro") {
    if (words.size() < 2) return bad(kind + " names no operation");
    item.request.emplace(kind == "ro");
    for (size_t i = 1; i < words.size(); i++) {
      if (Status st = AddOp(words[i], d, &*item.request); !st.ok()) return bad(st.message());
    }
    return item;
  }
  if (kind == "call") {
    if (words.size() < 2) return bad("call names no procedure");
    item.procedure = words[1];
    if (d.Procedure(item.procedure) == nullptr) {
      return bad("the server has no procedure \"" + item.procedure + "\"");
    }
    for (size_t i = 2; i < words.size(); i++) {
      Result<std::string> b = ParseBytes(words[i]);
      if (!b.ok()) return bad(b.status().message());
      item.args += *b;
    }
    return item;
  }
  return bad("\"" + kind + "\" is not txn, ro or call");
}

}  // namespace

int RunBatch(client::Client& c, const client::Description& d, const BatchArgs& a) {
  const std::string what = "client batch";
  std::ifstream file;
  if (a.file != "-") {
    file.open(a.file);
    if (!file) return Fail(what, "cannot read " + a.file);
  }
  std::istream& in = a.file == "-" ? std::cin : file;
  std::vector<Item> items;
  size_t number = 0;
  for (std::string text; std::getline(in, text);) {
    number++;
    const size_t first = text.find_first_not_of(" \t\r\v\f");
    if (first == std::string::npos || text[first] == '#') continue;
    Result<Item> item = ParseLine(number, text, d);
    if (!item.ok()) return Fail(what, item.status().message());
    items.push_back(std::move(*item));
  }
  if (in.bad())
    return Fail(what, "reading " + (a.file == "-" ? "standard input" : a.file) + " failed");

  std::unique_ptr<client::Pipeline> p = c.OpenPipeline();
  std::map<uint64_t, size_t> line_of;  // by request id: its item
  std::deque<size_t> to_send;          // items, in line order, then those aborted to try again
  for (size_t i = 0; i < items.size(); i++) to_send.push_back(i);
  size_t counts[4] = {0, 0, 0, 0}, retried = 0;
  std::optional<size_t> first_failed;  // the lowest line that did not commit
  int first_rc = 0;
  while (!to_send.empty() || p->in_flight() > 0) {
    while (!to_send.empty() && p->in_flight() < a.in_flight) {
      const size_t i = to_send.front();
      to_send.pop_front();
      Item& it = items[i];
      it.tries++;
      line_of[it.request ? p->Execute(*it.request) : p->Call(it.procedure, it.args)] = i;
    }
    for (client::PipelinedReply& r : p->Receive()) {
      const size_t i = line_of.at(r.id);
      line_of.erase(r.id);
      if (r.answer.outcome == client::Outcome::kAborted && Transient(r.answer.reason) &&
          items[i].tries <= a.retries) {
        to_send.push_back(i);
        retried++;
        continue;
      }
      const std::string prefix = std::to_string(items[i].line) + " ";
      std::printf("%s%s\n", prefix.c_str(), r.answer.ToString().c_str());
      if (r.answer.committed()) {
        PrintValues(r.values, prefix);
        if (!items[i].request && !r.reply.empty()) {
          std::printf("%sreply %s\n", prefix.c_str(), Show(r.reply).c_str());
        }
      } else if (!first_failed || items[i].line < *first_failed) {
        first_failed = items[i].line;
        first_rc = ExitFor(r.answer);
      }
      const client::Outcome o = r.answer.outcome;
      counts[o == client::Outcome::kCommitted  ? 0
             : o == client::Outcome::kAborted  ? 1
             : o == client::Outcome::kRejected ? 2
                                               : 3]++;
    }
    std::fflush(stdout);
  }
  std::fprintf(stderr,
               "pond %s: %zu transaction(s): %zu committed, %zu aborted, %zu rejected, %zu unknown "
               "(%zu sent again after a conflict)\n",
               what.c_str(), items.size(), counts[0], counts[1], counts[2], counts[3], retried);
  return first_rc;
}

}  // namespace pond::tools
