#!/usr/bin/env bash
# kill -9 of a CN daemon under motor and under ford, whose locks are words on the MNs: `pond up
# --protocol P` starts ZooKeeper, 3 MN and 3 CN daemons serving SmallBank (UCX shared memory); a
# client process drives it; CN 2 is killed mid-run. The others declare it and recover its logs —
# finishing or undoing each commit it cut short (cluster/mn_lock_recovery.h) — and its lock
# words left on the MNs go free to whoever meets them; everyone keeps committing; `pond restart`
# brings it back. Afterwards the money adds up (every acknowledged commit is there, each unknown
# outcome taken or not), and `pond client probe` commits in every shard through every live CN.
# Then `pond down` leaves no process behind. The same for pond (docs/protocols.md "pond"), whose
# locks are on the CNs as lotus's but whose commits are answered before their last round: an
# answered commit of the killed CN must be there too. Usage: kill_mn_locks_test.sh PATH_TO_POND
set -u
pond="$1"
source "$(dirname "$0")/cluster_test_lib.sh"

for protocol in ${PROTOCOLS:-motor ford pond}; do
  d="$tmp/$protocol"
  dirs+=("$d")
  if ! "$pond" up --dir "$d" --protocol "$protocol" --mns 3 --replication 2 --cns 3 \
      --region-mib 64 --ucx-tls shm --workload smallbank --accounts 2000 \
      --table probe:8:16384 --lease-ms "$kill_lease_ms" --timeout 60 >"$tmp/up.out" 2>&1; then
    fail "$protocol: pond up"; cat "$tmp/up.out"; continue
  fi
  ok "$protocol: pond up: 3 MNs and 3 CNs"
  addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
  [ -n "$addr" ] || { fail "$protocol: no client address"; cat "$tmp/up.out"; continue; }

  timeout 120 "$pond" bench smallbank --dir "$d" --connect "$addr" --clients 6 --seconds 10 >"$tmp/run.out" 2>&1 &
  bench=$!
  sleep 3
  kill_cn2_and_restart "$protocol" "$d"
  wait "$bench"
  money_adds_up "$protocol" "after the kill" "$tmp/run.out" $?
  # Commits went on: after the recovery (within 5 s of the kill at second 3), no second of
  # the run without them.
  low=$(min_rate_after "$tmp/run.out" 8)
  [ "$low" -gt 0 ] && ok "$protocol: clients committed every second after the recovery (at least $low/s)" ||
    { fail "$protocol: a second without commits after the recovery"; cat "$tmp/run.out"; }
  probe "$protocol: CN 2 killed and restarted" "$addr"
  cp "$d/cluster.json" "$tmp/cluster-$protocol.json"
  "$pond" down --dir "$d" --grace 10 >/dev/null 2>&1 || fail "$protocol: pond down"
  left=0
  for p in $(pids_of "$tmp/cluster-$protocol.json"); do alive "$p" && left=$((left + 1)); done
  [ "$left" -eq 0 ] && ok "$protocol: pond down left nothing running" ||
    fail "$protocol: $left process(es) left"
done

[ "$failures" -eq 0 ] && echo "all checks passed" || echo "$failures check(s) failed"
exit $((failures > 0))
