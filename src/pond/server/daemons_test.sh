#!/usr/bin/env bash
# Pond as processes, end to end: `pond up --cns 0` starts ZooKeeper and three `pond mn` daemons, an
# embedded SmallBank runs against them (money checked, history judged), the MNs refuse a second
# run, and `pond down` leaves no process behind — over UCX shared memory and over TCP on
# loopback; then CN daemons over TCP load SmallBank's 100,000 accounts in time and serve.
# Usage: daemons_test.sh PATH_TO_POND
set -u
pond="$1"
source "$(dirname "$0")/cluster_test_lib.sh"

for tls in shm tcp; do
  d="$tmp/$tls"
  dirs+=("$d")
  if ! "$pond" up --dir "$d" --mns 3 --cns 0 --ucx-tls "$tls" --ucx-net-devices lo --region-mib 64 \
      --timeout 60 >"$tmp/up.out" 2>&1; then
    fail "$tls: pond up"; cat "$tmp/up.out"; continue
  fi
  ok "$tls: pond up"
  coord=$(sed -n 's/^coord //p' "$tmp/up.out")
  cp "$d/cluster.json" "$tmp/cluster-$tls.json"
  [ "$(pids_of "$d/cluster.json" | wc -l)" -eq 4 ] && ok "$tls: 4 processes recorded" ||
    fail "$tls: cluster.json does not name 4 processes"
  grep -q "serving 64 MiB over UCX (tls $tls)" "$d/mn-2.log" && ok "$tls: MN 2 logged that it serves" ||
    { fail "$tls: MN 2's log"; cat "$d/mn-2.log"; }

  "$pond" up --dir "$d" --mns 3 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -ne 0 ] && grep -q "already up" "$tmp/err" && ok "$tls: a second up in the same dir is refused" ||
    fail "$tls: second up: exit $rc, $(cat "$tmp/err")"

  # Without the cluster's secret an embedded run is refused before it touches anything.
  "$pond" bench smallbank --coord "$coord" --seconds 0.2 --accounts 500 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "closed to processes without the cluster's secret" "$tmp/err" &&
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && ok "$tls: a run without the secret is refused in one line" ||
    fail "$tls: a run without the secret: exit $rc, $(cat "$tmp/err")"
  timeout 300 "$pond" bench smallbank --coord "$coord" --secret-file "$d/certs/cluster.secret" \
    --seconds 0.5 --accounts 500 --history "$tmp/h-$tls.json" >"$tmp/run.out" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^money check  ok" "$tmp/run.out" && grep -q "^valid: yes" "$tmp/run.out" &&
     grep -q "transport ucx ($tls)" "$tmp/run.out"; then
    ok "$tls: SmallBank against the daemons: money adds up, history strictly serializable"
  else
    fail "$tls: SmallBank against the daemons (exit $rc)"; cat "$tmp/run.out"
  fi

  "$pond" bench smallbank --coord "$coord" --secret-file "$d/certs/cluster.secret" --seconds 0.2 \
    --accounts 500 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 1 ] && grep -q "fresh ones" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
    ok "$tls: used MNs refuse a second embedded run in one line" ||
    fail "$tls: second run: exit $rc, $(cat "$tmp/err")"

  "$pond" down --dir "$d" >"$tmp/down.out" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] && grep -q "stopped 4 process(es)" "$tmp/down.out" && ok "$tls: pond down" ||
    { fail "$tls: pond down (exit $rc)"; cat "$tmp/down.out"; }
  left=0
  for p in $(pids_of "$tmp/cluster-$tls.json"); do alive "$p" && left=$((left + 1)); done
  [ "$left" -eq 0 ] && [ ! -f "$d/cluster.json" ] && ok "$tls: nothing left running" ||
    fail "$tls: $left process(es) left after pond down"
  grep -q "stopped" "$d/mn-0.log" && ok "$tls: MN 0 logged a clean stop" || fail "$tls: MN 0 did not log its stop"
done

# CN daemons over TCP with SmallBank's default 100,000 accounts: CN 0 loads 200,000 rows, which
# one-sided op by one took over a minute over TCP and now (store/bulk_load.h) takes about a second;
# `pond up` waits 60 s for it. Calls through a CN then commit and the money adds up.
d="$tmp/tcp-cns"
dirs+=("$d")
if "$pond" up --dir "$d" --mns 3 --cns 3 --ucx-tls tcp --ucx-net-devices lo --workload smallbank \
    --timeout 60 >"$tmp/up.out" 2>&1; then
  ok "tcp: pond up with 3 CN daemons loads 100,000 accounts within its 60 s"
  addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
  timeout 120 "$pond" bench smallbank --dir "$d" --connect "$addr" --seconds 1 >"$tmp/run.out" 2>&1
  rc=$?
  committed=$(sed -n 's/^throughput .*(\([0-9]*\) committed.*/\1/p' "$tmp/run.out")
  [ "$rc" -eq 0 ] && grep -q "^money check  ok" "$tmp/run.out" && [ "${committed:-0}" -gt 0 ] &&
    ok "tcp: calls through the CNs commit ($committed); money adds up" ||
    { fail "tcp: SmallBank through the CNs (exit $rc)"; cat "$tmp/run.out"; }
  "$pond" down --dir "$d" >/dev/null 2>&1 || fail "tcp: pond down of the CN daemons"
else
  fail "tcp: pond up with 3 CN daemons and 100,000 accounts"; cat "$tmp/up.out"; tail -3 "$d/cn-0.log"
fi

# Bad input: one line, non-zero.
"$pond" up --dir "$tmp/bad" --mns 2 --replication 3 >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && ok "up with R above the MNs: exit 2, one line" ||
  fail "up with R above the MNs: exit $rc, $(cat "$tmp/err")"
"$pond" down --dir "$tmp/nowhere" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "no cluster there" "$tmp/err" && ok "down without a cluster: one line" ||
  fail "down without a cluster: exit $rc, $(cat "$tmp/err")"
"$pond" mn --id 0 >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "coord" "$tmp/err" && ok "mn without --coord: exit 2" ||
  fail "mn without --coord: exit $rc, $(cat "$tmp/err")"
"$pond" mn --coord 127.0.0.1:1 --id 0 >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "cluster's secret: give --certs-dir" "$tmp/err" &&
  ok "mn with neither --certs-dir nor --insecure: exit 2, says which" ||
  fail "mn without its secret: exit $rc, $(cat "$tmp/err")"

[ "$failures" -eq 0 ] && echo "all daemon checks passed" || echo "$failures daemon check(s) failed"
exit $((failures > 0))
