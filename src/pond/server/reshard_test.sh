#!/usr/bin/env bash
# Shards move between CN daemons under client load (docs/resharding.md): `pond up` starts
# ZooKeeper, 3 MN and 3 CN daemons over UCX shared memory serving SmallBank, with both policies
# restless: any CN 2% above the mean for one 100 ms interval — the machine's period at a lease of
# 1 s — hands shards away, and a shard goes to a CN that made half its requests in one interval
# (with 2000 accounts, most shards hold one; a payment's second account is locked from the CN
# its call was routed to). Clients commit
# through CN 0 for 8 s. The CNs' logs must show moves made by epochs and shards opened where they
# went; the clients' money must add up and their commits keep flowing; `pond down` leaves no
# process behind. Usage: reshard_test.sh PATH_TO_POND
set -u
pond="$1"
source "$(dirname "$0")/cluster_test_lib.sh"

d="$tmp/c"
dirs+=("$d")
if ! "$pond" up --dir "$d" --mns 3 --replication 2 --cns 3 --region-mib 64 --ucx-tls shm \
    --workload smallbank --accounts 2000 --lease-ms 1000 --timeout 60 \
    --reshard both --reshard-interval-ms 100 --reshard-over 1.02 --reshard-intervals 1 \
    >"$tmp/up.out" 2>&1; then
  fail "pond up --reshard both"; cat "$tmp/up.out"; exit 1
fi
ok "pond up: 3 MNs and 3 CNs, resharding on"
addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
[ -n "$addr" ] || { fail "no client address"; cat "$tmp/up.out"; exit 1; }

timeout 120 "$pond" bench smallbank --dir "$d" --connect "$addr" --clients 6 --seconds 8 >"$tmp/run.out" 2>&1
money_adds_up "shm" "while shards moved" "$tmp/run.out" $?
made=$(cat "$d"/cn-*.log | grep -c "shards move from CN")
opened=$(cat "$d"/cn-*.log | grep -c "of this CN's shards came home")
if [ "$made" -gt 0 ] && [ "$opened" -gt 0 ]; then
  ok "$made epoch(s) moved shards between CN daemons; receivers opened them $opened time(s)"
else
  fail "no shard moved under load ($made epochs, $opened openings)"; tail -n 5 "$d"/cn-*.log
fi
load=$(cat "$d"/cn-*.log | grep -c "overloaded (")
near=$(cat "$d"/cn-*.log | grep -c "requested mostly from CN")
if [ "$near" -gt 0 ]; then
  ok "moves started: $load for load, $near for locality"
else
  fail "no move was started for locality ($load for load)"
fi
rate=$(min_rate_after "$tmp/run.out" 1)
[ "$rate" -gt 0 ] 2>/dev/null && ok "commits kept flowing: at least $rate a second after the first" ||
  { fail "commits stopped ($rate a second at the lowest)"; cat "$tmp/run.out"; }

down_leaves_nothing "$d"
verdict
