#!/usr/bin/env bash
# kill -9 under TPC-C, on a cluster of processes: `pond up --workload tpcc` starts ZooKeeper, 3 MN
# and 3 CN daemons (UCX shared memory, R = 2) serving TPC-C — its ordered tables' B+Trees
# replicated as the records are; a client process (`pond bench tpcc --connect`) runs the
# standard mix as terminals spread over the CNs. Then:
#   1. CN 2 is killed: the others declare it and recover it, its clients move on, everyone keeps
#      committing; `pond restart` brings it back.
#   2. MN 1 is killed: it is declared, and the copies of its records and tree nodes serve.
#   3. MN 1 is restarted under load: blank, it rejoins, the CNs copy its records and tree nodes
#      back; afterwards New-Orders — whose inserts need every new key's primary MN readable —
#      commit as before, and no call ends unknown.
# After each run the consistency conditions 1-4 are read back on the server (tpcc.check_district,
# tpcc.check_warehouse) and must hold: every acknowledged commit is there whole, every unknown
# outcome taken whole or not at all. After every fault `pond client probe` commits in every shard
# through every live CN. Then `pond down` leaves no process behind. Usage: kill_tpcc_test.sh POND
set -u
pond="$1"
source "$(dirname "$0")/cluster_test_lib.sh"

# The consistency check of TPC-C run output $2 (exit status $3) after $1: ok with its summary, or
# fail with the whole output.
consistent() {
  if [ "$3" -eq 0 ] && grep -q "^consistency  ok" "$2"; then
    ok "conditions 1-4 hold $1 ($(sed -n 's/^consistency  ok: [^(]*(\(.*\))$/\1/p' "$2"); $(sed -n 's/^answers *//p' "$2"))"
  else
    fail "TPC-C $1 (exit $3)"; cat "$2"
  fi
}
# New-Orders committed in run output $1.
new_orders() { sed -n 's/^committed *NewOrder \([0-9]*\),.*/\1/p' "$1"; }

d="$tmp/tpcc"
dirs+=("$d")
if ! "$pond" up --dir "$d" --mns 3 --replication 2 --cns 3 --ucx-tls shm --workload tpcc \
    --warehouses 3 --customers 30 --items 1000 --order-room 4000 --table probe:8:16384 \
    --table inserts:8:16384 --lease-ms "$kill_lease_ms" --timeout 60 >"$tmp/up.out" 2>&1; then
  fail "pond up --workload tpcc"; cat "$tmp/up.out"; exit 1
fi
ok "pond up: 3 MNs and 3 CNs serving TPC-C"
addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
[ -n "$addr" ] || { fail "no client address"; cat "$tmp/up.out"; exit 1; }

# 1. A CN killed under TPC-C, then restarted.
timeout 120 "$pond" bench tpcc --dir "$d" --connect "$addr" --clients 6 --seconds 10 >"$tmp/run1.out" 2>&1 &
bench=$!
sleep 3
kill_cn2_and_restart "tpcc" "$d"
wait "$bench"
consistent "after CN 2's kill" "$tmp/run1.out" $?
low=$(min_rate_after "$tmp/run1.out" 8)
[ "$low" -gt 0 ] && ok "clients committed every second after the recovery (at least $low/s)" ||
  { fail "a second without commits after CN 2's recovery"; cat "$tmp/run1.out"; }
probe "CN 2 killed and restarted" "$addr"

# 2. An MN killed under TPC-C: the copies serve. New keys whose primary was MN 1 cannot be
# inserted until it is back, so New-Orders (a dozen new keys each) nearly all abort meanwhile;
# the rest of the mix commits.
timeout 120 "$pond" bench tpcc --dir "$d" --connect "$addr" --clients 6 --seconds 9 >"$tmp/run2.out" 2>&1 &
bench=$!
sleep 2
kill -9 "$(pid_of "$d/cluster.json" mn 1)"
await_line "$d/cn-0.log" "MN 1 is down (epoch" 30 && ok "MN 1 killed; it was declared" ||
  { fail "MN 1's failure was not declared"; tail -n 5 "$d"/cn-*.log; }
wait "$bench"
consistent "after MN 1's kill" "$tmp/run2.out" $?
low=$(min_rate_after "$tmp/run2.out" 7)
[ "$low" -gt 0 ] && ok "clients committed every second once MN 1 was declared (at least $low/s)" ||
  { fail "a second without commits after MN 1 was declared"; cat "$tmp/run2.out"; }
probe "MN 1 killed" "$addr"

# 3. MN 1 restarted under TPC-C: it gets its copies back, records and tree nodes.
timeout 120 "$pond" bench tpcc --dir "$d" --connect "$addr" --clients 6 --seconds 6 >"$tmp/run3.out" 2>&1 &
bench=$!
sleep 1
"$pond" restart --dir "$d" --mn 1 --timeout 60 >"$tmp/restart-mn.out" 2>&1 &&
  grep -q "MN 1 is back" "$tmp/restart-mn.out" &&
  ok "pond restart brought MN 1 back, read like any replica" ||
  { fail "pond restart --mn 1"; cat "$tmp/restart-mn.out"; tail -n 5 "$d"/cn-*.log "$d/mn-1.log"; }
wait "$bench"
consistent "across MN 1's restart" "$tmp/run3.out" $?
timeout 120 "$pond" bench tpcc --dir "$d" --connect "$addr" --clients 6 --seconds 3 >"$tmp/run4.out" 2>&1
consistent "with MN 1 back" "$tmp/run4.out" $?
first=$(new_orders "$tmp/run1.out")
after=$(new_orders "$tmp/run4.out")
# While MN 1 was down or rejoining, a New-Order with a new key there could not commit; back, they
# commit at a rate near the first run's (9 s with a CN kill) again, and nothing ends unknown.
[ -n "$after" ] && [ -n "$first" ] && [ $((after * 12)) -ge "$first" ] &&
  ok "New-Orders commit again with MN 1 back ($after in 3 s; $first in the first 9 s)" ||
  { fail "New-Orders after MN 1's return: $after in 3 s ($first in the first 9 s)"; cat "$tmp/run4.out"; }
grep -q "^answers *0 unknown" "$tmp/run4.out" && ok "no call of unknown outcome with every node up" ||
  { fail "calls of unknown outcome with every node up"; cat "$tmp/run4.out"; }
PROBE_TABLE=inserts PROBE_WITHIN_MS=60000 probe "MN 1 restarted, new keys inserted" "$addr"

cp "$d/cluster.json" "$tmp/cluster.json"
"$pond" down --dir "$d" --grace 10 >"$tmp/down.out" 2>&1 || { fail "pond down"; cat "$tmp/down.out"; }
left=0
for p in $(pids_of "$tmp/cluster.json"); do alive "$p" && left=$((left + 1)); done
[ "$left" -eq 0 ] && ok "pond down left nothing running" || fail "$left process(es) left"

[ "$failures" -eq 0 ] && echo "all checks passed" || echo "$failures check(s) failed"
exit $((failures > 0))
