#!/usr/bin/env bash
# Makes the throughput-latency figures of docs/perf.md (Lotus Fig. 13's shape): SmallBank and
# TATP on the simulated Lotus testbed under lotus, motor and ford, load grown as the paper grows
# it — threads per CN first (1, 2, 4, 8 with one coroutine each), then coroutines per thread (2,
# 3, 4, 6 with 8 threads): 9 to 432 concurrent transactions. Simulated results depend on the
# seed alone, so a rerun reproduces the JSON and the PNGs exactly; it takes about 5 minutes on
# 2 cores (TATP's loads dominate). Usage: scripts/perf-figures.sh [OUTDIR] (default docs/perf).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/perf}
pond=build/release/pond
[ -x "$pond" ] || { echo "perf-figures: $pond is missing; run 'make release' first" >&2; exit 2; }
mkdir -p "$out"
for workload in smallbank tatp; do
  extra=()
  title=SmallBank
  if [ "$workload" = tatp ]; then
    # ford's single-version TATP tables need more than the default 1 GiB per MN.
    extra=(--region-mib 2048)
    title=TATP
  fi
  echo "perf-figures: $workload, threads 1..8 (progress on stderr)" >&2
  "$pond" sim compare --workload "$workload" "${extra[@]}" --coros 1 --sweep workers=1,2,4,8 \
    --json "$out/${workload}_sim_workers.json" >"$out/${workload}_sim_workers.txt"
  echo "perf-figures: $workload, coroutines 2..6" >&2
  "$pond" sim compare --workload "$workload" "${extra[@]}" --workers 8 --sweep coros=2,3,4,6 \
    --json "$out/${workload}_sim_coros.json" >"$out/${workload}_sim_coros.txt"
  /usr/bin/python3 bench/plot.py "$out/${workload}_sim_workers.json" \
    "$out/${workload}_sim_coros.json" -o "$out/${workload}_sim.png" \
    --title "$title on the simulated Lotus testbed (9 to 432 concurrent txns, seed 1)"
done
