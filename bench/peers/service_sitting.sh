#!/usr/bin/env bash
# Pond's service beside its peers in one sitting: PostgreSQL 15 (SERIALIZABLE, fsync on and off,
# through postgres_smallbank.sh), a no-op RPC server that answers every request at once over the
# same gRPC transport and messages (noop_rpc), `pond serve` and `pond up` clusters of processes
# (3 MN daemons and 3, then 1 CN daemons over UCX shared memory, with ZooKeeper) driven through
# the client API,
# and the embedded run, all SmallBank on the same accounts. One table of throughputs, their ratios
# and the CPU every process spent (from /proc), a JSON of it and a plot. docs/peers.md says what
# each row measures; --help lists the flags.
set -euo pipefail

prog=$(basename "$0")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

usage() {
  cat <<EOF
Usage: $prog [flags]

Runs, in one sitting and in this order: PostgreSQL SERIALIZABLE with fsync on and off
(postgres_smallbank.sh), the embedded 'pond bench smallbank', 'pond serve' driven by
'pond bench smallbank --connect', the no-op RPC server driven the same way, and 'pond up'
clusters (3 MN daemons and --up-cns CN daemons, UCX shared memory, ZooKeeper) driven the same
way. Prints one
table: throughput, its ratio to PostgreSQL and to the no-op RPC, and the CPU of every process
over each run (/proc/stat), per committed transaction.

  --accounts N      SmallBank accounts (default 100000)
  --seconds S       measured seconds per run, whole seconds (default 10)
  --clients N       client connections of the service runs (default 2)
  --pipeline D      calls each keeps in flight (default 64)
  --pond PATH       the pond binary (default build/release/pond)
  --noop PATH       the noop_rpc binary (default: beside the pond binary)
  --pg-bin DIR      PostgreSQL's programs (default /usr/lib/postgresql/15/bin)
  --json FILE       also write the rows as JSON
  --plot FILE       also draw them to this PNG (python3-matplotlib)
  --up-cns LIST     a 'pond up' run for each CN count listed (default 3,1: with one CN daemon
                    every lock request is local; with 3, two in three go to another daemon)
  --no-up           leave out the 'pond up' runs
  -h, --help        this text

Exit status: 0 on success, 1 if a run fails or a check does not hold, 2 on bad flags.
EOF
}

# shellcheck source=bench/peers/peers_lib.sh
. "$here/peers_lib.sh"

accounts=100000
seconds=10
clients=2
pipeline=64
pond="$repo/build/release/pond"
noop=
pg_bin=/usr/lib/postgresql/15/bin
json=
plot=
up_cns=3,1
while (($# > 0)); do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --no-up) up_cns= ;;
    --accounts | --seconds | --clients | --pipeline | --pond | --noop | --pg-bin | --json | --plot | \
      --up-cns)
      (($# >= 2)) || bad_usage "$1 needs a value"
      case "$1" in
        --accounts) accounts=$2 ;;
        --seconds) seconds=$2 ;;
        --clients) clients=$2 ;;
        --pipeline) pipeline=$2 ;;
        --pond) pond=$2 ;;
        --noop) noop=$2 ;;
        --pg-bin) pg_bin=$2 ;;
        --json) json=$2 ;;
        --plot) plot=$2 ;;
        --up-cns) up_cns=$2 ;;
      esac
      shift 2
      ;;
    *) bad_usage "unknown flag '$1' (see --help)" ;;
  esac
done
for n in accounts seconds clients pipeline; do
  [[ ${!n} =~ ^[1-9][0-9]*$ ]] || bad_usage "--$n must be a positive whole number, not '${!n}'"
done
[ -z "$up_cns" ] || [[ $up_cns =~ ^[1-9][0-9]?(,[1-9][0-9]?)*$ ]] ||
  bad_usage "--up-cns must list CN counts from 1 to 64 separated by commas, not '$up_cns'"
[ -x "$pond" ] || bad_usage "no pond binary at $pond (build it, or pass --pond)"
pond=$(cd "$(dirname "$pond")" && pwd)/$(basename "$pond")
noop=${noop:-$(dirname "$pond")/noop_rpc}
[ -x "$noop" ] || bad_usage "no noop_rpc binary at $noop (it is built beside pond; or pass --noop)"
for f in json plot; do
  if [ -n "${!f}" ]; then
    [ -d "$(dirname "${!f}")" ] || bad_usage "--$f: no directory $(dirname "${!f}")"
    printf -v "$f" '%s' "$(cd "$(dirname "${!f}")" && pwd)/$(basename "${!f}")"
  fi
done

tmp=$(mktemp -d)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# proc_ticks PID: the process's user + system time so far, in clock ticks (/proc/PID/stat).
proc_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
sum_ticks() {
  local p t=0
  for p in $1; do t=$((t + $(proc_ticks "$p"))); done
  echo "$t"
}
secs() { awk -v t="$1" -v hz="$tick_hz" 'BEGIN { printf "%.2f", t / hz }'; }

# start NAME COMMAND...: starts a server in the background that prints "listening HOST:PORT";
# sets addr and pid.
start() {
  local name=$1
  shift
  # Created here, not by the redirection below: that one runs in the child, which may not have
  # opened the file before the first poll reads it (and under set -e a failed read ends the run).
  : >"$tmp/$name.out"
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pid=$!
  pids+=("$pid")
  addr=
  for _ in $(seq 1200); do
    addr=$(sed -n 's/^listening //p' "$tmp/$name.out")
    [ -n "$addr" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 5 "$tmp/$name.err" >&2
  fail "$name did not start"
}
stop() { kill "$1" && wait "$1" 2>/dev/null || true; }

# drive NAME ADDR SERVER_PIDS SECURITY...: a --connect run against ADDR, with the client flags
# SECURITY (--insecure, or --certs-dir DIR / --dir DIR for TLS); appends its row (the servers' and
# the client's CPU from /proc, every process's from /proc/stat). SERVER_PIDS: one pid, or
# several separated by spaces (a cluster of processes).
rows=$tmp/rows.tsv
: >"$rows"
drive() {
  local name=$1 at=$2 server=$3 busy0 server0 tps committed client_s server_s all_s
  local security=("${@:4}")
  progress "$name: pond bench smallbank --connect, $clients clients x $pipeline in flight, $seconds s"
  busy0=$(busy_ticks)
  server0=$(sum_ticks "$server")
  if ! /usr/bin/time -f "%U %S" -o "$tmp/$name.time" "$pond" bench smallbank "${security[@]}" --connect "$at" \
    --clients "$clients" --pipeline "$pipeline" --seconds "$seconds" --json "$tmp/$name.json" \
    >"$tmp/$name.bench" 2>&1; then
    tail -n 5 "$tmp/$name.bench" >&2
    fail "the run against $name failed"
  fi
  all_s=$(secs $(($(busy_ticks) - busy0)))
  server_s=$(secs $(($(sum_ticks "$server") - server0)))
  client_s=$(awk '{ printf "%.2f", $1 + $2 }' "$tmp/$name.time")
  read -r tps committed < <(/usr/bin/python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["result"]
print(r["txn_per_sec"], r["committed"])' "$tmp/$name.json")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$tps" "$committed" "$all_s" "$server_s" "$client_s" >>"$rows"
}

progress "PostgreSQL SERIALIZABLE, fsync on and off ($accounts accounts, $seconds s each)"
bash "$here/postgres_smallbank.sh" --settings sr,sr-nosync --accounts "$accounts" \
  --seconds "$seconds" --pond "$pond" --pg-bin "$pg_bin" --json "$tmp/pg.json" >"$tmp/pg.out" ||
  fail "postgres_smallbank.sh failed"

progress "embedded: pond bench smallbank, $seconds s"
busy0=$(busy_ticks)
/usr/bin/time -f "%U %S" -o "$tmp/embedded.time" "$pond" bench smallbank --accounts "$accounts" \
  --seconds "$seconds" --json "$tmp/embedded.json" >"$tmp/embedded.bench" 2>&1 ||
  fail "the embedded run failed"
all_s=$(secs $(($(busy_ticks) - busy0)))
read -r tps committed < <(/usr/bin/python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["result"]
print(r["txn_per_sec"], r["committed"])' "$tmp/embedded.json")
printf '%s\t%s\t%s\t%s\t%s\t%s\n' embedded "$tps" "$committed" "$all_s" \
  "$(awk '{ printf "%.2f", $1 + $2 }' "$tmp/embedded.time")" 0 >>"$rows"

progress "pond serve: loading $accounts accounts"
start serve "$pond" serve --insecure --listen 127.0.0.1:0 --workload smallbank --accounts "$accounts"
serve_pid=$pid serve_addr=$addr
drive serve "$serve_addr" "$serve_pid" --insecure
# The no-op server describes itself as pond serve does, so the same driver runs against it
# unchanged; SmallBank's procedures reply 9 bytes.
start noop "$noop" --like "$serve_addr" --reply-bytes 9
noop_pid=$pid
stop "$serve_pid"
drive noop "$addr" "$noop_pid" --insecure
stop "$noop_pid"
# The same server over TLS (mutual, ECDSA P-256 certificates from pond certs): what TLS costs.
progress "pond serve over TLS: loading $accounts accounts"
"$pond" certs --certs-dir "$tmp/certs" >/dev/null || fail "pond certs failed"
start serve-tls "$pond" serve --certs-dir "$tmp/certs" --listen 127.0.0.1:0 --workload smallbank \
  --accounts "$accounts"
drive serve-tls "$addr" "$pid" --certs-dir "$tmp/certs"
stop "$pid"

# Each cluster in a directory of its own, stopped on every exit.
trap 'for u in "$tmp"/cluster-*; do "$pond" down --dir "$u" >/dev/null 2>&1 || true; done
      cleanup' EXIT
for cns in ${up_cns//,/ }; do
  progress "pond up: 3 MN and $cns CN daemons over UCX shared memory, loading $accounts accounts"
  # A cluster name of its own: its daemons can be told from any other cluster's on this host.
  "$pond" up --dir "$tmp/cluster-$cns" --cluster service-sitting --workload smallbank \
    --accounts "$accounts" --cns "$cns" --ucx-tls shm --ucx-net-devices lo >"$tmp/up$cns.out" 2>&1 ||
    { tail -n 5 "$tmp/up$cns.out" >&2; fail "pond up --cns $cns failed"; }
  up_addr=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up$cns.out")
  up_pids=$(/usr/bin/python3 -c 'import json, sys
print(" ".join(str(p["pid"]) for p in json.load(open(sys.argv[1]))["processes"]))' \
    "$tmp/cluster-$cns/cluster.json")
  drive "up$cns" "$up_addr" "$up_pids" --dir "$tmp/cluster-$cns"
  "$pond" down --dir "$tmp/cluster-$cns" >/dev/null 2>&1 || fail "pond down failed"
done

export json plot accounts seconds clients pipeline
/usr/bin/python3 - "$rows" "$tmp/pg.json" <<'EOF'
import datetime, json, os, sys

e = os.environ
pg = json.load(open(sys.argv[2]))
rows = []
for r in pg["rows"]:
    p = r["postgres"]
    rows.append({"run": f"PostgreSQL {r['label']}", "key": f"postgres-{r['setting']}",
                 "txn_per_sec": p["txn_per_sec"], "committed": p["transactions"],
                 "cpu_s": p["cpu_s"], "server_cpu_s": None, "client_cpu_s": None})
names = {"embedded": "Pond embedded (pond bench smallbank)",
         "serve": f"pond serve --insecure, {e['clients']} clients x {e['pipeline']} pipelined",
         "serve-tls": f"pond serve over mutual TLS, {e['clients']} clients x {e['pipeline']} "
                      "pipelined",
         "noop": f"no-op RPC (noop_rpc), {e['clients']} clients x {e['pipeline']} pipelined"}


def name_of(key):
    if key.startswith("up"):
        cns = int(key[2:])
        return (f"pond up (3 MN + {cns} CN daemon{'s' if cns > 1 else ''}, UCX shm, TLS), "
                f"{e['clients']} clients x {e['pipeline']} pipelined")
    return names[key]


for line in open(sys.argv[1]):
    name, tps, committed, all_s, server_s, client_s = line.split("\t")
    rows.append({"run": name_of(name), "key": name, "txn_per_sec": float(tps),
                 "committed": int(committed), "cpu_s": float(all_s),
                 "server_cpu_s": float(server_s), "client_cpu_s": float(client_s)})
by = {r["key"]: r for r in rows}
pg_on, pg_off = by["postgres-sr"]["txn_per_sec"], by["postgres-sr-nosync"]["txn_per_sec"]
noop = by["noop"]["txn_per_sec"]
for r in rows:
    r["cpu_us_per_txn"] = r["cpu_s"] * 1e6 / r["committed"] if r["committed"] else None
    r["over_postgres_fsync_on"] = r["txn_per_sec"] / pg_on
    r["over_postgres_fsync_off"] = r["txn_per_sec"] / pg_off
    r["over_noop"] = r["txn_per_sec"] / noop
emb = by["embedded"]["cpu_us_per_txn"]
for r in rows:
    r["cpu_over_embedded"] = r["cpu_us_per_txn"] / emb if r["cpu_us_per_txn"] and emb else None

print(f"SmallBank, {e['accounts']} accounts, SR, {e['seconds']} s per run, one sitting "
      f"({datetime.date.today()}); PostgreSQL {pg['settings']['clients']} connections, "
      f"Pond's service {e['clients']} clients x {e['pipeline']} calls in flight")
print()
print("| run | txn/s | ÷ PostgreSQL fsync on | ÷ fsync off | ÷ no-op RPC "
      "| CPU s, every process | µs per txn | ÷ embedded's | server / client CPU s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    split = ("—" if r["server_cpu_s"] is None or r["key"] == "embedded"
             else f"{r['server_cpu_s']:.1f} / {r['client_cpu_s']:.1f}")
    print(f"| {r['run']} | {r['txn_per_sec']:,.0f} | {r['over_postgres_fsync_on']:.2f} "
          f"| {r['over_postgres_fsync_off']:.2f} | {r['over_noop']:.2f} | {r['cpu_s']:.1f} "
          f"| {r['cpu_us_per_txn']:.1f} | {r['cpu_over_embedded']:.1f} | {split} |")
print()
print("CPU: /proc/stat's busy time of the whole machine over each measured run (PostgreSQL: "
      "pgbench's run; the service runs: the driver's, the server already loaded; embedded: the "
      "whole process, its load included); server and client from /proc/PID/stat and the "
      "driver's rusage.")
if e["json"]:
    with open(e["json"], "w") as out:
        json.dump({"bench": "service_sitting",
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "settings": {k: int(e[k]) for k in ("accounts", "seconds", "clients", "pipeline")},
                   "rows": rows}, out, indent=2)
        out.write("\n")
    print(f"results written to {e['json']}")
if e["plot"]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = [r["key"] for r in rows]
    a.barh(labels, [r["txn_per_sec"] for r in rows], color="tab:blue")
    a.set_xlabel("committed transactions per second")
    a.invert_yaxis()
    b.barh(labels, [r["cpu_us_per_txn"] for r in rows], color="tab:orange")
    b.set_xlabel("CPU µs per committed transaction, every process")
    b.invert_yaxis()
    fig.suptitle(f"SmallBank, {e['accounts']} accounts, SR, one sitting")
    fig.tight_layout()
    fig.savefig(e["plot"], dpi=110)
    print(f"plot written to {e['plot']}")
EOF
echo
echo "PostgreSQL's own report (postgres_smallbank.sh; its Pond column is the embedded run at its defaults):"
cat "$tmp/pg.out"
