// History: a list-append transaction history in Elle's format, parsed into compact arrays.
//
// The format (docs/checker.md has the full grammar) is one JSON object per line:
//   {"type":"invoke","process":3,"time":1200,"index":7,"f":"txn",
//    "value":[["append",5,12],["r",6,null]]}
//   {"type":"ok","process":3,"time":1900,"index":9,"f":"txn",
//    "value":[["append",5,12],["r",6,[1,4,12]]]}
// Each invocation is completed by the next ok/fail/info line of the same process; an
// invocation never completed is an info. Keys and elements are JSON integers; every
// (key, element) is appended at most once in the whole history.
//
// A History is immutable once parsed and may be read from many threads. Parsing is
// single-threaded. Everything the checker needs is indexed here once: keys are interned to
// dense ids, and every appended element maps to the transaction that appended it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pond/base/hash.h"
#include "pond/check/flat_map.h"
#include "pond/status.h"

namespace pond::check {

// Limits on one history. A larger history is rejected as malformed rather than half-checked.
inline constexpr uint32_t kMopsPerTxnMax = 4096;
inline constexpr uint32_t kReadLengthMax = (1u << 28) - 1;
// Transactions plus real-time barriers (at most one per transaction) must fit 30-bit node ids.
inline constexpr uint32_t kTxnCountMax = (1u << 29) - 1;
inline constexpr size_t kLineBytesMax = 64u << 20;

enum class TxnType : uint8_t {
  kOk,    // committed
  kFail,  // known not to have committed: its appends never happened
  kInfo,  // outcome unknown (or never completed): its appends may or may not have happened
};

enum class MopKind : uint8_t { kRead, kAppend };

// One micro-operation. 16 bytes: a million four-op transactions cost 64 MB here.
struct Mop {
  uint64_t value;  // append: the element; read: offset of its elements in the read pool
  uint32_t key;    // interned key id
  uint32_t read_length : 29;
  uint32_t is_append : 1;
  uint32_t read_known : 1;  // a read whose result is in the history (not null)
  uint32_t unused : 1;

  MopKind kind() const { return is_append ? MopKind::kAppend : MopKind::kRead; }
};
static_assert(sizeof(Mop) == 16);

struct Txn {
  uint64_t first_mop = 0;
  uint32_t mop_count = 0;
  TxnType type = TxnType::kInfo;
  int64_t process = 0;
  int64_t invoke_ns = 0;
  int64_t complete_ns = std::numeric_limits<int64_t>::max();  // max: never completed
  uint64_t id = 0;             // the completion's "index" (the invocation's if none), as Elle
  uint64_t invoke_line = 0;    // 1-based line numbers in the input, for messages
  uint64_t complete_line = 0;  // 0: never completed
};

// Where an element was appended: transaction number and micro-op position within it.
struct AppendRef {
  uint32_t txn;
  uint32_t mop;
};

struct ElementKey {
  uint64_t element;
  uint32_t key;
  bool operator==(const ElementKey&) const = default;
};
struct ElementKeyHash {
  uint64_t operator()(const ElementKey& k) const { return Mix64(k.element ^ Mix64(k.key + 1)); }
};
struct U64Hash {
  uint64_t operator()(uint64_t x) const { return Mix64(x); }
};

class History {
 public:
  const std::vector<Txn>& txns() const { return txns_; }
  std::span<const Mop> mops(const Txn& t) const {
    return {mops_.data() + t.first_mop, t.mop_count};
  }
  uint64_t MopIndex(const Txn& t, uint32_t i) const { return t.first_mop + i; }
  const Mop& mop(uint64_t index) const { return mops_[index]; }
  std::span<const uint64_t> read(const Mop& m) const {
    return {read_pool_.data() + m.value, m.read_length};
  }
  uint32_t key_count() const { return static_cast<uint32_t>(key_values_.size()); }
  uint64_t key_value(uint32_t key) const { return key_values_[key]; }
  // The transaction that appended element to key, in any outcome; nullptr if none did.
  const AppendRef* Appender(uint32_t key, uint64_t element) const {
    return appenders_.Find(ElementKey{element, key});
  }
  // A key or element as it was written in the input (values are stored as 64 raw bits).
  std::string FormatValue(uint64_t bits) const;
  const std::string& source() const { return source_; }

 private:
  friend class HistoryParser;

  std::string source_;
  std::vector<Txn> txns_;
  std::vector<Mop> mops_;
  std::vector<uint64_t> read_pool_;
  std::vector<uint64_t> key_values_;
  FlatMap<ElementKey, AppendRef, ElementKeyHash> appenders_;
  bool signed_values_ = false;  // some value was negative: print values as int64
};

// Parses a history. `source` names the input in error messages, which read
// "<source>:<line>: <what is wrong>" and fit on one line.
Result<History> ParseHistory(std::istream& in, std::string_view source);
Result<History> ReadHistoryFile(const std::string& path);

}  // namespace pond::check
