#include "pond/recovery/cn_membership.h"

#include <algorithm>
#include <bit>

#include "pond/base/assert.h"
#include "pond/store/layout.h"

namespace pond::recovery {

namespace {

// Failure::recovery: a log's recovery by this CN, from the coordination half's start of it to
// the beat half's end of it and back.
constexpr int kRecoveryIdle = 0, kRecoveryRunning = 1, kRecoveryDone = 2, kRecoveryFailed = 3;

}  // namespace

CnMembership::CnMembership(MembershipOptions o, cluster::Configuration view,
                           std::vector<uint16_t> shards, cluster::ConfigStore& store, Clock& clock,
                           CnControls& controls, MembershipCounts& counts, Scheduler& beat_sched,
                           Endpoint& beat_ep)
    : o_(std::move(o)),
      store_(store),
      clock_(clock),
      controls_(controls),
      counts_(counts),
      beat_sched_(beat_sched),
      beat_ep_(beat_ep),
      view_(std::move(view)),
      shards_(std::move(shards)),
      returns_(o_.cluster, o_.cn, o_.shards, store, controls),
      rejoins_(o_.cluster, o_.cn, store, controls) {
  beat_view_ = view_;
  rejoins_.Start(view_);
  const uint64_t now = clock_.NowNs();
  cn_seen_.assign(o_.cns, Seen{0, now});
  mn_seen_.assign(o_.mns, Seen{0, now});
  mn_busy_.assign(o_.mns, MnBusy{});
  mn_read_ns_.assign(o_.mns, 0);
  renewed_ns_ = now;
  // Whatever epochs came before it started, this CN applied none of them: as CM it waits a
  // lease, as after any epoch that drops an MN, before it declares a CN.
  dropped_ns_ = now;
  alive_ = view_.cns[o_.cn].alive;
  counts_.epoch = view_.epoch;
}

void CnMembership::Resumed() {
  const uint64_t now = clock_.NowNs();
  std::lock_guard lock(beat_mu_);
  for (Seen& s : cn_seen_) s.moved_ns = now;
  for (Seen& s : mn_seen_) s.moved_ns = now;
  renewed_ns_ = now;
}

void CnMembership::BeatTick() {
  if (fenced_.load()) return;
  const uint64_t now = clock_.NowNs();
  // A CN that has not renewed for its own lease can no longer know whether it was declared
  // failed: it stops before the CM, which counts a whole lease from its last beat it saw.
  const uint64_t from = LeaseFrom();
  if (renewed_ns_.load() < from) renewed_ns_ = from;
  const uint64_t renewed = renewed_ns_.load();
  if (now > renewed + o_.lease_ns - o_.lease_ns / 10) {
    std::string per_mn;
    for (size_t mn = 0; mn < mn_busy_.size(); mn++) {
      per_mn += "; MN " + std::to_string(mn) + ": last beat taken " +
                std::to_string((now - mn_busy_[mn].renewed_ns) / 1'000'000) + " ms ago" +
                (mn_busy_[mn].renewing ? ", one in flight" : "");
    }
    const uint64_t fresh = coord_fresh_ns_.load(std::memory_order_acquire);
    Fence("no beat a configuration manager would see for " +
          std::to_string((now - renewed) / 1'000'000) + " ms (the configuration last read " +
          (fresh == 0 ? std::string("never")
                      : std::to_string((now - fresh) / 1'000'000) + " ms ago") +
          ")" + per_mn);
    return;
  }
  Renew();
  Watch();
}

void CnMembership::RunQueued() {
  std::vector<std::function<Task<void>()>> spawn;
  {
    std::lock_guard lock(beat_mu_);
    spawn.swap(to_spawn_);
  }
  for (auto& fn : spawn) beat_sched_.Spawn(fn());
}

void CnMembership::CoordTick() {
  if (fenced_.load()) return;
  NoteCoordination(ReadConfig());
  if (fenced_.load()) return;
  Links();
  if (fenced_.load()) return;
  Adopt();
  NoteUndeclared();
  SayUnread();
  if (ActingCm()) Manage();
  for (auto& f : failures_) {
    if (!f->opened) Progress(*f);
  }
  // Not while a failure this CN knows of is unopened here: a returned shard may have come by it
  // (its CN failed, then the CN it went to), and opened at home before that recovery is over,
  // new transactions would lock keys its log recovery still rolls over (as Progress opens).
  if (std::all_of(failures_.begin(), failures_.end(), [](const auto& f) { return f->opened; })) {
    returns_.Progress();
  }
  rejoins_.Progress(view_);
}

void CnMembership::Renew() {
  const uint64_t beat = store::CnBeat(o_.incarnation, ++beat_count_);
  // Every MN on its own: a batch to an MN that died may take the transport's timeout to fail,
  // and must not hold up the beats the others take.
  for (int mn = 0; mn < o_.mns; mn++) {
    if (mn_busy_[mn].renewing || controls_.placement().IsDown(static_cast<MnId>(mn))) continue;
    mn_busy_[mn].renewing = true;
    const bool leaving = leaving_.load();
    const store::LeasePage::CnReport report{
        report_silent_.load(), uint64_t{o_.incarnation} << 48 |
                                   (report_coord_down_.load() ? store::kCnReportCoordDown : 0) |
                                   (report_in_.load() ? store::kCnReportIn : 0) |
                                   (leaving ? store::kCnReportLeft : 0)};
    beat_sched_.Spawn([](CnMembership* m, int mn, uint64_t beat,
                         store::LeasePage::CnReport report) -> Task<void> {
      const uint64_t sent = m->clock_.NowNs();
      // Its own copies: the writes read them after this coroutine suspends.
      uint64_t value = beat;
      const uint64_t page = store::kLeasePageOffset;
      const auto mn_id = static_cast<MnId>(mn);
      m->beat_ep_.Write(
          GAddr::Make(mn_id, page + offsetof(store::LeasePage, cn_beat) + 8 * uint64_t{m->o_.cn}),
          &value, 8);
      m->beat_ep_.Write(GAddr::Make(mn_id, page + offsetof(store::LeasePage, cn_report) +
                                               sizeof(report) * uint64_t{m->o_.cn}),
                        &report, sizeof(report));
      Status st = co_await m->beat_ep_.Flush();
      if (st.ok() && (report.flags & store::kCnReportLeft) != 0 && !m->mn_busy_[mn].left) {
        m->mn_busy_[mn].left = true;
        m->left_on_++;
      }
      if (st.ok()) {
        m->mn_busy_[mn].renewed_ns = sent;
        const uint64_t from = m->LeaseFrom();
        if (m->renewed_ns_.load() < from) m->renewed_ns_ = from;
      }
      m->mn_busy_[mn].renewing = false;
    }(this, mn, beat, report));
  }
}

void CnMembership::Watch() {
  std::vector<bool> alive;
  {
    std::lock_guard lock(beat_mu_);
    for (const cluster::MnStatus& m : beat_view_.mns) alive.push_back(m.alive);
  }
  for (int mn = 0; mn < o_.mns; mn++) {
    if (mn_busy_[mn].watching || !alive[mn]) continue;
    mn_busy_[mn].watching = true;
    beat_sched_.Spawn([](CnMembership* m, int mn) -> Task<void> {
      store::LeasePage page;
      const uint64_t asked = m->clock_.NowNs();
      m->beat_ep_.Read(GAddr::Make(static_cast<MnId>(mn), store::kLeasePageOffset), &page,
                       sizeof(page));
      const bool read = (co_await m->beat_ep_.Flush()).ok();
      m->mn_busy_[mn].watching = false;
      if (!read) co_return;  // an MN that does not answer does not beat
      const uint64_t now = m->clock_.NowNs();
      std::lock_guard lock(m->beat_mu_);
      m->mn_read_ns_[mn] = asked;
      Seen& s = m->mn_seen_[mn];
      if (page.mn_beat != s.beat) s = Seen{page.mn_beat, now};
      for (size_t cn = 0; cn < m->cn_seen_.size(); cn++) {
        const uint64_t b = page.cn_beat[cn];
        const store::LeasePage::CnReport& r = page.cn_report[cn];
        const bool current = store::CnBeatIncarnation(r.flags) == store::CnBeatIncarnation(b);
        // The incarnation the view holds counts: an older one's beats are its last. So does a
        // newer one that says it was let in, by an epoch this CN has not read — perhaps one it
        // put itself as CM just before it lost the coordination service, and then the reports
        // of the CN let in are the only way it learns the others cannot hear it.
        const uint16_t inc = store::CnBeatIncarnation(b);
        const uint16_t known = m->beat_view_.cns[cn].incarnation;
        const bool newer = inc > known && current && (r.flags & store::kCnReportIn) != 0;
        if (inc != known && !newer) continue;
        Seen& c = m->cn_seen_[cn];
        if (b <= c.beat) continue;
        c = Seen{b,
                 now,
                 current ? r.silent : 0,
                 current && (r.flags & store::kCnReportCoordDown) != 0,
                 newer,
                 current && !newer && (r.flags & store::kCnReportLeft) != 0};
      }
    }(this, mn));
  }
}

namespace {

// Whether every CM reads MN `m`'s lease page (and every CN its replicas): not down, not leaving,
// not rejoining before it is read. At most R-1 MNs are otherwise (Manage).
bool ReadByAll(const cluster::MnStatus& m) {
  using Rejoin = cluster::MnStatus::Rejoin;
  return m.alive && !m.leaving && (m.rejoin == Rejoin::kNone || m.rejoin == Rejoin::kSwitched);
}

}  // namespace

uint64_t CnMembership::LeaseFrom() const {
  // Read before the view: a read that came after the view it names (Apply, ReadConfig).
  const uint64_t fresh = coord_fresh_ns_.load(std::memory_order_acquire);
  std::vector<bool> read_by_all;
  {
    std::lock_guard lock(beat_mu_);
    for (const cluster::MnStatus& m : beat_view_.mns) read_by_all.push_back(ReadByAll(m));
  }
  // R MNs took it, or a majority of them (LeaseQuorum): a CM declares a CN only once it has read
  // every MN but R-1 (those down, leaving or rejoining) and a majority since, so one of those it
  // read holds it. This holds on the minority side of a cut too, which never hears the
  // configuration that drops the MNs it still reaches.
  std::vector<uint64_t> taken;
  uint64_t seen_by_cm = 0;
  for (size_t mn = 0; mn < mn_busy_.size(); mn++) {
    taken.push_back(mn_busy_[mn].renewed_ns);
    if (read_by_all[mn]) seen_by_cm = std::max(seen_by_cm, mn_busy_[mn].renewed_ns);
  }
  const size_t r = static_cast<size_t>(std::max(1, cluster::LeaseQuorum(o_.mns, o_.replication)));
  uint64_t quorum = 0;
  if (taken.size() >= r) {
    std::nth_element(taken.begin(), taken.begin() + static_cast<std::ptrdiff_t>(r - 1), taken.end(),
                     std::greater<>());
    quorum = taken[r - 1];
  }
  // Fewer MNs took it (too many MNs down, or out of reach): an MN that, by the configuration
  // read at `fresh`, every CM reads. An epoch after that read may drop it, so it counts from the
  // read at the latest; a CM waits a lease after applying such an epoch before it declares a CN
  // (Declarable).
  return std::max(quorum, std::min(fresh, seen_by_cm));
}

bool CnMembership::Declarable(uint16_t cn) const {
  if (!CnExpired(cn)) return false;
  std::lock_guard lock(beat_mu_);
  // It said it left, after its last write to the memory pool: nothing of it is left to fence.
  if (cn_seen_[cn].left) return true;
  // Alive at this instant, the CN had a renewal it took 0.9 of a lease before, on some MN a CM
  // must read (by either rule of LeaseFrom) — unless an epoch after its read dropped that MN,
  // which `dropped_ns_` covers. A read of each such MN asked for after then shows its beat moving.
  const uint64_t since =
      std::max(cn_seen_[cn].moved_ns, dropped_ns_) + o_.lease_ns - o_.lease_ns / 10;
  int read = 0;
  for (uint16_t mn = 0; mn < view_.mns.size(); mn++) {
    if (mn_read_ns_[mn] >= since) read++;
    if (ReadByAll(view_.mns[mn]) && mn_read_ns_[mn] < since) return false;
  }
  // Any LeaseQuorum MNs include one of those read.
  return read >= o_.mns - cluster::LeaseQuorum(o_.mns, o_.replication) + 1;
}

bool CnMembership::CnExpired(uint16_t cn) const {
  std::lock_guard lock(beat_mu_);
  return cn_seen_[cn].left || clock_.NowNs() > cn_seen_[cn].moved_ns + o_.lease_ns;
}

bool CnMembership::MnExpired(uint16_t mn) const {
  std::lock_guard lock(beat_mu_);
  return clock_.NowNs() > mn_seen_[mn].moved_ns + o_.lease_ns;
}

bool CnMembership::ActingCm() const {
  if (!view_.cns[o_.cn].alive) return false;
  for (uint16_t c = 0; c < o_.cn; c++) {
    if (view_.cns[c].alive && !CnExpired(c)) return false;
  }
  return true;
}

Status CnMembership::ReadConfig() {
  const std::string& name = o_.cluster;
  const uint64_t asked = clock_.NowNs();
  // The view is the service's as of `asked`: a renewal may lean on it (LeaseFrom).
  auto fresh = [&] {
    if (coord_fresh_ns_.load() < asked) coord_fresh_ns_.store(asked, std::memory_order_release);
  };
  Result<cluster::Versioned> v = store_.Get(cluster::ConfigKey(name));
  if (!v.ok()) return v.status();
  if (v->version == config_version_) {
    fresh();
    return Status::Ok();
  }
  Result<cluster::Configuration> next = cluster::Configuration::Decode(v->value);
  if (!next.ok()) {
    controls_.Event("unreadable configuration: " + next.status().message());
    return Status::Ok();
  }
  if (next->epoch <= view_.epoch) {
    config_version_ = v->version;  // the epoch this CN started from
    fresh();
    return Status::Ok();
  }
  Result<std::vector<uint16_t>> shards =
      cluster::ReadShardMap(store_, name, next->epoch, o_.shards);
  if (!shards.ok()) return Status::Ok();  // the CM writes the map first: read again next period
  config_version_ = v->version;
  Apply(*next, *shards);
  if (!fenced_.load()) fresh();
  return Status::Ok();
}

void CnMembership::Adopt() {
  // A failure declared before this CN was alive in an epoch it applied (it started, or was let
  // back in, while the recovery went on): it takes its part all the same — it holds none of the
  // failed CN's locks and none of its shards, so its steps are quick — because the others wait
  // for every CN alive, and should they all fail, it is who finishes the recovery.
  for (uint16_t c = 0; c < view_.cns.size(); c++) {
    const cluster::CnStatus& s = view_.cns[c];
    if (s.alive || s.failed_epoch == 0 || c == o_.cn) continue;
    const bool known = std::any_of(failures_.begin(), failures_.end(), [&](const auto& f) {
      return f->cn == c && f->epoch == s.failed_epoch;
    });
    if (known) continue;
    auto f = std::make_unique<Failure>();
    f->epoch = s.failed_epoch;
    f->cn = c;
    f->incarnation = s.incarnation;
    Result<cluster::LogAreas> logs = cluster::ReadLogAreas(store_, o_.cluster, c, s.incarnation);
    if (!logs.ok()) continue;  // the service is away: adopted next period
    f->logs = logs->areas;
    f->log_bytes = logs->bytes;
    failures_.push_back(std::move(f));
  }
}

void CnMembership::Links() {
  report_in_ = view_.cns[o_.cn].alive;
  if (!view_.cns[o_.cn].alive) return;  // not let in (back) yet: nobody waits on it
  report_coord_down_ = !coord_up_;
  // Who takes part: the CNs alive whose beat moved within half a lease. A CN that crashed stops
  // beating at once, and so leaves before anyone has waited on it for a lease; one cut off from
  // the others still beats (its one-sided writes reach the memory pool).
  const uint64_t now = clock_.NowNs();
  const size_t n = view_.cns.size();
  uint64_t in = uint64_t{1} << o_.cn;
  uint64_t unknown = 0;  // let in by an epoch this CN has not read: it cannot reach their workers
  std::vector<uint64_t> says(n, 0);  // by CN: whom it cannot hear
  std::vector<bool> coord_down(n, false);
  coord_down[o_.cn] = !coord_up_;
  {
    std::lock_guard lock(beat_mu_);
    for (uint16_t c = 0; c < n; c++) {
      const bool alive = view_.cns[c].alive || cn_seen_[c].let_in;
      if (c == o_.cn || !alive || now > cn_seen_[c].moved_ns + o_.lease_ns / 2) {
        continue;
      }
      in |= uint64_t{1} << c;
      if (!view_.cns[c].alive) unknown |= uint64_t{1} << c;
      says[c] = cn_seen_[c].silent;
      coord_down[c] = cn_seen_[c].coord_down;
    }
  }
  const uint64_t peers = in & ~(uint64_t{1} << o_.cn);
  // A CN that waits on nobody would never say whether it hears a peer, and one cut off may be
  // waited on by nobody while a recovery waits on its steps: every peer not heard from for half
  // a lease is asked for an answer (under load, replies to real requests answer for it).
  const std::optional<uint64_t> silent =
      controls_.CheckLinks(peers & ~unknown, o_.lease_ns / 2, o_.lease_ns);
  if (!silent) return;
  report_silent_ = *silent;
  // Its own judgement counts those it cannot reach as unheard; its report does not, lest a CN
  // slow to read an epoch help single out the CN that epoch let in.
  says[o_.cn] = *silent | unknown;
  const int others = std::popcount(in) - 1;
  if (others < 1) return;
  // It hears none of the others, and they (at least two: with one, each side would say so of
  // the other) hear each other: it is the one cut off.
  bool they_hear_each_other = true;
  for (uint16_t d = 0; d < n; d++) {
    if (d != o_.cn && (says[d] & peers) != 0) they_hear_each_other = false;
  }
  const bool isolated = others >= 2 && (says[o_.cn] & peers) == peers && they_hear_each_other;
  // The one a strict majority of the others cannot hear. Of several: the one that cannot reach
  // the coordination service, if just one cannot (the others will declare it); if every one can,
  // the highest (whichever fences, the rest declare it); if more than one cannot, none yet — who
  // is cut off is not known (two CNs, each unheard by the other, while the service is down), and
  // fencing the wrong one could leave nobody able to declare the other. Every CN picks the same
  // one from the same reports, and at most that one fences.
  int pick = -1, pick_off = -1;  // the highest candidate; the one without the service
  int off = 0;                   // candidates without the service
  std::vector<int> deaf(n, 0);
  for (uint16_t c = 0; c < n; c++) {
    if (((in >> c) & 1) == 0) continue;
    for (uint16_t d = 0; d < n; d++) {
      if (d != c && ((in >> d) & 1) != 0 && ((says[d] >> c) & 1) != 0) deaf[c]++;
    }
    if (2 * deaf[c] <= others) continue;
    pick = c;
    if (coord_down[c]) {
      off++;
      pick_off = c;
    }
  }
  if (off == 1) pick = pick_off;
  if (off > 1) pick = -1;
  const int heard_by_pick = pick >= 0 ? deaf[pick] : 0;
  // And only while its own finding agrees — it cannot hear one of those that cannot hear it:
  // the others' reports come a period or more late, and after a cut heals they go on saying so
  // of a CN that hears everyone again. Two CNs each silent to the other, then healed, would
  // otherwise fence the one the tie picks on its peer's stale word, and the other on the word
  // of the one that fenced (fault seed 12 under SI: both fenced, and nobody was left to declare
  // them). A CN truly cut off has asked each peer for an answer (probes) and heard none.
  uint64_t unheard_by = 0;  // the CNs that say they cannot hear this one
  for (uint16_t d = 0; d < n; d++) {
    if (d != o_.cn && ((in >> d) & 1) != 0 && ((says[d] >> o_.cn) & 1) != 0) {
      unheard_by |= uint64_t{1} << d;
    }
  }
  const bool agrees = (says[o_.cn] & unheard_by) != 0;
  // Only once it has been singled out for a few periods: its own finding is at hand at once,
  // the others' come a period or two later with their beats, and a CN that judged before those
  // arrived could take itself for the one cut off when they say otherwise.
  if (!isolated && (pick != o_.cn || !agrees)) {
    singled_since_ns_ = 0;
    return;
  }
  if (singled_since_ns_ == 0) singled_since_ns_ = now;
  if (now < singled_since_ns_ + 3 * period_ns()) return;
  // And only on the word of CNs still beating. One that crashed a moment ago takes part for half
  // a lease more, and its last report may single out the very CN that outlives it: fault seeds
  // 3747 and 4249 had a CM just healed from a cut fence itself on the reports of CNs that crashed
  // right after making them, and nobody was left to declare anyone. A peer whose beat has not
  // moved for two periods is waited for: it beats again, or it drops out of the judgement.
  {
    std::lock_guard lock(beat_mu_);
    for (uint16_t c = 0; c < n; c++) {
      if (c != o_.cn && ((in >> c) & 1) != 0 && now > cn_seen_[c].moved_ns + 2 * period_ns()) {
        return;
      }
    }
  }
  if (isolated) {
    Fence("cut off: it has heard nothing from any other CN for a lease");
  } else {
    Fence("cut off: " + std::to_string(heard_by_pick) + " of the " + std::to_string(others) +
          " other CNs have heard nothing from it for a lease" +
          (coord_down[o_.cn] ? ", and it cannot reach the coordination service" : ""));
  }
}

CnMembership::Part CnMembership::PartIn(uint16_t cn, uint64_t epoch) const {
  for (const auto& f : failures_) {
    if (f->cn != cn || f->epoch != epoch) continue;
    if (f->opened) return Part::kOpened;
    return f->released ? Part::kReleased : Part::kUnderWay;
  }
  return Part::kNone;
}

void CnMembership::NoteCoordination(const Status& read) {
  const uint64_t now = clock_.NowNs();
  // Only the service's absence counts; any other error is the configuration's, said elsewhere.
  const bool up = read.ok() || read.code() != Code::kUnavailable;
  if (up == coord_up_) return;
  coord_up_ = up;
  counts_.coordination_up = up;
  if (!up) {
    coord_down_ns_ = now;
    controls_.Event("the coordination service is unreachable (" + read.message() +
                    "): no failure can be declared or recovered until it is back");
  } else {
    controls_.Event("the coordination service is back after " +
                    std::to_string((now - coord_down_ns_) / 1'000'000) + " ms");
  }
}

void CnMembership::NoteUndeclared() {
  // A node whose beat stopped for a lease is declared within a period or two; one still
  // undeclared after two leases is a failure the cluster cannot get past (no service to put the
  // epoch, or too many MNs down): transactions that need it wait or abort until it is.
  const uint64_t now = clock_.NowNs();
  uint32_t undeclared = 0;
  auto note = [&](const std::string& what, uint64_t moved_ns, bool* logged) {
    const bool stuck = now > moved_ns + 2 * o_.lease_ns;
    undeclared += stuck;
    if (stuck && !*logged) {
      controls_.Event(what + " has not beaten for " + std::to_string((now - moved_ns) / 1'000'000) +
                      " ms and is not declared failed" +
                      (coord_up_ ? std::string() : ": the coordination service is unreachable"));
    }
    *logged = stuck;
  };
  std::vector<uint64_t> cn_moved, mn_moved;
  {
    std::lock_guard lock(beat_mu_);
    for (const Seen& c : cn_seen_) cn_moved.push_back(c.moved_ns);
    for (const Seen& m : mn_seen_) mn_moved.push_back(m.moved_ns);
  }
  undeclared_logged_.resize(cn_moved.size() + mn_moved.size());
  for (uint16_t c = 0; c < cn_moved.size(); c++) {
    bool logged = undeclared_logged_[c];
    if (c != o_.cn && view_.cns[c].alive)
      note("CN " + std::to_string(c), cn_moved[c], &logged);
    else
      logged = false;
    undeclared_logged_[c] = logged;
  }
  for (uint16_t mn = 0; mn < mn_moved.size(); mn++) {
    bool logged = undeclared_logged_[cn_moved.size() + mn];
    if (view_.mns[mn].alive && !view_.mns[mn].leaving) {
      note("MN " + std::to_string(mn), mn_moved[mn], &logged);
    } else {
      logged = false;
    }
    undeclared_logged_[cn_moved.size() + mn] = logged;
  }
  counts_.failures_undeclared = undeclared;
}

void CnMembership::Apply(const cluster::Configuration& next, const std::vector<uint16_t>& shards) {
  const std::string& name = o_.cluster;
  // Declared failed itself (a CM that stopped seeing its beats): others may be recovering it.
  if (view_.cns[o_.cn].alive && !next.cns[o_.cn].alive) {
    Fence("declared failed by epoch " + std::to_string(next.epoch));
    return;
  }
  std::vector<uint16_t> dead, back;
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    const cluster::CnStatus& was = view_.cns[c];
    const cluster::CnStatus& now = next.cns[c];
    if (was.alive && !now.alive) {
      dead.push_back(c);
      auto f = std::make_unique<Failure>();
      // The epoch that declared it, as the configuration names it: this CN may hear of it only
      // epochs later (it missed some while the service was down), and the steps are keyed by
      // the declaring epoch on every CN.
      f->epoch = now.failed_epoch != 0 ? now.failed_epoch : next.epoch;
      f->cn = c;
      f->incarnation = was.incarnation;
      Result<cluster::LogAreas> logs = cluster::ReadLogAreas(store_, name, c, was.incarnation);
      if (logs.ok()) {
        f->logs = logs->areas;
        f->log_bytes = logs->bytes;
      } else {
        controls_.Event("no log areas of CN " + std::to_string(c) + ": " + logs.status().message());
      }
      for (uint32_t s = 0; s < o_.shards; s++) {
        if (shards[s] == o_.cn && shards_[s] == c) f->moved.push_back(s);
      }
      controls_.Event("CN " + std::to_string(c) + " failed (epoch " + std::to_string(next.epoch) +
                      "); recovering it");
      counts_.cns_failed++;
      failures_.push_back(std::move(f));
    }
    if (now.alive && c != o_.cn && (!was.alive || now.incarnation != was.incarnation)) {
      back.push_back(c);
      // A restarted CN: its new workers.
      Status reached = controls_.ReachRestarted(c, now.incarnation);
      if (!reached.ok()) {
        controls_.Event("cannot reach restarted CN " + std::to_string(c) + ": " +
                        reached.message());
      }
      {
        // Its beats count from now: the old incarnation's last one is long past, and a CM that
        // read it so would declare the new one at once.
        std::lock_guard lock(beat_mu_);
        cn_seen_[c] = Seen{0, clock_.NowNs()};
      }
      controls_.Event("CN " + std::to_string(c) + " is back as incarnation " +
                      std::to_string(now.incarnation));
      counts_.cns_back++;
    }
  }
  for (uint16_t mn = 0; mn < next.mns.size(); mn++) {
    const cluster::MnStatus& was = view_.mns[mn];
    const cluster::MnStatus& now = next.mns[mn];
    // A CN that read the configuration before this epoch may renew on this MN's page still,
    // which a CM reads no more (LeaseFrom): no CN is declared for a lease (Declarable).
    if (ReadByAll(was) && !ReadByAll(now)) dropped_ns_ = clock_.NowNs();
    if (was.alive && now.alive && !was.leaving && now.leaving) {
      // Written still, read no more: a CN that has not heard this yet may still read it, so
      // everyone's writes must keep reaching it (over shared memory a dead MN's memory stays
      // readable, and would serve what it holds).
      controls_.StopReading(static_cast<MnId>(mn));
      controls_.Event("MN " + std::to_string(mn) + " failed (epoch " + std::to_string(next.epoch) +
                      "); this CN reads its replicas elsewhere");
    }
    // Counted once, at the first epoch that says so: it is leaving, or down at once.
    if (was.alive && !was.leaving && (now.leaving || !now.alive)) {
      counts_.mns_failed++;
    }
    if (!was.alive && now.alive) {
      // A restarted MN let in: its beats count from now, as a restarted CN's do.
      std::lock_guard lock(beat_mu_);
      mn_seen_[mn] = Seen{0, clock_.NowNs()};
    }
    if (was.alive && !now.alive) {
      controls_.MarkDown(static_cast<MnId>(mn));
      controls_.Event("MN " + std::to_string(mn) + " is down (epoch " + std::to_string(next.epoch) +
                      "); writes skip it, its replicas serve");
    }
  }
  // Shards that come home to this CN from a holder alive before and after (the same
  // incarnation: only a return moves a shard off a live CN) are opened once the workers have
  // the epoch (below): the holder drained them before the CM moved them. A failed CN's shards
  // wait for its recovery instead (Progress); one that came some other way — epochs this CN did
  // not see moved it more than once — waits for every failure this epoch declares, and stays
  // closed, said in the log, if it declares none.
  std::vector<uint32_t> came_home;
  for (uint32_t s = 0; s < o_.shards; s++) {
    if (shards[s] == shards_[s]) continue;
    controls_.AssignShard(s, shards[s]);
    if (shards[s] != o_.cn) continue;
    const uint16_t from = shards_[s];
    const bool holder_stayed = view_.cns[from].alive && next.cns[from].alive &&
                               view_.cns[from].incarnation == next.cns[from].incarnation;
    if (holder_stayed) {
      came_home.push_back(s);
    } else if (Recovering(s)) {
      // The failure of its last holder takes it (recorded above).
    } else if (!dead.empty()) {
      for (auto it = failures_.end() - static_cast<ptrdiff_t>(dead.size()); it != failures_.end();
           ++it) {
        (*it)->moved.push_back(s);
      }
    } else {
      controls_.Event("shard " + std::to_string(s) + " came from CN " + std::to_string(from) +
                      " by no failure this CN knows of; it stays closed");
    }
  }
  // A restarted CN let in: the shards of its home this CN holds go back (shard_return.h).
  returns_.Apply(next, shards, back, [this](uint32_t s) { return Recovering(s); });
  const bool tso_moved = next.tso_host != view_.tso_host;
  if (tso_moved) {
    // The new host's oracle starts from its clock once the old host's lease has expired, so
    // past the old one's last grant (docs/recovery.md "The timestamp oracle").
    controls_.MoveOracle(next.tso_host);
    controls_.Event("the timestamp oracle moves to CN " + std::to_string(next.tso_host));
    counts_.tso_moves++;
  }
  // Restarted MNs on their way back: their placement and this CN's visible gate.
  rejoins_.Apply(view_, next);
  counts_.epoch = next.epoch;
  // A restarted CN is a peer again: until told, the lock client would refuse every request for
  // a shard it manages and routed calls would not send to it — the shards it takes over at the
  // next failure would be unwritable from here.
  controls_.ApplyOnWorkers(next, dead, back, tso_moved);
  for (uint32_t s : came_home) controls_.OpenShard(s);
  if (!came_home.empty()) {
    controls_.Event(std::to_string(came_home.size()) + " of this CN's shards came home (epoch " +
                    std::to_string(next.epoch) + ")");
  }
  view_ = next;
  {
    std::lock_guard lock(beat_mu_);
    beat_view_ = next;
  }
  shards_ = shards;
  if (next.cns[o_.cn].alive) alive_ = true;
}

void CnMembership::SayUnread() {
  // Every worker has passed a round since the MN became unreadable here (ApplyOnWorkers, in
  // Apply, before this), or this CN started without reading it: said until the service takes it
  // (it may be down), then the CM lets writes skip the MN.
  for (uint16_t mn = 0; mn < view_.mns.size(); mn++) {
    const cluster::MnStatus& m = view_.mns[mn];
    if (!m.alive || !m.leaving || unread_said_.count({mn, m.incarnation})) continue;
    const std::string key = cluster::MnUnreadKey(o_.cluster, mn, m.incarnation, o_.cn);
    Result<uint64_t> put = store_.PutIf(key, {}, 0);
    if (put.ok() || put.status().code() == Code::kConflict)
      unread_said_.insert({mn, m.incarnation});
  }
}

bool CnMembership::MnUnreadByAll(uint16_t mn) const {
  for (uint16_t c : view_.Alive()) {
    Result<cluster::Versioned> v =
        store_.Get(cluster::MnUnreadKey(o_.cluster, mn, view_.mns[mn].incarnation, c));
    if (!v.ok() || v->version == 0) return false;
  }
  return true;
}

void CnMembership::Progress(Failure& f) {
  const std::vector<uint16_t> alive = view_.Alive();
  if (alive.empty()) return;
  const auto workers = o_.workers_per_cn;
  // Without its log areas nothing of it can be recovered, nor its locks released: the failure
  // stays open (Apply said why).
  if (f.logs.size() != workers) return;
  // Each log by one survivor: the i-th of those alive now (so a recoverer that fails too is
  // replaced), its recovery idempotent should two do it.
  // A recovery this CN ran, finished on the beat thread: its step is said here.
  const int state = f.recovery.load();
  if (state == kRecoveryDone || state == kRecoveryFailed) {
    const uint16_t worker = f.recovering_worker;
    if (state == kRecoveryFailed) {
      // An MN that failed under it: tried again next period, with the MN left out once the
      // epoch says so.
      controls_.Event("recovery of CN " + std::to_string(f.cn) + "'s log " +
                      std::to_string(worker) + " stopped: " + f.recovery_error);
      f.recovery = kRecoveryIdle;
    } else if (PutStep(f, "recovered", worker).ok()) {
      f.recovered.insert(worker);
      controls_.Event("recovered CN " + std::to_string(f.cn) + "'s log " + std::to_string(worker) +
                      ": " + std::to_string(f.recovery_stats.records) + " records, " +
                      std::to_string(f.recovery_stats.rolled_forward) + " rolled forward, " +
                      std::to_string(f.recovery_stats.rolled_back) + " rolled back");
      counts_.logs_recovered++;
      controls_.LogRecovered(f.cn, f.epoch, worker, f.recovery_stats);
      f.recovery = kRecoveryIdle;
    }
  }
  for (uint16_t i = 0; i < workers; i++) {
    if (f.recovered.count(i) != 0) continue;
    if (StepDone(f, "recovered", i)) {
      f.recovered.insert(i);
      continue;
    }
    if (alive[i % alive.size()] != o_.cn || f.recovery.load() != kRecoveryIdle) continue;
    // The recovery's one-sided work runs on the beat thread, which owns the endpoint.
    f.recovery = kRecoveryRunning;
    f.recovering_worker = i;
    std::lock_guard lock(beat_mu_);
    to_spawn_.push_back([this, fp = &f, i]() -> Task<void> {
      return [](CnMembership* m, Failure* f, uint16_t worker) -> Task<void> {
        Result<cluster::LogRecoveryStats> r = co_await cluster::RecoverCommitLog(
            m->beat_ep_, m->controls_.catalog(), m->controls_.placement(), f->logs[worker],
            f->log_bytes, f->cn, worker);
        if (r.ok()) {
          f->recovery_stats = *r;
          f->recovery = kRecoveryDone;
        } else {
          f->recovery_error = r.status().message();
          f->recovery = kRecoveryFailed;
        }
      }(this, fp, i);
    });
  }
  if (f.recovered.size() < workers) return;
  if (!f.released) {
    // Lotus §6's order: its transactions are finished or undone, so its locks may go.
    if (!controls_.ReleaseLocksOf(f.cn, f.incarnation) || !PutStep(f, "released", o_.cn).ok())
      return;
    f.released = true;
  }
  if (!f.drained) {
    const std::optional<size_t> live = controls_.LiveContacting(f.cn);
    if (!live.has_value() || *live != 0 || !PutStep(f, "drained", o_.cn).ok()) return;
    f.drained = true;
  }
  if (!StepDoneByAll(f, "released") || !StepDoneByAll(f, "drained")) return;
  // Shards open together: one moved twice (its CN failed, then the CN it went to, before the
  // first failure was recovered) must wait for both recoveries — opened after the second alone,
  // new transactions would lock keys the first failure's log recovery is still rolling back
  // over (a lost commit the simulator's seeds found). Failures are rare enough not to mind.
  for (const auto& g : failures_) {
    if (g->opened || g.get() == &f) continue;
    if (!StepDoneByAll(*g, "released") || !StepDoneByAll(*g, "drained")) return;
  }
  size_t opened = 0;
  for (uint32_t s : f.moved) {
    if (controls_.ShardOwner(s) != o_.cn) continue;  // moved on since: that failure opens it
    if (returns_.Returning(s)) continue;             // closed to go home: opened there
    controls_.OpenShard(s);
    opened++;
  }
  if (!PutStep(f, "opened", o_.cn).ok()) return;
  f.opened = true;
  controls_.Event("CN " + std::to_string(f.cn) + "'s failure (epoch " + std::to_string(f.epoch) +
                  ") is recovered; this CN serves " + std::to_string(opened) + " of its shards");
  counts_.recoveries++;
}

void CnMembership::Manage() {
  const std::string& name = o_.cluster;
  // A CM whose own beats are not getting through may be the one cut off: it declares nothing.
  if (clock_.NowNs() > renewed_ns_.load() + o_.lease_ns / 2) return;
  cluster::Configuration next = view_;
  std::vector<std::string> what;
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (c == o_.cn || !next.cns[c].alive || !Declarable(c)) continue;
    next.cns[c].alive = false;
    what.push_back("CN " + std::to_string(c) + " failed");
  }
  using Rejoin = cluster::MnStatus::Rejoin;
  // Without a full copy to read: down, leaving, or rejoining and not read yet.
  auto unread = [](const cluster::MnStatus& s) { return !ReadByAll(s); };
  int mns_down = 0;
  for (const cluster::MnStatus& s : next.mns) mns_down += unread(s) ? 1 : 0;
  for (uint16_t mn = 0; mn < next.mns.size(); mn++) {
    cluster::MnStatus& m = next.mns[mn];
    // An MN declared fails in two epochs: first nobody reads it (leaving), then, once every CN
    // has said so, writes skip it.
    if (m.alive && m.leaving) {
      if (MnUnreadByAll(mn)) {
        m = cluster::MnStatus{.alive = false, .incarnation = m.incarnation};
        what.push_back("MN " + std::to_string(mn) + " is down");
      }
      continue;
    }
    if (!m.alive || !MnExpired(mn)) continue;
    if (unread(m)) {
      // Failed again while rejoining, read by nobody: down at once (the rejoin is abandoned).
      m = cluster::MnStatus{.alive = false, .incarnation = m.incarnation};
      what.push_back("MN " + std::to_string(mn) + " failed while rejoining");
      continue;
    }
    // Every group keeps a copy: more than R-1 MNs down would lose data, so the declaration
    // waits (and writes to that MN's groups wait with it).
    if (mns_down + 1 > o_.replication - 1) continue;
    m.rejoin = Rejoin::kNone;  // read by some CNs already (switched): it leaves as any MN
    m.leaving = true;
    mns_down++;
    what.push_back("MN " + std::to_string(mn) + " failed");
  }
  // Restarted MNs: let in, and moved on a step once every CN has done its part.
  for (uint16_t mn : rejoins_.Pick(view_, &next, &what)) {
    std::lock_guard lock(beat_mu_);
    mn_seen_[mn] = Seen{0, clock_.NowNs()};
  }
  // Restarted CNs ask to come back; one is let in once its failure is recovered everywhere.
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (next.cns[c].alive || view_.cns[c].alive) continue;
    Result<cluster::Versioned> j = store_.Get(cluster::JoinKey(name, c));
    if (!j.ok() || j->value.empty()) continue;
    const std::string text(reinterpret_cast<const char*>(j->value.data()), j->value.size());
    if (text != std::to_string(view_.cns[c].incarnation + 1)) continue;
    // Judged from the service, not from this CN's records: a CM let in after the failure was
    // declared knows of it only as every CN does, by the epoch the configuration names.
    const uint64_t failed = view_.cns[c].failed_epoch;
    if (failed == 0 || !StepDoneByAll(failed, c, "opened")) continue;
    next.cns[c] = cluster::CnStatus{true, static_cast<uint16_t>(view_.cns[c].incarnation + 1)};
    // It comes back managing no shard, so its clock matters no more than any CN's.
    {
      std::lock_guard lock(beat_mu_);
      cn_seen_[c] = Seen{0, clock_.NowNs()};
    }
    what.push_back("CN " + std::to_string(c) + " rejoins");
  }
  std::vector<uint16_t> shards = shards_;
  returns_.Pick(view_, next, &shards, &what);
  if (what.empty()) return;
  next.epoch++;
  for (uint16_t c = 0; c < next.cns.size(); c++) {
    if (view_.cns[c].alive && !next.cns[c].alive) next.cns[c].failed_epoch = next.epoch;
  }
  const std::vector<uint16_t> alive = next.Alive();
  if (!next.cns[next.tso_host].alive) next.tso_host = alive.front();
  // The failed CNs' shards go round robin to the survivors that were alive before (a CN that
  // rejoins now gets none: its shards stay where they went).
  std::vector<uint16_t> takers;
  for (uint16_t c : alive) {
    if (view_.cns[c].alive) takers.push_back(c);
  }
  size_t k = 0;
  for (uint32_t s = 0; s < o_.shards; s++) {
    if (!next.cns[shards[s]].alive) shards[s] = takers[k++ % takers.size()];
  }
  // The map first, then the configuration that commits it: of two CMs the first map's writer
  // goes on to the configuration, the other gives up this period.
  Status map = cluster::WriteShardMap(store_, name, next.epoch, shards);
  if (!map.ok()) return;
  Result<uint64_t> put = store_.PutIf(cluster::ConfigKey(name), next.Encode(), config_version_);
  if (!put.ok()) return;
  std::string line = "epoch " + std::to_string(next.epoch) + ":";
  for (const std::string& w : what) line += " " + w + ";";
  controls_.Event(line + " (this CN manages the configuration)");
}

bool CnMembership::Recovering(uint32_t s) const {
  for (const auto& f : failures_) {
    if (!f->opened && std::find(f->moved.begin(), f->moved.end(), s) != f->moved.end()) return true;
  }
  return false;
}

Status CnMembership::PutStep(const Failure& f, const std::string& step, uint16_t who) {
  const std::string key = cluster::FailureStepKey(o_.cluster, f.epoch, f.cn, step, who);
  Result<uint64_t> put = store_.PutIf(key, {}, 0);
  if (put.ok() || put.status().code() == Code::kConflict) return Status::Ok();
  return put.status();
}

bool CnMembership::StepDone(const Failure& f, const std::string& step, uint16_t who) const {
  Result<cluster::Versioned> v =
      store_.Get(cluster::FailureStepKey(o_.cluster, f.epoch, f.cn, step, who));
  return v.ok() && v->version != 0;
}

bool CnMembership::StepDoneByAll(const Failure& f, const std::string& step) const {
  return StepDoneByAll(f.epoch, f.cn, step);
}

bool CnMembership::StepDoneByAll(uint64_t epoch, uint16_t dead, const std::string& step) const {
  // Every CN alive takes part, one let in after the failure too (Adopt): only the failed CN
  // itself, back since, does not.
  for (uint16_t c : view_.Alive()) {
    if (c == dead) continue;
    Result<cluster::Versioned> v =
        store_.Get(cluster::FailureStepKey(o_.cluster, epoch, dead, step, c));
    if (!v.ok() || v->version == 0) return false;
  }
  return true;
}

void CnMembership::Fence(const std::string& why) {
  fenced_ = true;
  controls_.Fence(why);
}

}  // namespace pond::recovery
