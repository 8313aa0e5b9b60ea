// RandomSchedule (fault_schedule.h): `--faults random`, a plan drawn from the run's seed within
// the limits Validate() holds a spec to. Apart from the parser and the validator, which know
// nothing of draws.
#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

#include "pond/sim/fault_schedule.h"

namespace pond::sim {

namespace {

// Draws a time in [a, b], a multiple of `grain` if [a, b] holds one, else a.
uint64_t DrawTime(Rng& rng, uint64_t a, uint64_t b, uint64_t grain) {
  uint64_t first = (a + grain - 1) / grain * grain, last = b / grain * grain;
  if (first > last) return a;
  return first + rng.Uniform((last - first) / grain + 1) * grain;
}

}  // namespace

FaultSchedule RandomSchedule(Rng& rng, const FaultLimits& limits) {
  // Bounds on the draw (STYLE.md item 4): a draw that breaks a limit is redrawn this often.
  constexpr int kAttemptsMax = 8;
  constexpr int kCnCrashesMax = 4;
  constexpr uint64_t kGapNsMin = 1'000'000, kGapNsMax = 10'000'000;  // crash to restart
  constexpr uint64_t kRateStepsMax = 100;  // message-fault rates in steps of 0.01%, up to 1%
  constexpr uint64_t kDelayUsMin = 1, kDelayUsMax = 200;
  constexpr uint64_t kJitterUsMax = 4;

  const uint64_t horizon = std::min(
      limits.horizon_ns != 0 ? limits.horizon_ns : kRandomFaultHorizonNsDefault, kFaultTimeNsLimit);
  const uint64_t lo = horizon / 10, hi = horizon * 9 / 10;  // no overflow: horizon <= 10 s
  const uint64_t span = hi - lo;
  // Whole microseconds keep the printed spec short, unless the window is too small for them.
  const uint64_t grain = span >= 1'000'000 ? 1'000 : 1;
  const uint64_t gap_max = std::min(kGapNsMax, span / 2), gap_min = std::min(kGapNsMin, gap_max);
  auto refused = [&](FaultKind k) {
    return std::any_of(limits.refused.begin(), limits.refused.end(),
                       [k](const auto& r) { return r.first == k; });
  };
  auto protected_cn = [&](uint16_t cn) {
    return std::any_of(limits.protected_cns.begin(), limits.protected_cns.end(),
                       [cn](const auto& p) { return p.first == cn; });
  };

  FaultSchedule s;
  // Adds `first` on `node` and, if `second_too`, `second` a gap in [gap_min, gap_max] later, if
  // the result still validates; redraws the node and times a bounded number of times. False if
  // it gave up. With `two`, each names two of `nodes` (cut-hosts, heal-hosts), lower first.
  auto try_pair = [&](Rng& r, FaultKind first, FaultKind second, bool second_too,
                      const std::vector<uint16_t>& nodes, bool two = false) {
    if (nodes.size() < (two ? 2u : 1u)) return false;
    for (int attempt = 0; attempt < kAttemptsMax; attempt++) {
      uint16_t node = nodes[r.Uniform(nodes.size())];
      uint16_t peer = 0;
      if (two) {
        peer = nodes[r.Uniform(nodes.size())];
        if (peer == node) continue;
        if (node > peer) std::swap(node, peer);
      }
      uint64_t gap = DrawTime(r, gap_min, gap_max, grain);
      uint64_t at = DrawTime(r, lo, hi - gap, grain);
      FaultSchedule c = s;
      c.events.push_back({first, node, at, FaultStep::kNone, peer});
      if (second_too) c.events.push_back({second, node, at + gap, FaultStep::kNone, peer});
      std::stable_sort(c.events.begin(), c.events.end(),
                       [](const FaultEvent& a, const FaultEvent& b) { return a.at_ns < b.at_ns; });
      if (c.Validate(limits).ok()) {
        s = std::move(c);
        return true;
      }
    }
    return false;
  };

  std::vector<uint16_t> cns, mns, hosts;
  for (uint16_t n = 0; n < limits.cns; n++) {
    if (!protected_cn(n)) cns.push_back(n);
  }
  for (uint16_t n = 0; n < limits.mns; n++) mns.push_back(n);
  // Host N is CN N with MN N (scripts/hosts.sh); its CN must be one that may be cut off.
  for (uint16_t n : cns) {
    if (n < limits.mns) hosts.push_back(n);
  }

  // Each part draws from its own stream, forked in a fixed order, so that refusing a kind (or a
  // redraw in one part) leaves the other parts' streams as they were; the limits may still refuse
  // what they draw (a partition beside crashes that already left few CNs up).
  Rng crash_rng = rng.Fork(), partition_rng = rng.Fork(), mn_rng = rng.Fork(),
      message_rng = rng.Fork(), step_rng = rng.Fork(), coord_rng = rng.Fork(),
      host_rng = rng.Fork(), pair_rng = rng.Fork();
  if (!refused(FaultKind::kCrashCn)) {
    const int crashes = 1 + static_cast<int>(crash_rng.Uniform(kCnCrashesMax));
    for (int i = 0; i < crashes; i++) {
      bool restart = crash_rng.Uniform(4) != 0;  // one crash in four stays down
      try_pair(crash_rng, FaultKind::kCrashCn, FaultKind::kRestartCn,
               restart && !refused(FaultKind::kRestartCn), cns);
    }
  }
  if (!refused(FaultKind::kPartitionCn) && partition_rng.Chance(0.5)) {
    bool heal = partition_rng.Uniform(4) != 0;
    // Half the partitions cut a whole host (its CN with its MN), where an MN may be down: the
    // cut the daemons meet when a host's link goes down. The coin is a stream of its own, forked
    // last, so that every other stream draws as it did before host cuts existed. A host cut the
    // limits refuse (its MN beside the crashes) falls back to cutting the CN alone. Its heal
    // comes as a CN's does, often before the MN is declared.
    const bool host = !refused(FaultKind::kPartitionHost) && limits.max_mns_down >= 1 &&
                      !hosts.empty() && host_rng.Chance(0.5);
    // Half of those cut two hosts apart instead, each still reaching the rest: the cut where a
    // CN loses one MN that the others reach (docs/recovery.md "An MN one CN cannot reach"). Its
    // coin is forked after the host coin, for the same reason.
    const bool two =
        host && !refused(FaultKind::kCutHosts) && hosts.size() >= 2 && pair_rng.Chance(0.5);
    const bool drawn =
        (two && try_pair(partition_rng, FaultKind::kCutHosts, FaultKind::kHealHosts,
                         heal && !refused(FaultKind::kHealHosts), hosts, /*two=*/true)) ||
        (host && try_pair(partition_rng, FaultKind::kPartitionHost, FaultKind::kHealHost,
                          heal && !refused(FaultKind::kHealHost), hosts));
    if (!drawn) {
      try_pair(partition_rng, FaultKind::kPartitionCn, FaultKind::kHealCn,
               heal && !refused(FaultKind::kHealCn), cns);
    }
  }
  if (!refused(FaultKind::kCrashMn) && limits.max_mns_down >= 1 && mn_rng.Chance(0.5)) {
    try_pair(mn_rng, FaultKind::kCrashMn, FaultKind::kRestartMn, !refused(FaultKind::kRestartMn),
             mns);
  }

  // The coordination service: an outage with chance 1/2, always ended (Validate).
  if (!refused(FaultKind::kCrashCoord) && !refused(FaultKind::kRestartCoord) &&
      coord_rng.Chance(0.5)) {
    try_pair(coord_rng, FaultKind::kCrashCoord, FaultKind::kRestartCoord, true, {0});
  }

  auto rate = [&message_rng] {
    bool on = message_rng.Chance(0.5);
    double p = static_cast<double>(1 + message_rng.Uniform(kRateStepsMax)) / 10'000;
    return on ? p : 0.0;
  };
  s.messages.drop_probability = rate();
  s.messages.duplicate_probability = rate();
  s.messages.delay_probability = rate();
  uint64_t d_min = kDelayUsMin + message_rng.Uniform(kDelayUsMax - kDelayUsMin + 1);
  uint64_t d_max = d_min + message_rng.Uniform(kDelayUsMax - d_min + 1);
  if (s.messages.delay_probability > 0) {
    s.messages.delay_ns_min = d_min * 1'000;
    s.messages.delay_ns_max = d_max * 1'000;
  }
  // Half the CN crashes are aimed at a commit step, drawn evenly, so that every step's window
  // is hit on purpose over a few seeds rather than by chance; and with chance 1/2 one-sided
  // batches are jittered, so batches to different MNs land in every order.
  for (FaultEvent& e : s.events) {
    if (e.kind != FaultKind::kCrashCn || !step_rng.Chance(0.5)) continue;
    e.step = static_cast<FaultStep>(1 + step_rng.Uniform(kFaultStepCount - 1));
  }
  if (step_rng.Chance(0.5)) s.jitter_ns = (1 + step_rng.Uniform(kJitterUsMax)) * 1'000;
  assert(s.Validate(limits).ok());
  return s;
}

}  // namespace pond::sim
