#!/usr/bin/env bash
# Scale-out on the simulator (docs/perf.md "pond", docs/simulator.md "Scale-out"): SmallBank on
# 9, 27, 81 and 256 CNs with a third as many MNs and the accounts grown with the CNs (100 000 per
# 9 CNs), 8 workers x 6 coroutines per CN, 0.005 virtual s, seed 1, under lotus and pond; then
# bench/plot_scale.py draws throughput against CNs beside linear scaling. Simulated results depend
# on the seed alone, so a rerun reproduces them exactly. About 10 minutes on 2 cores; the
# 256-CN runs take ~9 GiB each. Usage: scripts/perf-scale.sh [OUTDIR] (default docs/perf):
# writes scale_<protocol>_<cns>.json, scale.txt, scale_progress.txt and scale_smallbank.png there.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/perf}
pond=build/release/pond
[ -x "$pond" ] || { echo "perf-scale: $pond is missing; run 'make release' first" >&2; exit 2; }
mkdir -p "$out"
: >"$out/scale.txt"
# The runs' progress lines (throughput as the run goes) are kept too: the averages include the
# warm-up, and these show the rate after it.
exec 2> >(tee "$out/scale_progress.txt" >&2)
files=()
for shape in 9:3:100000 27:9:300000 81:27:900000 256:86:2844444; do
  IFS=: read -r cns mns accounts <<<"$shape"
  for protocol in lotus pond; do
    echo "perf-scale: $protocol on $cns CNs" >&2
    json="$out/scale_${protocol}_${cns}.json"
    {
      echo "== $protocol, $cns CNs, $mns MNs, $accounts accounts"
      "$pond" sim smallbank --cns "$cns" --mns "$mns" --accounts "$accounts" \
        --virtual-seconds 0.005 --seed 1 --protocol "$protocol" --json "$json"
    } >>"$out/scale.txt"
    files+=("$json")
  done
done
/usr/bin/python3 bench/plot_scale.py "${files[@]}" -o "$out/scale_smallbank.png" \
  --title "SmallBank on the simulator: 9 to 256 CNs (MNs = CNs / 3, seed 1)"
