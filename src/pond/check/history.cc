#include "pond/check/history.h"

#include <fmt/format.h>

#include <fstream>
#include <istream>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace pond::check {

namespace {

using nlohmann::json;

// Jepsen writes keywords either bare ("ok") or with their colon (":ok"); accept both.
std::string_view Keyword(const json& j) {
  if (!j.is_string()) return {};
  const std::string& s = j.get_ref<const std::string&>();
  std::string_view v(s);
  if (!v.empty() && v.front() == ':') v.remove_prefix(1);
  return v;
}

}  // namespace

std::string History::FormatValue(uint64_t bits) const {
  if (signed_values_) return fmt::format("{}", static_cast<int64_t>(bits));
  return fmt::format("{}", bits);
}

// Builds a History line by line. Every check that can fail returns a Status naming the line;
// nlohmann is used in its non-throwing mode and every value's type is checked before it is
// read, so no exception leaves this class.
class HistoryParser {
 public:
  explicit HistoryParser(std::string_view source) { h_.source_ = std::string(source); }

  Status ParseLine(std::string_view line) {
    line_++;
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return Status::Ok();  // blank lines are allowed
    if (line.size() > kLineBytesMax) return Error("line longer than {} bytes", kLineBytesMax);
    json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Error("not valid JSON");
    if (!j.is_object()) return Error("not a JSON object");

    auto process_it = j.find("process");
    if (process_it == j.end()) return Error("\"process\" is missing");
    // Jepsen's nemesis shares the history but is no client; its operations are not txns.
    if (Keyword(*process_it) == "nemesis") return Status::Ok();
    if (!process_it->is_number_integer()) return Error("\"process\" must be an integer");
    int64_t process = process_it->get<int64_t>();

    auto type_it = j.find("type");
    if (type_it == j.end()) return Error("\"type\" is missing");
    std::string_view type = Keyword(*type_it);
    auto f_it = j.find("f");
    if (f_it == j.end() || Keyword(*f_it) != "txn") return Error("\"f\" must be \"txn\"");
    auto time_it = j.find("time");
    if (time_it == j.end() || !time_it->is_number_integer() ||
        (time_it->is_number_unsigned() &&
         time_it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      return Error("\"time\" must be an integer (nanoseconds)");
    }
    int64_t time = time_it->get<int64_t>();
    uint64_t index = line_ - 1;
    if (auto it = j.find("index"); it != j.end()) {
      if (!it->is_number_unsigned()) return Error("\"index\" must be a non-negative integer");
      index = it->get<uint64_t>();
    }
    auto value_it = j.find("value");
    const json* value = value_it == j.end() ? nullptr : &*value_it;
    if (value != nullptr && !value->is_null() && !value->is_array()) {
      return Error("\"value\" must be a list of micro-ops or null");
    }
    if (type == "invoke") return Invoke(process, time, index, value);
    TxnType t;
    if (type == "ok") {
      t = TxnType::kOk;
    } else if (type == "fail") {
      t = TxnType::kFail;
    } else if (type == "info") {
      t = TxnType::kInfo;
    } else {
      return Error("\"type\" must be invoke, ok, fail or info");
    }
    return Complete(process, t, time, index, value);
  }

  History Finish() {
    // An invocation that never completed may or may not have taken effect: an info.
    for (auto& [process, txn] : pending_) h_.txns_[txn].type = TxnType::kInfo;
    return std::move(h_);
  }

 private:
  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) {
    return InvalidArgument(
        fmt::format("{}:{}: {}", h_.source_, line_, fmt::format(f, std::forward<Args>(args)...)));
  }

  // Reads a JSON integer as 64 raw bits. Negative values and values above INT64_MAX cannot
  // share one history because both would need the same bits.
  Status Integer(const json& j, std::string_view what, size_t mop, uint64_t* out) {
    if (!j.is_number_integer()) return Error("micro-op {}: {} must be an integer", mop + 1, what);
    if (j.is_number_unsigned()) {
      *out = j.get<uint64_t>();
      if (*out > static_cast<uint64_t>(INT64_MAX)) saw_big_ = true;
    } else {
      int64_t v = j.get<int64_t>();
      *out = static_cast<uint64_t>(v);
      if (v < 0) h_.signed_values_ = true;
    }
    if (saw_big_ && h_.signed_values_) {
      return Error("integers below 0 and above 2^63-1 in one history are not supported");
    }
    return Status::Ok();
  }

  uint32_t InternKey(uint64_t key) {
    auto [id, inserted] = keys_.Insert(key, static_cast<uint32_t>(h_.key_values_.size()));
    if (inserted) h_.key_values_.push_back(key);
    return *id;
  }

  // Checks the shape of micro-op i ([f, key, value]) and returns its f, key and value.
  Status MopShape(const json& m, size_t i, bool* is_append, uint64_t* key, const json** v) {
    if (!m.is_array() || m.size() != 3) {
      return Error("micro-op {}: must be [f, key, value]", i + 1);
    }
    std::string_view f = Keyword(m[0]);
    if (f == "append") {
      *is_append = true;
    } else if (f == "r") {
      *is_append = false;
    } else {
      return Error("micro-op {}: f must be \"append\" or \"r\"", i + 1);
    }
    POND_RETURN_IF_ERROR(Integer(m[1], "key", i, key));
    *v = &m[2];
    return Status::Ok();
  }

  Status Invoke(int64_t process, int64_t time, uint64_t index, const json* value) {
    if (pending_.count(process)) {
      return Error("process {} invokes again before its transaction on line {} completed", process,
                   h_.txns_[pending_[process]].invoke_line);
    }
    if (value == nullptr || !value->is_array()) {
      return Error("an invocation's \"value\" must list its micro-ops");
    }
    if (value->size() > kMopsPerTxnMax) {
      return Error("more than {} micro-ops in one transaction", kMopsPerTxnMax);
    }
    if (h_.txns_.size() >= kTxnCountMax) return Error("more than {} transactions", kTxnCountMax);
    uint32_t txn_index = static_cast<uint32_t>(h_.txns_.size());
    Txn txn;
    txn.first_mop = h_.mops_.size();
    txn.mop_count = static_cast<uint32_t>(value->size());
    txn.process = process;
    txn.invoke_ns = time;
    txn.id = index;
    txn.invoke_line = line_;
    for (size_t i = 0; i < value->size(); i++) {
      bool is_append;
      uint64_t key;
      const json* v;
      POND_RETURN_IF_ERROR(MopShape((*value)[i], i, &is_append, &key, &v));
      Mop m{};
      m.key = InternKey(key);
      m.is_append = is_append;
      if (is_append) {
        POND_RETURN_IF_ERROR(Integer(*v, "element", i, &m.value));
        auto [ref, inserted] = h_.appenders_.Insert(ElementKey{m.value, m.key},
                                                    AppendRef{txn_index, static_cast<uint32_t>(i)});
        if (!inserted) {
          return Error("element {} appended to key {} again (first on line {})",
                       h_.FormatValue(m.value), h_.FormatValue(key),
                       h_.txns_.size() > ref->txn ? h_.txns_[ref->txn].invoke_line : line_);
        }
      }
      // An invocation's read results are unknown until its completion.
      h_.mops_.push_back(m);
    }
    h_.txns_.push_back(txn);
    pending_[process] = txn_index;
    return Status::Ok();
  }

  Status Complete(int64_t process, TxnType type, int64_t time, uint64_t index, const json* value) {
    auto it = pending_.find(process);
    if (it == pending_.end()) return Error("process {} completes without an invocation", process);
    Txn& txn = h_.txns_[it->second];
    pending_.erase(it);
    txn.type = type;
    txn.complete_ns = time;
    txn.complete_line = line_;
    txn.id = index;
    if (value == nullptr || value->is_null()) {
      if (type == TxnType::kOk) return Error("an ok completion must carry its read results");
      return Status::Ok();  // fail/info without a value: the invocation's micro-ops stand
    }
    if (value->size() != txn.mop_count) {
      return Error("completion has {} micro-ops but its invocation on line {} has {}",
                   value->size(), txn.invoke_line, txn.mop_count);
    }
    for (size_t i = 0; i < value->size(); i++) {
      bool is_append;
      uint64_t key;
      const json* v;
      POND_RETURN_IF_ERROR(MopShape((*value)[i], i, &is_append, &key, &v));
      Mop& m = h_.mops_[txn.first_mop + i];
      const uint32_t* key_id = keys_.Find(key);
      if (is_append != static_cast<bool>(m.is_append) || key_id == nullptr || *key_id != m.key) {
        return Error("micro-op {}: differs from its invocation on line {}", i + 1, txn.invoke_line);
      }
      if (is_append) {
        uint64_t element;
        POND_RETURN_IF_ERROR(Integer(*v, "element", i, &element));
        if (element != m.value) {
          return Error("micro-op {}: differs from its invocation on line {}", i + 1,
                       txn.invoke_line);
        }
        continue;
      }
      if (v->is_null()) {
        if (type == TxnType::kOk) return Error("micro-op {}: an ok read needs a result", i + 1);
        continue;
      }
      if (!v->is_array()) return Error("micro-op {}: a read result must be a list", i + 1);
      if (v->size() > kReadLengthMax) {
        return Error("micro-op {}: read of more than {} elements", i + 1, kReadLengthMax);
      }
      m.value = h_.read_pool_.size();
      m.read_length = static_cast<uint32_t>(v->size());
      m.read_known = 1;
      for (const json& e : *v) {
        uint64_t element;
        POND_RETURN_IF_ERROR(Integer(e, "read element", i, &element));
        h_.read_pool_.push_back(element);
      }
    }
    return Status::Ok();
  }

  History h_;
  uint64_t line_ = 0;
  bool saw_big_ = false;
  FlatMap<uint64_t, uint32_t, U64Hash> keys_;
  std::unordered_map<int64_t, uint32_t> pending_;  // process -> its open transaction
};

Result<History> ParseHistory(std::istream& in, std::string_view source) {
  HistoryParser parser(source);
  std::string line;
  try {
    while (std::getline(in, line)) POND_RETURN_IF_ERROR(parser.ParseLine(line));
  } catch (const std::exception& e) {
    // The parser checks types before reading values; this only catches what slips through
    // (e.g. allocation failure) so that no exception crosses the library boundary.
    return InvalidArgument(fmt::format("{}: {}", source, e.what()));
  }
  if (in.bad()) return InvalidArgument(fmt::format("{}: read error", source));
  return parser.Finish();
}

Result<History> ReadHistoryFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(fmt::format("{}: cannot open", path));
  return ParseHistory(in, path);
}

}  // namespace pond::check
