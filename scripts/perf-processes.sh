#!/usr/bin/env bash
# Pond as processes against Pond embedded, in one sitting (docs/perf.md "Pond as processes"):
#   1. SmallBank and KVS on the embedded default (threads, the local transport);
#   2. the same workloads on `pond up`'s cluster — 3 MN and 3 CN daemons — driven through the
#      client API by `pond bench ... --connect`, over UCX shared memory and over TCP;
#   3. kill -9 of CN 2 under SmallBank load: when it was declared, when its recovery ended, and
#      how the clients' commits per 100 ms went meanwhile.
# Usage: perf-processes.sh [POND] [SECONDS]; writes its raw output to stdout.
set -euo pipefail
pond="${1:-build/release/pond}"
secs="${2:-10}"
tmp=$(mktemp -d)
trap '[ -f "$tmp/c/cluster.json" ] && "$pond" down --dir "$tmp/c" --grace 2 >/dev/null 2>&1; rm -rf "$tmp"' EXIT

echo "== machine: $(nproc) cores, $(uname -srm); $("$pond" --help >/dev/null 2>&1 && echo pond ok)"
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

echo "== kill -9 of CN 2 under SmallBank load (UCX shm, lease 1000 ms, 8 clients)"
"$pond" up --dir "$tmp/c" --mns 3 --cns 3 --ucx-tls shm --region-mib 1024 --workload smallbank \
  --accounts 100000 >"$tmp/up.out"
addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
"$pond" bench smallbank --connect "$addr" --clients 8 --seconds "$secs" --json "$tmp/run.json" \
  >"$tmp/run.out" &
bench=$!
sleep 4
victim=$(python3 -c "import json; print([p['pid'] for p in json.load(open('$tmp/c/cluster.json'))['processes'] if p['role'] == 'cn' and p['id'] == 2][0])")
kill_ms=$(date +%s%3N)
kill -9 "$victim"
wait "$bench"
grep -E "^throughput|^latency|^money|^answers" "$tmp/run.out"
grep -h "CN 2" "$tmp/c"/cn-0.log "$tmp/c"/cn-1.log | sort
python3 - "$tmp/run.json" "$kill_ms" "$tmp/c/cn-0.log" "$tmp/c/cn-1.log" <<'EOF'
import json, sys, datetime
run = json.load(open(sys.argv[1]))["result"]["timeline"]
kill = int(sys.argv[2])
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
declared = recovered = None
for path in sys.argv[3:]:
    for line in open(path):
        if "CN 2 failed" in line and declared is None:
            declared = at(line)
        if "CN 2's failure" in line and "is recovered" in line:
            recovered = max(recovered or 0, at(line))
print(f"before the kill: {mean:.0f} committed/s (mean of 100 ms buckets)")
print("per 100 ms from the kill:", " ".join(f"{r:.0f}" for r in rates[k:k + 15]))
print(f"declared failed {declared - kill} ms after the kill; recovered everywhere "
      f"{recovered - kill} ms after it")
if back is None:
    print("commits per 100 ms never came back to 90% of the mean before the kill")
else:
    print(f"commits per 100 ms back to 90% of the mean before the kill {(back - k) * step} ms "
          f"after the kill's bucket")
EOF
"$pond" down --dir "$tmp/c" >/dev/null
