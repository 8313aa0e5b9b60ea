#!/usr/bin/env bash
# What TLS costs on the client path, in one sitting: `pond serve` over SmallBank in plaintext
# (--insecure) and over mutual TLS (--certs-dir, certificates from `pond certs`), each driven by
# `pond bench smallbank --connect`, alternating, ROUNDS times, unary (--pipeline 1) and pipelined.
# Prints one line per run and the TLS ÷ plaintext ratio of each round (docs/perf_service.md,
# "TLS on the client path"). Loopback only; every server it starts is stopped on exit.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/tls_sitting.sh [--pond PATH] [--accounts N] [--clients N] [--seconds S] [--rounds R]

  --pond PATH     the pond binary (default: build/release/pond)
  --accounts N    SmallBank accounts (default 100000)
  --clients N     client threads of the driver (default 4)
  --seconds S     each run (default 10)
  --rounds R      plaintext-then-TLS rounds per pipeline depth (default 2)
EOF
}

pond=build/release/pond
accounts=100000
clients=4
seconds=10
rounds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --pond) pond=$2; shift 2 ;;
    --accounts) accounts=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "tls_sitting.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
[ -x "$pond" ] || { echo "tls_sitting.sh: no pond binary at $pond (make release)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/tls-sitting.XXXX)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
"$pond" certs --certs-dir "$tmp/certs" >/dev/null

# serve MODE: starts `pond serve` in MODE (--insecure, or --certs-dir); sets server and addr.
serve() {
  # Created before the child's redirection can, so that the first poll never reads a missing file.
  : >"$tmp/serve.out"
  "$pond" serve "$@" --listen 127.0.0.1:0 --workload smallbank --accounts "$accounts" \
    >"$tmp/serve.out" 2>"$tmp/serve.err" &
  server=$!
  for _ in $(seq 1200); do
    addr=$(sed -n 's/^listening //p' "$tmp/serve.out")
    [ -n "$addr" ] && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 3 "$tmp/serve.err" >&2
  exit 1
}

stop() {
  kill "$server"
  wait "$server" || true
  server=""
}

# run NAME DEPTH FLAGS...: one driven run; prints its line and echoes txn/s.
run() {
  local name=$1 depth=$2
  shift 2
  "$pond" bench smallbank "$@" --connect "$addr" --clients "$clients" --pipeline "$depth" \
    --seconds "$seconds" --json "$tmp/run.json" >"$tmp/run.out" 2>&1 ||
    { tail -n 5 "$tmp/run.out" >&2; exit 1; }
  grep -q "^money check  ok" "$tmp/run.out" || { echo "$name: the money check failed" >&2; exit 1; }
  /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["result"]["txn_per_sec"])' \
    "$tmp/run.json"
}

echo "SmallBank, $accounts accounts, $clients clients, $seconds s a run, $(date -u +%F)"
for depth in 1 16; do
  for ((r = 1; r <= rounds; r++)); do
    serve --insecure
    plain=$(run plaintext "$depth" --insecure)
    stop
    serve --certs-dir "$tmp/certs"
    tls=$(run tls "$depth" --certs-dir "$tmp/certs")
    stop
    printf 'pipeline %2d round %d: plaintext %8.0f txn/s, TLS %8.0f txn/s, TLS / plaintext %.3f\n' \
      "$depth" "$r" "$plain" "$tls" "$(/usr/bin/python3 -c "print($tls / $plain)")"
  done
done
