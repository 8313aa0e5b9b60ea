// SimMembership (sim_membership.h): the schedule's node faults carried out — each CN's queue of
// faults in order, cuts and heals of CNs and hosts, CN crashes and restarts, MN crashes and
// restarts, the coordination service's outages — and the waits by which a fault happens only
// when the cluster survives it.
#include <algorithm>
#include <utility>

#include "pond/base/assert.h"
#include "pond/cluster/directory.h"
#include "pond/lock/lock_key.h"
#include "pond/node/sim_driver.h"
#include "pond/node/sim_membership.h"
#include "pond/node/sim_membership_parts.h"
#include "pond/node/worker_context.h"
#include "pond/store/layout.h"

namespace pond::node {

void SimMembership::Enqueue(uint16_t cn, NodeFaultKind kind, bool first) {
  std::vector<NodeFaultKind>& q = queued_[cn];
  q.insert(first ? q.begin() : q.end(), kind);
  queued_count_++;
  if (q.size() == 1) RunQueue(cn);
}

void SimMembership::RunQueue(uint16_t cn) {
  std::vector<NodeFaultKind>& q = queued_[cn];
  while (!q.empty()) {
    bool done = false;
    if (q.front() == NodeFaultKind::kCrashCn) {
      // A crash aimed at a step waits for OnStep (or its deadline); one that would leave no CN
      // serving waits for one to be back, and a CN is crashed only once it is let in.
      if (step_aims_[cn].step != CommitStep::kNone) return;
      const Node& n = *nodes_[cn];
      done = ServingBesides(cn) > 0 && n.serving && !n.crashed && CrashSurvived(cn);
      if (done && !crash_given_up_[cn]) Crash(cn, /*fenced=*/false);
    } else if (q.front() == NodeFaultKind::kPartitionCn ||
               q.front() == NodeFaultKind::kPartitionHost) {
      done = Cut(cn, q.front() == NodeFaultKind::kPartitionHost);
    } else if (q.front() == NodeFaultKind::kHealCn || q.front() == NodeFaultKind::kHealHost) {
      done = Heal(cn, q.front() == NodeFaultKind::kHealHost);
    } else if (q.front() == NodeFaultKind::kCutHosts || q.front() == NodeFaultKind::kHealHosts) {
      const PairTurn turn = queued_peers_[cn].front();
      if (turn.peer < cn) {  // the other host's turn does it
        done = pairs_done_.erase(turn.seq) > 0;
      } else {
        const std::vector<PairTurn>& theirs = queued_peers_[turn.peer];
        const bool their_turn = !theirs.empty() && theirs.front().seq == turn.seq &&
                                !queued_[turn.peer].empty() &&
                                queued_[turn.peer].front() == q.front();
        done = their_turn && (q.front() == NodeFaultKind::kCutHosts ? CutHosts(cn, turn.peer)
                                                                    : HealHosts(cn, turn.peer));
        if (done) pairs_done_.insert(turn.seq);
      }
      if (done) queued_peers_[cn].erase(queued_peers_[cn].begin());
    } else if (crash_given_up_[cn]) {  // its crash never happened
      crash_given_up_[cn] = false;
      done = true;
    } else {
      done = Restart(cn);
    }
    if (!done) {
      engine_.At(engine_.now() + kRetryNs, [this, cn, gen = generation_] {
        if (gen == generation_) RunQueue(cn);
      });
      return;
    }
    q.erase(q.begin());
    queued_count_--;
  }
}

void SimMembership::AimCrash(uint16_t cn, CommitStep step) {
  StepAim& a = step_aims_[cn];
  a.step = step;
  const uint64_t token = ++a.token;
  // Bounded: a CN whose transactions never reach the step crashes at the deadline anyway.
  engine_.At(engine_.now() + kStepCrashWaitNsMax, [this, cn, token, gen = generation_] {
    StepAim& aim = step_aims_[cn];
    if (gen != generation_ || aim.token != token || aim.step == CommitStep::kNone) return;
    aim.step = CommitStep::kNone;
    step_crashes_unaimed_++;
    RunQueue(cn);
  });
}

void SimMembership::OnStep(uint16_t cn, CommitStep step) {
  StepAim& a = step_aims_[cn];
  if (a.step != step || IsCrashed(cn)) return;
  // Only once the crash is next in the CN's queue and would go ahead now.
  const std::vector<NodeFaultKind>& q = queued_[cn];
  if (q.empty() || q.front() != NodeFaultKind::kCrashCn || ServingBesides(cn) == 0 ||
      !nodes_[cn]->serving || crash_given_up_[cn] || !Survives(MnsOut(), /*cn_away=*/true)) {
    return;
  }
  a.step = CommitStep::kNone;
  step_crashes_[static_cast<size_t>(step)]++;
  // Called from inside the transaction: the crash is the next event at this instant, and
  // nothing the CN launches before it leaves (a CN left running mute would hang: checked).
  cl_.sim_fabric_->DieNow(cn);
  engine_.At(engine_.now(), [this, cn, gen = generation_] {
    if (gen != generation_) return;
    RunQueue(cn);
    POND_CHECK_MSG(nodes_[cn]->crashed, "a crash aimed at a commit step did not happen at once");
  });
}

bool SimMembership::CrashSurvived(uint16_t cn) {
  // As a cut waits (Cut): the CN must be declared, which needs the CM to read enough MNs, and a
  // restarted MN counts up for the schedule's check from its restart-mn but is read only once
  // its copy ends.
  if (Survives(MnsOut(), /*cn_away=*/true)) {
    crash_waiting_since_[cn] = 0;
    return true;
  }
  if (!GiveUp(&crash_waiting_since_[cn])) return false;
  crash_given_up_[cn] = true;  // and its restart-cn comes to nothing
  return true;
}

int SimMembership::ServingBesides(uint16_t cn) const {
  int serving = 0;
  for (uint16_t other = 0; other < nodes_.size(); other++) {
    const Node* n = nodes_[other].get();
    serving += other != cn && n != nullptr && !n->crashed && n->serving && !cut_[other];
  }
  return serving;
}

bool SimMembership::Cut(uint16_t cn, bool host) {
  // As a crash waits (RunQueue): not the last CN serving, and only once it serves.
  const Node& n = *nodes_[cn];
  if (ServingBesides(cn) == 0 || !n.serving || n.crashed) return false;
  // A host's MN is cut only once it is read like any replica: a restart-mn before it waits for
  // its declaration and copy, as a crash of another MN waits (CrashMn).
  if (host &&
      (mn_crashed_[cn] || config_.mns.empty() || !config_.mns[cn].alive ||
       config_.mns[cn].leaving || config_.mns[cn].rejoin != cluster::MnStatus::Rejoin::kNone)) {
    return false;
  }
  // The cut leaves CN `cn` away until it fences and is declared, and a CM declares a CN only
  // once it has read enough MNs (CnMembership::Declarable): it waits until the MNs out — its own
  // MN too, for a host — are few enough for that. A schedule's check counts an MN up from its
  // restart-mn, but here it stays unread until its copy ends: cut then, with another MN out too,
  // no CN down would ever be declared, nor its locks released (fault seeds 73, 142 and 166).
  if (!Survives(MnsOut() + (host ? 1 : 0), /*cn_away=*/true)) {
    if (!GiveUp(&cut_waiting_since_[cn])) return false;
    cut_given_up_[cn] = true;  // and its heal comes to nothing
    return true;
  }
  cut_waiting_since_[cn] = 0;
  cut_[cn] = true;
  FailoverStats::Partition p{cn, engine_.now() - base_ns_};
  if (host) {
    // Its MN keeps running, its CPU beating into a lease page that nobody else can read now; its
    // memory stays, and only CN `cn` reaches it.
    POND_CHECK(!mn_crashed_[cn]);
    host_cut_[cn] = true;
    cl_.sim_fabric_->PartitionHost(cn);
    p.host = true;
  } else {
    cl_.sim_fabric_->PartitionCn(cn);
  }
  partitions_.push_back(p);
  return true;
}

bool SimMembership::Heal(uint16_t cn, bool host) {
  if (cut_given_up_[cn]) {  // its partition never happened
    cut_given_up_[cn] = false;
    return true;
  }
  if (host && host_cut_[cn]) {
    host_cut_[cn] = false;
    host_healed_[cn] = engine_.now();
    cl_.sim_fabric_->HealHost(cn);
    // Declared meanwhile (its beat unread for a lease): the cluster has given its place up, and
    // its memory is what its replicas held when nobody could write it any more. It comes back as
    // a restarted MN, blank, rejoining. Never declared: it goes on as if nothing happened.
    if (!config_.mns.empty() && (!config_.mns[cn].alive || config_.mns[cn].leaving)) {
      LoseMnPlace(static_cast<MnId>(cn));
    }
  }
  if (cut_[cn]) {
    cut_[cn] = false;
    if (!host) cl_.sim_fabric_->HealCn(cn);
    for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
      if (it->cn != cn) continue;
      it->healed_ns = engine_.now() - base_ns_;
      break;
    }
  }
  // Healed before it fenced: it goes on (what waited on either side is sent again). After: it
  // comes back as a daemon's supervisor restarts it, once its failure is recovered.
  if (!nodes_[cn]->crashed) return true;
  return Restart(cn);
}

bool SimMembership::CutHosts(uint16_t x, uint16_t y) {
  // As Cut waits: both CNs serving, a CN besides them serving, both MNs read like any replica,
  // and the cluster surviving both CNs away and one of the MNs out (a CM on one host declares
  // the other's MN).
  int serving = 0;
  for (uint16_t other = 0; other < nodes_.size(); other++) {
    const Node* n = nodes_[other].get();
    serving +=
        other != x && other != y && n != nullptr && !n->crashed && n->serving && !cut_[other];
  }
  for (uint16_t h : {x, y}) {
    const Node& n = *nodes_[h];
    if (!n.serving || n.crashed || mn_crashed_[h] || config_.mns.empty() || !config_.mns[h].alive ||
        config_.mns[h].leaving || config_.mns[h].rejoin != cluster::MnStatus::Rejoin::kNone) {
      return false;
    }
  }
  if (serving == 0) return false;
  if (!Survives(MnsOut() + 1, /*cn_away=*/true)) {
    if (!GiveUp(&cut_waiting_since_[x])) return false;
    cut_given_up_[x] = true;  // and its heal comes to nothing
    return true;
  }
  cut_waiting_since_[x] = 0;
  cut_from_[x] = y;
  cut_from_[y] = x;
  cl_.sim_fabric_->CutHosts(x, y);
  for (auto [h, other] : {std::pair{x, y}, std::pair{y, x}}) {
    FailoverStats::Partition p{h, engine_.now() - base_ns_};
    p.apart_from = other;
    partitions_.push_back(p);
  }
  return true;
}

bool SimMembership::HealHosts(uint16_t x, uint16_t y) {
  if (cut_given_up_[x]) {  // the cut never happened
    cut_given_up_[x] = false;
    return true;
  }
  if (cut_from_[x] == y) {
    cut_from_[x] = cut_from_[y] = -1;
    cl_.sim_fabric_->HealHosts(x, y);
    for (uint16_t h : {x, y}) {
      host_healed_[h] = engine_.now();
      // Declared meanwhile, its MN comes back as a restarted one (as after heal-host).
      if (!config_.mns.empty() && (!config_.mns[h].alive || config_.mns[h].leaving)) {
        LoseMnPlace(static_cast<MnId>(h));
      }
      for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
        if (it->cn != h) continue;
        it->healed_ns = engine_.now() - base_ns_;
        break;
      }
    }
  }
  // A CN that fenced comes back as a daemon's supervisor restarts it; one of the two may have
  // to wait (its failure not recovered yet), and the heal waits with it.
  bool done = true;
  for (uint16_t h : {x, y}) {
    if (nodes_[h]->crashed && !Restart(h)) done = false;
  }
  return done;
}

void SimMembership::Crash(uint16_t cn, bool fenced) {
  Node& n = *nodes_[cn];
  POND_CHECK(!n.crashed);
  n.crashed = true;
  cl_.sim_fabric_->CrashCn(cn);
  cl_.driver_->StopCn(cn);
  for (auto& w : cl_.cns_[cn]->workers) {
    cl_.clients_running_ -= w->clients_running();
    w->clients_running() = 0;
  }
  Failure f;
  f.cn = cn;
  f.incarnation = n.incarnation;
  f.stats.cn = cn;
  f.stats.crash_ns = engine_.now() - base_ns_;
  f.stats.fenced = fenced;
  failures_.push_back(f);
  if (fenced) {
    for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
      if (it->cn != cn) continue;
      if (it->healed_ns == 0 && (cut_[cn] || InHostsCut(cn))) {
        it->fenced_ns = engine_.now() - base_ns_;
      }
      break;
    }
  }
  // A daemon that fenced itself exits, and its supervisor starts it again — once it can reach
  // the service: a CN still cut off comes back when it heals (Heal).
  // One on a host cut apart from another comes back at heal-hosts, too.
  if (fenced && !cut_[cn] && !InHostsCut(cn)) {
    Enqueue(cn, NodeFaultKind::kRestartCn, /*first=*/true);
  }
}

bool SimMembership::Restart(uint16_t cn) {
  // The oracle moved away when it was declared; the survivors heard so first.
  if (cl_.tso_cn_ == cn) return false;
  // A daemon starting then waits for the service (deploy/cn_process.cc's ReadStart loops on
  // TryStart).
  if (store_->down || cut_[cn] || InHostsCut(cn)) return false;
  const ClusterConfig& c = cl_.config();
  recovery::StartOptions o{.cluster = kClusterName,
                           .cn = cn,
                           .cns = static_cast<uint16_t>(c.cns),
                           .mns = static_cast<uint16_t>(c.mns),
                           .shards = lock::kShards};
  Result<std::optional<recovery::CnStart>> start = recovery::TryStart(*store_, o);
  POND_CHECK_MSG(start.ok(), start.status().ToString().c_str());
  if (!start->has_value()) return false;  // its old incarnation is not declared failed yet

  const recovery::CnStart& s = **start;
  POND_CHECK(s.restarted);
  cl_.RestartCn(cn, s.incarnation, s.config);
  // It starts from the epoch it read, as a daemon does (cluster.cc, process_start_).
  CnContext& me = *cl_.cns_[cn];
  me.shard_map.AssignAll(s.shards);
  me.placement = store::Placement(cl_.layout().num_mns, cl_.layout().replication);
  cluster::ApplyMnStates(s.config, me.placement);
  for (auto& w : cl_.cns_[cn]->workers) {
    w->tso().SetHost(cl_.TsoAsk(cn, w->index(), s.config.tso_host), nullptr);
  }
  StartNode(cn, s);
  return true;
}

void SimMembership::SetCoordinationDown(bool down) {
  POND_CHECK(store_->down != down);
  store_->down = down;
  const uint64_t now = engine_.now() - base_ns_;
  if (down) {
    coord_outages_.push_back(FailoverStats::CoordOutage{now, 0});
  } else {
    coord_outages_.back().up_ns = now;
  }
}

void SimMembership::CrashMn(MnId mn) {
  // One whose place a host cut lost waits for that restart first, and then to be let back in:
  // crashed before that, blank and asking to rejoin, it would restart unseen by any CN, and no
  // epoch would ever declare the crash (SmallBank fault seed 441: a crash-mn that had waited out
  // MN 2's host cut crashed it 1 us after its restart and 0.4 ms before its rejoin epoch).
  if (mn_crashed_[mn] || (!config_.mns.empty() && !config_.mns[mn].alive)) {
    mn_crash_pending_[mn] = true;
    RetryMnFault(mn, &SimMembership::CrashMn);
    return;
  }
  // One that would leave more MNs out than the cluster survives — more than R - 1 (a group with
  // no full copy), or, with a CN down or cut off or the service down, more than a CM can declare
  // a CN or a CN renew its lease without — waits until a rejoining MN is read like any replica
  // (the schedule's check, node_faults.cc, counts only crashes and restarts; a restart's copy
  // takes the time it takes), or a CN is back. Bounded as a cut's wait is (Cut).
  if (!Survives(MnsOut() + 1, CnAway())) {
    if (GiveUp(&mn_crash_waiting_since_[mn])) {
      mn_crash_given_up_[mn] = true;  // and its restart-mn comes to nothing
      mn_crash_pending_[mn] = false;
    } else {
      mn_crash_pending_[mn] = true;
      RetryMnFault(mn, &SimMembership::CrashMn);
    }
    return;
  }
  mn_crash_pending_[mn] = false;
  mn_crash_waiting_since_[mn] = 0;
  mn_crashed_[mn] = true;
  cl_.sim_fabric_->CrashMn(mn);
  mn_failures_.push_back(FailoverStats::MnFailure{mn, engine_.now() - base_ns_});
}

void SimMembership::LoseMnPlace(MnId mn) {
  if (mn_crashed_[mn]) return;
  mn_crash_given_up_[mn] = false;  // an older crash-mn's, whose restart-mn never came
  // As a crash: nothing reaches it any more, and its memory is gone (it has no place to keep).
  mn_crashed_[mn] = true;
  cl_.sim_fabric_->CrashMn(mn);
  RebootMn(mn);
}

void SimMembership::RestartMn(MnId mn) {
  // Its crash-mn may still wait (CrashMn); this restart is that crash's, not an earlier one's.
  if (mn_crash_pending_[mn]) {
    RetryMnFault(mn, &SimMembership::RestartMn);
    return;
  }
  RebootMn(mn);
}

void SimMembership::RebootMn(MnId mn) {
  // As an MN daemon does: not before its failure is declared (the configuration names it down,
  // so no CN writes its memory any more), then blank memory laid out from the catalog, its beat,
  // and its request to rejoin as the next incarnation — tried again while the coordination
  // service is down. One whose crash-mn was given up (CrashMn) is running: nothing to do.
  if (mn_crash_given_up_[mn] && !mn_crashed_[mn]) {
    mn_crash_given_up_[mn] = false;
    return;
  }
  const bool declared = !config_.mns.empty() && !config_.mns[mn].alive;
  Status asked = Status::Ok();
  if (declared) {
    if (mn_crashed_[mn]) {
      mn_crashed_[mn] = false;
      cl_.sim_fabric_->RestartMn(mn);
      // As its daemon formats it: a superblock that knows no table. The machines lay out the
      // catalog before they read it (LayOutRestarted).
      store::FormatRegion(cl_.fabric_->region(mn), cl_.layout(), mn);
      for (auto it = mn_failures_.rbegin(); it != mn_failures_.rend(); ++it) {
        if (it->mn != mn) continue;
        it->restart_ns = engine_.now() - base_ns_;  // its latest failure's
        break;
      }
    }
    const std::string inc = std::to_string(config_.mns[mn].incarnation + 1);
    asked =
        cluster::PutOwned(*store_, cluster::MnJoinKey(kClusterName, mn),
                          std::span(reinterpret_cast<const std::byte*>(inc.data()), inc.size()));
  }
  if (declared && asked.ok()) return;
  RetryMnFault(mn, &SimMembership::RebootMn);
}

int SimMembership::MnsOut() const {
  int out = 0;
  for (MnId m = 0; m < mn_crashed_.size(); m++) {
    const bool cut = m < host_cut_.size() && host_cut_[m];
    const bool readable =
        !mn_crashed_[m] && !cut &&
        (config_.mns.empty() || (config_.mns[m].alive && !config_.mns[m].leaving &&
                                 config_.mns[m].rejoin == cluster::MnStatus::Rejoin::kNone));
    out += !readable;
  }
  // Two hosts cut apart count one MN out until one of theirs is declared (then it counts above):
  // a CM on one host may declare the other's.
  for (uint16_t x = 0; x < cut_from_.size(); x++) {
    const int y = cut_from_[x];
    if (y <= x || config_.mns.empty()) continue;
    const cluster::MnStatus &a = config_.mns[x], &b = config_.mns[static_cast<size_t>(y)];
    if (a.alive && !a.leaving && b.alive && !b.leaving) out++;
  }
  return out;
}

bool SimMembership::Survives(int mns_out, bool cn_away) const {
  // The limits a schedule is checked against (ValidateNodeFaults, sim::FaultLimits): R - 1 MNs
  // out, each group keeping a copy; and with a CN to declare, or without the service, MNs less
  // LeaseQuorum: a CM declares a CN only once it has read mns - LeaseQuorum + 1 MNs, and a CN
  // renews its lease without the service only on LeaseQuorum MNs' beats (docs/recovery.md
  // "Fencing").
  const ClusterConfig& c = cl_.config();
  int most = c.replication - 1;
  if (cn_away || store_->down) {
    most = std::min(most, std::max(0, c.mns - cluster::LeaseQuorum(c.mns, c.replication)));
  }
  // With lock words on MNs a commit's writes lie on its R - 1 backups alone until its last
  // round: R - 1 MNs lost beside a CN that died between the two would leave a key whose write is
  // nowhere, and another key's perhaps seen. So R - 2 until every CN failure is recovered
  // (docs/recovery.md "Lock words on MNs, and an MN crash"; ford fault seed 155: a host cut's MN
  // and a crashed one, beside its fenced CN's half-done commit).
  // The same holds for a commit answered early (early_ack): its timestamp is on the backups
  // alone until its last round.
  if ((!c.protocol.cn_locks || c.protocol.early_ack) && CnFailureOpen()) {
    most = std::min(most, c.replication - 2);
  }
  return mns_out <= most;
}

bool SimMembership::CnFailureOpen() const {
  for (const Failure& f : failures_) {
    if (f.stats.recovered_ns == 0) return true;
  }
  return false;
}

bool SimMembership::CnAway() const {
  for (uint16_t cn = 0; cn < nodes_.size(); cn++) {
    if (cut_[cn] || IsCrashed(cn) || InHostsCut(cn)) return true;
  }
  return false;
}

bool SimMembership::GiveUp(uint64_t* since) {
  // Bounded: an MN whose copy never ends, or a CN never back, must not hold the run (and the
  // faults queued behind it) for good; given up, the fault never happens, and is counted.
  const uint64_t now = std::max<uint64_t>(engine_.now(), 1);
  if (*since == 0) *since = now;
  if (now - *since < kMnsOutWaitNsMax) return false;
  *since = 0;
  faults_given_up_++;
  return true;
}

void SimMembership::RetryMnFault(MnId mn, void (SimMembership::*fault)(MnId)) {
  // Counted while it waits, so that a run does not end with a fault of its schedule not done.
  mn_faults_waiting_++;
  engine_.At(engine_.now() + kRetryNs, [this, mn, fault, gen = generation_] {
    mn_faults_waiting_--;
    if (gen == generation_) (this->*fault)(mn);
  });
}

}  // namespace pond::node
