#include "pond/recovery/shard_return.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "pond/cluster/directory.h"

namespace pond::recovery {

ShardReturns::ShardReturns(std::string cluster, uint16_t cn, uint32_t shards,
                           cluster::ConfigStore& store, CnControls& controls)
    : cluster_(std::move(cluster)), cn_(cn), shards_(shards), store_(store), controls_(controls) {}

void ShardReturns::Apply(const cluster::Configuration& next, const std::vector<uint16_t>& shards,
                         const std::vector<uint16_t>& back,
                         const std::function<bool(uint32_t)>& recovering,
                         const std::function<bool(uint32_t)>& moving) {
  for (uint16_t c : back) {
    Return r{.cn = c, .incarnation = next.cns[c].incarnation};
    for (uint32_t s = 0; s < shards_; s++) {
      if (shards[s] == cn_ && controls_.ShardHome(s) == c && !moving(s)) r.shards.push_back(s);
    }
    if (r.shards.empty()) continue;
    for (uint32_t s : r.shards) controls_.CloseShard(s);
    controls_.Event("closed " + std::to_string(r.shards.size()) + " shards of CN " +
                    std::to_string(c) + " to give them back");
    returns_.push_back(std::move(r));
  }
  for (Return& r : returns_) {
    if (r.done) continue;
    if (!next.cns[r.cn].alive || next.cns[r.cn].incarnation != r.incarnation) {
      // It failed again before they went: those still here are served here again, but for any
      // an unfinished failure brought here, which that failure's recovery opens.
      size_t reopened = 0;
      for (uint32_t s : r.shards) {
        if (shards[s] != cn_ || recovering(s)) continue;
        controls_.OpenShard(s);
        reopened++;
      }
      controls_.Event("CN " + std::to_string(r.cn) + " failed before its shards went back; " +
                      std::to_string(reopened) + " are served here again");
      r.done = true;
    } else if (std::none_of(r.shards.begin(), r.shards.end(),
                            [&](uint32_t s) { return shards[s] == cn_; })) {
      controls_.Event("gave " + std::to_string(r.shards.size()) + " shards back to CN " +
                      std::to_string(r.cn));
      r.done = true;
    }
  }
}

void ShardReturns::Progress(uint32_t seq, uint16_t incarnation) {
  for (Return& r : returns_) {
    if (r.done || r.drained) continue;
    const std::optional<size_t> held = controls_.LocksHeldIn(r.shards);
    if (!held.has_value() || *held != 0) continue;
    const cluster::MoveRecord record{.seq = seq,
                                     .incarnation = incarnation,
                                     .to = r.cn,
                                     .to_incarnation = r.incarnation,
                                     .shards = r.shards};
    // Only this CN writes its key for this incarnation of r.cn: whatever is there is its own.
    const std::string key = cluster::ReturnKey(cluster_, r.cn, r.incarnation, cn_);
    Result<cluster::Versioned> now = store_.Get(key);
    if (!now.ok()) return;  // said next period
    Result<uint64_t> put = store_.PutIf(key, record.Encode(), now->version);
    if (!put.ok() && put.status().code() != Code::kUnknown) return;
    r.drained = true;  // an Unknown put may have landed: from now on only an epoch ends it
    return;            // one hand-over said at a time
  }
}

bool ShardReturns::Said() const {
  return std::any_of(returns_.begin(), returns_.end(),
                     [](const Return& r) { return r.drained && !r.done; });
}

void ShardReturns::Pick(const cluster::Configuration& view, cluster::Configuration* next,
                        std::vector<uint16_t>* shards, std::vector<std::string>* what) {
  // The (home, holder) pairs with a shard of the home on the holder: one record each to read.
  std::set<std::pair<uint16_t, uint16_t>> pairs;
  for (uint32_t s = 0; s < shards_; s++) {
    const uint16_t home = controls_.ShardHome(s), holder = (*shards)[s];
    if (holder != home) pairs.emplace(home, holder);
  }
  std::map<uint16_t, size_t> moved;
  for (const auto& [home, holder] : pairs) {
    // Only to a CN restarted and alive now and after; only from a holder that stays alive (a
    // failing holder's shards move with its failure, and come home later, or stay).
    const cluster::CnStatus &h = view.cns[holder], &c = view.cns[home];
    if (c.incarnation == 0 || !c.alive || !next->cns[home].alive || !h.alive ||
        !next->cns[holder].alive || next->cns[holder].incarnation != h.incarnation) {
      continue;
    }
    const std::string key = cluster::ReturnKey(cluster_, home, c.incarnation, holder);
    Result<cluster::Versioned> v = store_.Get(key);
    if (!v.ok() || v->version == 0) continue;
    Result<cluster::MoveRecord> r = cluster::MoveRecord::Decode(v->value, shards_);
    if (!r.ok()) {
      controls_.Event("ignored " + key + ": " + r.status().ToString());
      continue;
    }
    // The holder's next hand-over, by the incarnation that closed them, for this home: made
    // once. Only the shards the holder closed go: one a later failure moved to it stays.
    if (r->incarnation != h.incarnation || r->seq != next->cns[holder].moves + 1 ||
        next->cns[holder].moves != h.moves || r->to != home || r->to_incarnation != c.incarnation ||
        !std::all_of(r->shards.begin(), r->shards.end(),
                     [&](uint32_t s) { return (*shards)[s] == holder; })) {
      continue;
    }
    for (uint32_t s : r->shards) (*shards)[s] = home;
    next->cns[holder].moves = r->seq;
    moved[home] += r->shards.size();
  }
  for (const auto& [cn, n] : moved) {
    what->push_back(std::to_string(n) + " shards go home to CN " + std::to_string(cn));
  }
}

bool ShardReturns::Returning(uint32_t s) const {
  for (const Return& r : returns_) {
    if (!r.done && std::binary_search(r.shards.begin(), r.shards.end(), s)) return true;
  }
  return false;
}

bool ShardReturns::Returning() const {
  return std::any_of(returns_.begin(), returns_.end(), [](const Return& r) { return !r.done; });
}

}  // namespace pond::recovery
