#include "pond/bench/smallbank_history.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "pond/base/hash.h"

namespace pond::bench {

namespace {

// A version of a row: (key, tag). A transaction writes one tag to each row it changes.
struct Version {
  uint64_t key, tag;
  bool operator==(const Version&) const = default;
};
struct VersionHash {
  size_t operator()(const Version& v) const { return Mix64(v.key * 0x9e3779b97f4a7c15ULL ^ v.tag); }
};
using PrevMap = std::unordered_map<Version, uint64_t, VersionHash>;  // -> the tag its writer read

// list(t) for the tags that reads saw, kept: reads of a hot row see its chain again and again,
// and each list is built from the nearest one already known. Only read tags are kept, so memory
// is the size of the history written.
class Chains {
 public:
  explicit Chains(const PrevMap& prev) : prev_(prev) {}

  const std::vector<uint64_t>& Of(uint64_t key, uint64_t tag) {
    static const std::vector<uint64_t> kEmpty;
    if (tag == 0) return kEmpty;
    if (auto it = lists_.find({key, tag}); it != lists_.end()) return it->second;
    // Walk back (iteratively: chains of hot rows are thousands long) to the loaded value or to
    // a tag whose list is known.
    std::vector<uint64_t> path;
    const std::vector<uint64_t>* base = &kEmpty;
    for (uint64_t t = tag; t != 0;) {
      if (auto it = lists_.find({key, t}); it != lists_.end()) {
        base = &it->second;
        break;
      }
      path.push_back(t);
      auto p = prev_.find({key, t});
      // A tag nobody wrote (a garbage read) starts its own chain: the checker names it.
      if (p == prev_.end()) break;
      t = p->second;
      // Longer than all writes: a cycle of predecessors, which only a broken protocol makes.
      // Cut it; the checker finds the reads inconsistent.
      if (path.size() > prev_.size()) break;
    }
    std::vector<uint64_t> list = *base;
    list.insert(list.end(), path.rbegin(), path.rend());
    return lists_.emplace(Version{key, tag}, std::move(list)).first->second;
  }

 private:
  const PrevMap& prev_;
  std::unordered_map<Version, std::vector<uint64_t>, VersionHash> lists_;
};

}  // namespace

Status WriteSmallBankHistory(const std::vector<SmallBankRecordedTxn>& txns, check::Recorder& out) {
  PrevMap prev;
  for (const SmallBankRecordedTxn& t : txns) {
    for (size_t i = 0; i < t.ops.size(); i++) {
      const SmallBankOp& op = t.ops[i];
      if (!op.write) continue;
      auto read = std::find_if(t.ops.begin(), t.ops.begin() + static_cast<ptrdiff_t>(i),
                               [&](const SmallBankOp& r) { return !r.write && r.key == op.key; });
      if (read == t.ops.begin() + static_cast<ptrdiff_t>(i)) {
        return InvalidArgument("SmallBank history: a write of key " + std::to_string(op.key) +
                               " without a read of it before");
      }
      if (op.tag == 0 || !prev.emplace(Version{op.key, op.tag}, read->tag).second) {
        return InvalidArgument("SmallBank history: tag " + std::to_string(op.tag) +
                               " written twice to key " + std::to_string(op.key) + ", or zero");
      }
    }
  }
  Chains chains(prev);
  for (const SmallBankRecordedTxn& t : txns) {
    check::TxnRecorder r = out.Begin(t.process, t.invoke_ns);
    for (const SmallBankOp& op : t.ops) {
      if (op.write) {
        r.Append(op.key, op.tag);
      } else {
        r.Read(op.key, chains.Of(op.key, op.tag));
      }
    }
    r.Finish(t.unknown     ? check::Outcome::kInfo
             : t.committed ? check::Outcome::kOk
                           : check::Outcome::kFail,
             t.complete_ns);
  }
  return out.Flush();
}

}  // namespace pond::bench
