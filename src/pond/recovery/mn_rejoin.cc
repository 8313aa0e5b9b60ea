#include "pond/recovery/mn_rejoin.h"

#include <algorithm>
#include <string>

#include "pond/btree/node.h"
#include "pond/cluster/directory.h"

namespace pond::recovery {

namespace {

const char* StepOf(cluster::MnStatus::Rejoin s) {
  using S = cluster::MnStatus::Rejoin;
  switch (s) {
    case S::kCopying:
      return "joined";
    case S::kFrozen:
      return "frozen";
    case S::kGated:
      return "gated";
    case S::kSwitched:
      return "switched";
    case S::kNone:
      break;
  }
  return "";
}

}  // namespace

void MnRejoins::Start(const cluster::Configuration& view) {
  for (uint16_t mn = 0; mn < view.mns.size(); mn++) {
    const cluster::MnStatus& m = view.mns[mn];
    if (m.alive && m.rejoin != State::kNone) Enter(mn, m, /*fresh=*/true);
  }
  Gate();
}

bool MnRejoins::Holding() const {
  for (const auto& [mn, p] : parts_) {
    if (p.state == State::kGated || p.state == State::kSwitched) return true;
  }
  return false;
}

void MnRejoins::Gate() { controls_.SetVisibleGate(Holding()); }

void MnRejoins::Enter(uint16_t mn, const cluster::MnStatus& m, bool fresh) {
  Part& p = parts_[mn];
  if (p.incarnation != m.incarnation || p.state == State::kNone) {
    p = Part{.incarnation = m.incarnation};
    // A new process: reached where it serves now, before this CN writes to it.
    if (Status s = controls_.ReachRestartedMn(static_cast<MnId>(mn), m.incarnation); !s.ok()) {
      controls_.Event("cannot reach restarted MN " + std::to_string(mn) + ": " + s.message());
    }
  }
  p.state = m.rejoin;
  p.done = false;
  p.syncing = false;
  const MnId id = static_cast<MnId>(mn);
  switch (m.rejoin) {
    case State::kCopying:
      controls_.MnJoining(id);
      break;
    case State::kFrozen:
    case State::kGated:
      controls_.MnJoining(id);
      controls_.MnFrozen(id);
      break;
    case State::kSwitched:
      // The gate is closed first (Apply's end sees to it before the workers take the epoch):
      // this CN put "gated", so no commit of it is between its write-visible rounds.
      controls_.SetVisibleGate(true);
      controls_.MnUp(id);
      break;
    case State::kNone:
      break;
  }
  // Taken after the placement changed: a transaction that starts later chooses replicas by it.
  p.mark = fresh ? std::vector<uint64_t>{} : controls_.TxnMark();
}

void MnRejoins::Apply(const cluster::Configuration& view, const cluster::Configuration& next) {
  for (uint16_t mn = 0; mn < next.mns.size(); mn++) {
    const cluster::MnStatus& was = view.mns[mn];
    const cluster::MnStatus& now = next.mns[mn];
    if (now.alive && now.rejoin != State::kNone) {
      if (!was.alive || was.rejoin != now.rejoin || was.incarnation != now.incarnation) {
        Enter(mn, now, /*fresh=*/false);
      }
      continue;
    }
    auto it = parts_.find(mn);
    if (it == parts_.end()) continue;
    // The rejoin ended: finished, or abandoned as the MN failed again (declared as any MN).
    if (now.alive && !now.leaving && now.incarnation == it->second.incarnation) {
      controls_.MnUp(static_cast<MnId>(mn));
      controls_.Event("MN " + std::to_string(mn) + " is back as incarnation " +
                      std::to_string(now.incarnation) + " (epoch " + std::to_string(next.epoch) +
                      "): read like any replica");
    } else {
      controls_.Event("MN " + std::to_string(mn) + " failed while rejoining (epoch " +
                      std::to_string(next.epoch) + ")");
    }
    parts_.erase(it);
  }
  Gate();
}

void MnRejoins::Progress(const cluster::Configuration& view) {
  for (auto& [mn, p] : parts_) {
    if (!p.done) {
      bool ready = true;
      if (p.state == State::kCopying || p.state == State::kFrozen) {
        ready = controls_.EndedSince(p.mark).value_or(false);
      } else if (p.state == State::kGated) {
        ready = controls_.CommitsMidVisible().value_or(1) == 0;
      }
      if (ready && Put(mn, p, StepOf(p.state)).ok()) p.done = true;
    }
    if (p.state != State::kCopying || !p.done) continue;
    // Copying: once every CN's transactions from before have ended, this CN's share, dealt over
    // the CNs alive now; dealt and copied again when they change (a copy is idempotent).
    if (!DoneByAll(view, mn, p.incarnation, "joined")) continue;
    const std::string step = CopyStep(view);
    if (p.copy_step != step) {
      controls_.StartCopy(static_cast<MnId>(mn), Share(view));
      p.copy_step = step;
      p.copy_put = false;
      continue;
    }
    if (p.copy_put) continue;
    std::optional<Result<uint64_t>> r = controls_.CopyResult(static_cast<MnId>(mn));
    if (!r) continue;
    if (r->ok()) {
      p.copy_put = Put(mn, p, step).ok();
    } else if (r->status().code() != Code::kUnavailable) {
      // Unavailable: the MN failed again, and an epoch will say so. Anything else is tried again.
      controls_.Event("copying onto MN " + std::to_string(mn) +
                      " failed: " + r->status().ToString() + "; copying again");
      p.copy_step.clear();
    }
  }
}

std::vector<uint16_t> MnRejoins::Pick(const cluster::Configuration& view,
                                      cluster::Configuration* next,
                                      std::vector<std::string>* what) {
  std::vector<uint16_t> let_in;
  for (uint16_t mn = 0; mn < view.mns.size(); mn++) {
    const cluster::MnStatus& m = view.mns[mn];
    cluster::MnStatus& n = next->mns[mn];
    if (n != m) continue;  // changed this period already (declared failed)
    if (!m.alive) {
      Result<cluster::Versioned> j = store_.Get(cluster::MnJoinKey(cluster_, mn));
      if (!j.ok() || j->value.empty()) continue;
      const std::string text(reinterpret_cast<const char*>(j->value.data()), j->value.size());
      if (text != std::to_string(m.incarnation + 1)) continue;
      n = cluster::MnStatus{.alive = true,
                            .rejoin = State::kCopying,
                            .incarnation = static_cast<uint16_t>(m.incarnation + 1)};
      what->push_back("MN " + std::to_string(mn) + " rejoins as incarnation " + text);
      let_in.push_back(mn);
      continue;
    }
    if (m.rejoin == State::kNone) continue;
    auto it = parts_.find(mn);
    if (it == parts_.end() || it->second.incarnation != m.incarnation) continue;
    Part& p = it->second;
    const std::string name = "MN " + std::to_string(mn);
    switch (m.rejoin) {
      case State::kCopying:
        if (DoneByAll(view, mn, m.incarnation, CopyStep(view))) {
          n.rejoin = State::kFrozen;
          what->push_back(name + " is copied");
        }
        break;
      case State::kFrozen: {
        if (!DoneByAll(view, mn, m.incarnation, "frozen")) break;
        if (!p.syncing) {
          controls_.StartSync(static_cast<MnId>(mn));
          p.syncing = true;
          break;
        }
        std::optional<Status> s = controls_.SyncResult();
        if (!s) break;
        p.syncing = false;  // done or failed: a failure is tried again next period
        if (s->ok()) {
          n.rejoin = State::kGated;
          what->push_back(name + "'s cursors are in step");
        }
        break;
      }
      case State::kGated:
        if (DoneByAll(view, mn, m.incarnation, "gated")) {
          n.rejoin = State::kSwitched;
          what->push_back(name + " is read");
        }
        break;
      case State::kSwitched:
        if (DoneByAll(view, mn, m.incarnation, "switched")) {
          n.rejoin = State::kNone;
          what->push_back(name + " is up");
        }
        break;
      case State::kNone:
        break;
    }
  }
  return let_in;
}

std::string MnRejoins::CopyStep(const cluster::Configuration& view) {
  std::string step = "copied";
  for (uint16_t c : view.Alive()) step += "." + std::to_string(c);
  return step;
}

std::vector<CopyUnit> MnRejoins::Share(const cluster::Configuration& view) const {
  const std::vector<uint16_t> alive = view.Alive();
  const size_t rank =
      static_cast<size_t>(std::find(alive.begin(), alive.end(), cn_) - alive.begin());
  std::vector<CopyUnit> mine;
  if (rank == alive.size()) return mine;
  size_t k = 0;
  const int reps = controls_.placement().replication();
  for (const store::TableInfo& t : controls_.catalog().tables()) {
    for (int i = 0; i < reps; i++) {
      for (uint64_t b = 0; b < t.bucket_count; b += kCopyUnitBuckets, k++) {
        if (k % alive.size() != rank) continue;
        mine.push_back(CopyUnit{t.id, static_cast<uint8_t>(i), b,
                                std::min(t.bucket_count, b + kCopyUnitBuckets)});
      }
    }
    if (!t.ordered) continue;
    // Its B+Tree's copies: the header and every node of each range (a unit past the range's
    // cursor copies nothing).
    const uint64_t lines = t.tree_bytes / btree::kNodeBytes + 1;
    for (int i = 0; i < reps; i++) {
      for (uint64_t l = 0; l < lines; l += kCopyUnitLines, k++) {
        if (k % alive.size() != rank) continue;
        mine.push_back(
            CopyUnit{t.id, static_cast<uint8_t>(i), l, std::min(lines, l + kCopyUnitLines), true});
      }
    }
  }
  return mine;
}

std::string MnRejoins::Key(uint16_t mn, uint16_t incarnation, const std::string& step,
                           uint16_t who) const {
  return cluster::MnRejoinStepKey(cluster_, mn, incarnation, step, who);
}

Status MnRejoins::Put(uint16_t mn, const Part& p, const std::string& step) {
  Result<uint64_t> put = store_.PutIf(Key(mn, p.incarnation, step, cn_), {}, 0);
  if (put.ok() || put.status().code() == Code::kConflict) return Status::Ok();
  return put.status();
}

bool MnRejoins::DoneByAll(const cluster::Configuration& view, uint16_t mn, uint16_t incarnation,
                          const std::string& step) const {
  for (uint16_t c : view.Alive()) {
    Result<cluster::Versioned> v = store_.Get(Key(mn, incarnation, step, c));
    if (!v.ok() || v->version == 0) return false;
  }
  return true;
}

}  // namespace pond::recovery
