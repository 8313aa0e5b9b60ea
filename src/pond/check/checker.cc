#include "pond/check/checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "pond/base/assert.h"
#include "pond/base/hash.h"
#include "pond/check/graph_search.h"

namespace pond::check {

Result<Model> ParseModel(std::string_view name) {
  if (name == "serializable") return Model::kSerializable;
  if (name == "snapshot-isolation") return Model::kSnapshotIsolation;
  if (name == "strict-serializable") return Model::kStrictSerializable;
  return InvalidArgument(fmt::format(
      "unknown model \"{}\" (serializable, snapshot-isolation, strict-serializable)", name));
}

std::string_view ModelName(Model model) {
  switch (model) {
    case Model::kSerializable:
      return "serializable";
    case Model::kSnapshotIsolation:
      return "snapshot-isolation";
    case Model::kStrictSerializable:
      return "strict-serializable";
  }
  return "?";
}

std::string_view AnomalyName(Anomaly a) {
  switch (a) {
    case Anomaly::kG0:
      return "G0";
    case Anomaly::kG1c:
      return "G1c";
    case Anomaly::kGSingle:
      return "G-single";
    case Anomaly::kGNonadjacent:
      return "G-nonadjacent";
    case Anomaly::kG2Item:
      return "G2-item";
    case Anomaly::kG0Realtime:
      return "G0-realtime";
    case Anomaly::kG1cRealtime:
      return "G1c-realtime";
    case Anomaly::kGSingleRealtime:
      return "G-single-realtime";
    case Anomaly::kGNonadjacentRealtime:
      return "G-nonadjacent-realtime";
    case Anomaly::kG2ItemRealtime:
      return "G2-item-realtime";
    case Anomaly::kG1a:
      return "G1a";
    case Anomaly::kG1b:
      return "G1b";
    case Anomaly::kInternal:
      return "internal";
    case Anomaly::kLostUpdate:
      return "lost-update";
    case Anomaly::kIncompatibleOrder:
      return "incompatible-order";
    case Anomaly::kDuplicateElements:
      return "duplicate-elements";
    case Anomaly::kGarbageRead:
      return "garbage-read";
    case Anomaly::kCount:
      break;
  }
  return "?";
}

bool Forbids(Model model, Anomaly a) {
  switch (a) {
    // Snapshot isolation admits exactly the cycles with two adjacent rw edges (write skew);
    // Elle calls those G2-item and lets SI have them.
    case Anomaly::kG2Item:
      return model != Model::kSnapshotIsolation;
    case Anomaly::kG0Realtime:
    case Anomaly::kG1cRealtime:
    case Anomaly::kGSingleRealtime:
    case Anomaly::kGNonadjacentRealtime:
    case Anomaly::kG2ItemRealtime:
      return model == Model::kStrictSerializable;
    default:
      return true;
  }
}

namespace {

constexpr uint32_t kNone32 = ~0u;
constexpr uint64_t kNone64 = ~uint64_t{0};
constexpr size_t kListElementsShownMax = 10;
constexpr size_t kMopsShownMax = 12;
// How many rw edges of one component to try as the start of a G-single before settling for
// any cycle without adjacent rw edges; bounds the search at kGSingleTriesMax BFS per component.
constexpr size_t kGSingleTriesMax = 8;

enum MopFlag : uint8_t {
  kIntermediate = 1,  // an append followed by another append to the same key in its txn
  kPrefix = 2,        // a read that is a prefix of its key's longest read
};

std::string_view EdgeName(EdgeKind k) {
  switch (k) {
    case EdgeKind::kWw:
      return "ww";
    case EdgeKind::kWr:
      return "wr";
    case EdgeKind::kRw:
      return "rw";
    case EdgeKind::kRealtime:
      return "realtime";
  }
  return "?";
}

std::string_view TypeName(TxnType t) {
  switch (t) {
    case TxnType::kOk:
      return "ok";
    case TxnType::kFail:
      return "fail";
    case TxnType::kInfo:
      return "info";
  }
  return "?";
}

std::string FormatList(const History& h, std::span<const uint64_t> list) {
  std::string s = "[";
  auto put = [&](size_t i) {
    if (s.size() > 1) s += ' ';
    s += h.FormatValue(list[i]);
  };
  if (list.size() <= kListElementsShownMax) {
    for (size_t i = 0; i < list.size(); i++) put(i);
  } else {
    for (size_t i = 0; i < kListElementsShownMax / 2; i++) put(i);
    s += fmt::format(" ...({} more)...", list.size() - kListElementsShownMax);
    for (size_t i = list.size() - kListElementsShownMax / 2; i < list.size(); i++) put(i);
  }
  return s + "]";
}

std::string TxnName(const History& h, uint32_t t) { return fmt::format("T{}", h.txns()[t].id); }

// Which realtime-free anomaly a cycle with these edges is, following Elle's classification:
// one rw edge is G-single; several, none adjacent, G-nonadjacent; several with two adjacent,
// G2-item; no rw but a wr, G1c; only ww, G0. Any real-time edge makes it the -realtime kind.
Anomaly Classify(const std::vector<CycleStep>& steps) {
  size_t rw = 0, wr = 0;
  bool realtime = false, adjacent_rw = false;
  for (size_t i = 0; i < steps.size(); i++) {
    EdgeKind k = steps[i].kind;
    rw += k == EdgeKind::kRw;
    wr += k == EdgeKind::kWr;
    realtime |= k == EdgeKind::kRealtime;
    if (k == EdgeKind::kRw && steps[(i + 1) % steps.size()].kind == EdgeKind::kRw) {
      adjacent_rw = true;
    }
  }
  Anomaly a = rw == 1  ? Anomaly::kGSingle
              : rw > 1 ? (adjacent_rw ? Anomaly::kG2Item : Anomaly::kGNonadjacent)
              : wr > 0 ? Anomaly::kG1c
                       : Anomaly::kG0;
  if (!realtime) return a;
  switch (a) {
    case Anomaly::kG0:
      return Anomaly::kG0Realtime;
    case Anomaly::kG1c:
      return Anomaly::kG1cRealtime;
    case Anomaly::kGSingle:
      return Anomaly::kGSingleRealtime;
    case Anomaly::kGNonadjacent:
      return Anomaly::kGNonadjacentRealtime;
    default:
      return Anomaly::kG2ItemRealtime;
  }
}

// One run of the checker over one history. The passes, in order:
//   1. version orders: each key's longest read, its distinct elements and their appenders;
//   2. reads: prefix check (incompatible-order), duplicates, garbage, G1a, what was observed;
//   3. which transactions are graph nodes (ok, or info with an observed append);
//   4. per transaction: intermediate appends, internal consistency, lost-update candidates,
//      G1b;
//   5. edges (ww, wr, rw, and real-time barriers for strict-serializable) into a CSR graph;
//   6. cycles: SCCs of the whole graph first (a valid history stops here), then of filtered
//      views to name each cycle and find a short example of it.
class Analysis {
 public:
  Analysis(const History& h, const CheckerOptions& o) : h_(h), o_(o) {
    r_.model = o.model;
    examples_max_ = std::min(o.examples_per_anomaly_max, kExamplesPerAnomalyLimit);
  }

  CheckResult Run() {
    const auto& txns = h_.txns();
    for (const Txn& t : txns) {
      r_.ok_count += t.type == TxnType::kOk;
      r_.fail_count += t.type == TxnType::kFail;
      r_.info_count += t.type == TxnType::kInfo;
    }
    r_.txn_count = txns.size();
    r_.key_count = h_.key_count();
    mop_flags_.assign(TotalMops(), 0);
    BuildOrders();
    CheckReads();
    in_graph_.assign(txns.size(), 0);
    for (uint32_t t = 0; t < txns.size(); t++) {
      in_graph_[t] =
          txns[t].type == TxnType::kOk || (txns[t].type == TxnType::kInfo && observed_[t]);
      r_.graph_txn_count += in_graph_[t];
    }
    ScanTxns();
    BuildGraph();
    FindCycles();
    r_.valid = true;
    for (size_t a = 0; a < kAnomalyCount; a++) {
      if (r_.anomalies[a].count > 0 && Forbids(o_.model, static_cast<Anomaly>(a))) {
        r_.valid = false;
      }
    }
    return std::move(r_);
  }

 private:
  uint64_t TotalMops() const {
    const auto& txns = h_.txns();
    return txns.empty() ? 0 : txns.back().first_mop + txns.back().mop_count;
  }
  std::span<const uint64_t> Order(uint32_t k) const {
    return {order_.data() + order_begin_[k], order_begin_[k + 1] - order_begin_[k]};
  }
  uint32_t OrderWriter(uint32_t k, uint64_t pos) const {
    return order_writer_[order_begin_[k] + pos];
  }
  bool Graph(uint32_t t) const { return t != kNone32 && in_graph_[t]; }

  // Counts one anomaly; returns the example to fill in, or nullptr when enough are kept.
  AnomalyExample* Add(Anomaly a) {
    AnomalyReport& rep = r_.anomalies[static_cast<size_t>(a)];
    rep.count++;
    if (rep.examples.size() >= examples_max_) return nullptr;
    return &rep.examples.emplace_back();
  }

  // The read with its trailing elements that the reader itself appended taken off: the
  // external state it observed. Also returns the appender of that state's last element.
  struct External {
    uint32_t length;
    const AppendRef* last;  // appender of element length-1, nullptr if none or length 0
  };
  External ExternalRead(uint32_t reader, const Mop& m) const {
    auto list = h_.read(m);
    uint32_t n = static_cast<uint32_t>(list.size());
    while (n > 0) {
      const AppendRef* ref = h_.Appender(m.key, list[n - 1]);
      if (ref == nullptr || ref->txn != reader) return {n, ref};
      n--;
    }
    return {0, nullptr};
  }

  // ---- pass 1: version orders
  void BuildOrders() {
    const uint32_t keys = h_.key_count();
    const auto& txns = h_.txns();
    longest_.assign(keys, kNone64);
    for (const Txn& t : txns) {
      if (t.type == TxnType::kFail) continue;  // a failed txn's reads say nothing of the state
      for (uint32_t j = 0; j < t.mop_count; j++) {
        uint64_t mi = h_.MopIndex(t, j);
        const Mop& m = h_.mop(mi);
        if (m.is_append || !m.read_known) continue;
        uint64_t& l = longest_[m.key];
        if (l == kNone64 || m.read_length > h_.mop(l).read_length) l = mi;
      }
    }
    order_begin_.assign(uint64_t{keys} + 1, 0);
    key_has_dup_.assign(keys, 0);
    first_garbage_.assign(keys, kNone32);
    first_failed_.assign(keys, kNone32);
    observed_.assign(txns.size(), 0);
    for (uint32_t k = 0; k < keys; k++) {
      order_begin_[k] = order_.size();
      if (longest_[k] == kNone64) continue;
      auto list = h_.read(h_.mop(longest_[k]));
      for (uint32_t j = 0; j < list.size(); j++) {
        uint64_t e = list[j];
        auto [pos, inserted] = position_.Insert(
            ElementKey{e, k}, static_cast<uint32_t>(order_.size() - order_begin_[k]));
        if (!inserted) {
          key_has_dup_[k] = 1;
          continue;
        }
        const AppendRef* ref = h_.Appender(k, e);
        uint32_t writer = ref ? ref->txn : kNone32;
        if (ref == nullptr && first_garbage_[k] == kNone32) first_garbage_[k] = j;
        if (ref != nullptr && txns[ref->txn].type == TxnType::kFail &&
            first_failed_[k] == kNone32) {
          first_failed_[k] = j;
        }
        if (ref != nullptr) observed_[ref->txn] = 1;
        order_.push_back(e);
        order_writer_.push_back(writer);
      }
    }
    order_begin_[keys] = order_.size();
  }

  // ---- pass 2: every read against its key's order
  void CheckReads() {
    const auto& txns = h_.txns();
    std::vector<uint8_t> key_reported(h_.key_count(), 0);
    std::vector<uint64_t> sorted;
    for (uint32_t t = 0; t < txns.size(); t++) {
      const Txn& txn = txns[t];
      if (txn.type == TxnType::kFail) continue;
      const bool ok = txn.type == TxnType::kOk;
      for (uint32_t j = 0; j < txn.mop_count; j++) {
        uint64_t mi = h_.MopIndex(txn, j);
        const Mop& m = h_.mop(mi);
        if (m.is_append || !m.read_known) continue;
        const uint32_t k = m.key;
        auto list = h_.read(m);
        auto longest = h_.read(h_.mop(longest_[k]));
        bool prefix = mi == longest_[k] || std::equal(list.begin(), list.end(), longest.begin());
        if (prefix) mop_flags_[mi] |= kPrefix;
        if ((!prefix || key_has_dup_[k]) && list.size() > 1) {
          sorted.assign(list.begin(), list.end());
          std::sort(sorted.begin(), sorted.end());
          auto dup = std::adjacent_find(sorted.begin(), sorted.end());
          if (dup != sorted.end()) {
            if (AnomalyExample* ex = Add(Anomaly::kDuplicateElements)) {
              ex->summary = fmt::format("{} read key {} = {}, which holds {} more than once",
                                        TxnName(h_, t), h_.FormatValue(h_.key_value(k)),
                                        FormatList(h_, list), h_.FormatValue(*dup));
              ex->txns = {t};
            }
          }
        }
        if (!prefix && !key_reported[k]) {
          key_reported[k] = 1;
          uint32_t longest_txn = TxnOfMop(longest_[k]);
          if (AnomalyExample* ex = Add(Anomaly::kIncompatibleOrder)) {
            ex->summary = fmt::format(
                "key {}: {} read {}, which is not a prefix of {}'s read {} (the longest)",
                h_.FormatValue(h_.key_value(k)), TxnName(h_, t), FormatList(h_, list),
                TxnName(h_, longest_txn), FormatList(h_, longest));
            ex->txns = {t, longest_txn};
          }
        }
        uint32_t garbage = kNone32, failed = kNone32;
        if (prefix) {
          if (first_garbage_[k] < list.size()) garbage = first_garbage_[k];
          if (first_failed_[k] < list.size()) failed = first_failed_[k];
        } else {
          for (uint32_t i = 0; i < list.size(); i++) {
            const AppendRef* ref = h_.Appender(k, list[i]);
            if (ref == nullptr) {
              if (garbage == kNone32) garbage = i;
            } else if (txns[ref->txn].type == TxnType::kFail) {
              if (failed == kNone32) failed = i;
            } else {
              observed_[ref->txn] = 1;
            }
          }
        }
        if (garbage != kNone32) {
          if (AnomalyExample* ex = Add(Anomaly::kGarbageRead)) {
            ex->summary = fmt::format("{} read key {} = {}, but no transaction appended {}",
                                      TxnName(h_, t), h_.FormatValue(h_.key_value(k)),
                                      FormatList(h_, list), h_.FormatValue(list[garbage]));
            ex->txns = {t};
          }
        }
        // Elle counts only committed readers: an info reader may itself have aborted.
        if (failed != kNone32 && ok) {
          const AppendRef* ref = h_.Appender(k, list[failed]);
          if (AnomalyExample* ex = Add(Anomaly::kG1a)) {
            ex->summary =
                fmt::format("{} read key {} = {}, which holds {}, appended by {} which failed",
                            TxnName(h_, t), h_.FormatValue(h_.key_value(k)), FormatList(h_, list),
                            h_.FormatValue(list[failed]), TxnName(h_, ref->txn));
            ex->txns = {t, ref->txn};
          }
        }
      }
    }
  }

  uint32_t TxnOfMop(uint64_t mi) const {
    const auto& txns = h_.txns();
    auto it = std::upper_bound(txns.begin(), txns.end(), mi,
                               [](uint64_t v, const Txn& t) { return v < t.first_mop; });
    return static_cast<uint32_t>(it - txns.begin() - 1);
  }

  // ---- pass 4: within each transaction
  struct KeyState {
    uint32_t last_read;    // position of the txn's latest known read of the key
    uint32_t last_append;  // position of its latest append to the key
    uint32_t since;        // appends since last_read (or since the start)
    uint32_t first_read;   // position of a read that came before any append, for lost update
    bool appended;
    bool lost_update_done;
  };

  void ScanTxns() {
    const auto& txns = h_.txns();
    key_stamp_.assign(h_.key_count(), 0);
    key_state_.resize(h_.key_count());
    // Intermediate appends, for every txn: G1b is about any writer, whatever its outcome.
    for (uint32_t t = 0; t < txns.size(); t++) {
      stamp_++;
      for (uint32_t j = txns[t].mop_count; j-- > 0;) {
        uint64_t mi = h_.MopIndex(txns[t], j);
        const Mop& m = h_.mop(mi);
        if (!m.is_append) continue;
        if (key_stamp_[m.key] == stamp_) {
          mop_flags_[mi] |= kIntermediate;
        } else {
          key_stamp_[m.key] = stamp_;
        }
      }
    }
    struct LostUpdateCandidate {
      uint32_t key;
      uint64_t hash;
      uint32_t txn;
      uint64_t read_mop;
    };
    std::vector<LostUpdateCandidate> lost;
    std::vector<uint32_t> prev_append;
    for (uint32_t t = 0; t < txns.size(); t++) {
      const Txn& txn = txns[t];
      if (txn.type != TxnType::kOk) continue;
      stamp_++;
      prev_append.assign(txn.mop_count, kNone32);
      bool internal_reported = false;
      for (uint32_t j = 0; j < txn.mop_count; j++) {
        uint64_t mi = h_.MopIndex(txn, j);
        const Mop& m = h_.mop(mi);
        const uint32_t k = m.key;
        if (key_stamp_[k] != stamp_) {
          key_stamp_[k] = stamp_;
          key_state_[k] = {kNone32, kNone32, 0, kNone32, false, false};
        }
        KeyState& s = key_state_[k];
        if (m.is_append) {
          // A read earlier in this txn that already held this element saw the future.
          if (s.last_read != kNone32 && !internal_reported) {
            auto seen = h_.read(h_.mop(h_.MopIndex(txn, s.last_read)));
            if (std::find(seen.begin(), seen.end(), m.value) != seen.end()) {
              internal_reported = true;
              if (AnomalyExample* ex = Add(Anomaly::kInternal)) {
                ex->summary = fmt::format(
                    "{} read key {} = {} before appending {} to it itself (a future read)",
                    TxnName(h_, t), h_.FormatValue(h_.key_value(k)), FormatList(h_, seen),
                    h_.FormatValue(m.value));
                ex->txns = {t};
              }
            }
          }
          if (s.first_read != kNone32 && !s.lost_update_done) {
            s.lost_update_done = true;
            auto seen = h_.read(h_.mop(h_.MopIndex(txn, s.first_read)));
            lost.push_back(
                {k, HashBytes(seen.data(), seen.size_bytes()), t, h_.MopIndex(txn, s.first_read)});
          }
          prev_append[j] = s.last_append;
          s.last_append = j;
          s.since++;
          s.appended = true;
          continue;
        }
        if (!m.read_known) continue;
        auto list = h_.read(m);
        if (!internal_reported && !ConsistentWithOwn(txn, s, prev_append, list)) {
          internal_reported = true;
          if (AnomalyExample* ex = Add(Anomaly::kInternal)) {
            ex->summary = fmt::format("{} read key {} = {}, but expected {}", TxnName(h_, t),
                                      h_.FormatValue(h_.key_value(k)), FormatList(h_, list),
                                      Expected(txn, s, prev_append));
            ex->txns = {t};
          }
        }
        if (!s.appended && s.first_read == kNone32) s.first_read = j;
        s.last_read = j;
        s.since = 0;
        CheckG1b(t, m);
      }
    }
    // Lost update: two committed txns read the same state of a key, then both appended to it.
    std::sort(lost.begin(), lost.end(), [](const auto& a, const auto& b) {
      return a.key != b.key ? a.key < b.key : a.hash != b.hash ? a.hash < b.hash : a.txn < b.txn;
    });
    for (size_t i = 0; i < lost.size();) {
      size_t j = i + 1;
      auto first = h_.read(h_.mop(lost[i].read_mop));
      while (j < lost.size() && lost[j].key == lost[i].key && lost[j].hash == lost[i].hash) {
        auto other = h_.read(h_.mop(lost[j].read_mop));
        if (!std::equal(first.begin(), first.end(), other.begin(), other.end())) break;
        j++;
      }
      if (j - i >= 2) {
        if (AnomalyExample* ex = Add(Anomaly::kLostUpdate)) {
          std::string names;
          for (size_t x = i; x < j && ex->txns.size() < kListElementsShownMax; x++) {
            ex->txns.push_back(lost[x].txn);
            names += (names.empty() ? "" : ", ") + TxnName(h_, lost[x].txn);
          }
          ex->summary = fmt::format(
              "{} transactions ({}) all read key {} = {} and then appended to it", j - i, names,
              h_.FormatValue(h_.key_value(lost[i].key)), FormatList(h_, first));
        }
      }
      i = j;
    }
  }

  // Whether a read agrees with the txn's own earlier read of the key plus the appends since
  // (or, with no earlier read, ends with the txn's appends so far).
  bool ConsistentWithOwn(const Txn& txn, const KeyState& s, const std::vector<uint32_t>& prev,
                         std::span<const uint64_t> list) const {
    if (s.last_read == kNone32 && s.since == 0) return true;
    if (list.size() < s.since) return false;
    uint32_t j = s.last_append;
    for (uint32_t i = 0; i < s.since; i++, j = prev[j]) {
      if (list[list.size() - 1 - i] != h_.mop(h_.MopIndex(txn, j)).value) return false;
    }
    if (s.last_read == kNone32) return true;
    auto before = h_.read(h_.mop(h_.MopIndex(txn, s.last_read)));
    return list.size() == before.size() + s.since &&
           std::equal(before.begin(), before.end(), list.begin());
  }

  std::string Expected(const Txn& txn, const KeyState& s, const std::vector<uint32_t>& prev) const {
    std::vector<uint64_t> own;
    for (uint32_t i = 0, j = s.last_append; i < s.since; i++, j = prev[j]) {
      own.push_back(h_.mop(h_.MopIndex(txn, j)).value);
    }
    std::reverse(own.begin(), own.end());
    if (s.last_read == kNone32) {
      return fmt::format("a list ending in its own appends {}", FormatList(h_, own));
    }
    auto before = h_.read(h_.mop(h_.MopIndex(txn, s.last_read)));
    std::vector<uint64_t> want(before.begin(), before.end());
    want.insert(want.end(), own.begin(), own.end());
    return fmt::format("{} (its earlier read plus its own appends)", FormatList(h_, want));
  }

  void CheckG1b(uint32_t t, const Mop& m) {
    External ext = ExternalRead(t, m);
    if (ext.length == 0 || ext.last == nullptr) return;
    const Txn& writer = h_.txns()[ext.last->txn];
    if (!(mop_flags_[h_.MopIndex(writer, ext.last->mop)] & kIntermediate)) return;
    AnomalyExample* ex = Add(Anomaly::kG1b);
    if (ex == nullptr) return;
    uint64_t later = 0;
    for (uint32_t j = ext.last->mop + 1; j < writer.mop_count; j++) {
      const Mop& w = h_.mop(h_.MopIndex(writer, j));
      if (w.is_append && w.key == m.key) {
        later = w.value;
        break;
      }
    }
    auto list = h_.read(m);
    ex->summary = fmt::format(
        "{} read key {} = {}, ending in {}'s append of {}, which that transaction followed "
        "with its append of {}",
        TxnName(h_, t), h_.FormatValue(h_.key_value(m.key)), FormatList(h_, list),
        TxnName(h_, ext.last->txn), h_.FormatValue(list[ext.length - 1]), h_.FormatValue(later));
    ex->txns = {t, ext.last->txn};
  }

  // ---- pass 5: the graph
  // Position in its key's order of the element after the external state a read observed, or
  // kNone64 when the read's end is not in the order (then it yields no rw edge).
  uint64_t NextPosition(uint64_t mi, const Mop& m, const External& ext) const {
    if (ext.length == 0) return 0;
    if ((mop_flags_[mi] & kPrefix) && !key_has_dup_[m.key]) return ext.length;
    const uint32_t* p = position_.Find(ElementKey{h_.read(m)[ext.length - 1], m.key});
    return p ? uint64_t{*p} + 1 : kNone64;
  }

  void BuildGraph() {
    const auto& txns = h_.txns();
    const uint32_t n = static_cast<uint32_t>(txns.size());
    const uint32_t keys = h_.key_count();
    std::vector<DependencyGraph::RawEdge> edges;
    edges.reserve(TotalMops() + TotalMops() / 2);
    auto link = [&](uint32_t from, uint32_t to, EdgeKind kind) {
      edges.push_back(DependencyGraph::Edge(from, to, kind));
    };
    // Appends no read saw still follow everything that was read (lists only grow), so they
    // come after the last observed element, unordered among themselves.
    std::vector<std::pair<uint32_t, uint32_t>> unobserved;  // (key, txn)
    for (uint32_t t = 0; t < n; t++) {
      if (!in_graph_[t]) continue;
      for (uint32_t j = 0; j < txns[t].mop_count; j++) {
        const Mop& m = h_.mop(h_.MopIndex(txns[t], j));
        if (!m.is_append || position_.Find(ElementKey{m.value, m.key}) != nullptr) continue;
        unobserved.push_back({m.key, t});
        auto order = Order(m.key);
        if (order.empty()) continue;
        uint32_t last = OrderWriter(m.key, order.size() - 1);
        if (Graph(last) && last != t) link(last, t, EdgeKind::kWw);
      }
    }
    std::sort(unobserved.begin(), unobserved.end());
    unobserved.erase(std::unique(unobserved.begin(), unobserved.end()), unobserved.end());
    unobserved_begin_.assign(uint64_t{keys} + 1, 0);
    for (auto& [k, t] : unobserved) unobserved_begin_[k + 1]++;
    for (uint32_t k = 0; k < keys; k++) unobserved_begin_[k + 1] += unobserved_begin_[k];
    unobserved_txn_.resize(unobserved.size());
    for (size_t i = 0; i < unobserved.size(); i++) unobserved_txn_[i] = unobserved[i].second;
    unobserved = {};
    // ww: consecutive elements of each order.
    for (uint32_t k = 0; k < keys; k++) {
      uint64_t size = order_begin_[k + 1] - order_begin_[k];
      for (uint64_t i = 1; i < size; i++) {
        uint32_t a = OrderWriter(k, i - 1), b = OrderWriter(k, i);
        if (Graph(a) && Graph(b) && a != b) link(a, b, EdgeKind::kWw);
      }
    }
    // wr and rw: from each read's external state.
    std::vector<uint64_t> final_edges(keys, 0);
    bool final_capped = false;
    for (uint32_t t = 0; t < n; t++) {
      if (!in_graph_[t]) continue;
      for (uint32_t j = 0; j < txns[t].mop_count; j++) {
        uint64_t mi = h_.MopIndex(txns[t], j);
        const Mop& m = h_.mop(mi);
        if (m.is_append || !m.read_known) continue;
        External ext = ExternalRead(t, m);
        if (ext.last != nullptr && Graph(ext.last->txn)) link(ext.last->txn, t, EdgeKind::kWr);
        uint64_t next = NextPosition(mi, m, ext);
        if (next == kNone64) continue;
        uint64_t size = order_begin_[m.key + 1] - order_begin_[m.key];
        if (next < size) {
          uint32_t w = OrderWriter(m.key, next);
          if (Graph(w) && w != t) link(t, w, EdgeKind::kRw);
          continue;
        }
        for (uint64_t i = unobserved_begin_[m.key]; i < unobserved_begin_[m.key + 1]; i++) {
          uint32_t w = unobserved_txn_[i];
          if (w == t) continue;
          if (final_edges[m.key]++ >= o_.final_state_edges_per_key_max) {
            final_capped = true;
            break;
          }
          link(t, w, EdgeKind::kRw);
        }
      }
    }
    if (final_capped) {
      r_.notes.push_back(fmt::format(
          "some rw edges to never-read appends were dropped (more than {} for one key); cycles "
          "through them may be missed",
          o_.final_state_edges_per_key_max));
    }
    uint32_t nodes = n;
    if (o_.model == Model::kStrictSerializable) nodes = AddRealtimeBarriers(link);
    graph_ = DependencyGraph(n, nodes, std::move(edges));
    r_.edge_count = graph_.edge_count();
  }

  // Real time as a chain of barrier nodes: every ok txn links to the first barrier after its
  // completion, barriers link forward in time, and a barrier links to every txn invoked after
  // it and before the next. A path A -> barriers -> B exists iff A completed before B was
  // invoked: O(n) edges for what would be O(n^2) direct ones.
  template <typename Link>
  uint32_t AddRealtimeBarriers(Link& link) {
    const auto& txns = h_.txns();
    struct Event {
      int64_t time;
      uint32_t is_completion;  // 0 sorts first: equal times are concurrent, not ordered
      uint32_t txn;
    };
    std::vector<Event> events;
    for (uint32_t t = 0; t < txns.size(); t++) {
      if (!in_graph_[t]) continue;
      events.push_back({txns[t].invoke_ns, 0, t});
      // An info txn's end is unknown: it may still be running, so nothing follows it.
      if (txns[t].type == TxnType::kOk) events.push_back({txns[t].complete_ns, 1, t});
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.time != b.time                     ? a.time < b.time
             : a.is_completion != b.is_completion ? a.is_completion < b.is_completion
                                                  : a.txn < b.txn;
    });
    uint32_t nodes = static_cast<uint32_t>(txns.size());
    uint32_t current = kNoNode;
    std::vector<uint32_t> completed;
    for (const Event& e : events) {
      if (e.is_completion) {
        completed.push_back(e.txn);
        continue;
      }
      if (!completed.empty()) {
        POND_CHECK(nodes < kNodeCountMax);
        uint32_t barrier = nodes++;
        if (current != kNoNode) link(current, barrier, EdgeKind::kRealtime);
        for (uint32_t t : completed) link(t, barrier, EdgeKind::kRealtime);
        completed.clear();
        current = barrier;
      }
      if (current != kNoNode) link(current, e.txn, EdgeKind::kRealtime);
    }
    return nodes;
  }

  // ---- pass 6: cycles
  // Turns a path found by ShortestPath (from `start`, closing at `start`) into txn steps;
  // runs of barrier nodes become one real-time step.
  template <typename View>
  std::vector<CycleStep> Steps(const View& v, uint32_t start, const std::vector<PathStep>& path) {
    std::vector<CycleStep> steps;
    uint32_t from = v.Txn(start);
    bool via_barrier = false;
    for (const PathStep& p : path) {
      uint32_t node = v.Txn(p.node);
      if (!graph_.IsTxn(node)) {
        via_barrier = true;
        continue;
      }
      EdgeKind kind = via_barrier ? EdgeKind::kRealtime : v.Kind(p.edge);
      steps.push_back({from, node, kind, Explain(from, node, kind)});
      from = node;
      via_barrier = false;
    }
    return steps;
  }

  // Counts a cycle under the class its edges give it (Classify), with it as an example.
  void Report(std::vector<CycleStep> steps) {
    POND_ASSERT(!steps.empty());
    if (steps.empty()) return;  // a search within one SCC cannot fail; never count nothing
    Anomaly a = Classify(steps);
    AnomalyExample* ex = Add(a);
    if (ex == nullptr) return;
    std::string chain = TxnName(h_, steps.front().from);
    for (const CycleStep& s : steps) {
      ex->txns.push_back(s.from);
      chain += fmt::format(" -{}-> {}", EdgeName(s.kind), TxnName(h_, s.to));
    }
    ex->summary =
        fmt::format("{} cycle of {} transactions: {}", AnomalyName(a), steps.size(), chain);
    ex->cycle = std::move(steps);
  }

  // The first node of every nontrivial component (kNoNode for trivial ones).
  static std::vector<uint32_t> Representatives(const Components& c) {
    std::vector<uint32_t> rep(c.size.size(), kNoNode);
    for (uint32_t x = 0; x < c.comp.size(); x++) {
      if (c.Nontrivial(x) && rep[c.comp[x]] == kNoNode) rep[c.comp[x]] = x;
    }
    return rep;
  }

  // For every nontrivial component of c, the first edge of `kind` inside it, as (from, edge).
  template <typename View>
  std::vector<std::pair<uint32_t, uint64_t>> InnerEdges(const View& v, const Components& c,
                                                        EdgeKind kind) {
    std::vector<std::pair<uint32_t, uint64_t>> first(c.size.size(), {kNoNode, 0});
    for (uint32_t x = 0; x < c.comp.size(); x++) {
      if (!c.Nontrivial(x) || first[c.comp[x]].first != kNoNode) continue;
      for (uint64_t i = v.Begin(x); i < v.End(x); i++) {
        uint32_t t = v.Target(x, i);
        if (t != kNoNode && v.Kind(i) == kind && c.comp[t] == c.comp[x]) {
          first[c.comp[x]] = {x, i};
          break;
        }
      }
    }
    return first;
  }

  // A cycle that starts with edge (x, i) and returns to x inside component c.
  template <typename View, typename PathView>
  std::vector<CycleStep> CycleThrough(const View& v, const PathView& pv, const Components& comps,
                                      uint32_t x, uint64_t i) {
    uint32_t t = v.Target(x, i);
    auto path = ShortestPath(pv, comps, comps.comp[x], t, x, scratch_);
    if (path.empty()) return {};
    std::vector<PathStep> full{{t, i}};
    full.insert(full.end(), path.begin(), path.end());
    return Steps(v, x, full);
  }

  void FindCycles() {
    const bool strict = o_.model == Model::kStrictSerializable;
    const uint32_t n = graph_.txn_count();
    KindView full(graph_, strict ? kAllMask : kDataMask, nullptr);
    Components full_c = StronglyConnected(full);
    if (!full_c.AnyNontrivial()) return;  // acyclic: the common, valid case ends here
    std::vector<uint8_t> in_cycle(graph_.node_count(), 0);
    for (uint32_t x = 0; x < graph_.node_count(); x++) in_cycle[x] = full_c.Nontrivial(x);
    KindView data(graph_, kDataMask, &in_cycle);
    Components data_c = strict ? StronglyConnected(data) : full_c;
    std::vector<uint8_t> in_data_cycle(graph_.node_count(), 0);
    for (uint32_t x = 0; x < n; x++) in_data_cycle[x] = data_c.Nontrivial(x);
    KindView data_only(graph_, kDataMask, &in_data_cycle);

    // Cycles without adjacent rw edges: G-single and G-nonadjacent (and G0/G1c, which the
    // layered view also holds but which are named below from their own views).
    LayeredView layered(graph_, kDataMask, &in_data_cycle);
    LayeredView layered_wwwr(graph_, kWwWrMask, &in_data_cycle);
    Components layer_c = StronglyConnected(layered);
    std::vector<std::vector<std::pair<uint32_t, uint64_t>>> rw_starts(layer_c.size.size());
    for (uint32_t x = 0; x < 2 * n; x += 2) {
      if (!layer_c.Nontrivial(x)) continue;
      auto& starts = rw_starts[layer_c.comp[x]];
      for (uint64_t i = layered.Begin(x); i < layered.End(x) && starts.size() < kGSingleTriesMax;
           i++) {
        uint32_t t = layered.Target(x, i);
        if (t != kNoNode && (t & 1) && layer_c.comp[t] == layer_c.comp[x]) starts.push_back({x, i});
      }
    }
    for (auto& starts : rw_starts) {
      if (starts.empty()) continue;
      std::vector<CycleStep> steps;
      for (auto [x, i] : starts) {  // G-single: this rw edge, then back by ww/wr alone
        steps = CycleThrough(layered, layered_wwwr, layer_c, x, i);
        if (!steps.empty()) break;
      }
      if (steps.empty())
        steps = CycleThrough(layered, layered, layer_c, starts[0].first, starts[0].second);
      POND_ASSERT(!steps.empty());
      Report(std::move(steps));
    }

    // G1c: a ww/wr component with a wr edge inside.
    KindView wwwr(graph_, kWwWrMask, &in_data_cycle);
    Components wwwr_c = StronglyConnected(wwwr);
    for (auto [x, i] : InnerEdges(wwwr, wwwr_c, EdgeKind::kWr)) {
      if (x != kNoNode) Report(CycleThrough(wwwr, wwwr, wwwr_c, x, i));
    }
    // G0: any ww component.
    KindView ww(graph_, kWwMask, &in_data_cycle);
    Components ww_c = StronglyConnected(ww);
    for (uint32_t x : Representatives(ww_c)) {
      if (x == kNoNode) continue;
      Report(Steps(ww, x, ShortestPath(ww, ww_c, ww_c.comp[x], x, x, scratch_)));
    }

    // G2-item: data components in which every cycle has two adjacent rw edges, i.e. no node
    // is on a cycle of the layered view.
    std::vector<uint8_t> has_si_cycle(data_c.size.size(), 0);
    for (uint32_t x = 0; x < n; x++) {
      if (in_data_cycle[x] && (layer_c.Nontrivial(2 * x) || layer_c.Nontrivial(2 * x + 1))) {
        has_si_cycle[data_c.comp[x]] = 1;
      }
    }
    auto rw_inner = InnerEdges(data_only, data_c, EdgeKind::kRw);
    for (uint32_t c = 0; c < rw_inner.size(); c++) {
      auto [x, i] = rw_inner[c];
      if (x == kNoNode || has_si_cycle[c]) continue;
      Report(CycleThrough(data_only, data_only, data_c, x, i));
    }

    // Real-time: components of the strict graph with no data cycle in them need a
    // real-time edge to close. Components that do hold a data cycle are reported above.
    if (!strict) return;
    std::vector<uint8_t> has_data_cycle(full_c.size.size(), 0);
    for (uint32_t x = 0; x < n; x++) {
      if (in_data_cycle[x]) has_data_cycle[full_c.comp[x]] = 1;
    }
    std::vector<uint32_t> rep(full_c.size.size(), kNoNode);
    for (uint32_t x = 0; x < n; x++) {
      if (full_c.Nontrivial(x) && rep[full_c.comp[x]] == kNoNode) rep[full_c.comp[x]] = x;
    }
    for (uint32_t c = 0; c < rep.size(); c++) {
      uint32_t x = rep[c];
      if (x == kNoNode || has_data_cycle[c]) continue;
      Report(Steps(full, x, ShortestPath(full, full_c, c, x, x, scratch_)));
    }
  }

  // ---- explanations (examples only, so a scan of both transactions' micro-ops is fine)
  std::string Explain(uint32_t from, uint32_t to, EdgeKind kind) const {
    const auto& txns = h_.txns();
    const Txn& a = txns[from];
    const Txn& b = txns[to];
    auto key = [&](uint32_t k) { return h_.FormatValue(h_.key_value(k)); };
    auto val = [&](uint64_t v) { return h_.FormatValue(v); };
    std::string an = TxnName(h_, from), bn = TxnName(h_, to);
    switch (kind) {
      case EdgeKind::kRealtime:
        return fmt::format("{} completed (time {}) before {} was invoked (time {})", an,
                           a.complete_ns, bn, b.invoke_ns);
      case EdgeKind::kWw:
        for (const Mop& m : h_.mops(b)) {
          if (!m.is_append) continue;
          auto order = Order(m.key);
          const uint32_t* p = position_.Find(ElementKey{m.value, m.key});
          if (p != nullptr && *p > 0 && OrderWriter(m.key, *p - 1) == from) {
            return fmt::format("{} appended {} to key {} right after {}'s append of {}", bn,
                               val(m.value), key(m.key), an, val(order[*p - 1]));
          }
          if (p == nullptr && !order.empty() && OrderWriter(m.key, order.size() - 1) == from) {
            return fmt::format(
                "{} appended {} to key {}, which no read saw, so after {}'s append of {} "
                "(the last element read)",
                bn, val(m.value), key(m.key), an, val(order.back()));
          }
        }
        break;
      case EdgeKind::kWr:
        for (const Mop& m : h_.mops(b)) {
          if (m.is_append || !m.read_known) continue;
          External ext = ExternalRead(to, m);
          if (ext.last != nullptr && ext.last->txn == from) {
            return fmt::format("{} read key {} = {}, which ends in {}'s append of {}", bn,
                               key(m.key), FormatList(h_, h_.read(m)), an,
                               val(h_.read(m)[ext.length - 1]));
          }
        }
        break;
      case EdgeKind::kRw:
        for (uint32_t j = 0; j < a.mop_count; j++) {
          uint64_t mi = h_.MopIndex(a, j);
          const Mop& m = h_.mop(mi);
          if (m.is_append || !m.read_known) continue;
          External ext = ExternalRead(from, m);
          uint64_t next = NextPosition(mi, m, ext);
          if (next == kNone64) continue;
          auto order = Order(m.key);
          if (next < order.size()) {
            if (OrderWriter(m.key, next) == to) {
              return fmt::format(
                  "{} read key {} = {}, which misses {}'s append of {} that came next", an,
                  key(m.key), FormatList(h_, h_.read(m)), bn, val(order[next]));
            }
            continue;
          }
          for (const Mop& w : h_.mops(b)) {
            if (w.is_append && w.key == m.key &&
                position_.Find(ElementKey{w.value, w.key}) == nullptr) {
              return fmt::format(
                  "{} read key {} = {}, the last state any read saw, which misses {}'s append "
                  "of {}",
                  an, key(m.key), FormatList(h_, h_.read(m)), bn, val(w.value));
            }
          }
        }
        break;
    }
    return "";
  }

  const History& h_;
  const CheckerOptions& o_;
  CheckResult r_;
  uint32_t examples_max_ = 0;

  std::vector<uint8_t> mop_flags_;
  // Version orders: the distinct elements of each key's longest read, and their appenders.
  std::vector<uint64_t> longest_;  // per key: mop index of its longest read, kNone64 if unread
  std::vector<uint64_t> order_begin_;
  std::vector<uint64_t> order_;
  std::vector<uint32_t> order_writer_;  // appender of each order element, kNone32 if none
  FlatMap<ElementKey, uint32_t, ElementKeyHash> position_;
  std::vector<uint8_t> key_has_dup_;
  std::vector<uint32_t> first_garbage_;  // per key: index in the longest read, kNone32
  std::vector<uint32_t> first_failed_;
  std::vector<uint8_t> observed_;  // per txn: some read holds one of its appends
  std::vector<uint8_t> in_graph_;
  std::vector<uint64_t> unobserved_begin_;
  std::vector<uint32_t> unobserved_txn_;
  // Per-key scratch for scans within one transaction; a key's entry is live iff its stamp is
  // the current one, so no per-transaction clearing.
  std::vector<uint64_t> key_stamp_;
  std::vector<KeyState> key_state_;
  uint64_t stamp_ = 0;

  DependencyGraph graph_;
  SearchScratch scratch_;
};

}  // namespace

CheckResult Check(const History& history, const CheckerOptions& options) {
  return Analysis(history, options).Run();
}

std::string DescribeTxn(const History& h, uint32_t t) {
  const Txn& txn = h.txns()[t];
  std::string s = fmt::format("{} {} process {}:", TxnName(h, t), TypeName(txn.type), txn.process);
  uint32_t shown = 0;
  for (const Mop& m : h.mops(txn)) {
    if (shown++ == kMopsShownMax) {
      s += fmt::format(" ...({} more)", txn.mop_count - kMopsShownMax);
      break;
    }
    if (m.is_append) {
      s +=
          fmt::format(" [append {} {}]", h.FormatValue(h.key_value(m.key)), h.FormatValue(m.value));
    } else {
      s += fmt::format(" [r {} {}]", h.FormatValue(h.key_value(m.key)),
                       m.read_known ? FormatList(h, h.read(m)) : "null");
    }
  }
  return s;
}

std::string FormatText(const History& h, const CheckResult& r) {
  std::string s = fmt::format("valid: {}\nmodel: {}\n", r.valid ? "yes" : "no", ModelName(r.model));
  s += fmt::format(
      "transactions: {} (ok {}, fail {}, info {}; {} in the graph), keys: {}, edges: {}\n",
      r.txn_count, r.ok_count, r.fail_count, r.info_count, r.graph_txn_count, r.key_count,
      r.edge_count);
  bool any = false;
  for (size_t i = 0; i < kAnomalyCount; i++) {
    const AnomalyReport& rep = r.anomalies[i];
    if (rep.count == 0) continue;
    if (!any) s += "anomalies:\n";
    any = true;
    Anomaly a = static_cast<Anomaly>(i);
    s += fmt::format("  {}: {} ({} by {})\n", AnomalyName(a), rep.count,
                     Forbids(r.model, a) ? "forbidden" : "allowed", ModelName(r.model));
    for (const AnomalyExample& ex : rep.examples) {
      s += fmt::format("    - {}\n", ex.summary);
      for (const CycleStep& step : ex.cycle) {
        s += fmt::format("        {} -{}-> {}: {}\n", TxnName(h, step.from), EdgeName(step.kind),
                         TxnName(h, step.to), step.why);
      }
      for (uint32_t t : ex.txns) s += fmt::format("        {}\n", DescribeTxn(h, t));
    }
  }
  if (!any) s += "anomalies: none\n";
  for (const std::string& note : r.notes) s += fmt::format("note: {}\n", note);
  return s;
}

nlohmann::json ToJson(const History& h, const CheckResult& r) {
  using nlohmann::json;
  json out;
  out["valid"] = r.valid;
  out["model"] = ModelName(r.model);
  out["stats"] = {{"transactions", r.txn_count},   {"ok", r.ok_count},
                  {"fail", r.fail_count},          {"info", r.info_count},
                  {"in_graph", r.graph_txn_count}, {"keys", r.key_count},
                  {"edges", r.edge_count}};
  json counts = json::object(), anomalies = json::object(), forbidden = json::array();
  for (size_t i = 0; i < kAnomalyCount; i++) {
    const AnomalyReport& rep = r.anomalies[i];
    if (rep.count == 0) continue;
    Anomaly a = static_cast<Anomaly>(i);
    std::string name(AnomalyName(a));
    counts[name] = rep.count;
    if (Forbids(r.model, a)) forbidden.push_back(name);
    json examples = json::array();
    for (const AnomalyExample& ex : rep.examples) {
      json txns = json::array();
      for (uint32_t t : ex.txns) {
        const Txn& txn = h.txns()[t];
        txns.push_back({{"index", txn.id},
                        {"type", TypeName(txn.type)},
                        {"process", txn.process},
                        {"line", txn.complete_line ? txn.complete_line : txn.invoke_line},
                        {"text", DescribeTxn(h, t)}});
      }
      json cycle = json::array();
      for (const CycleStep& s : ex.cycle) {
        cycle.push_back({{"from", h.txns()[s.from].id},
                         {"to", h.txns()[s.to].id},
                         {"type", EdgeName(s.kind)},
                         {"why", s.why}});
      }
      json e = {{"summary", ex.summary}, {"txns", txns}};
      if (!cycle.empty()) e["cycle"] = cycle;
      examples.push_back(e);
    }
    anomalies[name] = {
        {"count", rep.count}, {"forbidden", Forbids(r.model, a)}, {"examples", examples}};
  }
  out["forbidden"] = forbidden;
  out["counts"] = counts;
  out["anomalies"] = anomalies;
  out["notes"] = r.notes;
  return out;
}

}  // namespace pond::check
