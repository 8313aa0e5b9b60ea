#!/usr/bin/env bash
# Pond as processes against Pond embedded, in one sitting (docs/perf.md "Pond as processes"):
#   1. SmallBank and KVS on the embedded default (threads, the local transport);
#   2. the same workloads on `pond up`'s cluster — 3 MN and 3 CN daemons — driven through the
#      client API by `pond bench ... --connect`, over UCX shared memory and over TCP;
#   3. kill -9 of CN 2, then (on a new cluster) of MN 1, under SmallBank load: when it was
#      declared, when its failure was over, and how the clients' commits per 100 ms went; then
#      (again on a new cluster) MN 1 killed and restarted: each step of its rejoin, and the
#      commits per 100 ms while its replicas are copied back.
# Usage: [KILLS_ONLY=1] perf-processes.sh [POND] [SECONDS]; writes its raw output to stdout
# (KILLS_ONLY: part 3 alone).
set -euo pipefail
pond="${1:-build/release/pond}"
secs="${2:-10}"
tmp=$(mktemp -d)
trap '[ -f "$tmp/c/cluster.json" ] && "$pond" down --dir "$tmp/c" --grace 2 >/dev/null 2>&1; rm -rf "$tmp"' EXIT

echo "== machine: $(nproc) cores, $(uname -srm); $("$pond" --help >/dev/null 2>&1 && echo pond ok)"
if [ -z "${KILLS_ONLY:-}" ]; then
echo "== embedded (local transport): smallbank, kvs"
"$pond" bench smallbank --seconds "$secs" --accounts 100000 | grep -E "^pond|^throughput|^latency|^money"
"$pond" bench kvs --seconds "$secs" --keys 100000 | grep -E "^pond|^throughput|^latency"

for tls in shm tcp; do
  echo "== processes over UCX $tls: 3 MN + 3 CN daemons, 8 gRPC clients"
  "$pond" up --dir "$tmp/c" --mns 3 --cns 3 --ucx-tls "$tls" --ucx-net-devices lo --region-mib 1024 \
    --workload smallbank,kvs --accounts 100000 --keys 100000 --timeout 900 >"$tmp/up.out"
  addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
  "$pond" bench smallbank --connect "$addr" --clients 8 --seconds "$secs" |
    grep -E "^pond|^throughput|^latency|^money|^answers"
  "$pond" bench kvs --connect "$addr" --clients 8 --seconds "$secs" |
    grep -E "^pond|^throughput|^latency|^answers"
  "$pond" down --dir "$tmp/c" >/dev/null
done
fi

# kill_under_load ROLE ID: kill -9 of that daemon 4 s into a SmallBank run of $secs s; prints when
# it was declared, when its failure was over (a CN: recovered everywhere; an MN: every CN skips
# it) and how the clients' commits per 100 ms went meanwhile.
kill_under_load() {
  local role="$1" id="$2"
  local name="${role^^} $id"
  echo "== kill -9 of $name under SmallBank load (UCX shm, lease 1000 ms, 8 clients)"
  "$pond" up --dir "$tmp/c" --mns 3 --cns 3 --ucx-tls shm --region-mib 1024 --workload smallbank \
    --accounts 100000 >"$tmp/up.out"
  addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
  "$pond" bench smallbank --connect "$addr" --clients 8 --seconds "$secs" --json "$tmp/run.json" \
    >"$tmp/run.out" &
  bench=$!
  sleep 4
  victim=$(python3 -c "import json; print([p['pid'] for p in json.load(open('$tmp/c/cluster.json'))['processes'] if p['role'] == '$role' and p['id'] == $id][0])")
  kill_ms=$(date +%s%3N)
  kill -9 "$victim"
  wait "$bench"
  grep -E "^throughput|^latency|^money|^answers" "$tmp/run.out"
  grep -h "$name" "$tmp/c"/cn-0.log "$tmp/c"/cn-1.log | sort
  python3 - "$tmp/run.json" "$kill_ms" "$name" "$tmp/c/cn-0.log" "$tmp/c/cn-1.log" <<'EOF'
import json, sys, datetime
run = json.load(open(sys.argv[1]))["result"]["timeline"]
kill = int(sys.argv[2])
name = sys.argv[3]
step = run["step_ms"]
counts = run["committed"]
rates = [(counts[i] - (counts[i - 1] if i else 0)) * 1000 / step for i in range(len(counts))]
k = (kill - run["start_unix_ms"]) // step  # the bucket the kill fell in
before = rates[2:k]  # skip the first 200 ms (connections warming up)
mean = sum(before) / len(before)
back = next((i for i in range(k, len(rates)) if rates[i] >= 0.9 * mean), None)
def at(line):
    t = datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
declared = over = None
for path in sys.argv[4:]:
    for line in open(path):
        if f"{name} failed" in line and declared is None:
            declared = at(line)
        # A CN: its failure recovered on every survivor; an MN: every CN skips it.
        if (f"{name}'s failure" in line and "is recovered" in line) or f"{name} is down" in line:
            over = max(over or 0, at(line))
print(f"before the kill: {mean:.0f} committed/s (mean of 100 ms buckets)")
print("per 100 ms from the kill:", " ".join(f"{r:.0f}" for r in rates[k:k + 15]))
done = "recovered everywhere" if name.startswith("CN") else "skipped by every CN"
print(f"declared failed {declared - kill} ms after the kill; {done} {over - kill} ms after it")
if back is None:
    print("commits per 100 ms never came back to 90% of the mean before the kill")
else:
    print(f"commits per 100 ms back to 90% of the mean before the kill {(back - k) * step} ms "
          f"after the kill's bucket")
EOF
  "$pond" down --dir "$tmp/c" >/dev/null
}

# restart_mn_under_load: kill -9 of MN 1 2 s into a SmallBank run of 3 x $secs s, `pond restart
# --mn 1` once it is down; prints each step of its rejoin from the restart on and the clients'
# commits per 100 ms before, while it is copied and held, and after.
restart_mn_under_load() {
  echo "== kill -9 of MN 1, then pond restart --mn 1, under SmallBank load (UCX shm, lease 1000 ms, 8 clients)"
  "$pond" up --dir "$tmp/c" --mns 3 --cns 3 --ucx-tls shm --region-mib 1024 --workload smallbank \
    --accounts 100000 >"$tmp/up.out"
  addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
  "$pond" bench smallbank --connect "$addr" --clients 8 --seconds "$((3 * secs))" \
    --json "$tmp/run.json" >"$tmp/run.out" &
  bench=$!
  sleep 2
  victim=$(python3 -c "import json; print([p['pid'] for p in json.load(open('$tmp/c/cluster.json'))['processes'] if p['role'] == 'mn' and p['id'] == 1][0])")
  kill -9 "$victim"
  until grep -q "MN 1 is down" "$tmp/c"/cn-0.log; do sleep 0.1; done
  restart_ms=$(date +%s%3N)
  "$pond" restart --dir "$tmp/c" --mn 1 --timeout 600
  wait "$bench"
  grep -E "^throughput|^latency|^money|^answers" "$tmp/run.out"
  python3 - "$tmp/run.json" "$restart_ms" "$tmp"/c/cn-*.log <<'EOF2'
import json, sys, datetime
run = json.load(open(sys.argv[1]))["result"]["timeline"]
restart = int(sys.argv[2])
step = run["step_ms"]
counts = run["committed"]
rates = [(counts[i] - (counts[i - 1] if i else 0)) * 1000 / step for i in range(len(counts))]
def at(line):
    t = datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
steps = {}
for path in sys.argv[3:]:
    for line in open(path):
        for key in ("rejoins as", "is copied", "cursors are in step", "is read;", "is up"):
            if "MN 1" in line and key in line and key not in steps:
                steps[key] = at(line)
for key in ("rejoins as", "is copied", "cursors are in step", "is read;", "is up"):
    print(f"MN 1 {key.rstrip(';')}: +{steps[key] - restart} ms after pond restart")
def bucket(ms):
    return (ms - run["start_unix_ms"]) // step
r, up = bucket(restart), bucket(steps["is up"])
copied = bucket(steps["is copied"])
def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")
print(f"commits/s: down, before the restart {mean(rates[r - 10:r]):.0f}; copying "
      f"{mean(rates[r:copied]):.0f}; cursors and switch {mean(rates[copied:up + 1]):.0f}; "
      f"after {mean(rates[up + 1:up + 31]):.0f} (means of 100 ms buckets)")
print("per 100 ms from the restart:", " ".join(f"{x:.0f}" for x in rates[r:up + 5]))
EOF2
  "$pond" down --dir "$tmp/c" >/dev/null
}

kill_under_load cn 2
kill_under_load mn 1
restart_mn_under_load
