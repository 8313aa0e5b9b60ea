// --faults for a simulated run (docs/fault_schedules.md): turns a spec into the node faults and
// message faults of RunOptions. Shared by the CLI and the seed tests, so both run exactly the
// same schedule for a seed. Called from one thread.
#pragma once

#include <string>
#include <vector>

#include "pond/bench/workload.h"
#include "pond/status.h"

namespace pond::bench {

// Parses `spec` ("random" draws one from o->cluster.seed; empty: no faults), validates it against
// the cluster and what it survives — kinds Pond does not survive yet, CN 0 (the timestamp oracle),
// at least 2 CNs up, crashes for a protocol that cannot recover them — and puts it into *o: the
// node faults, the message faults into o->sim, and the canonical spec that replays it. A random
// schedule draws only what the cluster survives. InvalidArgument in one line otherwise.
Status ResolveFaults(RunOptions* o, const std::string& spec);
// The same for runs that must share one schedule (the rows of `pond sim compare`, which differ in
// protocol only): it must fit every run, and `random` draws only what all of them survive.
Status ResolveFaultsForAll(const std::vector<RunOptions*>& runs, const std::string& spec);

// ResolveFaults for a run of `w` as it will really run. A run that stops at a call cap (a
// recorded run: o->calls_max) ends when its calls run out, well before o->seconds, and a random
// schedule drawn over o->seconds would leave most of its faults after that end, unplayed. So for
// such a run the end is learned first — `w` run once with the same options, without faults and
// without recording — and `random` draws within kCappedHorizonShare of it; o->faults_horizon says
// so. Faults slow a run down, so the faulty run reaches its cap no sooner: every drawn fault
// falls inside it (and a run that still leaves one unplayed fails: RunOptions).
Status ResolveFaultsFor(Workload& w, RunOptions* o, const std::string& spec);
inline constexpr double kCappedHorizonShare = 0.8;

}  // namespace pond::bench
