#!/usr/bin/env bash
# SIGTERM stops a CN daemon even while it starts (docs/deploy.md "Stopping"): `pond up` starts
# ZooKeeper, 2 MN and 2 CN daemons serving SmallBank over UCX shared memory. A second `pond cn
# --id 1`, started by hand with CN 1's flags while CN 1 runs, waits in Cluster::Start for its
# earlier process to be declared failed, which never happens while it beats (up to --wait, 60 s
# here). Sent SIGTERM after 2 s, it must exit within 3 s, saying why in its log; the cluster it
# never joined goes on serving (commits through CN 0 flow, and the money adds up), and `pond down`
# leaves no process behind. Usage: start_stop_test.sh PATH_TO_POND
set -u
pond="$1"
source "$(dirname "$0")/cluster_test_lib.sh"

d="$tmp/c"
dirs+=("$d")
if ! "$pond" up --dir "$d" --mns 2 --replication 2 --cns 2 --region-mib 64 --ucx-tls shm \
    --workload smallbank --accounts 2000 --lease-ms 1000 --timeout 60 >"$tmp/up.out" 2>&1; then
  fail "pond up"; cat "$tmp/up.out"; exit 1
fi
ok "pond up: 2 MNs and 2 CNs"
addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
[ -n "$addr" ] || { fail "no client address"; cat "$tmp/up.out"; exit 1; }

# CN 1's command line, as `pond up` started it (cluster.json), but for its metrics port, which
# the running CN 1 holds.
mapfile -t argv < <(python3 - "$d/cluster.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = next(p for p in r["processes"] if p["role"] == "cn" and p["id"] == 1)
args = list(p["args"])
if "--metrics" in args:
    i = args.index("--metrics")
    del args[i:i + 2]
print("\n".join(["cn", "--coord", r["coord"], "--cluster", r["cluster"], "--id", "1"] + args))
PY
)
[ "${#argv[@]}" -gt 6 ] || { fail "cannot read CN 1's flags from cluster.json"; verdict; exit 1; }
"$pond" "${argv[@]}" >"$tmp/second.log" 2>&1 &
second=$!
sleep 2
if ! alive "$second"; then
  fail "the second CN 1 did not wait for the first to be declared failed"; cat "$tmp/second.log"
else
  kill -TERM "$second"
  sent=$(date +%s%3N)
  for _ in $(seq 1 30); do
    alive "$second" || break
    sleep 0.1
  done
  took=$(( $(date +%s%3N) - sent ))
  if alive "$second"; then
    fail "the second CN 1 still runs $took ms after SIGTERM, waiting in its start"
    kill -9 "$second"
  elif grep -q "stopping (SIGTERM) while starting" "$tmp/second.log"; then
    ok "the second CN 1 stopped $took ms after SIGTERM, while it waited to start"
  else
    fail "the second CN 1 stopped $took ms after SIGTERM without saying why"; cat "$tmp/second.log"
  fi
fi
wait "$second" 2>/dev/null

timeout 60 "$pond" bench smallbank --dir "$d" --connect "$addr" --clients 4 --seconds 2 >"$tmp/run.out" 2>&1
money_adds_up "shm" "after the second CN 1 stopped" "$tmp/run.out" $?
down_leaves_nothing "$d"
verdict
