#!/usr/bin/env bash
# Smoke test of postgres_smallbank.sh: a tiny comparison (1000 accounts, 2 clients, 2 s per
# run, one durable and one fsync=off row) must print a table with numbers on both sides and
# leave no server or directory behind; so must one short row of --style interactive; a bad flag
# must exit 2 with one line on stderr.
# Usage: postgres_smallbank_test.sh PATH_TO_POND. PostgreSQL 15 is a dependency
# (scripts/install-deps.sh): without it the test fails, it does not skip.
set -euo pipefail

pond=${1:?usage: postgres_smallbank_test.sh PATH_TO_POND}
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/postgres_smallbank.sh"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
# check DESCRIPTION COMMAND...: the command must succeed.
check() {
  local desc=$1
  shift
  if "$@"; then
    echo "ok   $desc"
  else
    echo "FAIL $desc"
    failures=$((failures + 1))
  fi
}
lines_of() { wc -l <"$1"; }
# The table's rows: | setting | PG txn/s | p50 | p99 | retries | failed | Pond txn/s | p50 |
# p99 | ratio |; prints how many lack a positive number in a throughput or ratio column.
rows_without_numbers() {
  grep '^| SERIALIZABLE\|^| REPEATABLE READ' "$1" | awk -F'|' '
    function pos(x) { gsub(/ /, "", x); return x ~ /^[0-9]+(\.[0-9]+)?$/ && x + 0 > 0 }
    !(pos($3) && pos($8) && pos($11)) { n++ }
    END { print n + 0 }'
}
one_row_with_numbers() {
  [ "$(grep -c '^| SERIALIZABLE\|^| REPEATABLE READ' "$1")" -eq 1 ] &&
    [ "$(rows_without_numbers "$1")" -eq 0 ]
}
no_process_mentions() { ! pgrep -f -- "$1" >/dev/null; }
all_gone() {
  local pid
  for pid in "$@"; do
    if kill -0 "$pid" 2>/dev/null; then return 1; fi
  done
}

# Bad input: exit 2 and exactly one line on stderr, before anything is started.
for bad in "--bogus" "--accounts 1" "--settings sr,xx" "--seconds" "--style remote"; do
  rc=0
  # shellcheck disable=SC2086 # each case is several words on purpose
  bash "$script" --pond "$pond" $bad >"$out/bad.out" 2>"$out/bad.err" || rc=$?
  check "'$bad' exits 2 (got $rc)" [ "$rc" -eq 2 ]
  check "'$bad' prints one line on stderr" [ "$(lines_of "$out/bad.err")" -eq 1 ]
done

rc=0
bash "$script" --pond "$pond" --accounts 1000 --seconds 2 --cns 2 --workers 1 --coros 1 \
  --settings sr,rr-nosync --check --json "$out/r.json" >"$out/table" 2>"$out/progress" || rc=$?
cat "$out/table"
check "the comparison exits 0 (got $rc)" [ "$rc" -eq 0 ]
if [ "$rc" -ne 0 ]; then tail -n 30 "$out/progress"; fi

rows=$(grep -c '^| SERIALIZABLE\|^| REPEATABLE READ' "$out/table" || true)
check "two table rows (got $rows)" [ "$rows" -eq 2 ]
check "every row has PostgreSQL and Pond txn/s > 0 and a ratio" \
  [ "$(rows_without_numbers "$out/table")" -eq 0 ]
check "an fsync=off row" grep -q "fsync=off" "$out/table"
check "PostgreSQL's money check holds on both rows" \
  [ "$(grep -c "PostgreSQL ok:" "$out/table" || true)" -eq 2 ]
check "the JSON has both rows" \
  [ "$(grep -c '"pond_over_postgres"' "$out/r.json" 2>/dev/null || true)" -eq 2 ]

# Nothing of the throwaway server may outlive the command.
tmpdir=$(sed -n 's/^postgres_smallbank.sh: temporary directory //p' "$out/progress")
mapfile -t pids < <(sed -n 's/^postgres_smallbank.sh: PostgreSQL started: pid \([0-9]*\),.*/\1/p' \
  "$out/progress")
check "the progress names the temporary directory" [ -n "$tmpdir" ]
check "the temporary directory is gone" [ ! -e "${tmpdir:-/nonexistent}" ]
check "no process names that directory" no_process_mentions "${tmpdir:-/nonexistent}"
check "the progress names a server pid per row (got ${#pids[@]})" [ "${#pids[@]}" -eq 2 ]
check "every server pid is gone" all_gone "${pids[@]}"

# The other way of issuing the SQL, one short row: its scripts must run and keep the money.
rc=0
bash "$script" --pond "$pond" --accounts 1000 --seconds 1 --cns 2 --workers 1 --coros 1 \
  --settings rr --style interactive --check >"$out/table2" 2>"$out/progress2" || rc=$?
check "--style interactive exits 0 (got $rc)" [ "$rc" -eq 0 ]
if [ "$rc" -ne 0 ]; then tail -n 30 "$out/progress2"; fi
check "--style interactive: one row, with numbers" one_row_with_numbers "$out/table2"
check "--style interactive: the money check holds" grep -q "PostgreSQL ok:" "$out/table2"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
