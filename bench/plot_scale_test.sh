#!/usr/bin/env bash
# Two small simulated SmallBank runs at 3 and 6 CNs under two protocols, and bench/plot_scale.py
# on their JSON: a PNG is written; bad input (a file that is not a run's JSON) is one line, exit 2.
# Usage: plot_scale_test.sh PYTHON POND
set -euo pipefail
python=$1
pond=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "plot_scale_test: $*" >&2; exit 1; }

files=()
for cns in 3 6; do
  for protocol in lotus pond; do
    "$pond" sim smallbank --cns "$cns" --mns 3 --workers 2 --coros 2 --accounts 5000 \
      --virtual-seconds 0.001 --protocol "$protocol" --json "$tmp/$protocol$cns.json" \
      >"$tmp/out" 2>"$tmp/err" || fail "$protocol on $cns CNs failed: $(tail -3 "$tmp/err")"
    files+=("$tmp/$protocol$cns.json")
  done
done
"$python" "$here/plot_scale.py" "${files[@]}" -o "$tmp/scale.png" || fail "plot_scale.py failed"
[ -s "$tmp/scale.png" ] || fail "no PNG written"
set +e
"$python" "$here/plot_scale.py" "$tmp/out" -o "$tmp/x.png" 2>"$tmp/perr"
code=$?
set -e
[ "$code" = 2 ] && [ "$(wc -l <"$tmp/perr")" = 1 ] || fail "bad input: exit $code"
echo "plot_scale_test: ok"
