#!/usr/bin/env bash
# Smoke test of service_sitting.sh: a tiny sitting (1000 accounts, 1 s per run) must print a
# table of eight rows (pond serve plaintext and over TLS, two `pond up` clusters', of 3 and 1 CN
# daemons, among them) with a positive throughput and CPU in each, write its JSON and plot, and leave no server behind; a bad flag must exit 2 with one line on stderr, before anything runs.
# Usage: service_sitting_test.sh PATH_TO_POND (noop_rpc beside it). PostgreSQL 15 and
# python3-matplotlib are dependencies (scripts/install-deps.sh): without them the test fails.
set -uo pipefail

pond=${1:?usage: service_sitting_test.sh PATH_TO_POND}
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/service_sitting.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

for bad in "--bogus" "--pipeline 0" "--seconds x" "--noop /nonexistent" "--up-cns 3,x"; do
  # shellcheck disable=SC2086 # each case is its words
  bash "$script" --pond "$pond" $bad >"$out/bad.out" 2>"$out/bad.err"
  rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l <"$out/bad.err")" -eq 1 ] && [ ! -s "$out/bad.out" ]; then
    ok "'$bad': exit 2, one line ($(cat "$out/bad.err"))"
  else
    fail "'$bad': exit $rc"; cat "$out/bad.out" "$out/bad.err"
  fi
done

bash "$script" --pond "$pond" --accounts 1000 --seconds 1 --json "$out/s.json" \
  --plot "$out/s.png" >"$out/s.out" 2>"$out/s.err"
rc=$?
if [ "$rc" -ne 0 ]; then
  fail "a tiny sitting: exit $rc"; cat "$out/s.out" "$out/s.err"
else
  ok "a tiny sitting ran"
  # Rows: | run | txn/s | ÷ on | ÷ off | ÷ no-op | CPU s | µs per txn | ÷ embedded | split |
  rows=$(grep -c '^| \(PostgreSQL\|Pond embedded\|pond serve\|no-op RPC\|pond up\)' "$out/s.out")
  bad=$(grep '^| \(PostgreSQL\|Pond embedded\|pond serve\|no-op RPC\|pond up\)' "$out/s.out" | awk -F'|' '
    function pos(x) { gsub(/[ ,]/, "", x); return x ~ /^[0-9]+(\.[0-9]+)?$/ && x + 0 > 0 }
    !(pos($3) && pos($7) && pos($8)) { n++ } END { print n + 0 }')
  [ "$rows" -eq 8 ] && [ "$bad" -eq 0 ] && ok "eight rows, each with a throughput and CPU" ||
    { fail "the table ($rows rows, $bad without numbers)"; cat "$out/s.out"; }
  /usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["rows"]) == 8 and all(r["cpu_us_per_txn"] > 0 for r in d["rows"])' "$out/s.json" &&
    ok "the JSON has the eight rows" || fail "the JSON"
  [ -s "$out/s.png" ] && ok "the plot was drawn" || fail "no plot"
fi
if pgrep -f "noop_rpc --like" >/dev/null || pgrep -f -- "--cluster service-sitting" >/dev/null || pgrep -f "pond serve --listen 127.0.0.1:0 --workload smallbank --accounts 1000" >/dev/null; then
  fail "a server was left running"
else
  ok "no server left behind"
fi
echo "$failures failures"
[ "$failures" -eq 0 ]
