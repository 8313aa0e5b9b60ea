#!/usr/bin/env bash
# Sherman's B+Tree on the simulated testbed of Sherman's shape (docs/perf.md "The B+Tree"):
# 8 MNs and 8 CNs on the cx5 model, 22 workers per CN with 3 coroutines each (528 clients, as
# Sherman's Fig. 13), write-intensive at uniform, zipf 0.9 and zipf 0.99; then the breakdown
# (--ablation, Sherman Fig. 11) uniform and at zipf 0.99; then the other mixes, uniform.
# Simulated numbers depend on the seed alone, not on the machine or the build.
# Usage: perf-btree.sh [POND] [KEYS] [VIRTUAL_SECONDS]; writes its raw output to stdout.
set -euo pipefail
pond="${1:-build/release/pond}"
keys="${2:-2000000}"
secs="${3:-0.005}"
shape=(--mns 8 --cns 8 --workers 22 --coros 3 --keys "$keys" --virtual-seconds "$secs"
  --region-mib 512 --model cx5 --seed 1)
keep='^pond|^throughput|^latency|^per op|^writes|^tree check|^==|^vs baseline'

for theta in 0 0.9 0.99; do
  echo "== write-intensive, theta $theta"
  "$pond" sim btree "${shape[@]}" --mix write-intensive --theta "$theta" 2>/dev/null | grep -E "$keep"
done
for theta in 0 0.99; do
  echo "== breakdown, write-intensive, theta $theta"
  "$pond" sim btree "${shape[@]}" --mix write-intensive --theta "$theta" --ablation 2>/dev/null |
    grep -E "$keep"
done
for mix in write-only read-intensive range-only range-write; do
  echo "== $mix, uniform"
  "$pond" sim btree "${shape[@]}" --mix "$mix" 2>/dev/null | grep -E "$keep"
done
