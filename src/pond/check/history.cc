#include "pond/check/history.h"

#include <fmt/format.h>

#include <fstream>
#include <istream>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace pond::check {

namespace {

using nlohmann::json;

// What a JSON value was, as far as the checker cares.
enum class Tok : uint8_t {
  kAbsent,
  kNull,
  kBool,
  kNegative,
  kUnsigned,
  kFloat,
  kString,
  kArray,
  kObject
};

struct Scalar {
  Tok tok = Tok::kAbsent;
  uint64_t bits = 0;  // kNegative: the int64's bits; kUnsigned: the value
  std::string str;    // kString
};

struct LineMop {
  Tok shape = Tok::kArray;  // what the micro-op itself was (it must be an array)
  uint32_t arity = 0;
  Scalar f, key, value;  // value.tok == kArray: the list is elements[list_begin, +list_len)
  size_t list_begin = 0, list_len = 0;
  Tok bad_element = Tok::kAbsent;  // the first list element that was not an integer
  bool list_negative = false, list_big = false;
};

// One line, reduced to the fields the history needs. Reused across lines.
struct LineData {
  bool top_is_object = false;
  Scalar type, process, time, index, f;
  Tok value = Tok::kAbsent;
  std::vector<LineMop> mops;
  size_t mop_count = 0;  // mops[0, mop_count) are this line's; the rest are spare capacity
  std::vector<uint64_t> elements;

  void Reset() {
    top_is_object = false;
    type.tok = process.tok = time.tok = index.tok = f.tok = Tok::kAbsent;
    value = Tok::kAbsent;
    mop_count = 0;
    elements.clear();
  }
  LineMop& NewMop() {
    if (mop_count == mops.size()) mops.emplace_back();
    LineMop& m = mops[mop_count++];
    m = LineMop{};
    return m;
  }
};

// A SAX handler for nlohmann's parser: the same lexer as json::parse but no document tree, so
// a line costs no allocation once the buffers have grown. It never judges; it records what it
// saw for HistoryParser to check.
class LineReader {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit LineReader(LineData* d) : d_(d) {}
  void Reset() {
    d_->Reset();
    roles_.clear();
    key_ = Field::kOther;
  }

  bool null() { return Scalar(Tok::kNull, 0, nullptr); }
  bool boolean(bool) { return Scalar(Tok::kBool, 0, nullptr); }
  bool number_integer(number_integer_t v) {
    return v < 0 ? Scalar(Tok::kNegative, static_cast<uint64_t>(v), nullptr)
                 : Scalar(Tok::kUnsigned, static_cast<uint64_t>(v), nullptr);
  }
  bool number_unsigned(number_unsigned_t v) { return Scalar(Tok::kUnsigned, v, nullptr); }
  bool number_float(number_float_t, const string_t&) { return Scalar(Tok::kFloat, 0, nullptr); }
  bool string(string_t& s) { return Scalar(Tok::kString, 0, &s); }
  bool binary(binary_t&) { return Scalar(Tok::kObject, 0, nullptr); }
  bool start_object(std::size_t) { return Open(Tok::kObject); }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(Tok::kArray); }
  bool end_array() { return Close(); }
  bool key(string_t& k) {
    if (roles_.size() == 1 && roles_.back() == Role::kTop) {
      key_ = k == "type"      ? Field::kType
             : k == "process" ? Field::kProcess
             : k == "time"    ? Field::kTime
             : k == "index"   ? Field::kIndex
             : k == "f"       ? Field::kF
             : k == "value"   ? Field::kValue
                              : Field::kOther;
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    error_position_ = position;
    return false;
  }
  size_t error_position() const { return error_position_; }

 private:
  // What the container being filled is.
  enum class Role : uint8_t { kTop, kValue, kMop, kList, kSkip };
  enum class Field : uint8_t { kType, kProcess, kTime, kIndex, kF, kValue, kOther };

  ::pond::check::Scalar* TopField() {
    switch (key_) {
      case Field::kType:
        return &d_->type;
      case Field::kProcess:
        return &d_->process;
      case Field::kTime:
        return &d_->time;
      case Field::kIndex:
        return &d_->index;
      case Field::kF:
        return &d_->f;
      default:
        return nullptr;
    }
  }

  // The micro-op slot the next value of a micro-op fills (its position is its arity so far).
  ::pond::check::Scalar* MopSlot() {
    LineMop& m = d_->mops[d_->mop_count - 1];
    uint32_t pos = m.arity++;
    return pos == 0 ? &m.f : pos == 1 ? &m.key : pos == 2 ? &m.value : nullptr;
  }

  bool Scalar(Tok tok, uint64_t bits, string_t* s) {
    auto set = [&](::pond::check::Scalar* x) {
      if (x == nullptr) return;
      x->tok = tok;
      x->bits = bits;
      if (s != nullptr) x->str.assign(*s);
    };
    if (roles_.empty()) return true;  // a top-level scalar: top_is_object stays false
    switch (roles_.back()) {
      case Role::kTop:
        if (key_ == Field::kValue) {
          d_->value = tok;
        } else {
          set(TopField());
        }
        break;
      case Role::kValue:
        d_->NewMop().shape = tok;
        break;
      case Role::kMop:
        set(MopSlot());
        break;
      case Role::kList: {
        LineMop& m = d_->mops[d_->mop_count - 1];
        if (tok == Tok::kNegative || tok == Tok::kUnsigned) {
          d_->elements.push_back(bits);
          m.list_negative |= tok == Tok::kNegative;
          m.list_big |= tok == Tok::kUnsigned && bits > static_cast<uint64_t>(INT64_MAX);
        } else if (m.bad_element == Tok::kAbsent) {
          m.bad_element = tok;
        }
        break;
      }
      case Role::kSkip:
        break;
    }
    return true;
  }

  bool Open(Tok tok) {
    Role role = Role::kSkip;
    if (roles_.empty()) {
      if (tok == Tok::kObject) {
        d_->top_is_object = true;
        role = Role::kTop;
      }
    } else {
      switch (roles_.back()) {
        case Role::kTop:
          if (key_ == Field::kValue) {
            d_->value = tok;
            if (tok == Tok::kArray) role = Role::kValue;
          } else if (auto* x = TopField()) {
            x->tok = tok;
          }
          break;
        case Role::kValue: {
          LineMop& m = d_->NewMop();
          m.shape = tok;
          if (tok == Tok::kArray) role = Role::kMop;
          break;
        }
        case Role::kMop: {
          LineMop& m = d_->mops[d_->mop_count - 1];
          bool is_list = m.arity == 2 && tok == Tok::kArray;
          if (auto* x = MopSlot()) x->tok = tok;
          if (is_list) {
            m.list_begin = d_->elements.size();
            role = Role::kList;
          }
          break;
        }
        case Role::kList: {
          LineMop& m = d_->mops[d_->mop_count - 1];
          if (m.bad_element == Tok::kAbsent) m.bad_element = tok;
          break;
        }
        case Role::kSkip:
          break;
      }
    }
    roles_.push_back(role);
    return true;
  }

  bool Close() {
    if (roles_.back() == Role::kList) {
      LineMop& m = d_->mops[d_->mop_count - 1];
      m.list_len = d_->elements.size() - m.list_begin;
    }
    roles_.pop_back();
    return true;
  }

  LineData* d_;
  size_t error_position_ = 0;  // 1-based byte of the last syntax error
  std::vector<Role> roles_;
  Field key_ = Field::kOther;
};

// Jepsen writes keywords either bare ("ok") or with their colon (":ok"); accept both.
std::string_view Keyword(const Scalar& s) {
  if (s.tok != Tok::kString) return {};
  std::string_view v(s.str);
  if (!v.empty() && v.front() == ':') v.remove_prefix(1);
  return v;
}

bool IsInteger(const Scalar& s) { return s.tok == Tok::kNegative || s.tok == Tok::kUnsigned; }
bool FitsInt64(const Scalar& s) {
  return s.tok == Tok::kNegative ||
         (s.tok == Tok::kUnsigned && s.bits <= static_cast<uint64_t>(INT64_MAX));
}

}  // namespace

std::string History::FormatValue(uint64_t bits) const {
  if (signed_values_) return fmt::format("{}", static_cast<int64_t>(bits));
  return fmt::format("{}", bits);
}

// Builds a History line by line. Every check that can fail returns a Status naming the line;
// no exception is thrown here (nlohmann's SAX parser reports errors through the handler).
class HistoryParser {
 public:
  explicit HistoryParser(std::string_view source) : reader_(&line_data_) {
    h_.source_ = std::string(source);
  }

  Status ParseLine(std::string_view line) {
    line_++;
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return Status::Ok();  // blank lines are allowed
    if (line.size() > kLineBytesMax) return Error("line longer than {} bytes", kLineBytesMax);
    reader_.Reset();
    if (!json::sax_parse(line.begin(), line.end(), &reader_)) {
      return Error("not valid JSON (at byte {})", reader_.error_position());
    }
    const LineData& d = line_data_;
    if (!d.top_is_object) return Error("not a JSON object");

    if (d.process.tok == Tok::kAbsent) return Error("\"process\" is missing");
    // Jepsen's nemesis shares the history but is no client; its operations are not txns.
    if (Keyword(d.process) == "nemesis") return Status::Ok();
    if (!FitsInt64(d.process)) return Error("\"process\" must be an integer");
    int64_t process = static_cast<int64_t>(d.process.bits);

    if (d.type.tok == Tok::kAbsent) return Error("\"type\" is missing");
    std::string_view type = Keyword(d.type);
    if (Keyword(d.f) != "txn") return Error("\"f\" must be \"txn\"");
    if (!FitsInt64(d.time)) return Error("\"time\" must be an integer (nanoseconds)");
    int64_t time = static_cast<int64_t>(d.time.bits);
    uint64_t index = line_ - 1;
    if (d.index.tok != Tok::kAbsent) {
      if (d.index.tok != Tok::kUnsigned) return Error("\"index\" must be a non-negative integer");
      index = d.index.bits;
    }
    if (d.value != Tok::kAbsent && d.value != Tok::kNull && d.value != Tok::kArray) {
      return Error("\"value\" must be a list of micro-ops or null");
    }
    if (type == "invoke") return Invoke(process, time, index);
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
    return Complete(process, t, time, index);
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

  // Negative values and values above INT64_MAX cannot share one history because both would
  // need the same 64 bits.
  Status NoteSigns(bool negative, bool big) {
    h_.signed_values_ |= negative;
    saw_big_ |= big;
    if (saw_big_ && h_.signed_values_) {
      return Error("integers below 0 and above 2^63-1 in one history are not supported");
    }
    return Status::Ok();
  }

  Status Integer(const Scalar& s, std::string_view what, size_t mop, uint64_t* out) {
    if (!IsInteger(s)) return Error("micro-op {}: {} must be an integer", mop + 1, what);
    *out = s.bits;
    return NoteSigns(s.tok == Tok::kNegative,
                     s.tok == Tok::kUnsigned && s.bits > static_cast<uint64_t>(INT64_MAX));
  }

  uint32_t InternKey(uint64_t key) {
    auto [id, inserted] = keys_.Insert(key, static_cast<uint32_t>(h_.key_values_.size()));
    if (inserted) h_.key_values_.push_back(key);
    return *id;
  }

  // Checks the shape of micro-op i ([f, key, value]) and returns whether it appends, and its key.
  Status MopShape(const LineMop& m, size_t i, bool* is_append, uint64_t* key) {
    if (m.shape != Tok::kArray || m.arity != 3) {
      return Error("micro-op {}: must be [f, key, value]", i + 1);
    }
    std::string_view f = Keyword(m.f);
    if (f == "append") {
      *is_append = true;
    } else if (f == "r") {
      *is_append = false;
    } else {
      return Error("micro-op {}: f must be \"append\" or \"r\"", i + 1);
    }
    return Integer(m.key, "key", i, key);
  }

  Status Invoke(int64_t process, int64_t time, uint64_t index) {
    const LineData& d = line_data_;
    if (auto it = pending_.find(process); it != pending_.end()) {
      return Error("process {} invokes again before its transaction on line {} completed", process,
                   h_.txns_[it->second].invoke_line);
    }
    if (d.value != Tok::kArray) return Error("an invocation's \"value\" must list its micro-ops");
    if (d.mop_count > kMopsPerTxnMax) {
      return Error("more than {} micro-ops in one transaction", kMopsPerTxnMax);
    }
    if (h_.txns_.size() >= kTxnCountMax) return Error("more than {} transactions", kTxnCountMax);
    uint32_t txn_index = static_cast<uint32_t>(h_.txns_.size());
    Txn txn;
    txn.first_mop = h_.mops_.size();
    txn.mop_count = static_cast<uint32_t>(d.mop_count);
    txn.process = process;
    txn.invoke_ns = time;
    txn.id = index;
    txn.invoke_line = line_;
    for (size_t i = 0; i < d.mop_count; i++) {
      const LineMop& lm = d.mops[i];
      bool is_append;
      uint64_t key;
      POND_RETURN_IF_ERROR(MopShape(lm, i, &is_append, &key));
      Mop m{};
      m.key = InternKey(key);
      m.is_append = is_append;
      if (is_append) {
        POND_RETURN_IF_ERROR(Integer(lm.value, "element", i, &m.value));
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

  Status Complete(int64_t process, TxnType type, int64_t time, uint64_t index) {
    const LineData& d = line_data_;
    auto it = pending_.find(process);
    if (it == pending_.end()) return Error("process {} completes without an invocation", process);
    Txn& txn = h_.txns_[it->second];
    pending_.erase(it);
    // Real-time edges assume it; a completion before its own invocation would order the
    // transaction before itself.
    if (time < txn.invoke_ns) {
      return Error("completion time {} is before its invocation's time {} (line {})", time,
                   txn.invoke_ns, txn.invoke_line);
    }
    txn.type = type;
    txn.complete_ns = time;
    txn.complete_line = line_;
    txn.id = index;
    if (d.value != Tok::kArray) {
      if (type == TxnType::kOk) return Error("an ok completion must carry its read results");
      return Status::Ok();  // fail/info without a value: the invocation's micro-ops stand
    }
    if (d.mop_count != txn.mop_count) {
      return Error("completion has {} micro-ops but its invocation on line {} has {}", d.mop_count,
                   txn.invoke_line, txn.mop_count);
    }
    for (size_t i = 0; i < d.mop_count; i++) {
      const LineMop& lm = d.mops[i];
      bool is_append;
      uint64_t key;
      POND_RETURN_IF_ERROR(MopShape(lm, i, &is_append, &key));
      Mop& m = h_.mops_[txn.first_mop + i];
      const uint32_t* key_id = keys_.Find(key);
      if (is_append != static_cast<bool>(m.is_append) || key_id == nullptr || *key_id != m.key) {
        return Error("micro-op {}: differs from its invocation on line {}", i + 1, txn.invoke_line);
      }
      if (is_append) {
        uint64_t element;
        POND_RETURN_IF_ERROR(Integer(lm.value, "element", i, &element));
        if (element != m.value) {
          return Error("micro-op {}: differs from its invocation on line {}", i + 1,
                       txn.invoke_line);
        }
        continue;
      }
      if (lm.value.tok == Tok::kNull) {
        if (type == TxnType::kOk) return Error("micro-op {}: an ok read needs a result", i + 1);
        continue;
      }
      if (lm.value.tok != Tok::kArray) {
        return Error("micro-op {}: a read result must be a list", i + 1);
      }
      if (lm.bad_element != Tok::kAbsent) {
        return Error("micro-op {}: read element must be an integer", i + 1);
      }
      if (lm.list_len > kReadLengthMax) {
        return Error("micro-op {}: read of more than {} elements", i + 1, kReadLengthMax);
      }
      POND_RETURN_IF_ERROR(NoteSigns(lm.list_negative, lm.list_big));
      m.value = h_.read_pool_.size();
      m.read_length = static_cast<uint32_t>(lm.list_len);
      m.read_known = 1;
      h_.read_pool_.insert(h_.read_pool_.end(), d.elements.begin() + lm.list_begin,
                           d.elements.begin() + lm.list_begin + lm.list_len);
    }
    return Status::Ok();
  }

  History h_;
  LineData line_data_;
  LineReader reader_;
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
    // Nothing here throws by design; this only catches what slips through (e.g. allocation
    // failure) so that no exception crosses the library boundary.
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
