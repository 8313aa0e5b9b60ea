#include "pond/recovery/shard_return.h"

#include <algorithm>
#include <map>
#include <optional>
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

void ShardReturns::Progress() {
  for (Return& r : returns_) {
    if (r.done || r.drained) continue;
    const std::optional<size_t> held = controls_.LocksHeldIn(r.shards);
    if (!held.has_value() || *held != 0) continue;
    Result<uint64_t> put = store_.PutIf(cluster::ReturnKey(cluster_, r.cn, r.incarnation, cn_),
                                        cluster::EncodeShardList(r.shards), 0);
    if (!put.ok() && put.status().code() != Code::kConflict) continue;  // said next period
    r.drained = true;
  }
}

void ShardReturns::Pick(const cluster::Configuration& view, const cluster::Configuration& next,
                        std::vector<uint16_t>* shards, std::vector<std::string>* what) {
  // The shards holder H has closed and drained for restarted CN C (sorted): read once per pair.
  std::map<std::pair<uint16_t, uint16_t>, std::vector<uint32_t>> drained;
  std::map<uint16_t, size_t> moved;
  for (uint32_t s = 0; s < shards_; s++) {
    const uint16_t home = controls_.ShardHome(s), holder = (*shards)[s];
    // Only to a CN restarted and alive now and after; only from a holder that stays alive (a
    // failing holder's shards move with its failure, and come home later, or stay).
    if (holder == home || view.cns[home].incarnation == 0 || !view.cns[home].alive ||
        !next.cns[home].alive || !view.cns[holder].alive || !next.cns[holder].alive) {
      continue;
    }
    auto it = drained.find({home, holder});
    if (it == drained.end()) {
      const std::string key =
          cluster::ReturnKey(cluster_, home, view.cns[home].incarnation, holder);
      Result<cluster::Versioned> v = store_.Get(key);
      std::vector<uint32_t> ids;
      if (v.ok() && v->version != 0) {
        Result<std::vector<uint32_t>> list = cluster::DecodeShardList(v->value, shards_);
        if (list.ok()) {
          ids = std::move(*list);
        } else {
          controls_.Event("ignored " + key + ": " + list.status().ToString());
        }
      }
      it = drained.emplace(std::make_pair(home, holder), std::move(ids)).first;
    }
    // Only a shard the holder closed goes: one a later failure moved to it is served there.
    if (!std::binary_search(it->second.begin(), it->second.end(), s)) continue;
    (*shards)[s] = home;
    moved[home]++;
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
