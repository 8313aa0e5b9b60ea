#!/usr/bin/env bash
# SmallBank on PostgreSQL 15 beside `pond bench smallbank`, on the same machine with the same
# accounts, skew, mix and number of clients, one table row per PostgreSQL setting. A throwaway
# server lives in a temporary directory for the length of the command. docs/peers.md describes
# the comparison; --help lists the flags.
set -euo pipefail

prog=$(basename "$0")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

usage() {
  cat <<EOF
Usage: $prog [flags]

Runs SmallBank on a throwaway PostgreSQL 15 with pgbench, then the same workload with
'pond bench smallbank', and prints one table row per setting.

  --accounts N        accounts, rows in each of savings and checking (default 100000)
  --seconds S         measured seconds per run, whole seconds (default 10)
  --cns N             Pond compute nodes (default 3)
  --workers N         Pond worker threads per CN (default 1)
  --coros N           Pond client coroutines per worker (default 4); PostgreSQL gets
                      cns x workers x coros pgbench clients, one connection each
  --threads N         pgbench threads (default cns x workers, Pond's thread count, at most
                      the number of clients)
  --hot-fraction F    share of the accounts in the hot set (default 0.04)
  --hot-access F      share of the account draws that go to the hot set (default 0.9)
  --settings LIST     rows to run, comma-separated, in order (default all four):
                        sr         SERIALIZABLE (Pond --isolation sr)
                        rr         REPEATABLE READ, PostgreSQL's snapshot isolation
                                   (Pond --isolation si)
                        sr-nosync  SERIALIZABLE with fsync=off, synchronous_commit=off
                        rr-nosync  REPEATABLE READ with fsync=off, synchronous_commit=off
  --style S           function: each transaction is one call of a PL/pgSQL function, one
                      round trip (default); interactive: BEGIN, one statement per step with
                      the decisions taken in the pgbench script, COMMIT
  --max-tries N       pgbench tries per transaction on serialization failure or deadlock;
                      0 = until it commits (default 0)
  --check             append each transaction's net deposit to a ledger table inside the
                      transaction and check after each run that the balances add up (costs
                      one row insert per depositing transaction; off by default)
  --tcp               connect pgbench over 127.0.0.1 instead of the Unix socket
  --pond PATH         the pond binary (default build/release/pond in the repository)
  --pg-bin DIR        PostgreSQL's programs (default /usr/lib/postgresql/15/bin)
  --json FILE         also write the rows as JSON
  -h, --help          this text

Exit status: 0 on success, 1 if PostgreSQL, pgbench or Pond fails or a check does not hold,
2 on bad flags.
EOF
}

# shellcheck source=bench/peers/peers_lib.sh
. "$here/peers_lib.sh"

accounts=100000
seconds=10
cns=3
workers=1
coros=4
threads=
hot_fraction=0.04
hot_access=0.9
settings=sr,rr,sr-nosync,rr-nosync
style=function
max_tries=0
check=0
tcp=0
pond="$repo/build/release/pond"
pg_bin=/usr/lib/postgresql/15/bin
json=

while (($# > 0)); do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --check) check=1 ;;
    --tcp) tcp=1 ;;
    --*=*)
      # --flag=value is --flag value.
      set -- "${1%%=*}" "${1#*=}" "${@:2}"
      continue
      ;;
    --accounts | --seconds | --cns | --workers | --coros | --threads | --hot-fraction | \
      --hot-access | --settings | --style | --max-tries | --pond | --pg-bin | --json)
      (($# >= 2)) || bad_usage "$1 needs a value"
      case "$1" in
        --accounts) accounts=$2 ;;
        --seconds) seconds=$2 ;;
        --cns) cns=$2 ;;
        --workers) workers=$2 ;;
        --coros) coros=$2 ;;
        --threads) threads=$2 ;;
        --hot-fraction) hot_fraction=$2 ;;
        --hot-access) hot_access=$2 ;;
        --settings) settings=$2 ;;
        --style) style=$2 ;;
        --max-tries) max_tries=$2 ;;
        --pond) pond=$2 ;;
        --pg-bin) pg_bin=$2 ;;
        --json) json=$2 ;;
      esac
      shift
      ;;
    *) bad_usage "unknown flag '$1' (see --help)" ;;
  esac
  shift
done

# is_int VALUE MIN MAX: a decimal integer in [MIN, MAX], without leading zeros or signs that
# bash arithmetic would read as octal or accept silently.
is_int() {
  [[ $1 =~ ^(0|[1-9][0-9]{0,14})$ ]] && (($1 >= $2 && $1 <= $3))
}
# is_share VALUE LOW_OPEN: a decimal in [0, 1], or (0, 1] when LOW_OPEN is 1.
is_share() {
  [[ $1 =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] &&
    awk -v x="$1" -v open="$2" 'BEGIN { exit !((open ? x > 0 : x >= 0) && x <= 1) }'
}

is_int "$accounts" 2 1099511627776 || bad_usage "--accounts must be an integer from 2 to 2^40"
is_int "$seconds" 1 86400 || bad_usage "--seconds must be a whole number of seconds, 1 to 86400"
is_int "$cns" 1 1024 || bad_usage "--cns must be a positive integer"
is_int "$workers" 1 1024 || bad_usage "--workers must be a positive integer"
is_int "$coros" 1 256 || bad_usage "--coros must be an integer from 1 to 256"
clients=$((cns * workers * coros))
((clients <= 1000)) || bad_usage "cns x workers x coros must be at most 1000 clients"
if [ -z "$threads" ]; then
  threads=$((cns * workers < clients ? cns * workers : clients))
fi
is_int "$threads" 1 "$clients" || bad_usage "--threads must be an integer from 1 to $clients"
is_share "$hot_fraction" 1 || bad_usage "--hot-fraction must be in (0, 1]"
is_share "$hot_access" 0 || bad_usage "--hot-access must be in [0, 1]"
is_int "$max_tries" 0 1000000 || bad_usage "--max-tries must be a non-negative integer"
case "$style" in
  function | interactive) ;;
  *) bad_usage "--style must be function or interactive" ;;
esac
IFS=, read -r -a rows <<<"$settings"
((${#rows[@]} > 0)) || bad_usage "--settings must name at least one of sr, rr, sr-nosync, rr-nosync"
seen=,
for r in "${rows[@]}"; do
  case "$r" in
    sr | rr | sr-nosync | rr-nosync) ;;
    *) bad_usage "--settings: unknown setting '$r' (choices: sr, rr, sr-nosync, rr-nosync)" ;;
  esac
  [[ $seen != *",$r,"* ]] || bad_usage "--settings names '$r' twice"
  seen+="$r,"
done
if [ ! -f "$pond" ] || [ ! -x "$pond" ]; then
  bad_usage "no pond binary at $pond (build it, or pass --pond)"
fi
for p in initdb pg_ctl psql pgbench; do
  [ -x "$pg_bin/$p" ] || bad_usage "no $p in $pg_bin (install postgresql-15, or pass --pg-bin)"
done
pond=$(cd "$(dirname "$pond")" && pwd)/$(basename "$pond")
if [ -n "$json" ]; then
  [ -d "$(dirname "$json")" ] || bad_usage "--json: no directory $(dirname "$json")"
  json=$(cd "$(dirname "$json")" && pwd)/$(basename "$json")
fi
python=
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null; then
    python=$(command -v "$p")
    break
  fi
done
[ -n "$python" ] || fail "python3 is needed to read Pond's JSON"

# The hot set exactly as Pond sizes it (a truncating conversion, at least one account); the
# hot-set probability goes to pgbench in millionths, since its random() draws integers.
hot=$(awk -v a="$accounts" -v f="$hot_fraction" 'BEGIN { h = int(a * f); print (h < 1 ? 1 : h) }')
hot_ppm=$(awk -v p="$hot_access" 'BEGIN { printf "%d", p * 1000000 + 0.5 }')

# PostgreSQL refuses to run as root: as root, the server and its clients run as the postgres
# account the Debian package creates, and the temporary directory belongs to it.
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 ||
    fail "running as root needs the postgres account (postgresql-15 creates it)"
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi

tmp=
cleanup() {
  local rc=$? pid i
  cd / || true
  if [ -n "$tmp" ] && [ -d "$tmp" ]; then
    if [ -f "$tmp/data/postmaster.pid" ]; then
      pid=$(head -n 1 "$tmp/data/postmaster.pid" 2>/dev/null || true)
      # Immediate: nothing in the throwaway cluster is worth a shutdown checkpoint.
      as_pg "$pg_bin/pg_ctl" -D "$tmp/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
      # If pg_ctl could not stop it (an interrupt may have left the server half shut down),
      # the postmaster goes by its recorded pid, and its children follow it when they see it
      # gone. Waiting keeps it from writing into the directory being removed.
      if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
          kill -0 "$pid" 2>/dev/null || break
          sleep 0.1
        done
      fi
    fi
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pond-postgres.XXXXXXXX")
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$tmp"; fi
progress "temporary directory $tmp"
# The server and pgbench run as another user and need a working directory and scripts they can
# read; the repository may not be readable by that user.
cd "$tmp" || fail "cannot enter $tmp"
mkdir "$tmp/sql"
cp "$here/smallbank/schema.sql" "$here/smallbank/reset.sql" "$tmp/sql/"
# Each pgbench script is its account draw followed by the transaction: pgbench has no include,
# and the draw is the same for every transaction of one or of two accounts.
for style_dir in function interactive; do
  mkdir "$tmp/sql/$style_dir"
  for t in amalgamate balance deposit_checking send_payment transact_savings write_check; do
    case $t in
      amalgamate | send_payment) draw=draw_two_accounts.sql ;;
      *) draw=draw_one_account.sql ;;
    esac
    cat "$here/smallbank/$draw" "$here/smallbank/$style_dir/$t.sql" >"$tmp/sql/$style_dir/$t.sql"
  done
done
if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$tmp/sql"; fi

pg_version=$("$pg_bin/postgres" --version 2>/dev/null || "$pg_bin/pg_ctl" --version)
pgbench_version=$("$pg_bin/pgbench" --version)
cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem_gib=$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
nproc=$(nproc)
load_before=$(cut -d ' ' -f 1-3 /proc/loadavg)

progress "initdb"
# No passwords: the Unix socket sits in a directory only the server's user can enter, and TCP
# connections from 127.0.0.1 are accepted only when --tcp asks for them.
host_auth=reject
if ((tcp)); then host_auth=trust; fi
if ! as_pg "$pg_bin/initdb" -D "$tmp/data" -U smallbank --auth-local=trust \
  --auth-host="$host_auth" --encoding=UTF8 --locale=C --no-sync --no-instructions \
  >"$tmp/initdb.log" 2>&1; then
  tail -n 20 "$tmp/initdb.log" >&2
  fail "initdb failed"
fi
# Every run's settings come from pond.conf, rewritten before each start.
echo "include 'pond.conf'" | as_pg tee -a "$tmp/data/postgresql.conf" >/dev/null

free_port() {
  "$python" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
port=$(free_port)
if ((tcp)); then host=127.0.0.1; else host=$tmp; fi

# start_server ISOLATION SYNC: a server whose sessions default to ISOLATION, with fsync and
# synchronous_commit both SYNC (on or off).
start_server() {
  local attempt
  for attempt in 1 2 3; do
    as_pg tee "$tmp/data/pond.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$tmp'
max_connections = $((clients + 10))
default_transaction_isolation = '$1'
fsync = $2
synchronous_commit = $2
EOF
    if as_pg "$pg_bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 60 start \
      >/dev/null 2>&1; then
      progress "PostgreSQL started: pid $(head -n 1 "$tmp/data/postmaster.pid"), port $port"
      return 0
    fi
    # Another program may have taken the port since free_port looked: try a new one.
    if ((attempt < 3)) && grep -q 'could not bind' "$tmp/server.log" 2>/dev/null; then
      port=$(free_port)
      continue
    fi
    break
  done
  echo "$prog: PostgreSQL did not start; the last lines of its log:" >&2
  tail -n 20 "$tmp/server.log" >&2 || true
  exit 1
}

stop_server() {
  as_pg "$pg_bin/pg_ctl" -D "$tmp/data" -m fast -w -t 60 stop >/dev/null ||
    fail "PostgreSQL did not stop"
}

# psql_q DB SQL...: runs SQL, prints unaligned tuples.
psql_q() {
  local db=$1
  shift
  as_pg "$pg_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U smallbank \
    -d "$db" "$@"
}

sql_total="SELECT (SELECT sum(bal) FROM savings) + (SELECT sum(bal) FROM checking)"

# Pond's share of the work: one run per row, PostgreSQL stopped meanwhile.
run_pond() {
  local iso=$1 out=$2
  if ! "$pond" bench smallbank --accounts "$accounts" --seconds "$seconds" --cns "$cns" \
    --workers "$workers" --coros "$coros" --isolation "$iso" --hot-fraction "$hot_fraction" \
    --hot-access "$hot_access" --json "$out.json" >"$out.log" 2>&1; then
    tail -n 20 "$out.log" >&2
    fail "pond bench smallbank failed"
  fi
}

# json_get FILE EXPR: a value from a JSON document, EXPR a Python expression over `d`.
json_get() {
  "$python" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$1" "$2"
}

# pgbench_field FILE PATTERN: the first number after PATTERN in pgbench's report (0 if absent:
# older reports leave out the retry lines when nothing was retried).
pgbench_field() {
  awk -v pat="$2" 'index($0, pat) == 1 { s = substr($0, length(pat) + 1); sub(/^ */, "", s);
    split(s, w, /[ (]/); print w[1]; found = 1; exit } END { if (!found) print 0 }' "$1"
}

script_args=()
# The mix, in Pond's percent (kSmallBankMixPct): pgbench picks a script by weight per transaction.
for t in amalgamate:15 balance:15 deposit_checking:15 send_payment:25 transact_savings:15 \
  write_check:15; do
  script_args+=(-f "$tmp/sql/$style/${t%%:*}.sql@${t##*:}")
done

rows_tsv=$tmp/rows.tsv
: >"$rows_tsv"
initial_total=
n=0
for row in "${rows[@]}"; do
  n=$((n + 1))
  case "$row" in
    sr*) iso=serializable pond_iso=sr label="SERIALIZABLE" ;;
    rr*) iso="repeatable read" pond_iso=si label="REPEATABLE READ" ;;
  esac
  sync=on
  if [[ $row == *-nosync ]]; then
    sync=off
    label+=", fsync=off, synchronous_commit=off"
  fi
  dir=$tmp/row$n
  as_pg mkdir "$dir"

  progress "[$n/${#rows[@]}] $label: PostgreSQL, loading $accounts accounts"
  start_server "$iso" "$sync"
  if [ -z "$initial_total" ]; then
    psql_q postgres -c "CREATE DATABASE smallbank" >/dev/null
    psql_q smallbank -v accounts="$accounts" -f "$tmp/sql/schema.sql" >/dev/null
    initial_total=$(psql_q smallbank -c "SELECT sum(sav) + sum(chk) FROM sb_initial")
  fi
  psql_q smallbank -f "$tmp/sql/reset.sql" >/dev/null
  shown=$(psql_q smallbank -F ' ' -c "SELECT current_setting('default_transaction_isolation'),
    current_setting('fsync'), current_setting('synchronous_commit')")
  [ "$shown" = "$iso $sync $sync" ] || fail "the server runs with '$shown', not '$iso $sync $sync'"
  total_before=$(psql_q smallbank -c "$sql_total")

  progress "[$n/${#rows[@]}] $label: pgbench, $clients clients, $threads threads, $seconds s"
  # The log (-l) gives every transaction's latency, for percentiles pgbench does not report.
  # Serialization failures come by the thousand and are retried; logging each would cost the
  # server writes that are no part of the workload, so pgbench's sessions do not log them.
  busy_before=$(busy_ticks)
  if ! as_pg env PGOPTIONS="-c log_min_messages=fatal" "$pg_bin/pgbench" -n -M prepared \
    -c "$clients" -j "$threads" -T "$seconds" --max-tries="$max_tries" --failures-detailed \
    -l --log-prefix="$dir/txn" -h "$host" -p "$port" -U smallbank \
    -D accounts="$accounts" -D hot="$hot" -D hot_ppm="$hot_ppm" -D check="$check" \
    "${script_args[@]}" smallbank >"$dir/pgbench.out" 2>"$dir/pgbench.err"; then
    tail -n 20 "$dir/pgbench.err" >&2
    fail "pgbench failed ($label)"
  fi
  pg_cpu_s=$(awk -v a="$busy_before" -v b="$(busy_ticks)" -v hz="$tick_hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
  total_after=$(psql_q smallbank -c "$sql_total")
  ledger=$(psql_q smallbank -c "SELECT coalesce(sum(net), 0) FROM ledger")
  stop_server
  # With fsync=off the server leaves its writes in the page cache; flushing them now keeps the
  # kernel's write-back from taking CPU in the middle of Pond's run.
  sync

  pg_tps=$(pgbench_field "$dir/pgbench.out" "tps =")
  pg_txns=$(pgbench_field "$dir/pgbench.out" "number of transactions actually processed:")
  pg_retried=$(pgbench_field "$dir/pgbench.out" "number of transactions retried:")
  pg_retries=$(pgbench_field "$dir/pgbench.out" "total number of retries:")
  pg_failed=$(pgbench_field "$dir/pgbench.out" "number of failed transactions:")
  # Nearest-rank percentiles over the committed transactions (failed ones log no time).
  read -r pg_p50 pg_p99 < <(cat "$dir"/txn.* | awk '$3 ~ /^[0-9]+$/ { print $3 }' | sort -n |
    awk '{ v[NR] = $1 }
      function rank(p,   i) { i = int(p * NR); if (i < p * NR) i++; if (i < 1) i = 1; return v[i] }
      END { if (NR == 0) print "0 0"; else print rank(0.50), rank(0.99) }')

  if ((check)); then
    if ((total_after == total_before + ledger)); then
      money="ok: total $total_after = $total_before + ledger $ledger"
    else
      money="FAILED: total $total_after, expected $total_before + ledger $ledger"
    fi
  else
    money="not checked without --check: total $total_before before, $total_after after"
  fi

  progress "[$n/${#rows[@]}] $label: pond bench smallbank --isolation $pond_iso"
  run_pond "$pond_iso" "$dir/pond"
  pond_tps=$(json_get "$dir/pond.json" "d['result']['txn_per_sec']")
  pond_p50=$(json_get "$dir/pond.json" "d['result']['latency_ns']['p50']")
  pond_p99=$(json_get "$dir/pond.json" "d['result']['latency_ns']['p99']")
  pond_aborted=$(json_get "$dir/pond.json" "d['result']['aborted']")
  pond_initial=$(json_get "$dir/pond.json" "d['result']['money_check']['initial_total']")
  pond_build=$(json_get "$dir/pond.json" "d['build_type']")
  # Both sides must have started from the same balances, or the rows compare different banks.
  ((pond_initial == initial_total)) ||
    fail "PostgreSQL loaded a total of $initial_total, Pond $pond_initial: the loads differ"

  fields=("$row" "$label" "$iso" "$sync" "$pg_tps" "$pg_p50" "$pg_p99" "$pg_txns" "$pg_retried"
    "$pg_retries" "$pg_failed" "$total_before" "$total_after" "$ledger" "$money" "$pond_iso"
    "$pond_tps" "$pond_p50" "$pond_p99" "$pond_aborted" "$pond_build" "$pg_cpu_s")
  (
    IFS=$'\t'
    echo "${fields[*]}"
  ) >>"$rows_tsv"
done
load_after=$(cut -d ' ' -f 1-3 /proc/loadavg)

# The report: one header line, the table, then each row's money lines. Python formats it and
# writes the JSON, from the rows gathered above and the run's description.
export accounts seconds cns workers coros clients threads hot hot_ppm hot_fraction hot_access \
  style max_tries check tcp nproc pg_version pgbench_version cpu mem_gib load_before load_after \
  initial_total json
"$python" - "$rows_tsv" <<'EOF'
import datetime, json, os, sys

e = os.environ
rows = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    rows.append({
        "setting": f[0], "label": f[1],
        "postgres": {
            "default_transaction_isolation": f[2], "fsync": f[3], "synchronous_commit": f[3],
            "txn_per_sec": float(f[4]), "latency_us": {"p50": int(f[5]), "p99": int(f[6])},
            "transactions": int(f[7]), "transactions_retried": int(f[8]),
            "retries": int(f[9]), "failed": int(f[10]),
            "total_before": int(f[11]), "total_after": int(f[12]),
            "ledger_net": int(f[13]), "money_check": f[14],
            # Every process's CPU over pgbench's run (/proc/stat), and per committed transaction.
            "cpu_s": float(f[21]),
            "cpu_us_per_txn": float(f[21]) * 1e6 / int(f[7]) if int(f[7]) > 0 else None,
        },
        "pond": {
            "isolation": f[15], "txn_per_sec": float(f[16]),
            "latency_us": {"p50": int(f[17]) / 1000, "p99": int(f[18]) / 1000},
            "aborted": int(f[19]), "build_type": f[20],
        },
    })
    r = rows[-1]
    pg = r["postgres"]["txn_per_sec"]
    r["pond_over_postgres"] = r["pond"]["txn_per_sec"] / pg if pg > 0 else None

machine = {"nproc": int(e["nproc"]), "cpu": e["cpu"], "memory_gib": float(e["mem_gib"]),
           "load_before": e["load_before"], "load_after": e["load_after"]}
print(f"machine: {machine['nproc']} CPUs ({e['cpu']}), {e['mem_gib']} GiB; load average "
      f"{e['load_before']} before, {e['load_after']} after")
print(f"{e['pg_version']}; {e['pgbench_version']}; Pond build "
      f"{rows[0]['pond']['build_type'] if rows else '?'}")
print(f"SmallBank: {e['accounts']} accounts, {float(e['hot_access']) * 100:g}% of draws to "
      f"{e['hot']} hot ({float(e['hot_fraction']) * 100:g}%), "
      f"{e['clients']} clients ({e['cns']} CNs x {e['workers']} workers x {e['coros']} coros; "
      f"pgbench -j {e['threads']}), {e['seconds']} s per run, --style {e['style']}, "
      f"--max-tries {e['max_tries']}, "
      f"over {'TCP 127.0.0.1' if e['tcp'] == '1' else 'a Unix socket'}")
print()
print("| setting | PostgreSQL txn/s | p50 µs | p99 µs | retries | failed | Pond txn/s "
      "| p50 µs | p99 µs | Pond ÷ PostgreSQL |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    p, q = r["postgres"], r["pond"]
    ratio = f"{r['pond_over_postgres']:.1f}" if r["pond_over_postgres"] is not None else "-"
    print(f"| {r['label']} | {p['txn_per_sec']:.0f} | {p['latency_us']['p50']} "
          f"| {p['latency_us']['p99']} | {p['retries']} | {p['failed']} "
          f"| {q['txn_per_sec']:.0f} | {q['latency_us']['p50']:.1f} "
          f"| {q['latency_us']['p99']:.1f} | {ratio} |")
print()
for r in rows:
    print(f"money check {r['setting']}: PostgreSQL {r['postgres']['money_check']}; "
          f"Pond ok (it checks its own and exits 1 otherwise)")
print("CPU of every process over pgbench's run (/proc/stat): "
      + ", ".join(f"{r['setting']} {r['postgres']['cpu_s']:.1f} s, "
                  f"{r['postgres']['cpu_us_per_txn'] or 0:.1f} µs per transaction" for r in rows)
      + ".")
print("PostgreSQL's latency includes its retries; Pond does not retry (aborts: "
      + ", ".join(f"{r['setting']} {r['pond']['aborted']}" for r in rows) + ").")

if e["json"]:
    doc = {
        "bench": "postgres_smallbank",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "postgres_version": e["pg_version"], "pgbench_version": e["pgbench_version"],
        "settings": {
            "accounts": int(e["accounts"]), "hot_fraction": float(e["hot_fraction"]),
            "hot_accounts": int(e["hot"]), "hot_access": float(e["hot_access"]),
            "seconds": int(e["seconds"]), "clients": int(e["clients"]), "cns": int(e["cns"]),
            "workers": int(e["workers"]), "coros": int(e["coros"]),
            "pgbench_threads": int(e["threads"]), "style": e["style"],
            "max_tries": int(e["max_tries"]), "check": e["check"] == "1",
            "transport": "tcp" if e["tcp"] == "1" else "unix",
            "initial_total": int(e["initial_total"]),
        },
        "rows": rows,
    }
    with open(e["json"], "w") as out:
        json.dump(doc, out, indent=2)
        out.write("\n")
    print(f"results written to {e['json']}")
EOF

if grep -q $'\tFAILED' "$rows_tsv"; then
  fail "the money check failed on PostgreSQL"
fi
