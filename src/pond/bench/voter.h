// Voter (H-Store's phone-voting benchmark, as Zeus §8.4 runs it): a talent show's contestants and
// the phone numbers that vote for them. Two transactions:
//   Vote         (read-write): a voter votes for a contestant. If the voter is still under the
//                per-voter limit, the voter's row (votes so far, the last choice) and the
//                contestant's tally go up by one; otherwise the vote is declined — committed,
//                nothing written.
//   Leaderboard  (read-only): every contestant's tally, in one snapshot.
// A vote touches two objects whose shards are usually managed by different CNs (the voter's and
// the contestant's), and a popular contestant's tally is the hot spot Zeus moves around; a
// share of the votes can go to contestant 0 to make one (--hot-share).
//
// After the run a check reads every voter and every contestant: the tallies sum to the votes
// the voters cast, no voter is over the limit, and the votes applied are those the run's calls
// committed (each call of unknown outcome taken whole or not at all). docs/workloads.md
// describes the workload.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pond/bench/workload.h"

namespace pond::bench {

enum class VoterTxn : uint8_t { kVote, kLeaderboard };
constexpr int kVoterTxnCount = 2;
constexpr std::array<const char*, kVoterTxnCount> kVoterTxnNames = {"Vote", "Leaderboard"};
// A Leaderboard reads every contestant in one transaction.
constexpr uint32_t kVoterContestantsMax = 256;

struct VoterParams {
  uint64_t voters = 100'000;  // Zeus: 1 M
  uint32_t contestants = 20;  // Zeus: 20
  uint32_t max_votes = 10;    // per voter over the run (H-Store: per phone number)
  int leaderboard_pct = 5;    // of the calls; the rest are votes
  double hot_share = 0;       // of the votes, for contestant 0; the rest uniform over all
};

struct VoterCounters;

class VoterWorkload : public Workload {
 public:
  explicit VoterWorkload(const VoterParams& p);
  ~VoterWorkload() override;
  const VoterParams& params() const { return p_; }

  const char* name() const override { return "voter"; }
  const char* title() const override { return "Voter"; }
  std::unique_ptr<Workload> Clone() const override { return std::make_unique<VoterWorkload>(p_); }
  Status Validate(const RunOptions& o) const override;
  std::string Settings() const override;
  nlohmann::json SettingsJson() const override;
  Status Setup(Cluster& cluster, RunContext& ctx) override;
  Task<void> RunClient(Session& s, RunContext& ctx) override;
  // The vote count check.
  Status Finish(Cluster& cluster, RunContext& ctx, RunResult* r) override;

 private:
  VoterParams p_;
  std::vector<ProcedureId> procs_;  // as registered, in VoterTxn order
  uint16_t tvoter_ = 0, tcontestant_ = 0;
  std::vector<VoterCounters> counters_;
};

// A voter's key: the phone's index above bits 0..11, which hold its shard (the index's low 12
// bits). A contestant's: its number above a shard drawn from it, so that the tallies spread over
// the CNs as the voters do.
inline uint64_t VoterKey(uint64_t voter) { return (voter << 12) | (voter & 0xfff); }
uint64_t ContestantKey(uint64_t contestant);

}  // namespace pond::bench
