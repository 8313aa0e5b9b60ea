#!/usr/bin/env bash
# Makes the resharding figures of docs/perf.md: SmallBank on the simulated Lotus testbed with a
# hot set that jumps to another CN's shards every T ms, with resharding off, Lotus's load
# policy, Zeus's locality policy and both, plotted over time with each shard move marked
# (bench/plot_moves.py). Two
# shapes: a short one at 2 ms policy intervals (hot set moving every 25 ms, 0.1 virtual s), and
# the paper's 100 ms intervals (hot set moving every second, 4 virtual s). Simulated results
# depend on the seed alone, so a rerun reproduces the JSON and the PNGs exactly; about 30
# minutes on 2 cores. Usage: scripts/perf-moves.sh [POND] [OUTDIR] (default build/release/pond,
# docs/perf).
set -euo pipefail
cd "$(dirname "$0")/.."
pond=${1:-build/release/pond}
out=${2:-docs/perf}
[ -x "$pond" ] || { echo "perf-moves: $pond is missing; run 'make release' first" >&2; exit 2; }
mkdir -p "$out"
# shape NAME SECONDS JUMP_MS INTERVAL_MS TITLE
shape() {
  local name=$1 seconds=$2 jump=$3 interval=$4 title=$5 policy
  for policy in none load locality both; do
    echo "perf-moves: $name, --reshard $policy" >&2
    "$pond" sim smallbank --virtual-seconds "$seconds" --moving-hotspot-ms "$jump" \
      --reshard "$policy" --reshard-interval-ms "$interval" \
      --json "$out/moves_${name}_${policy}.json" >"$out/moves_${name}_${policy}.txt"
  done
  /usr/bin/python3 bench/plot_moves.py "$out/moves_${name}_none.json" \
    "$out/moves_${name}_load.json" "$out/moves_${name}_locality.json" \
    "$out/moves_${name}_both.json" -o "$out/moves_${name}.png" --title "$title"
}
shape short 0.1 25 2 \
  "SmallBank, hot set moving every 25 ms, policies at 2 ms intervals (simulated, seed 1)"
shape paper 4 1000 100 \
  "SmallBank, hot set moving every second, policies at 100 ms intervals (simulated, seed 1)"
