#!/usr/bin/env bash
# A short simulated run with a restless load policy, and bench/plot_moves.py on its JSON: every
# move made is in result.resharding.made_ms, in order, within the run; a run without resharding
# plots beside it; bad input is one line and exit 2. (Moves go on while the run winds down and
# the money is checked, so the last may fall after the measured 10 ms.)
# Usage: plot_moves_test.sh PYTHON POND
set -euo pipefail
python=$1
pond=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "plot_moves_test: $*" >&2; exit 1; }

run=(sim smallbank --cns 3 --workers 2 --coros 8 --accounts 20000 --virtual-seconds 0.01
  --moving-hotspot-ms 4)
"$pond" "${run[@]}" --reshard load --reshard-interval-ms 0.5 --reshard-over 1.1 \
  --reshard-intervals 1 --json "$tmp/load.json" >"$tmp/load.out" 2>"$tmp/err" ||
  fail "the run with resharding failed: $(tail -3 "$tmp/err")"
"$pond" "${run[@]}" --json "$tmp/none.json" >"$tmp/none.out" 2>"$tmp/err" ||
  fail "the run without resharding failed: $(tail -3 "$tmp/err")"
"$python" - "$tmp/load.json" "$tmp/none.json" <<'PY' || fail "the JSON's move times are wrong"
import json, sys
load = json.load(open(sys.argv[1]))
r = load["result"]["resharding"]
made = r["made_ms"]
assert r["policy"] == "load" and r["moves"] > 0 and len(made) == r["moves"], r
assert r["shards"] >= r["moves"], r
assert made == sorted(made) and 0 < made[0] < 10.0, made
assert load["settings"]["moving_hotspot_ms"] == 4.0
none = json.load(open(sys.argv[2]))
assert "resharding" not in none["result"]
PY
"$python" "$here/plot_moves.py" "$tmp/none.json" "$tmp/load.json" -o "$tmp/moves.png" \
  >"$tmp/plot.out" || fail "plot_moves.py failed"
moves=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"]["resharding"]["moves"])' "$tmp/load.json")
grep -q "plotted 2 run(s), 20 millisecond(s), $moves move(s)" "$tmp/plot.out" ||
  fail "unexpected summary: $(cat "$tmp/plot.out")"
[ -s "$tmp/moves.png" ] || fail "no PNG written"
# Bad input: a file that is not a run's JSON, and labels that do not match the files.
for bad in "$tmp/load.out" "$tmp/load.json --label a --label b"; do
  set +e
  # shellcheck disable=SC2086  # the second case is two words on purpose
  "$python" "$here/plot_moves.py" $bad -o "$tmp/x.png" 2>"$tmp/perr"
  code=$?
  set -e
  [ "$code" = 2 ] && [ "$(wc -l <"$tmp/perr")" = 1 ] || fail "bad input '$bad': exit $code"
done
echo "plot_moves_test: ok"
