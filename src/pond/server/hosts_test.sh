#!/usr/bin/env bash
# Pond across hosts: scripts/hosts.sh makes three hosts of network namespaces on this machine
# (10.77.0.10-12 on a bridge of their own), ZooKeeper on host 0 and one MN and one CN on each,
# over UCX's TCP transport, each host's interface named differently (its daemons' own
# --ucx-net-devices); SmallBank clients run on host 0. Then:
#   1. Clients reach every CN by the address it advertises (it listens on 0.0.0.0): Describe
#      names 10.77.0.1H:7400 for CN H, and clients on host 0 commit through CN 1 on host 1.
#   2. Host 2's link goes down for longer than the lease, under load. CN 2 can reach only MN 2
#      beside it, so its beats land on one MN of three: it must fence itself before the others
#      declare it and recover its log (the order is read from the daemons' logs), and once the
#      link is back the clients on host 0 commit again, every shard takes a write through CNs 0
#      and 1 (`pond client probe`), and the money adds up.
#   3. Host 2 is cut from host 0 alone (ZooKeeper's) for longer than the ZooKeeper session: its
#      CN keeps its lease on MNs 1 and 2, but once it hears that its session expired it stops,
#      and only then is it declared.
# Needs root for the namespaces; elsewhere it says so and is skipped (exit 77).
# Usage: hosts_test.sh PATH_TO_POND
set -u
pond=$(realpath "$1")
hosts="$(dirname "$0")/../../../scripts/hosts.sh"
failures=0
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
ok() { echo "ok   $1"; }

if [ "$(id -u)" -ne 0 ] || ! ip netns add "pondprobe$$" 2>/dev/null; then
  echo "skipped: this machine cannot make network namespaces (needs root and iproute2)"
  exit 77
fi
ip netns del "pondprobe$$"
bash "$hosts" sweep >/dev/null 2>&1 || true

tmp=$(mktemp -d)
cleanup() {
  for d in "$tmp"/h*; do bash "$hosts" down "$d" >/dev/null 2>&1; done
  if [ "$failures" -gt 0 ]; then
    for f in "$tmp"/h*/*.log; do echo "--- last lines of ${f#"$tmp"/}"; tail -n 8 "$f"; done
  fi
  [ -n "${POND_TEST_KEEP:-}" ] && cp -r "$tmp" "$POND_TEST_KEEP"
  rm -rf "$tmp"
}
trap cleanup EXIT
at() { bash "$hosts" exec "$tmp/h" "$@"; }  # at HOST CMD...

# Each host's interface named its own way (ethH): its daemons are told theirs, over the spec's.
if ! timeout 120 bash "$hosts" up "$tmp/h" --pond "$pond" --lease-ms 1000 --vary-ifnames -- \
    --workload smallbank --accounts 2000 --table probe:8:16384 >"$tmp/up.out" 2>&1; then
  fail "hosts.sh up"; cat "$tmp/up.out"; exit 1
fi
ok "3 hosts up: ZooKeeper on host 0, an MN and a CN on each, UCX over TCP on eth0, eth1, eth2"

# 1. Advertised addresses.
at 0 "$pond" client --connect 10.77.0.10:7400 describe >"$tmp/describe.out" 2>&1
if [ "$(sed -n 's/^cn //p' "$tmp/describe.out" | paste -sd ' ')" = \
     "10.77.0.10:7400 10.77.0.11:7400 10.77.0.12:7400" ]; then
  ok "Describe names each CN at its host's address (it listens on 0.0.0.0)"
else
  fail "Describe does not name the CNs' hosts"; cat "$tmp/describe.out"
fi
timeout 60 bash "$hosts" exec "$tmp/h" 0 "$pond" bench smallbank --connect 10.77.0.11:7400 \
  --clients 4 --seconds 2 >"$tmp/run1.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^money check  ok" "$tmp/run1.out"; then
  ok "clients on host 0 commit through CN 1 on host 1 ($(sed -n 's/^throughput *//p' "$tmp/run1.out"))"
else
  fail "clients on host 0 through CN 1 (exit $rc)"; cat "$tmp/run1.out"
fi

# 2. Host 2 cut off for 4 leases, under load. At the heal, an MN daemon that had been answering
#    CN 2 over UCX's TCP transport may abort inside UCX (Debian's 1.13 asserts "got REP message" in
#    ucp_request_send_state_ff as it drops the dead CN's connection; UCX itself removed that
#    assertion as wrong, openucx/ucx pull request 8175). Such a run proves nothing either way
#    about Pond, so it is said and run again on a fresh cluster, up to three times; any other
#    failure fails the test.
# probe_cns DIR WHAT: a put into every shard through CNs 0 and 1 commits within 20 s (the probe
# table's keys: inserts the first time, writes after).
probe_cns() {
  if bash "$hosts" exec "$1" 0 "$pond" client --connect 10.77.0.10:7400 --timeout-ms 5000 \
      probe probe --within-ms 20000 --cn 10.77.0.10:7400 --cn 10.77.0.11:7400 \
      >"$tmp/probe.out" 2>&1; then
    ok "$2: every shard commits through CNs 0 and 1 ($(paste -sd ';' "$tmp/probe.out"))"
  else
    fail "$2: some shard does not commit through CN 0 or CN 1"; cat "$tmp/probe.out"
  fi
}

cut_case() {  # $1: the cluster's directory (already up); 0 if judged, 2 if UCX aborted
  local d=$1
  # Every shard's probe key exists before the cut: after it, MN 2 stays down, and Pond takes no
  # insert of a key whose primary is down (docs/deploy.md "Several hosts").
  probe_cns "$d" "before the cut"
  timeout 90 bash "$hosts" exec "$d" 0 "$pond" bench smallbank --connect 10.77.0.10:7400 \
    --clients 6 --seconds 14 >"$tmp/run2.out" 2>&1 &
  local bench=$!
  sleep 3
  local cut_at healed_at
  cut_at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
  bash "$hosts" cut "$d" 2
  sleep 4
  bash "$hosts" heal "$d" 2
  healed_at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
  wait "$bench"
  local rc=$?
  local aborted
  # UCX's own assertions ("[host:pid:...] file.c:NNN  Assertion `...' failed"), not Pond's.
  aborted=$(grep -l '\] [a-z_]*\.c:[0-9]* *Assertion `' "$d"/mn-*.log "$d"/cn-*.log 2>/dev/null |
    xargs -r -n1 basename | paste -sd ' ')
  if [ -n "$aborted" ]; then
    echo "note UCX asserted in $aborted at the heal ($(grep -ho 'Assertion `.*' "$d"/*.log | head -n 1 | cut -c1-120))"
    return 2
  fi
  local fenced declared recovered
  fenced=$(grep -h "pond cn 2: lease lost" "$d/cn-2.log" | head -n 1 | cut -d' ' -f1)
  declared=$(grep -h "CN 2 failed (epoch" "$d/cn-0.log" "$d/cn-1.log" | cut -d' ' -f1 | sort | head -n 1)
  recovered=$(grep -h "recovered CN 2's log" "$d/cn-0.log" "$d/cn-1.log" | cut -d' ' -f1 | sort | head -n 1)
  if [ -z "$fenced" ]; then
    fail "CN 2, cut off with MN 2 beside it, never fenced itself"
  elif [ -z "$declared" ]; then
    fail "CN 2 fenced ($fenced) but nobody declared it"
  elif [[ "$fenced" < "$declared" ]]; then
    ok "CN 2 fenced itself at $fenced, before the others declared it at $declared (cut at $cut_at, healed at $healed_at; its log recovered at ${recovered:-never})"
  else
    fail "CN 2 was declared at $declared, before it fenced at $fenced"
  fi
  grep -q "lease lost (no beat a configuration manager would see" "$d/cn-2.log" &&
    ok "CN 2 says why: $(grep -o 'no beat a configuration manager would see for [0-9]* ms' "$d/cn-2.log" | head -n 1)" ||
    fail "CN 2's log does not say why it stopped"
  if grep -q "lease lost" "$d/cn-0.log" "$d/cn-1.log"; then
    fail "a CN on the majority side lost its lease"
  else
    ok "CNs 0 and 1 kept their leases"
  fi
  if [ "$rc" -eq 0 ] && grep -q "^money check  ok" "$tmp/run2.out"; then
    ok "the money adds up after the cut ($(sed -n 's/^answers *//p' "$tmp/run2.out"))"
  else
    fail "the money does not add up after the cut (exit $rc)"; cat "$tmp/run2.out"
  fi
  # The clients commit again once the link is back (second 7 of the run): the last three seconds.
  local low
  low=$(awk '$2 == "s" && $1 + 0 > 11 { r = $3 + 0; if (min == "" || r < min) min = r }
    END { print (min == "" ? -1 : min) }' "$tmp/run2.out")
  [ "$low" -gt 0 ] && ok "clients commit again after the heal (at least $low/s)" ||
    { fail "a second without commits after the heal"; cat "$tmp/run2.out"; }
  probe_cns "$d" "after the heal"
  return 0
}
judged=0
for attempt in 1 2 3; do
  d="$tmp/h"
  if [ "$attempt" -gt 1 ]; then
    d="$tmp/h2.$attempt"
    if ! timeout 120 bash "$hosts" up "$d" --pond "$pond" --lease-ms 1000 -- \
        --workload smallbank --accounts 2000 --table probe:8:16384 >"$tmp/up2.out" 2>&1; then
      fail "hosts.sh up (attempt $attempt)"; cat "$tmp/up2.out"; break
    fi
  fi
  cut_case "$d" && { judged=1; break; }
  bash "$hosts" down "$d" >/dev/null 2>&1
done
[ "$judged" -eq 1 ] || fail "UCX aborted at the heal in every attempt: the cut case was never judged"

# 3. Host 2 cut from host 0 alone, for longer than the ZooKeeper session (10 s): CN 2 still beats
#    into MNs 1 and 2, so its lease holds and CN 0 (which reads its beats on MN 1) must not
#    declare it, and nobody singles it out (CN 1 hears both). But it hears no epoch meanwhile,
#    and ZooKeeper lets its session go: told so once it reaches the service again, it must stop
#    (before, its calls failed for good and it served on), and only then is it declared.
bash "$hosts" down "$tmp/h3" >/dev/null 2>&1
if ! timeout 120 bash "$hosts" up "$tmp/h3" --pond "$pond" --lease-ms 1000 -- \
    --workload smallbank --accounts 2000 >"$tmp/up3.out" 2>&1; then
  fail "hosts.sh up (again)"; cat "$tmp/up3.out"; exit 1
fi
bash "$hosts" block "$tmp/h3" 2 0
blocked_at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
sleep 13
bash "$hosts" unblock "$tmp/h3" 2 0
for _ in $(seq 1 150); do
  grep -q "pond cn 2: lease lost" "$tmp/h3/cn-2.log" && break
  sleep 0.1
done
stopped=$(grep -h "pond cn 2: lease lost" "$tmp/h3/cn-2.log" | head -n 1)
for _ in $(seq 1 100); do
  grep -q "CN 2 failed (epoch" "$tmp/h3/cn-0.log" "$tmp/h3/cn-1.log" && break
  sleep 0.1
done
declared=$(grep -h "CN 2 failed (epoch" "$tmp/h3/cn-0.log" "$tmp/h3/cn-1.log" | cut -d' ' -f1 | sort | head -n 1)
if [[ "$stopped" == *"ZooKeeper session expired"* ]]; then
  ok "CN 2, cut from ZooKeeper's host at $blocked_at for 13 s, stopped for its expired session at ${stopped%% *}"
else
  fail "CN 2 did not stop for its expired session: ${stopped:-it never stopped}"
fi
if [ -n "$declared" ] && [[ "${stopped%% *}" < "$declared" ]]; then
  ok "and was declared only after that, at $declared"
else
  fail "CN 2 was declared at ${declared:-never}, not after it stopped"
fi

echo "$failures failures"
[ "$failures" -eq 0 ]
