#include "pond/recovery/load_policy.h"

#include <algorithm>

namespace pond::recovery {

uint64_t LoadPolicy::EndInterval(const CnLoad& now) {
  // Counts only grow; a CN's workers restarting with it start a new policy too.
  const uint64_t txns = now.txns - last_.txns;
  const uint64_t latency = now.latency_ns - last_.latency_ns;
  interval_.assign(now.shard_requests.size(), 0);
  for (size_t s = 0; s < now.shard_requests.size(); s++) {
    const uint64_t before = s < last_.shard_requests.size() ? last_.shard_requests[s] : 0;
    interval_[s] = now.shard_requests[s] - before;
  }
  majority_ = now.majority;
  last_ = now;
  return txns == 0 ? 0 : latency / txns;
}

std::optional<LoadPolicy::Move> LoadPolicy::Judge(
    uint16_t cn, const std::vector<std::optional<uint64_t>>& latency,
    std::optional<uint16_t> oracle, const std::function<bool(uint32_t)>& movable) {
  if (cn >= latency.size() || !latency[cn].has_value()) return std::nullopt;
  const uint64_t own = *latency[cn];
  double sum = 0;
  int known = 0;
  std::optional<uint16_t> coolest;
  for (uint16_t c = 0; c < latency.size(); c++) {
    if (!latency[c].has_value()) continue;
    sum += static_cast<double>(*latency[c]);
    known++;
    if (c == cn || c == oracle) continue;
    if (!coolest.has_value() || *latency[c] < *latency[*coolest]) coolest = c;
  }
  const double mean = sum / known;
  const bool overloaded = mean > 0 && static_cast<double>(own) > o_.over * mean;
  streak_ = overloaded ? streak_ + 1 : 0;
  if (streak_ < o_.intervals || !coolest.has_value() || *latency[*coolest] >= own) {
    return std::nullopt;
  }
  std::vector<uint32_t> hot;
  uint64_t requests = 0;
  for (uint32_t s = 0; s < interval_.size(); s++) {
    requests += interval_[s];
    if (interval_[s] != 0 && movable(s)) hot.push_back(s);
  }
  if (hot.empty()) return std::nullopt;
  std::sort(hot.begin(), hot.end(), [&](uint32_t a, uint32_t b) {
    return interval_[a] != interval_[b] ? interval_[a] > interval_[b] : a < b;
  });
  const double share =
      static_cast<double>(own - *latency[*coolest]) / (2.0 * static_cast<double>(own));
  const auto target = static_cast<uint64_t>(share * static_cast<double>(requests));
  Move m{.to = *coolest};
  uint64_t taken = 0;
  for (uint32_t s : hot) {
    if (!m.shards.empty() && taken >= target) break;
    m.shards.push_back(s);
    taken += interval_[s];
  }
  std::sort(m.shards.begin(), m.shards.end());
  // The next move waits for a streak of its own, measured with this one made.
  streak_ = 0;
  return m;
}

std::optional<LoadPolicy::Move> LoadPolicy::JudgeLocality(
    uint16_t cn, const std::function<bool(uint16_t)>& receiver,
    const std::function<bool(uint32_t)>& movable) {
  runs_.resize(interval_.size());
  // Requests by the receiver each would go to, of the shards due to move.
  std::vector<std::pair<uint16_t, uint64_t>> by_cn;
  for (uint32_t s = 0; s < runs_.size(); s++) {
    const ShardMajority m = s < majority_.size() ? majority_[s] : ShardMajority{};
    Run& r = runs_[s];
    if (m.count == 0 || m.cn == cn || 2 * m.count < interval_[s]) {
      r = Run{};
      continue;
    }
    r = Run{m.cn, r.cn == m.cn ? r.intervals + 1 : 1};
    if (r.intervals < o_.intervals || !movable(s) || !receiver(m.cn)) continue;
    auto it =
        std::find_if(by_cn.begin(), by_cn.end(), [&](const auto& p) { return p.first == m.cn; });
    if (it == by_cn.end()) it = by_cn.insert(by_cn.end(), {m.cn, 0});
    it->second += interval_[s];
  }
  if (by_cn.empty()) return std::nullopt;
  const auto most = std::min_element(by_cn.begin(), by_cn.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  Move m{.to = most->first};
  for (uint32_t s = 0; s < runs_.size(); s++) {
    if (runs_[s].cn != m.to || runs_[s].intervals < o_.intervals || !movable(s)) continue;
    m.shards.push_back(s);
    // Moved, it is measured anew where it lands; kept (the move refused), it needs a new run.
    runs_[s] = Run{};
  }
  return m;
}

}  // namespace pond::recovery
