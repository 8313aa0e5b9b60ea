#!/usr/bin/env bash
# `pond sim smallbank --faults` end to end, and bench/plot_recovery.py on what it writes: a CN
# crash and restart, an MN crash and a partition are reported (the schedule, the failover, the
# commits per millisecond, recovery_ms, the replica check) and plotted; bad schedules are
# refused with one line and exit 2.
# Usage: plot_recovery_test.sh PYTHON POND
set -euo pipefail
python=$1
pond=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "plot_recovery_test: $*" >&2; exit 1; }

run=(sim smallbank --cns 4 --workers 2 --coros 4 --accounts 20000 --virtual-seconds 0.008)
"$pond" "${run[@]}" --faults crash-cn:2@3ms,restart-cn:2@3ms --json "$tmp/crash.json" >"$tmp/out" \
  2>"$tmp/err" || fail "the run with a crash failed: $(tail -3 "$tmp/out") $(tail -3 "$tmp/err")"
for line in "^faults       crash-cn:2@3ms,restart-cn:2@3ms$" "^failover     CN 2 crashed at 3.000 ms" \
  "^failover     CN 2 restarted: running clients +" "^per ms       " "^recovery_ms  " \
  "^replicas     ok: " "^money check  ok"; do
  grep -q "$line" "$tmp/out" || fail "no line '$line' in: $(cat "$tmp/out")"
done
"$python" - "$tmp/crash.json" <<'PY' || fail "the JSON lacks the failover"
import json, sys
r = json.load(open(sys.argv[1]))["result"]
f = r["faults"]
assert f["spec"] == "crash-cn:2@3ms,restart-cn:2@3ms", f["spec"]
c = f["failures"][0]
assert c["cn"] == 2 and c["crash_ms"] == 3.0
assert c["returned_ms"] > c["restart_ms"] > c["open_ms"] > c["detected_ms"] > 3.0, c
assert len(f["committed_per_ms"]) >= 8 and sum(f["committed_per_ms"]) == r["committed"]
assert r["replica_check"]["ok"] and r["replica_check"]["acked"] > 0
PY

# An MN crash and restart: reported, in the JSON, and plotted beside the CN crash. The run lasts
# until the restarted MN holds its replicas again (40,000 slots: 2 tables of 20,000 accounts, and
# with R = 3 on 3 MNs every MN holds every key); the replica check then compares it too.
"$pond" "${run[@]}" --faults crash-mn:1@3ms,restart-mn:1@3ms --json "$tmp/mn.json" >"$tmp/mn.out" \
  2>"$tmp/err" ||
  fail "the run with an MN crash failed: $(tail -3 "$tmp/mn.out") $(tail -3 "$tmp/err")"
for line in "^failover     MN 1 crashed at 3.000 ms" \
  "^failover     MN 1 restarted +.*40000 slots copied +.*readable (R copies again) +" \
  "^recovery_ms  " "^replicas     ok: " "^money check  ok"; do
  grep -q "$line" "$tmp/mn.out" || fail "no line '$line' in: $(cat "$tmp/mn.out")"
done
"$python" - "$tmp/mn.json" <<'PY' || fail "the JSON lacks the MN failure"
import json, sys
r = json.load(open(sys.argv[1]))["result"]
m = r["faults"]["mn_failures"][0]
assert m["mn"] == 1 and m["crash_ms"] == 3.0 and m["down_ms"] > m["detected_ms"] > 3.0, m
assert m["readable_ms"] > m["copied_ms"] > m["copy_start_ms"] > m["restart_ms"] >= m["down_ms"], m
assert m["slots_copied"] == 40000, m
assert r["aborts"]["mn_unreachable"] > 0, r["aborts"]
assert r["replica_check"]["ok"]
PY

# A partition that outlasts the CN's lease: it fences itself, is declared after, and — healed —
# rejoins; reported, in the JSON, and plotted with the others.
"$pond" "${run[@]}" --faults partition-cn:2@2ms,heal-cn:2@7ms --json "$tmp/part.json" \
  >"$tmp/part.out" 2>"$tmp/err" ||
  fail "the run with a partition failed: $(tail -3 "$tmp/part.out") $(tail -3 "$tmp/err")"
for line in "^failover     CN 2 partitioned at 2.000 ms: it fenced itself +.*healed +5.000 ms" \
  "^failover     CN 2 fenced itself at " "^failover     CN 2 restarted: running clients +" \
  "^recovery_ms  " "^replicas     ok: " "^money check  ok"; do
  grep -q "$line" "$tmp/part.out" || fail "no line '$line' in: $(cat "$tmp/part.out")"
done
"$python" - "$tmp/part.json" <<'PY' || fail "the JSON lacks the partition"
import json, sys
f = json.load(open(sys.argv[1]))["result"]["faults"]
p = f["partitions"][0]
assert p["cn"] == 2 and p["cut_ms"] == 2.0 and p["healed_ms"] == 7.0, p
assert 2.0 < p["fenced_ms"] < 7.0, p
c = f["failures"][0]
assert c["fenced"] and c["crash_ms"] == p["fenced_ms"] and c["detected_ms"] > c["crash_ms"], c
assert f["cut_packets"] > 0
PY

# The same seed draws the same random schedule, printed so that it replays.
"$pond" "${run[@]}" --faults random --seed 5 >"$tmp/r1" 2>/dev/null || fail "random run failed"
"$pond" "${run[@]}" --faults random --seed 5 >"$tmp/r2" 2>/dev/null || fail "random rerun failed"
spec=$(sed -n 's/^faults       //p' "$tmp/r1")
[ -n "$spec" ] || fail "the random schedule was not printed"
diff <(grep -v "wall clock" "$tmp/r1") <(grep -v "wall clock" "$tmp/r2") >/dev/null ||
  fail "a random schedule did not replay from its seed"
"$pond" "${run[@]}" --faults "$spec" --seed 5 >"$tmp/r3" 2>/dev/null || fail "replay by spec failed"
diff <(grep -v "wall clock" "$tmp/r1") <(grep -v "wall clock" "$tmp/r3") >/dev/null ||
  fail "the printed schedule did not replay the run"

# Bad schedules: one line, exit 2.
for bad in "crash-xx:1@1ms" "crash-cn:1@" "restart-cn:1@1ms" "restart-mn:1@1ms" "crash-cn:9@1ms" \
  "drop:2"; do
  set +e
  "$pond" "${run[@]}" --faults "$bad" >"$tmp/bad.out" 2>"$tmp/bad.err"
  code=$?
  set -e
  [ "$code" = 2 ] || fail "--faults $bad: exit $code, not 2"
  [ "$(wc -l <"$tmp/bad.err")" = 1 ] || fail "--faults $bad: not one line: $(cat "$tmp/bad.err")"
done
# A protocol that cannot survive a crash refuses it in one line, exit 2, saying why.
refused() {  # PROTOCOL SPEC WORDS [FLAGS...]
  set +e
  "$pond" "${run[@]}" --protocol "$1" --faults "$2" "${@:4}" >/dev/null 2>"$tmp/refused.err"
  local code=$?
  set -e
  [ "$code" = 2 ] && grep -q "$3" "$tmp/refused.err" ||
    fail "$1 with $2: exit $code: $(cat "$tmp/refused.err")"
}
refused motor crash-cn:1@1ms "needs --replication of at least 2" --replication 1
refused ford partition-cn:1@1ms,heal-cn:1@2ms "needs --replication of at least 2" --replication 1
# A crash with the history recorded: judged by the isolation checker, the calls caught mid-commit
# as info.
"$pond" sim smallbank --cns 4 --workers 2 --coros 4 --accounts 2000 --virtual-seconds 0.008 \
  --faults crash-cn:1@3ms,crash-mn:2@4ms --history "$tmp/h.jsonl" >"$tmp/hist.out" \
  2>"$tmp/hist.err" || fail "--history with crashes failed: $(tail -3 "$tmp/hist.err")"
grep -q "^valid: yes" "$tmp/hist.out" ||
  fail "the crash run's history: $(grep -A3 '^valid' "$tmp/hist.out")"
[ -s "$tmp/h.jsonl" ] || fail "no history written"

# compare: one schedule for every row; one that a row cannot survive is refused naming it.
# every_row PATTERN WHAT: each protocol's "faults" line of the last compare matches PATTERN.
every_row() {
  local p
  for p in lotus motor ford; do
    grep -q "^faults $p: $1" "$tmp/cmp.out" || fail "no $2 line for $p in: $(cat "$tmp/cmp.out")"
  done
}
cmp=(sim compare --workload smallbank --cns 4 --workers 2 --coros 4 --accounts 20000
  --virtual-seconds 0.008 --no-check)
"$pond" "${cmp[@]}" --protocols lotus,motor --replication 1 --faults crash-cn:2@4ms \
  >"$tmp/cmp.out" 2>"$tmp/cmp.err" && fail "compare: motor with a CN crash at R = 1 was not refused"
grep -q "motor needs --replication of at least 2" "$tmp/cmp.err" ||
  fail "compare: $(cat "$tmp/cmp.err")"
# A CN crash beside an MN crash, for every row: recovery finds the dead CN's lock words on any
# replica in reach (docs/recovery.md "Lock words on MNs, and an MN crash").
"$pond" "${cmp[@]}" --faults crash-mn:1@3ms,crash-cn:2@4ms >"$tmp/cmp.out" 2>"$tmp/cmp.err" ||
  fail "compare with a CN crash beside an MN crash failed: $(tail -3 "$tmp/cmp.err")"
every_row "1 CN and 1 MN crash(es).*replicas ok" "CN-and-MN crash"
# An MN crash and its restart for every row: lock words on MNs move to the next replica, and the
# copy onto the restarted MN takes them where they are.
"$pond" "${cmp[@]}" --faults crash-mn:1@3ms,restart-mn:1@5ms >"$tmp/cmp.out" 2>"$tmp/cmp.err" ||
  fail "compare with an MN crash and restart failed: $(tail -3 "$tmp/cmp.err")"
every_row "0 CN and 1 MN crash(es).*replicas ok" "MN crash"
"$pond" "${cmp[@]}" --protocols lotus --faults crash-mn:1@3ms,drop:0.01 >"$tmp/cmp.out" \
  2>"$tmp/cmp.err" || fail "compare with faults failed: $(tail -3 "$tmp/cmp.err")"
for line in "^faults       crash-mn:1@3ms,drop:0.01$" "^faults lotus: 0 CN and 1 MN crash(es).*replicas ok"; do
  grep -q "$line" "$tmp/cmp.out" || fail "no line '$line' in: $(cat "$tmp/cmp.out")"
done
# Random faults, drawn once for every row (each survives all of them): host cuts and MN crashes
# included.
"$pond" "${cmp[@]}" --faults random --seed 3 >"$tmp/cmp.out" 2>"$tmp/cmp.err" ||
  fail "compare with random faults failed: $(tail -3 "$tmp/cmp.err")"
every_row ".*replicas ok" "random-faults"
# A CN crash for every row: each prints its recovery beside its throughput.
"$pond" "${cmp[@]}" --faults crash-cn:1@3ms >"$tmp/cmp.out" 2>"$tmp/cmp.err" ||
  fail "compare with a CN crash failed: $(tail -3 "$tmp/cmp.err")"
every_row "1 CN and 0 MN crash(es).*CN 1 declared +.* ms, recovered +.* ms.*replicas ok" "recovery"

"$python" "$here/plot_recovery.py" "$tmp/crash.json" "$tmp/mn.json" "$tmp/part.json" \
  -o "$tmp/crash.png" >"$tmp/plot.out" || fail "plot_recovery.py failed"
grep -q "plotted 3 run(s)" "$tmp/plot.out" || fail "unexpected summary: $(cat "$tmp/plot.out")"
[ -s "$tmp/crash.png" ] || fail "no PNG written"
set +e
"$python" "$here/plot_recovery.py" "$tmp/out" -o "$tmp/x.png" 2>"$tmp/perr"
pcode=$?
set -e
[ "$pcode" = 2 ] && [ "$(wc -l <"$tmp/perr")" = 1 ] || fail "bad plot input: exit $pcode"
echo "plot_recovery_test: ok"
