#!/usr/bin/env bash
# Runs Voter and Handovers at Zeus's scale (Zeus §8.1, §8.4) for docs/perf.md "Voter and
# Handovers beside Zeus": Handovers with 2 M phones on 1000 cells, 0%, 2.5% and 5% handovers, on 3
# and 6 CNs; Voter with 1 M voters and 20 contestants on 3 CNs. Simulated (the Lotus testbed's
# CNs, 8 workers of 6 coroutines, 3 MNs), 10 virtual ms each; results depend on the seed alone.
# About 4 minutes on 2 cores. Usage: scripts/perf-zeus.sh [POND] [OUTDIR] (default
# build/release/pond, docs/perf).
set -euo pipefail
cd "$(dirname "$0")/.."
pond=${1:-build/release/pond}
out=${2:-docs/perf}
[ -x "$pond" ] || { echo "perf-zeus: $pond is missing; run 'make release' first" >&2; exit 2; }
mkdir -p "$out"
for cns in 3 6; do
  for pct in 0 2.5 5; do
    echo "perf-zeus: handovers, $cns CNs, $pct% handovers" >&2
    # 2 M phones with R = 3 on 3 MNs do not fit the default 1 GiB per MN.
    "$pond" sim handovers --cns "$cns" --phones 2000000 --cells 1000 --handover-pct "$pct" \
      --region-mib 4096 --virtual-seconds 0.01 >"$out/zeus_handovers_${cns}cn_$pct.txt"
  done
done
echo "perf-zeus: voter, 3 CNs" >&2
"$pond" sim voter --cns 3 --voters 1000000 --region-mib 2048 --virtual-seconds 0.01 \
  >"$out/zeus_voter_3cn.txt"
