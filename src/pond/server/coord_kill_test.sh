#!/usr/bin/env bash
# The coordination service lost, then a CN, on a cluster of processes (`pond up`, UCX shared
# memory, 3 MNs, 3 CNs, SmallBank under load):
#   1. ZooKeeper is killed: every CN logs once that it is unreachable and exports
#      pond_coordination_up 0; the CNs go on committing (no failure needs declaring).
#   2. CN 2 is killed: it cannot be declared; the survivors log that it has not beaten and is
#      undeclared, pond_failures_undeclared says 1 and pond_serving 0 — no healthy-looking
#      cluster that commits nothing.
#   3. `pond restart --coord` brings ZooKeeper back on its port with its data: the CNs log its
#      return, CN 2 is declared and recovered by itself, the metrics say so, and every shard
#      commits through both survivors; CN 2 restarts and every shard commits through all three.
#   4. CN 1 is stopped (SIGSTOP) past its lease and let go (SIGCONT): it finds its lease lost and
#      exits (fences) rather than act; the others declare and recover it.
# The money adds up across all of it, and `pond down` leaves no process behind.
# Usage: coord_kill_test.sh PATH_TO_POND
set -u
pond="$1"
source "$(dirname "$0")/cluster_test_lib.sh"
d="$tmp/cluster"
dirs+=("$d")

if ! "$pond" up --dir "$d" --mns 3 --replication 2 --cns 3 --region-mib 64 --ucx-tls shm \
    --workload smallbank --accounts 2000 --table probe:8:16384 --lease-ms 1000 --timeout 60 \
    >"$tmp/up.out" 2>&1; then
  fail "pond up"; cat "$tmp/up.out"; exit 1
fi
ok "pond up: 3 MNs and 3 CNs"
addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
mapfile -t cn_addr < <("$pond" client --dir "$d" --connect "$addr" describe | sed -n 's/^cn //p')
[ "${#cn_addr[@]}" -eq 3 ] && ok "three CNs take clients" || { fail "describe: ${cn_addr[*]}"; exit 1; }
[ "$(metric "$d" cn 0 pond_coordination_up)" = "1" ] && [ "$(metric "$d" cn 0 pond_serving)" = "1" ] &&
  ok "CN 0: coordination up, serving" || fail "CN 0's metrics before the faults"

timeout 120 "$pond" bench smallbank --dir "$d" --connect "$addr" --clients 4 --seconds 16 >"$tmp/run.out" 2>&1 &
bench=$!
sleep 2

# 1. ZooKeeper killed (its whole process group: the launcher and the JVM).
kill -9 -- "-$(pid_of "$d/cluster.json" zookeeper 0)"
for cn in 0 1 2; do
  await_line "$d/cn-$cn.log" "the coordination service is unreachable" 10 ||
    fail "CN $cn did not log the coordination service's loss"
done
[ "$(grep -c "the coordination service is unreachable" "$d/cn-0.log")" -eq 1 ] &&
  ok "ZooKeeper killed: every CN logs it, once" || fail "CN 0 logged the loss more than once"
await_metric "$d" cn 1 pond_coordination_up 10 0 && ok "CN 1 exports pond_coordination_up 0" ||
  fail "CN 1's pond_coordination_up: $(metric "$d" cn 1 pond_coordination_up)"

# 2. A CN killed while nobody can declare it.
kill -9 "$(pid_of "$d/cluster.json" cn 2)"
await_line "$d/cn-0.log" "CN 2 has not beaten for [0-9]* ms and is not declared failed: the coordination service is unreachable" 10 &&
  ok "CN 2 killed: CN 0 logs that it is failed and cannot be declared" ||
  { fail "CN 0 did not say CN 2 is undeclared"; tail -n 5 "$d/cn-0.log"; }
await_metric "$d" cn 0 pond_failures_undeclared 10 1 && [ "$(metric "$d" cn 0 pond_serving)" = "0" ] &&
  ok "CN 0 exports pond_failures_undeclared 1, pond_serving 0" ||
  fail "CN 0's metrics with CN 2 undeclared: undeclared $(metric "$d" cn 0 pond_failures_undeclared), serving $(metric "$d" cn 0 pond_serving)"

# 3. ZooKeeper back: recovery resumes by itself.
"$pond" restart --dir "$d" --coord --timeout 60 >"$tmp/restart.out" 2>&1 &&
  grep -q "ZooKeeper is back" "$tmp/restart.out" && ok "pond restart --coord brought ZooKeeper back" ||
  { fail "pond restart --coord"; cat "$tmp/restart.out"; }
await_line "$d/cn-0.log" "the coordination service is back after [0-9]* ms" 30 &&
  ok "CN 0 logs the coordination service's return" || fail "CN 0 did not see ZooKeeper back"
await_line "$d/cn-0.log" "CN 2's failure (epoch [0-9]*) is recovered" 30 &&
  ok "CN 2 declared and recovered once ZooKeeper was back" ||
  { fail "CN 2's failure was not recovered"; tail -n 8 "$d"/cn-0.log "$d"/cn-1.log; }
await_metric "$d" cn 0 pond_serving 10 1 && [ "$(metric "$d" cn 0 pond_coordination_up)" = "1" ] &&
  [ "$(metric "$d" cn 0 pond_failures_undeclared)" = "0" ] &&
  ok "CN 0: coordination up, nothing undeclared, serving" || fail "CN 0's metrics after the recovery"
wait "$bench"
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^money check  ok" "$tmp/run.out"; then
  ok "the money adds up across both losses ($(sed -n 's/^answers *//p' "$tmp/run.out"))"
else
  fail "SmallBank across the losses (exit $rc)"; cat "$tmp/run.out"
fi
probe "ZooKeeper and CN 2 lost, ZooKeeper back" "$addr" "${cn_addr[0]}" "${cn_addr[1]}"
"$pond" restart --dir "$d" --cn 2 --timeout 60 >"$tmp/restart.out" 2>&1 &&
  ok "CN 2 restarted" || { fail "pond restart --cn 2"; cat "$tmp/restart.out"; }
await_line "$d/cn-0.log" "CN 2 is back as incarnation 1" 30 || fail "CN 2 was not let back in"
probe "CN 2 restarted" "$addr"

# 4. A CN paused past its lease fences itself when it runs again.
cn1=$(pid_of "$d/cluster.json" cn 1)
kill -STOP "$cn1"
await_line "$d/cn-0.log" "CN 1's failure (epoch [0-9]*) is recovered" 30 &&
  ok "CN 1 paused: declared and recovered" || fail "the paused CN 1 was not recovered"
kill -CONT "$cn1"
for _ in $(seq 50); do alive "$cn1" || break; sleep 0.1; done
if alive "$cn1"; then
  fail "CN 1 runs on after its lease was lost"
else
  grep -q "lease lost" "$d/cn-1.log" && ok "CN 1, let go, found its lease lost and stopped (fenced)" ||
    { fail "CN 1 stopped without saying its lease was lost"; tail -n 3 "$d/cn-1.log"; }
fi
probe "CN 1 fenced" "$addr" "${cn_addr[0]}"

cp "$d/cluster.json" "$tmp/cluster-copy.json"
"$pond" down --dir "$d" >"$tmp/down.out" 2>&1 || { fail "pond down"; cat "$tmp/down.out"; }
left=0
for p in $(pids_of "$tmp/cluster-copy.json"); do alive "$p" && left=$((left + 1)); done
[ "$left" -eq 0 ] && ok "nothing left running" || fail "$left process(es) left"

[ "$failures" -eq 0 ] && echo "all coordination-loss checks passed" || echo "$failures coordination-loss check(s) failed"
exit $((failures > 0))
