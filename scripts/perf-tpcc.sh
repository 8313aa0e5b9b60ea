#!/usr/bin/env bash
# TPC-C's throughput-latency curves (docs/perf.md "TPC-C", Lotus Fig. 13's TPC-C panels): lotus,
# motor and ford on the simulated Lotus testbed (3 MNs, 9 CNs, cx3, N = 2, SR, seed 1), 105
# warehouses as in the paper at a tenth of the spec's per-warehouse scale (10 000 items, 300
# customers per district) so that one run fits in about 5 GB; the load grown as for SmallBank —
# threads per CN first (1, 2, 4, 8 with one coroutine each), then coroutines per thread (2, 3, 4,
# 6 with 8 threads): 9 to 432 concurrent transactions, 0.05 virtual s each (five times
# SmallBank's: TPC-C commits a tenth as many). Every point ends with the consistency
# conditions 1-4, and every protocol with a list-append history check. Simulated results depend on
# the seed alone, so a rerun reproduces the tables, the JSON and the PNG exactly; loading 105
# warehouses takes most of the ~20 minutes on 2 cores.
# Usage: scripts/perf-tpcc.sh [OUTDIR] (default docs/perf): writes tpcc.txt (the raw tables),
# tpcc_sim_workers.json, tpcc_sim_coros.json and tpcc_sim.png there.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/perf}
pond=build/release/pond
[ -x "$pond" ] || { echo "perf-tpcc: $pond is missing; run 'make release' first" >&2; exit 2; }
mkdir -p "$out"
shape=(--workload tpcc --warehouses 105 --items 10000 --customers 300 --order-room 100
  --virtual-seconds 0.05 --seed 1)
echo "perf-tpcc: threads 1..8 (progress on stderr)" >&2
"$pond" sim compare "${shape[@]}" --coros 1 --sweep workers=1,2,4,8 \
  --json "$out/tpcc_sim_workers.json" >"$out/tpcc_sim_workers.txt"
echo "perf-tpcc: coroutines 2..6" >&2
"$pond" sim compare "${shape[@]}" --workers 8 --sweep coros=2,3,4,6 \
  --json "$out/tpcc_sim_coros.json" >"$out/tpcc_sim_coros.txt"
{
  echo "== scripts/perf-tpcc.sh: threads per CN 1..8, one coroutine each"
  cat "$out/tpcc_sim_workers.txt"
  echo
  echo "== coroutines per thread 2..6, 8 threads per CN"
  cat "$out/tpcc_sim_coros.txt"
} >"$out/tpcc.txt"
rm "$out/tpcc_sim_workers.txt" "$out/tpcc_sim_coros.txt"
/usr/bin/python3 bench/plot.py "$out/tpcc_sim_workers.json" "$out/tpcc_sim_coros.json" \
  -o "$out/tpcc_sim.png" \
  --title "TPC-C on the simulated Lotus testbed (105 warehouses, 9 to 432 concurrent txns, seed 1)"
