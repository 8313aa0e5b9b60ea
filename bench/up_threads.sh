#!/usr/bin/env bash
# Where a `pond up` cluster's CPU goes, thread by thread: starts 3 MN + 3 CN daemons (or as many
# CNs, with the protocol, as --cns and --protocol say) over UCX shared memory with SmallBank,
# drives them with `pond bench smallbank --connect`, and reads every
# thread's /proc/PID/task/TID/schedstat 2 s into the clients' run and 6 s later: time on a core, time
# runnable but waiting for one, and times scheduled (docs/perf_service.md, "Two idle costs of
# `pond up`", "What holds `pond up` back"). Stops the cluster on every exit.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/up_threads.sh [--pond PATH] [--accounts N] [--clients N] [--pipeline N]
                           [--cns N] [--protocol P]

  --pond PATH     the pond binary (default: build/release/pond)
  --accounts N    SmallBank accounts (default 100000)
  --clients N     client threads of the driver (default 2)
  --pipeline N    calls in flight per client (default 64)
  --cns N         CN daemons (default 3; 1 makes every lock request local)
  --protocol P    the cluster's protocol (default lotus; `pond up --help`)

Prints the driver's throughput, then each thread with 20 ms or more on or waiting for a core
over the 6 s or so measured: ms on a core, ms waiting for one, times scheduled, its process and name.
EOF
}

pond=build/release/pond
accounts=100000
clients=2
pipeline=64
cns=3
protocol=lotus
while [ $# -gt 0 ]; do
  case "$1" in
    --pond) pond="$2"; shift 2 ;;
    --accounts) accounts="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --pipeline) pipeline="$2"; shift 2 ;;
    --cns) cns="$2"; shift 2 ;;
    --protocol) protocol="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "up_threads.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
[ -x "$pond" ] || { echo "up_threads.sh: no pond binary at $pond (make release)" >&2; exit 2; }

d=$(mktemp -d /tmp/up-threads.XXXX)
cleanup() { "$pond" down --dir "$d/up" >/dev/null 2>&1 || true; rm -rf "$d"; }
trap cleanup EXIT

"$pond" up --dir "$d/up" --cluster up-threads --workload smallbank --accounts "$accounts" \
  --cns "$cns" --protocol "$protocol" --ucx-tls shm --ucx-net-devices lo >"$d/up.out" 2>&1 ||
  { tail -5 "$d/up.out" >&2; exit 1; }
addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$d/up.out")
pids=$(python3 -c "import json,sys; print(' '.join(str(p['pid']) for p in \
json.load(open(sys.argv[1]))['processes']))" "$d/up/cluster.json")

# One line per thread: pid tid name run_ns wait_ns times_scheduled, after a first line with the
# time. One process reads them all: a fork per thread took seconds on a busy host.
snap() {
  python3 -c '
import os, sys, time
print(time.monotonic())
for p in sys.argv[1:]:
    try:
        tids = os.listdir("/proc/%s/task" % p)
    except OSError:
        continue
    for t in tids:
        try:
            stat = open("/proc/%s/task/%s/schedstat" % (p, t)).read().split()
            name = open("/proc/%s/task/%s/comm" % (p, t)).read().strip().replace(" ", "_")
        except OSError:
            continue
        print(p, t, name, *stat)
' "$@"
}

# Line-buffered: its lines a second must reach the file as they are printed.
stdbuf -oL "$pond" bench smallbank --dir "$d/up" --connect "$addr" --clients "$clients" \
  --pipeline "$pipeline" --seconds 10 >"$d/bench.out" 2>&1 &
bench=$!
# The driver first reads every balance (its check's starting total) and only then runs its
# clients for 10 s, printing a line a second: the window starts at its first line.
until grep -qE '^ +[0-9.]+ s ' "$d/bench.out"; do
  kill -0 "$bench" 2>/dev/null || { tail -5 "$d/bench.out" >&2; exit 1; }
  sleep 0.2
done
sleep 1
snap $pids $bench >"$d/s0"
sleep 6
snap $pids $bench >"$d/s1"
wait "$bench" || { tail -5 "$d/bench.out" >&2; exit 1; }
grep '^throughput' "$d/bench.out"
python3 - "$d/s0" "$d/s1" <<'EOF'
import sys
def read(path):
    lines = open(path).read().splitlines()
    threads = {}
    for line in lines[1:]:
        p, t, name, run, wait, times = line.split()
        threads[(p, t)] = (name, int(run), int(wait), int(times))
    return float(lines[0]), threads
t0, before = read(sys.argv[1])
t1, after = read(sys.argv[2])
rows = []
for key, (name, run, wait, times) in after.items():
    _, r0, w0, n0 = before.get(key, (name, 0, 0, 0))
    run_ms, wait_ms = (run - r0) / 1e6, (wait - w0) / 1e6
    if run_ms + wait_ms >= 20:
        rows.append((run_ms, wait_ms, times - n0, key[0], name))
print("over %.1f s: ms on a core, ms waiting for one, times scheduled, process, thread" % (t1 - t0))
for r in sorted(rows, reverse=True):
    print("%8.0f %8.0f %8d  pid %s %s" % r)
print("every thread: %.0f ms on a core, %.0f ms waiting for one, in %.1f s" %
      (sum(r[0] for r in rows), sum(r[1] for r in rows), t1 - t0))
EOF
