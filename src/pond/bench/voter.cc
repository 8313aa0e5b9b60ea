#include "pond/bench/voter.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "pond/base/hash.h"

namespace pond::bench {

namespace {

constexpr uint64_t kVotersMax = uint64_t{1} << 40;
constexpr uint64_t kScanBatch = 64;  // voters per read-only transaction of the check
// voter: index, votes so far, the last contestant voted for (or all ones). contestant: number,
// tally.
constexpr uint32_t kVoterBytes = 24, kContestantBytes = 16;
constexpr uint64_t kNone = ~uint64_t{0};

struct Args {
  uint64_t voter = 0;
  uint64_t contestant = 0;
};

uint64_t Word(std::span<const std::byte> v, int i) {
  uint64_t x;
  std::memcpy(&x, v.data() + 8 * i, 8);
  return x;
}

template <size_t N>
std::array<std::byte, 8 * N> Row(const std::array<uint64_t, N>& words) {
  std::array<std::byte, 8 * N> v;
  std::memcpy(v.data(), words.data(), v.size());
  return v;
}

}  // namespace

uint64_t ContestantKey(uint64_t contestant) {
  return (contestant << 12) | (Mix64(contestant + 0x766f746572) & 0xfff);
}

// Per worker. Votes applied are booked by the worker that ran the procedure, once its commit is
// done; the rest by the calling client's worker.
struct alignas(64) VoterCounters {
  std::atomic<uint64_t> applied{0};   // votes committed with effect
  std::atomic<uint64_t> declined{0};  // votes committed without, the voter at the limit
  // Votes with effect whose Commit has not returned: what is left after the run is in doubt —
  // its CN crashed mid-commit, and recovery decided. Not a guard object: a crashed CN's
  // coroutine is destroyed, and that must leave its vote counted here.
  std::atomic<uint64_t> committing{0};
  std::array<std::atomic<uint64_t>, kVoterTxnCount> by_txn{};
};

VoterWorkload::VoterWorkload(const VoterParams& p) : p_(p) {}
VoterWorkload::~VoterWorkload() = default;

Status VoterWorkload::Validate(const RunOptions& o) const {
  if (o.record) return InvalidArgument("the Voter workload records no history");
  if (p_.voters < 1 || p_.voters > kVotersMax) return InvalidArgument("--voters must be 1 to 2^40");
  if (p_.contestants < 1 || p_.contestants > kVoterContestantsMax) {
    return InvalidArgument(fmt::format("--contestants must be 1 to {}", kVoterContestantsMax));
  }
  if (p_.max_votes < 1) return InvalidArgument("--max-votes must be at least 1");
  if (p_.leaderboard_pct < 0 || p_.leaderboard_pct > 100) {
    return InvalidArgument("--leaderboard-pct must be 0 to 100");
  }
  if (!(p_.hot_share >= 0 && p_.hot_share <= 1)) {
    return InvalidArgument("--hot-share must be 0 to 1");
  }
  return Status::Ok();
}

std::string VoterWorkload::Settings() const {
  return fmt::format(
      "{} voters, {} contestants, at most {} votes each, {}% Leaderboard{}", p_.voters,
      p_.contestants, p_.max_votes, p_.leaderboard_pct,
      p_.hot_share > 0 ? fmt::format(", {:g}% of votes for contestant 0", 100 * p_.hot_share) : "");
}

nlohmann::json VoterWorkload::SettingsJson() const {
  return {{"voters", p_.voters},
          {"contestants", p_.contestants},
          {"max_votes", p_.max_votes},
          {"leaderboard_pct", p_.leaderboard_pct},
          {"hot_share", p_.hot_share}};
}

Status VoterWorkload::Setup(Cluster& cluster, RunContext& ctx) {
  Result<uint16_t> tv = cluster.CreateTable(
      {.name = "voter", .value_bytes = kVoterBytes, .capacity = p_.voters, .critical_field = true});
  if (!tv.ok()) return tv.status();
  Result<uint16_t> tc = cluster.CreateTable({.name = "contestant",
                                             .value_bytes = kContestantBytes,
                                             .capacity = p_.contestants,
                                             .critical_field = true});
  if (!tc.ok()) return tc.status();
  const uint16_t tvoter = tvoter_ = *tv, tcontestant = tcontestant_ = *tc;
  POND_RETURN_IF_ERROR(
      cluster.Load(tvoter, p_.voters, [](uint64_t v, uint64_t* key, std::span<std::byte> row) {
        *key = VoterKey(v);
        auto r = Row<3>({v, 0, kNone});
        std::memcpy(row.data(), r.data(), r.size());
      }));
  POND_RETURN_IF_ERROR(cluster.Load(tcontestant, p_.contestants,
                                    [](uint64_t c, uint64_t* key, std::span<std::byte> row) {
                                      *key = ContestantKey(c);
                                      auto r = Row<2>({c, 0});
                                      std::memcpy(row.data(), r.data(), r.size());
                                    }));
  counters_ = std::vector<VoterCounters>(ctx.workers());

  RunContext* c = &ctx;
  std::vector<VoterCounters>* counters = &counters_;
  const uint32_t max_votes = p_.max_votes, contestants = p_.contestants;
  procs_.clear();
  // Vote: the voter's row and the contestant's tally, or nothing at the limit.
  procs_.push_back(
      cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
        Args a;
        std::memcpy(&a, args.data(), sizeof(a));
        Txn t = s.Begin(TxnKind::kReadWrite);
        t.AddRW(tvoter, VoterKey(a.voter));
        t.AddRW(tcontestant, ContestantKey(a.contestant));
        POND_CO_RETURN_IF_ERROR(co_await t.Execute());
        Result<std::span<const std::byte>> v = t.Read(tvoter, VoterKey(a.voter));
        if (!v.ok()) co_return v.status();
        Result<std::span<const std::byte>> k = t.Read(tcontestant, ContestantKey(a.contestant));
        if (!k.ok()) co_return k.status();
        if (Word(*v, 0) != a.voter || Word(*k, 0) != a.contestant) {
          co_return Internal("a voter or contestant row names another");
        }
        const bool at_limit = Word(*v, 1) >= max_votes;
        if (!at_limit) {
          POND_CO_RETURN_IF_ERROR(
              t.Write(tvoter, VoterKey(a.voter), Row<3>({a.voter, Word(*v, 1) + 1, a.contestant})));
          POND_CO_RETURN_IF_ERROR(t.Write(tcontestant, ContestantKey(a.contestant),
                                          Row<2>({a.contestant, Word(*k, 1) + 1})));
        }
        VoterCounters& me = (*counters)[c->Worker(s)];
        if (!at_limit) me.committing.fetch_add(1, std::memory_order_relaxed);
        Status st = co_await t.Commit();
        if (!at_limit) me.committing.fetch_sub(1, std::memory_order_relaxed);
        if (st.ok()) (at_limit ? me.declined : me.applied).fetch_add(1, std::memory_order_relaxed);
        co_return st;
      }));
  // Leaderboard: every tally, in one snapshot.
  procs_.push_back(
      cluster.RegisterProcedure([=](Session& s, std::span<const std::byte>) -> Task<Status> {
        Txn t = s.Begin(TxnKind::kReadOnly);
        for (uint64_t k = 0; k < contestants; k++) t.AddRO(tcontestant, ContestantKey(k));
        POND_CO_RETURN_IF_ERROR(co_await t.Execute());
        for (uint64_t k = 0; k < contestants; k++) {
          Result<std::span<const std::byte>> row = t.Read(tcontestant, ContestantKey(k));
          if (!row.ok()) co_return row.status();
          if (Word(*row, 0) != k) co_return Internal("a contestant row names another");
        }
        co_return co_await t.Commit();
      }));
  return Status::Ok();
}

Task<void> VoterWorkload::RunClient(Session& s, RunContext& ctx) {
  VoterCounters& me = counters_[ctx.Worker(s)];
  Rng& rng = s.rng();
  while (ctx.NextCall(s)) {
    const bool board = static_cast<int>(rng.Uniform(100)) < p_.leaderboard_pct;
    Args a;
    a.voter = rng.Uniform(p_.voters);
    a.contestant = rng.Chance(p_.hot_share) ? 0 : rng.Uniform(p_.contestants);
    const VoterTxn kind = board ? VoterTxn::kLeaderboard : VoterTxn::kVote;
    // A vote runs where its voter's shard is managed (Lotus §4.3); a leaderboard stays here.
    RouteHint hint{board ? TxnKind::kReadOnly : TxnKind::kReadWrite, tvoter_, VoterKey(a.voter)};
    uint64_t t0 = s.clock().NowNs();
    Status st =
        co_await s.Call(procs_[static_cast<size_t>(kind)], std::as_bytes(std::span(&a, 1)), hint);
    uint64_t t1 = s.clock().NowNs();
    if (!ctx.Book(s, st, t0, t1, !board)) break;
    if (st.ok()) me.by_txn[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
  }
}

Status VoterWorkload::Finish(Cluster& cluster, RunContext& ctx, RunResult* r) {
  // The clients take batches of voters in turn, and the first done reads the contestants: clients
  // of a CN that a fault schedule left down do not run.
  std::atomic<uint64_t> next{0};
  std::atomic<bool> tallied{false};
  const uint64_t batches = (p_.voters + kScanBatch - 1) / kScanBatch;
  std::atomic<uint64_t> votes{0}, tallies{0}, over{0};
  std::atomic<bool> failed{false};
  std::mutex detail_mu;
  std::string detail;  // guarded by detail_mu: why the check could not read
  auto fail = [&](const std::string& why) {
    failed = true;
    std::lock_guard lock(detail_mu);
    if (detail.empty()) detail = why;
  };
  cluster.Run(ctx.options().coros, [&](Session& s) -> Task<void> {
    for (uint64_t b = next++; b < batches && !failed; b = next++) {
      const uint64_t lo = b * kScanBatch, hi = std::min(p_.voters, lo + kScanBatch);
      uint64_t sum = 0, bad = 0;
      Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
        for (uint64_t v = lo; v < hi; v++) t.AddRO(tvoter_, VoterKey(v));
        POND_CO_RETURN_IF_ERROR(co_await t.Execute());
        sum = bad = 0;
        for (uint64_t v = lo; v < hi; v++) {
          Result<std::span<const std::byte>> row = t.Read(tvoter_, VoterKey(v));
          if (!row.ok()) co_return row.status();
          if (Word(*row, 0) != v)
            co_return Internal(fmt::format("voter {}'s row names another", v));
          sum += Word(*row, 1);
          bad += Word(*row, 1) > p_.max_votes ? 1 : 0;
        }
        co_return Status::Ok();
      });
      if (!st.ok()) {
        fail("check read failed: " + st.ToString());
        break;
      }
      votes += sum;
      over += bad;
    }
    if (tallied.exchange(true)) co_return;
    uint64_t sum = 0;
    Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
      for (uint64_t k = 0; k < p_.contestants; k++) t.AddRO(tcontestant_, ContestantKey(k));
      POND_CO_RETURN_IF_ERROR(co_await t.Execute());
      sum = 0;
      for (uint64_t k = 0; k < p_.contestants; k++) {
        Result<std::span<const std::byte>> row = t.Read(tcontestant_, ContestantKey(k));
        if (!row.ok()) co_return row.status();
        sum += Word(*row, 1);
      }
      co_return Status::Ok();
    });
    if (!st.ok()) fail("check read failed: " + st.ToString());
    tallies += sum;
  });

  uint64_t applied = 0, declined = 0, in_doubt = 0;
  std::array<uint64_t, kVoterTxnCount> by_txn{};
  for (VoterCounters& c : counters_) {
    applied += c.applied.load();
    declined += c.declined.load();
    in_doubt += c.committing.load();
    for (size_t k = 0; k < c.by_txn.size(); k++) by_txn[k] += c.by_txn[k].load();
  }
  r->loaded = fmt::format("{} voters, {} contestants", p_.voters, p_.contestants);
  r->declined = declined;
  for (int k = 0; k < kVoterTxnCount; k++) {
    r->committed_by_txn.emplace_back(kVoterTxnNames[static_cast<size_t>(k)],
                                     by_txn[static_cast<size_t>(k)]);
  }
  // Every vote whose commit returned is applied; one caught mid-commit by a crash may be too.
  const uint64_t total = tallies.load();
  std::string why = detail;
  if (why.empty() && total != votes.load()) {
    why = fmt::format("the tallies sum to {}, the voters' votes to {}", total, votes.load());
  }
  if (why.empty() && over.load() > 0) {
    why = fmt::format("{} voters are over the limit of {}", over.load(), p_.max_votes);
  }
  if (why.empty() && (total < applied || total > applied + in_doubt)) {
    why = fmt::format("{} votes counted, but {} applied (+ {} caught mid-commit)", total, applied,
                      in_doubt);
  }
  WorkloadCheck check;
  check.name = "vote check";
  check.label = "vote check";
  check.json_key = "vote_check";
  check.ok = why.empty();
  check.detail = why;
  check.summary =
      fmt::format("{} votes counted: {} applied{}, {} declined at the limit", total, applied,
                  in_doubt == 0 ? ""
                                : fmt::format(" (+ {} of {} caught mid-commit by a crash)",
                                              total > applied ? total - applied : 0, in_doubt),
                  declined);
  check.brief = fmt::format("{} votes, {} applied", total, applied);
  check.json = {{"ok", check.ok},       {"votes", total},       {"applied", applied},
                {"in_doubt", in_doubt}, {"declined", declined}, {"detail", check.detail}};
  r->check = std::move(check);
  return Status::Ok();
}

}  // namespace pond::bench
