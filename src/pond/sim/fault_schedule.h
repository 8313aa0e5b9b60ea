// FaultSchedule: which nodes crash, restart, are cut off or healed, and when, plus how messages
// misbehave — the whole fault plan of one simulated run, written as a one-line spec that a user
// types after `--faults` and that a run prints so it replays (STYLE.md item 6; grammar and rules
// in docs/fault_schedules.md).
//
// The schedule is a plan, not an actor: it schedules nothing and knows no verbs, transactions or
// recovery; it knows only two node kinds (CN, MN), node ids and virtual times. The cluster that
// runs it turns each event into an engine event. Parse() checks only the spec's syntax;
// Validate() checks the plan against one cluster (node counts, which kinds the cluster survives,
// how many nodes may be away at once), since the same spec may fit one cluster and not another.
// RandomSchedule() draws a plan from an Rng within the same limits, so "--faults random" is one
// seed like everything else, and the run prints the drawn plan as a spec.
//
// Thread rules: plain values and pure functions; one thread may use an object at a time, and
// copies are independent.
// Invariants: Parse() returns events sorted by at_ns, equal times in spec order (a stable sort);
// ToString() prints a spec that Parse() turns back into an equal schedule; every event time is at
// most kFaultTimeNsLimit; RandomSchedule() returns only schedules that pass Validate().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pond/rng.h"
#include "pond/sim/faults.h"
#include "pond/status.h"

namespace pond::sim {

// The latest time a spec may name (10 virtual seconds), as for message delays: far beyond any
// simulated run, and small enough that a time plus a delay cannot overflow.
inline constexpr uint64_t kFaultTimeNsLimit = 10'000'000'000ULL;

// The most jitter a spec may ask for (Testbed::jitter_ns' own limit).
inline constexpr uint64_t kFaultJitterNsMax = 10'000'000;

// The spec that asks for RandomSchedule() instead of a list; the caller checks for it, Parse()
// refuses it.
inline constexpr std::string_view kRandomFaultSpec = "random";

// The horizon RandomSchedule() assumes when the limits give none.
inline constexpr uint64_t kRandomFaultHorizonNsDefault = 100'000'000;  // 100 ms

enum class FaultKind : unsigned char {
  kCrashCn,       // the CN stops: it loses its volatile state and sends and receives nothing
  kRestartCn,     // a crashed CN comes back empty and rejoins
  kCrashMn,       // the same for an MN
  kRestartMn,     // a crashed MN comes back empty and rejoins
  kPartitionCn,   // the CN keeps running but no message or verb reaches it or leaves it
  kHealCn,        // its links come back
  kCrashCoord,    // the coordination service stops answering (no node: there is one)
  kRestartCoord,  // it answers again, holding what it held
  // Host N is CN N with MN N (scripts/hosts.sh): its link goes down. CN N is cut as by
  // kPartitionCn and its one-sided ops reach MN N alone; nobody else's reach MN N, which keeps
  // running with its memory. Counted as a CN partition and as an MN down.
  kPartitionHost,
  kHealHost,  // its link comes back
  // Hosts X and Y lose the link between them alone (`cut-hosts:X-Y`): CN X and CN Y lose each
  // other's messages, CN X's one-sided ops to MN Y fail as to a crashed MN, and CN Y's to MN X;
  // both still reach everyone else and the coordination service. Counted as two CN partitions
  // and one MN down (of MN X and MN Y, the CM may declare the one it cannot read).
  kCutHosts,
  kHealHosts,  // that link comes back
};
inline constexpr int kFaultKindCount = 12;

// The kind's spec word, e.g. "crash-cn".
std::string_view FaultKindName(FaultKind kind);
// True for the kinds that name a CN (crash-cn, restart-cn, partition-cn, heal-cn).
bool IsCnFault(FaultKind kind);
// True for crash-coord and restart-coord, which name no node (`crash-coord@TIME`).
bool IsCoordFault(FaultKind kind);
// True for partition-host and heal-host, which name a host: CN N and MN N together.
bool IsHostFault(FaultKind kind);
// True for cut-hosts and heal-hosts, which name two hosts (`cut-hosts:X-Y@TIME`).
bool IsHostPairFault(FaultKind kind);

// A point in a transaction's commit that a crash-cn may be aimed at. The schedule only carries
// it (its spec word below); the cluster that runs the schedule says where each is in its
// protocol (pond::CommitStep, testbed.h, numbers these alike).
enum class FaultStep : unsigned char {
  kNone,
  kLocked,
  kRead,
  kLogged,
  kTimestamped,
  kVisible,
  kUnlocked,
};
inline constexpr int kFaultStepCount = 7;
// The step's spec word ("locked", ...); "" for kNone.
std::string_view FaultStepName(FaultStep step);

struct FaultEvent {
  FaultKind kind;
  uint16_t node;   // 0-based CN, MN or host id, by kind; 0 for the coordination service
  uint64_t at_ns;  // virtual time since the start of the run
  // crash-cn only: the crash waits from at_ns for the first transaction of the CN to reach this
  // step (a bounded wait, the cluster's). Validate() places it at at_ns.
  FaultStep step = FaultStep::kNone;
  // cut-hosts and heal-hosts only: the other host, above `node`.
  uint16_t peer = 0;
  friend bool operator==(const FaultEvent&, const FaultEvent&) = default;
};

// What one cluster can run; Validate() and RandomSchedule() hold a schedule to it.
struct FaultLimits {
  uint16_t cns = 0;
  uint16_t mns = 0;
  uint16_t min_cns_up = 1;    // CNs up and unpartitioned, at every instant
  uint16_t max_mns_down = 0;  // MNs down at once
  // MNs down at once while the coordination service is down or a CN is down or cut off (an MN
  // restarted during an outage counting as down until it ends: an epoch lets it back in). With
  // more, a CN without the service's word cannot renew its lease, and no CM declares a CN
  // (docs/recovery.md "Fencing"): MNs less cluster::LeaseQuorum.
  uint16_t max_mns_down_quorum = UINT16_MAX;
  uint64_t horizon_ns = 0;  // every event strictly before it; 0 = no horizon
  // Kinds this cluster cannot run yet, each with the one-line reason the user sees
  // (e.g. {kCrashMn, "MN crashes are not survived yet"}).
  std::vector<std::pair<FaultKind, std::string>> refused;
  // CNs that may be neither crashed nor partitioned, each with its reason
  // (e.g. {0, "CN 0 hosts the timestamp oracle"}).
  std::vector<std::pair<uint16_t, std::string>> protected_cns;
};

struct FaultSchedule {
  std::vector<FaultEvent> events;  // sorted by at_ns; equal times in spec order
  // Message faults for the whole run. Parse() only sets the probabilities and the uniform delay
  // bounds; delay_distribution stays kUniform.
  FaultConfig messages;
  // One-sided batches' jitter for the whole run (Testbed::jitter_ns); 0: the testbed's own.
  uint64_t jitter_ns = 0;

  // The schedule a spec describes (docs/fault_schedules.md), or InvalidArgument with one line
  // naming the first bad item and why. Checks syntax and ranges only; "" is the empty schedule.
  // `random` is refused: the caller draws with RandomSchedule() instead.
  static Result<FaultSchedule> Parse(std::string_view spec);

  // OK if this schedule can run on the cluster `limits` describes, or InvalidArgument with one
  // line naming the first event (or the message faults) that cannot, and why. Walks the events in
  // order, each node in one of three states (up, down, partitioned; all up at the start): crash
  // and partition only of an up node, restart only of a down one, heal only of a partitioned
  // one (a host's CN and MN both, by heal-host alone); after every event at least min_cns_up CNs
  // up and at most max_mns_down MNs down, a cut host's CN counting as partitioned and its MN as
  // down. The coordination service, crashed, must be restarted by a later event: without it no
  // failure is declared, and a run with one could not end.
  Status Validate(const FaultLimits& limits) const;

  // The canonical spec: events in order, then drop, duplicate, delay (each only if set); times
  // in the largest unit that keeps them whole, probabilities in the shortest decimal that reads
  // back to the same double. Parse(ToString()) == *this.
  std::string ToString() const;

  // No events, no message faults and no jitter: the run is fault-free.
  bool empty() const { return events.empty() && !messages.enabled() && jitter_ns == 0; }

  friend bool operator==(const FaultSchedule& a, const FaultSchedule& b);
};

// A schedule drawn from `rng` within `limits`, deterministic in the rng's state. It has 1 to 4
// CN crashes (most restarted 1 to 10 ms later; half of them aimed at a commit step, drawn
// evenly), at most one CN partition (usually healed; with chance 1/2 a host partition instead,
// the CN cut off with the MN of its host, if an MN may be down and the cluster takes it), at
// most one MN crash and restart (only if max_mns_down >= 1), with chance 1/2 one outage of the
// coordination service (always ended 1 to 10 ms later; unless refused), each message fault with
// chance 1/2 (drop, duplicate, delay up to 1%; delays 1 us to 200 us), and with chance 1/2 jitter
// of one-sided batches (1 to 4 us). Every event lies in [horizon/10, horizon*9/10] (horizon:
// limits.horizon_ns, or kRandomFaultHorizonNsDefault if 0, at most kFaultTimeNsLimit). Kinds in
// limits.refused and protected CNs are never drawn; a draw that would break a limit is redrawn a
// bounded number of times, then left out, so a small cluster gets fewer events. The result passes
// Validate(limits).
FaultSchedule RandomSchedule(Rng& rng, const FaultLimits& limits);

}  // namespace pond::sim
