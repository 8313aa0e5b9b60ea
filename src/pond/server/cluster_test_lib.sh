# What the shell tests of local clusters share (sourced by daemons_test.sh, kill_test.sh,
# kill_mn_locks_test.sh, kill_tpcc_test.sh, coord_kill_test.sh, stuck_stop_test.sh,
# start_stop_test.sh and metrics_test.sh; needs $pond set): a temp dir that goes away with every
# cluster started under it, ok/FAIL lines with a count, and how to find and watch the daemons.

tmp=$(mktemp -d)
# The lease of the clusters that faults are dealt to under load. These tests put ZooKeeper, six
# daemons and a client that keeps them busy on two cores: there a thread that sleeps 10 ms woke
# up to 0.45 s late (runnable, waiting for a core), and a CN's beat thread once did not run for
# 0.94 s. With a 1 s lease, such waits had live nodes declared failed or fenced in 3 of 5 runs
# of kill_test over TCP; a lease of twice that leaves them room.
kill_lease_ms=2000
dirs=()  # the --dir of every cluster started: each is stopped at exit
failures=0
# POND_TEST_KEEP=DIR: a test that failed leaves its daemons' logs, cluster files and recorded
# histories there (a fresh subfolder per run), for a failure that a rerun may not repeat.
cleanup() {
  for d in "${dirs[@]}"; do
    [ -f "$d/cluster.json" ] && "$pond" down --dir "$d" --grace 2 >/dev/null 2>&1
  done
  # A failure's story is often in a daemon's log (one that died says why there, if it could).
  if [ "$failures" -gt 0 ]; then
    for f in $(find "$tmp" -name '*.log' 2>/dev/null | sort); do
      echo "--- last lines of ${f#"$tmp"/}"; tail -n 6 "$f"
    done
  fi
  if [ "$failures" -gt 0 ] && [ -n "${POND_TEST_KEEP:-}" ]; then
    mkdir -p "$POND_TEST_KEEP" && cp -r "$tmp" "$(mktemp -d "$POND_TEST_KEEP/run.XXXXXX")" &&
      echo "kept the failed run's files in $POND_TEST_KEEP"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
ok() { echo "ok   $1"; }

# Every pid in a cluster file.
pids_of() { grep -o '"pid": [0-9]*' "$1" | grep -o '[0-9]*$'; }
# The pid of ROLE ID in a cluster file.
pid_of() {
  python3 -c "import json,sys; print([p['pid'] for p in json.load(open(sys.argv[1]))['processes']
    if p['role'] == sys.argv[2] and p['id'] == int(sys.argv[3])][0])" "$1" "$2" "$3"
}
# Running, not a zombie: a daemon whose starter exited is init's child, and an init that does not
# reap at once (a container's) leaves it a zombie for a while after it exits.
alive() {
  [ -r "/proc/$1/stat" ] || return 1
  [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != "Z" ]
}
# `pond down` of the cluster in $1 ($2 names the case, may be empty), then: no process of it is
# left running.
down_leaves_nothing() {
  cp "$1/cluster.json" "$tmp/down-cluster.json"
  "$pond" down --dir "$1" --grace 5 >/dev/null 2>&1
  local left=0 p
  for p in $(pids_of "$tmp/down-cluster.json"); do alive "$p" && left=$((left + 1)); done
  [ "$left" -eq 0 ] && ok "${2:+$2: }pond down left nothing running" ||
    fail "${2:+$2: }$left process(es) left after pond down"
}
# The last line of a test: its verdict, and its exit status.
verdict() {
  [ "$failures" -eq 0 ] && echo "all checks passed" || echo "$failures check(s) failed"
  exit $((failures > 0))
}
# Waits up to $3 seconds for file $1 to hold a line matching $2.
await_line() {
  for _ in $(seq 1 $(($3 * 10))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# The value of metric SAMPLE (name with labels, as written) that daemon ROLE ID of the cluster in
# DIR serves now; empty if it cannot be read.
metric() {
  python3 - "$1/cluster.json" "$2" "$3" "$4" <<'PY'
import json, sys, urllib.request
procs = json.load(open(sys.argv[1]))["processes"]
addr = [p.get("metrics", "") for p in procs if p["role"] == sys.argv[2] and p["id"] == int(sys.argv[3])]
try:
    text = urllib.request.urlopen("http://%s/metrics" % addr[0], timeout=5).read().decode()
except Exception:
    sys.exit(0)
for line in text.splitlines():
    if line.split(" ")[0] == sys.argv[4]:
        print(line.split(" ")[1])
PY
}
# Waits up to $5 seconds for metric $4 of daemon $2 $3 of cluster $1 to read $6.
await_metric() {
  for _ in $(seq 1 $(($5 * 5))); do
    [ "$(metric "$1" "$2" "$3" "$4")" = "$6" ] && return 0
    sleep 0.2
  done
  return 1
}
# probe NAME ADDR [CN_ADDR...]: every shard commits through each CN (all the server names if none).
probe() {
  local what="$1" addr="$2"; shift 2
  local through=()
  for c in "$@"; do through+=(--cn "$c"); done
  # PROBE_TABLE: another table (a fresh one: every put is an insert); PROBE_WITHIN_MS: its bound.
  if "$pond" client --dir "$d" --connect "$addr" --timeout-ms 5000 probe "${PROBE_TABLE:-probe}" \
      --within-ms "${PROBE_WITHIN_MS:-20000}" \
      "${through[@]}" >"$tmp/probe.out" 2>&1; then
    ok "$what: every shard commits through every CN ($(awk '{ printf "%s%s", (NR > 1 ? "; " : ""), $0 }' "$tmp/probe.out"))"
  else
    fail "$what: some shard does not commit through some CN"; cat "$tmp/probe.out"
  fi
}

# The money check of SmallBank run output $3 (exit status $4) for $1 (a transport or protocol),
# $2 ("after the kill"): ok with the answers line, or fail with the whole output.
money_adds_up() {
  if [ "$4" -eq 0 ] && grep -q "^money check  ok" "$3"; then
    ok "$1: the money adds up $2 ($(sed -n 's/^answers *//p' "$3"))"
  else
    fail "$1: the money does not add up $2 (exit $4)"; cat "$3"
  fi
}

# Committed per second in the progress lines after second $2 of run output $1: the lowest.
min_rate_after() {
  awk -v from="$2" '$2 == "s" && $1 + 0 > from + 0 { r = $3 + 0; if (min == "" || r < min) min = r }
    END { print (min == "" ? -1 : min) }' "$1"
}

# kill -9 of CN 2 of the cluster in $2 ($1 names the case): CN 0 declares and recovers it, a
# survivor recovers its log, and `pond restart` brings it back.
kill_cn2_and_restart() {
  local what="$1" d="$2"
  kill -9 "$(pid_of "$d/cluster.json" cn 2)"
  await_line "$d/cn-0.log" "CN 2's failure (epoch [0-9]*) is recovered" 30 &&
    ok "$what: CN 2 killed; CN 0 declared and recovered it" ||
    { fail "$what: CN 2's failure was not recovered"; tail -n 5 "$d"/cn-*.log; }
  grep -q "recovered CN 2's log 0" "$d/cn-0.log" "$d/cn-1.log" &&
    ok "$what: a survivor recovered CN 2's commit log" || fail "$what: nobody recovered CN 2's log"
  "$pond" restart --dir "$d" --cn 2 --timeout 60 >"$tmp/restart.out" 2>&1 &&
    grep -q "CN 2 is back" "$tmp/restart.out" && ok "$what: pond restart brought CN 2 back" ||
    { fail "$what: pond restart"; cat "$tmp/restart.out"; tail -n 5 "$d/cn-2.log"; }
}
