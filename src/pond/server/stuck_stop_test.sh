#!/usr/bin/env bash
# SIGTERM always stops a CN daemon (docs/deploy.md "Several hosts"): `pond up` starts ZooKeeper,
# 3 MN and 3 CN daemons serving SmallBank over UCX's TCP transport on loopback, with a lease of
# 60 s so that nobody fences or is declared while the test runs. Clients commit through CN 0;
# MN 1 is frozen (SIGSTOP): its process answers nothing more, so what CN 0 asked of it waits — TCP
# keeps the connection open, and nothing fails it within the lease. CN 0, sent SIGTERM (its
# daemon's grace: 2 s), cannot finish its stop (calls wait on MN 1): it must say so and exit by
# itself within the grace plus 10 s (cn_daemon.cc, kStopStuckS), rather than hang until killed. Then MN 1 is thawed and `pond down`
# leaves no process behind. Usage: stuck_stop_test.sh PATH_TO_POND
set -u
pond="$1"
source "$(dirname "$0")/cluster_test_lib.sh"

d="$tmp/c"
dirs+=("$d")
if ! "$pond" up --dir "$d" --mns 3 --replication 2 --cns 3 --region-mib 64 --ucx-tls tcp \
    --ucx-net-devices lo --workload smallbank --accounts 2000 --lease-ms 60000 --timeout 60 \
    >"$tmp/up.out" 2>&1; then
  fail "pond up"; cat "$tmp/up.out"; exit 1
fi
ok "pond up: 3 MNs and 3 CNs over TCP, lease 60 s"
addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
[ -n "$addr" ] || { fail "no client address"; cat "$tmp/up.out"; exit 1; }
cn0=$(pid_of "$d/cluster.json" cn 0)
mn1=$(pid_of "$d/cluster.json" mn 1)

timeout 60 "$pond" bench smallbank --dir "$d" --connect "$addr" --clients 6 --seconds 20 \
  --timeout-ms 30000 >"$tmp/run.out" 2>&1 &
bench=$!
sleep 2
kill -STOP "$mn1"
sleep 1
kill -TERM "$cn0"
sent=$(date +%s%3N)
# The grace plus 10 s, and a margin of 8 s for a loaded machine.
for _ in $(seq 1 200); do
  alive "$cn0" || break
  sleep 0.1
done
took=$(( $(date +%s%3N) - sent ))
kill -CONT "$mn1"
if alive "$cn0"; then
  fail "CN 0 still runs $took ms after SIGTERM, its stop stuck on MN 1"
  kill -9 "$cn0"
elif grep -q "stopping took more than" "$d/cn-0.log"; then
  ok "CN 0 stopped $took ms after SIGTERM, its stop stuck on MN 1: $(grep -ho 'stopping took more than.*' "$d/cn-0.log" | head -n 1)"
else
  fail "CN 0 stopped $took ms after SIGTERM, but not for a stuck stop (the test froze nothing it waited on)"
  tail -n 5 "$d/cn-0.log"
fi
kill "$bench" 2>/dev/null
wait "$bench" 2>/dev/null
down_leaves_nothing "$d"
verdict
