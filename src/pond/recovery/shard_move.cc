#include "pond/recovery/shard_move.h"

#include <algorithm>
#include <utility>

namespace pond::recovery {

namespace {
bool AliveAs(const cluster::Configuration& c, uint16_t cn, uint16_t incarnation) {
  return cn < c.cns.size() && c.cns[cn].alive && c.cns[cn].incarnation == incarnation;
}
}  // namespace

ShardMoves::ShardMoves(std::string cluster, uint16_t cn, uint32_t shards, uint64_t drain_bound_ns,
                       cluster::ConfigStore& store, CnControls& controls)
    : cluster_(std::move(cluster)),
      cn_(cn),
      shards_(shards),
      drain_bound_ns_(drain_bound_ns),
      store_(store),
      controls_(controls) {}

bool ShardMoves::Start(const cluster::Configuration& view, std::vector<uint32_t> shards,
                       uint16_t to, uint64_t now_ns) {
  if (move_.has_value() || shards.empty()) return false;
  Move m;
  m.record = cluster::MoveRecord{.seq = 0,  // numbered when said
                                 .incarnation = view.cns[cn_].incarnation,
                                 .to = to,
                                 .to_incarnation = view.cns[to].incarnation,
                                 .shards = std::move(shards)};
  m.started_ns = now_ns;
  for (uint32_t s : m.record.shards) controls_.CloseShard(s);
  controls_.Event("closed " + std::to_string(m.record.shards.size()) +
                  " shards to move them to CN " + std::to_string(to));
  move_ = std::move(m);
  return true;
}

void ShardMoves::Progress(uint64_t now_ns, bool may_say, uint32_t seq) {
  if (!move_.has_value() || move_->drained) return;
  Move& m = *move_;
  // Past the bound, and looked at a few times: a holder that acts once a long period would
  // otherwise give up before it ever saw the shards drain.
  if (!m.said && now_ns - m.started_ns > drain_bound_ns_ && ++m.late_looks > 3) {
    // No record a CM could act on exists: serving them again cannot make two grantors.
    for (uint32_t s : m.record.shards) controls_.OpenShard(s);
    controls_.Event("gave up moving " + std::to_string(m.record.shards.size()) + " shards to CN " +
                    std::to_string(m.record.to) +
                    ": locks in them still held after the drain bound");
    counts_.given_up++;
    move_.reset();
    return;
  }
  if (!may_say) return;
  const std::optional<size_t> held = controls_.LocksHeldIn(m.record.shards);
  if (!held.has_value() || *held != 0) return;
  // Overwrites the last move's record whatever its version: only this CN writes its key.
  const std::string key = cluster::MoveKey(cluster_, cn_);
  Result<cluster::Versioned> now = store_.Get(key);
  if (!now.ok()) return;  // said next period
  m.record.seq = seq;
  Result<uint64_t> put = store_.PutIf(key, m.record.Encode(), now->version);
  if (put.ok()) {
    m.said = m.drained = true;
  } else if (put.status().code() == Code::kUnknown) {
    m.said = true;  // it may have landed: from now on only an epoch ends the move
    m.started_ns = now_ns;
  }
}

void ShardMoves::Apply(const cluster::Configuration& next, const std::vector<uint16_t>& shards,
                       uint64_t now_ns, const std::function<bool(uint32_t)>& recovering) {
  if (!move_.has_value()) return;
  Move& m = *move_;
  const cluster::MoveRecord& r = m.record;
  if (m.said && next.cns[cn_].moves >= r.seq) {
    const uint64_t closed = now_ns - m.started_ns;
    counts_.made++;
    counts_.shards += r.shards.size();
    counts_.closed_ns_total += closed;
    counts_.closed_ns_max = std::max(counts_.closed_ns_max, closed);
    if (counts_.made_ns.size() < kMoveTimesMax) counts_.made_ns.push_back(now_ns);
    controls_.Event("moved " + std::to_string(r.shards.size()) + " shards to CN " +
                    std::to_string(r.to) + " (epoch " + std::to_string(next.epoch) + ")");
    move_.reset();
  } else if (!AliveAs(next, r.to, r.to_incarnation)) {
    // No later epoch makes it: a CM makes a move only to the incarnation it names.
    Reopen(shards, recovering, "CN " + std::to_string(r.to) + " failed before the move was made");
    counts_.cancelled++;
    move_.reset();
  }
}

std::optional<std::pair<uint16_t, std::vector<uint32_t>>> ShardMoves::MadeIn(
    const cluster::Configuration& next) const {
  if (!move_.has_value() || !move_->said || next.cns[cn_].moves < move_->record.seq) {
    return std::nullopt;
  }
  return std::make_pair(move_->record.to, move_->record.shards);
}

void ShardMoves::Reopen(const std::vector<uint16_t>& shards,
                        const std::function<bool(uint32_t)>& recovering, const std::string& why) {
  size_t reopened = 0;
  for (uint32_t s : move_->record.shards) {
    if (shards[s] != cn_ || recovering(s)) continue;
    controls_.OpenShard(s);
    reopened++;
  }
  controls_.Event(why + "; " + std::to_string(reopened) + " shards are served here again");
}

void ShardMoves::Pick(const cluster::Configuration& view, cluster::Configuration* next,
                      std::vector<uint16_t>* shards, std::vector<std::string>* what) {
  for (uint16_t h = 0; h < view.cns.size(); h++) {
    if (!view.cns[h].alive || !AliveAs(*next, h, view.cns[h].incarnation)) continue;
    Result<cluster::Versioned> v = store_.Get(cluster::MoveKey(cluster_, h));
    if (!v.ok() || v->version == 0) continue;
    Result<cluster::MoveRecord> r = cluster::MoveRecord::Decode(v->value, shards_);
    if (!r.ok()) {
      controls_.Event("ignored " + cluster::MoveKey(cluster_, h) + ": " + r.status().ToString());
      continue;
    }
    // Made already (or an old incarnation's): a record is made once.
    // (A return of h's made in this epoch took its number: next's count is then past view's.)
    if (r->incarnation != view.cns[h].incarnation || r->seq != view.cns[h].moves + 1 ||
        next->cns[h].moves != view.cns[h].moves) {
      continue;
    }
    if (r->to == h || !AliveAs(view, r->to, r->to_incarnation) ||
        !AliveAs(*next, r->to, r->to_incarnation)) {
      continue;
    }
    if (!std::all_of(r->shards.begin(), r->shards.end(),
                     [&](uint32_t s) { return (*shards)[s] == h; })) {
      continue;
    }
    for (uint32_t s : r->shards) (*shards)[s] = r->to;
    next->cns[h].moves = r->seq;
    what->push_back(std::to_string(r->shards.size()) + " shards move from CN " + std::to_string(h) +
                    " to CN " + std::to_string(r->to));
  }
}

bool ShardMoves::Moving(uint32_t s) const {
  return move_.has_value() &&
         std::binary_search(move_->record.shards.begin(), move_->record.shards.end(), s);
}

}  // namespace pond::recovery
