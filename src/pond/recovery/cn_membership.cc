// CnMembership's beats, leases, fencing and partition reports, and the coordination half's
// period; its epochs and recovery steps are in cn_membership_epochs.cc.
#include "pond/recovery/cn_membership.h"

#include <algorithm>
#include <bit>

#include "pond/base/assert.h"
#include "pond/store/layout.h"

namespace pond::recovery {

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
      moves_(o_.cluster, o_.cn, o_.shards, o_.move_drain_ns, store, controls),
      load_policy_(o_.load),
      rejoins_(o_.cluster, o_.cn, store, controls) {
  beat_view_ = view_;
  rejoins_.Start(view_);
  const uint64_t now = clock_.NowNs();
  cn_seen_.assign(o_.cns, Seen{0, now});
  mn_seen_.assign(o_.mns, Seen{0, now});
  mn_busy_.assign(o_.mns, MnBusy{});
  mn_read_ns_.assign(o_.mns, 0);
  loads_.assign(o_.cns, PeerLoad{});
  load_next_ns_ = now + o_.load.interval_ns;
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
  for (MnBusy& b : mn_busy_) b.tried_ns = 0;
  renewed_ns_ = now;
}

void CnMembership::BeatTick() {
  if (fenced_.load()) return;
  const uint64_t now = clock_.NowNs();
  const uint64_t ticked = ticked_ns_ == 0 ? now : ticked_ns_;
  ticked_ns_ = now;
  // A CN that has not renewed for its own lease can no longer know whether it was declared
  // failed: it stops before the CM, which counts a whole lease from its last beat it saw.
  NoteRenewed(LeaseFrom());
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
          "; the beat thread's previous tick " + std::to_string((now - ticked) / 1'000'000) +
          " ms ago, one due every " + std::to_string(period_ns() / 1'000'000) + " ms)" + per_mn);
    return;
  }
  // The MNs this CN owes a beat that none has reached for a lease: a cut between its host and
  // theirs, or an MN down that is not declared yet. Its next beats say so (MnLinks).
  uint64_t mn_silent = 0;
  {
    std::lock_guard lock(beat_mu_);
    for (size_t mn = 0; mn < mn_busy_.size(); mn++) {
      const cluster::MnStatus& s = beat_view_.mns[mn];
      const uint64_t tried = mn_busy_[mn].tried_ns;
      if (s.alive && !s.leaving && tried != 0 && now > tried + o_.lease_ns) {
        mn_silent |= uint64_t{1} << mn;
      }
    }
  }
  report_mn_silent_ = mn_silent;
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
  MnLinks();
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
  const bool all_opened =
      std::all_of(failures_.begin(), failures_.end(), [](const auto& f) { return f->opened; });
  // One hand-over said at a time, a return or a move, numbered by the configuration's count of
  // those made (shard_move.h): a record is made once, by its number.
  const uint32_t seq = view_.cns[o_.cn].moves + 1;
  if (all_opened && !moves_.Said() && !returns_.Said()) {
    returns_.Progress(seq, o_.incarnation);
  }
  // The same for a move: its receiver opens what this CN drained, as a CN coming home does.
  moves_.Progress(clock_.NowNs(), all_opened && !moves_.Said() && !returns_.Said(), seq);
  if (o_.load.on || o_.load.locality) Balance();
  rejoins_.Progress(view_);
}

void CnMembership::Balance() {
  const uint64_t now = clock_.NowNs();
  if (now < load_next_ns_) return;
  // A CN paused past several intervals measures one: the next ends an interval from now.
  load_next_ns_ = now + o_.load.interval_ns;
  const std::optional<CnLoad> load = controls_.Load();
  if (!load.has_value()) return;
  const uint64_t latency = load_policy_.EndInterval(*load);
  report_load_latency_ = latency;
  report_load_interval_ = uint64_t{o_.incarnation} << 48 | ++load_intervals_;
  // Peers heard from lately count, at their newest: a peer's entry changes once an interval,
  // measured at its coordination periods, and reaches this CN with a beat (a period each way).
  const uint64_t fresh_ns = 2 * std::max(o_.load.interval_ns, period_ns()) + 2 * period_ns();
  std::vector<std::optional<uint64_t>> latencies(o_.cns);
  {
    std::lock_guard lock(beat_mu_);
    for (uint16_t c = 0; c < o_.cns; c++) {
      const PeerLoad& p = loads_[c];
      if (c == o_.cn || !view_.cns[c].alive || p.interval == 0 ||
          store::CnBeatIncarnation(p.interval) != view_.cns[c].incarnation ||
          now - p.changed_ns > fresh_ns) {
        continue;
      }
      latencies[c] = p.latency_ns;
    }
  }
  latencies[o_.cn] = latency;
  if (!alive_.load() || moves_.Moving() || returns_.Returning()) return;
  const auto movable = [&](uint32_t s) {
    return shards_[s] == o_.cn && !Recovering(s) && !returns_.Returning(s);
  };
  std::optional<LoadPolicy::Move> m;
  std::string why;
  if (o_.load.on) {
    m = load_policy_.Judge(o_.cn, latencies, view_.tso_host, movable);
    why = "overloaded (" + std::to_string(latency) + " ns a transaction)";
  }
  if (o_.load.locality) {
    // With the load policy on, only a CN at or below the mean latency receives for locality.
    double sum = 0;
    int known = 0;
    for (const auto& l : latencies) {
      if (l.has_value()) sum += static_cast<double>(*l), known++;
    }
    const auto receiver = [&](uint16_t c) {
      if (c >= view_.cns.size() || !view_.cns[c].alive) return false;
      return !o_.load.on ||
             (latencies[c].has_value() && static_cast<double>(*latencies[c]) * known <= sum);
    };
    std::optional<LoadPolicy::Move> near = load_policy_.JudgeLocality(o_.cn, receiver, movable);
    if (!m.has_value() && near.has_value()) {
      m = std::move(near);
      why = "requested mostly from CN " + std::to_string(m->to);
    }
  }
  if (!m.has_value()) return;
  const size_t n = m->shards.size();
  const Status st = StartMove(m->shards, m->to);
  controls_.Event(why + ": " + std::to_string(n) + (n == 1 ? " shard" : " shards") + " to CN " +
                  std::to_string(m->to) + (st.ok() ? "" : ", not started: " + st.ToString()));
}

Status CnMembership::StartMove(std::vector<uint32_t> shards, uint16_t to) {
  if (to >= view_.cns.size() || to == o_.cn || !view_.cns[to].alive) {
    return InvalidArgument("cannot move shards to CN " + std::to_string(to) +
                           ": not another CN alive");
  }
  if (!alive_.load() || fenced_.load()) return Unavailable("this CN is not alive");
  for (size_t i = 0; i < shards.size(); i++) {
    const uint32_t s = shards[i];
    if (s >= o_.shards || (i > 0 && s <= shards[i - 1])) {
      return InvalidArgument("shards to move must be ascending ids below " +
                             std::to_string(o_.shards));
    }
    if (shards_[s] != o_.cn || Recovering(s) || returns_.Returning(s)) {
      return InvalidArgument("shard " + std::to_string(s) + " is not managed and open here");
    }
  }
  if (shards.empty()) return InvalidArgument("no shard to move");
  if (!moves_.Start(view_, std::move(shards), to, clock_.NowNs())) {
    return Conflict("a shard move is under way");
  }
  return Status::Ok();
}

void CnMembership::Renew() {
  const uint64_t beat = store::CnBeat(o_.incarnation, ++beat_count_);
  // Every MN on its own: a batch to an MN that died may take the transport's timeout to fail,
  // and must not hold up the beats the others take.
  for (int mn = 0; mn < o_.mns; mn++) {
    if (controls_.placement().IsDown(static_cast<MnId>(mn))) {
      mn_busy_[mn].tried_ns = 0;  // owed no beat: when it is back, silence counts from then
      continue;
    }
    if (mn_busy_[mn].renewing) continue;
    mn_busy_[mn].renewing = true;
    if (mn_busy_[mn].tried_ns == 0) mn_busy_[mn].tried_ns = clock_.NowNs();
    const bool leaving = leaving_.load();
    const store::LeasePage::CnReport report{
        report_silent_.load(),
        uint64_t{o_.incarnation} << 48 |
            (report_coord_down_.load() ? store::kCnReportCoordDown : 0) |
            (report_in_.load() ? store::kCnReportIn : 0) | (leaving ? store::kCnReportLeft : 0),
        report_mn_silent_.load(), report_epoch_.load()};
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
      store::LeasePage::CnLoad load{m->report_load_interval_.load(),
                                    m->report_load_latency_.load()};
      if (m->o_.load.on) {
        m->beat_ep_.Write(GAddr::Make(mn_id, page + offsetof(store::LeasePage, cn_load) +
                                                 sizeof(load) * uint64_t{m->o_.cn}),
                          &load, sizeof(load));
      }
      Status st = co_await m->beat_ep_.Flush();
      if (st.ok() && (report.flags & store::kCnReportLeft) != 0 && !m->mn_busy_[mn].left) {
        m->mn_busy_[mn].left = true;
        m->left_on_++;
      }
      if (st.ok()) {
        m->mn_busy_[mn].renewed_ns = sent;
        m->mn_busy_[mn].tried_ns = 0;
        m->NoteRenewed(m->LeaseFrom());
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
      // The loads only while the policy is on: a page read costs the fabric its bytes.
      m->beat_ep_.Read(GAddr::Make(static_cast<MnId>(mn), store::kLeasePageOffset), &page,
                       m->o_.load.on ? sizeof(page) : offsetof(store::LeasePage, cn_load));
      const bool read = (co_await m->beat_ep_.Flush()).ok();
      m->mn_busy_[mn].watching = false;
      if (!read) co_return;  // an MN that does not answer does not beat
      const uint64_t now = m->clock_.NowNs();
      std::lock_guard lock(m->beat_mu_);
      m->mn_read_ns_[mn] = asked;
      Seen& s = m->mn_seen_[mn];
      if (page.mn_beat != s.beat) s = Seen{page.mn_beat, now};
      for (size_t cn = 0; m->o_.load.on && cn < m->loads_.size(); cn++) {
        const store::LeasePage::CnLoad& l = page.cn_load[cn];
        PeerLoad& p = m->loads_[cn];
        if (l.interval > p.interval) p = PeerLoad{l.interval, l.latency_ns, now};
      }
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
                 current && !newer && (r.flags & store::kCnReportLeft) != 0,
                 current ? r.mn_silent : 0,
                 current ? r.epoch : 0};
      }
    }(this, mn));
  }
}

uint64_t CnMembership::LeaseFrom() const {
  // Read before the view: a read that came after the view it names (Apply, ReadConfig).
  const uint64_t fresh = coord_fresh_ns_.load(std::memory_order_acquire);
  std::vector<bool> read_by_all;
  {
    std::lock_guard lock(beat_mu_);
    for (const cluster::MnStatus& m : beat_view_.mns) read_by_all.push_back(m.ReadByAll());
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
    if (view_.mns[mn].ReadByAll() && mn_read_ns_[mn] < since) return false;
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
  return clock_.NowNs() > std::max(mn_seen_[mn].moved_ns, resumed_ns_.load()) + o_.lease_ns;
}

void CnMembership::NoteRenewed(uint64_t from) {
  const uint64_t before = renewed_ns_.load();
  if (before >= from) return;
  // A beat period is a tenth of the lease; a quarter without a renewal is no hiccup. (A gap of
  // half a lease holds the CM's declarations back already: Manage.) Fault seed 533: CN 2, the CM,
  // on a host cut for 1.3 ms (lease 2 ms) declared MN 0, which it had not read since the cut,
  // 0.7 ms after the heal — before its first read of MN 0 got through.
  if (from > before + o_.lease_ns / 4) resumed_ns_ = clock_.NowNs();
  renewed_ns_ = from;
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

void CnMembership::MnLinks() {
  const uint64_t now = clock_.NowNs();
  const size_t mns = view_.mns.size();
  mn_cut_since_ns_.resize(mns, 0);
  const bool in = view_.cns[o_.cn].alive;
  report_epoch_ = view_.epoch;
  // Who takes part, as in Links: the CNs alive whose beat moved within half a lease. Only the
  // MNs read by everyone are judged; the others are on their way out or in already.
  std::vector<int> silent_to(mns, 0);
  int voters = 0;
  bool whole_peer = false;  // a CN beside this one reaches every MN: it will serve on
  bool peers_beating = true;
  // A CN at another epoch may count an MN out that this one still waits on, or the reverse: the
  // CM that put the epoch taking an MN out, the service lost before it read the epoch back, saw
  // the others (which had read it) stop saying they could not reach that MN, and took itself for
  // the odd one out (`CnsRenewOnAMajorityOfMnsWhileTheServiceIsDown`). Nothing is judged until
  // every CN beating has applied the same epoch.
  bool one_epoch = true;
  auto count = [&](uint64_t mask) {
    voters++;
    for (size_t mn = 0; mn < mns; mn++) {
      if (((mask >> mn) & 1) != 0 && view_.mns[mn].alive && !view_.mns[mn].leaving) silent_to[mn]++;
    }
  };
  const uint64_t own = in ? report_mn_silent_.load() : 0;
  if (in) count(own);
  {
    std::lock_guard lock(beat_mu_);
    for (uint16_t c = 0; c < view_.cns.size(); c++) {
      const Seen& s = cn_seen_[c];
      if (c == o_.cn || !(view_.cns[c].alive || s.let_in) || now > s.moved_ns + o_.lease_ns / 2) {
        continue;
      }
      count(s.mn_silent);
      if (s.epoch != view_.epoch) one_epoch = false;
      if (s.mn_silent == 0) whole_peer = true;
      if (now > s.moved_ns + 2 * period_ns()) peers_beating = false;
    }
  }
  // An MN that a strict majority cannot reach is as good as down to the cluster, whatever its own
  // beat says (the CM may share its host): the CM declares it, as any failed MN (Manage).
  for (size_t mn = 0; mn < mns; mn++) {
    if (!one_epoch || 2 * silent_to[mn] <= voters) {
      mn_cut_since_ns_[mn] = 0;
    } else if (mn_cut_since_ns_[mn] == 0) {
      mn_cut_since_ns_[mn] = now;
    }
  }
  // An MN this CN cannot reach while no strict majority of CNs says so: this CN is on the wrong
  // side, and its commits to that MN would wait for as long as the cut lasts (nobody declares an
  // MN that half the CNs reach). It fences, and is declared as any failed CN once its beat stops
  // — but only while a CN that reaches every MN is left to serve, lest each CN fence on its own
  // missing MN. At exactly half it fences too: with hosts 1 and 2 cut apart, CN 1 fencing first
  // leaves CN 2 one of two CNs that cannot reach MN 1, and neither rule would act again.
  std::string odd;
  int reach = 0;  // of the voters, those that reach the first MN in `odd`
  for (size_t mn = 0; mn < mns; mn++) {
    if (((own >> mn) & 1) != 0 && silent_to[mn] > 0 && 2 * silent_to[mn] <= voters) {
      if (odd.empty()) reach = voters - silent_to[mn];
      odd += (odd.empty() ? "" : ", ") + std::to_string(mn);
    }
  }
  if (odd.empty() || !whole_peer || !one_epoch) {
    mn_singled_since_ns_ = 0;
    return;
  }
  // Half a lease, for the others' reports to catch up with this CN's own finding (an MN that
  // crashed goes silent to every CN within a period of each other, and their reports come a
  // period or two later), and only on the word of CNs still beating (as in Links).
  if (mn_singled_since_ns_ == 0) mn_singled_since_ns_ = now;
  if (now < mn_singled_since_ns_ + o_.lease_ns / 2 || !peers_beating) return;
  Fence("cut off from MN " + odd + ": none of its beats has reached it for a lease, while " +
        std::to_string(reach) + " of the " + std::to_string(voters) + " CNs beating do");
}

bool CnMembership::MnCutOff(uint16_t mn) const {
  return mn < mn_cut_since_ns_.size() && mn_cut_since_ns_[mn] != 0 &&
         clock_.NowNs() >= mn_cut_since_ns_[mn] + 3 * period_ns();
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

void CnMembership::SayUnread() {
  // Every worker has passed a round since the MN became unreadable here (ApplyOnWorkers, in
  // Apply, before this), or this CN started without reading it: said until the service takes it
  // (it may be down), then the CM lets writes skip the MN.
  for (uint16_t mn = 0; mn < view_.mns.size(); mn++) {
    const cluster::MnStatus& m = view_.mns[mn];
    if (!m.alive || !m.leaving || unread_said_.count({mn, m.incarnation})) continue;
    // With MN lock words, also every transaction that may hold one on it has ended: its keys'
    // words then move to the next replica with nobody holding any on it (Placement::LockReplica).
    if (auto mark = unread_mark_.find({mn, m.incarnation}); mark != unread_mark_.end()) {
      if (!controls_.EndedSince(mark->second).value_or(false)) continue;
    }
    const std::string key = cluster::MnUnreadKey(o_.cluster, mn, m.incarnation, o_.cn);
    Result<uint64_t> put = store_.PutIf(key, {}, 0);
    if (put.ok() || put.status().code() == Code::kConflict) {
      unread_said_.insert({mn, m.incarnation});
      unread_mark_.erase({mn, m.incarnation});
    }
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

void CnMembership::Fence(const std::string& why) {
  fenced_ = true;
  controls_.Fence(why);
}

}  // namespace pond::recovery
