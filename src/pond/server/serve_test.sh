#!/usr/bin/env bash
# Pond as a service, end to end on loopback: `pond serve` loads SmallBank and an empty table and
# serves them; `pond client` describes, puts, gets, runs a transaction and calls a procedure,
# with an exit code for each outcome; `pond bench smallbank --connect` drives it from three
# client threads and the money adds up; the Python example runs against it; SIGTERM stops it
# cleanly; bad input gets one line and the documented exit code. Leaves no process behind.
# Usage: serve_test.sh PATH_TO_POND PYTHON_STUBS_DIR PATH_TO_pond_client.py
set -u
pond="$1"
stubs="$2"
example="$3"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
ok() { echo "ok   $1"; }

# start_serve NAME ARGS...: starts `pond serve` in the background; sets addr and spid. Each MN has
# 64 MiB unless SERVE_REGION says otherwise ("": what the served tables need).
start_serve() {
  local name="$1"
  shift
  : >"$tmp/$name.out" # before the child opens it: the first poll must not read a missing file
  "$pond" serve --listen 127.0.0.1:0 ${SERVE_REGION---region-mib 64} "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  spid=$!
  pids+=("$spid")
  addr=""
  for _ in $(seq 300); do
    addr=$(sed -n 's/^listening //p' "$tmp/$name.out")
    [ -n "$addr" ] && return 0
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

# expect RC DESCRIPTION PATTERN ARGS...: `pond ARGS` exits RC; with RC not 0, stderr is one line
# matching PATTERN; with RC 0, stdout matches it.
expect() {
  local want="$1" desc="$2" pattern="$3"
  shift 3
  timeout 60 "$pond" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$desc: exit $rc, not $want"; cat "$tmp/out" "$tmp/err"
  elif [ "$want" -ne 0 ] && [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    fail "$desc: $(wc -l <"$tmp/err") stderr lines"; cat "$tmp/err"
  elif [ "$want" -ne 0 ] && ! grep -q -- "$pattern" "$tmp/err"; then
    fail "$desc: stderr lacks '$pattern'"; cat "$tmp/err"
  elif [ "$want" -eq 0 ] && ! grep -q -- "$pattern" "$tmp/out"; then
    fail "$desc: stdout lacks '$pattern'"; cat "$tmp/out"
  else
    ok "$desc"
  fi
}

# TLS, as a user would set it up by hand: the cluster's certificates first.
"$pond" certs --certs-dir "$tmp/certs" >"$tmp/out" 2>&1 && [ -f "$tmp/certs/client.root.key" ] &&
  ok "pond certs makes a CA, a node and a root client certificate" || { fail "pond certs"; cat "$tmp/out"; }
if ! start_serve main --certs-dir "$tmp/certs" --cns 2 --buffer-mib 32 --workload smallbank --accounts 500 --table kv:16:1024 --table probe:8:8192; then
  fail "pond serve did not start"; cat "$tmp/main.err"; exit 1
fi
ok "pond serve listens on $addr"
grep -q "tables savings (8 B x 500), checking (8 B x 500), kv (16 B x 1024), probe (8 B x 8192); 6 procedure" \
  "$tmp/main.err" && ok "pond serve says what it serves" || { fail "serve's header"; cat "$tmp/main.err"; }

expect 0 "describe" "procedure smallbank.send_payment args_bytes 32 read-write" \
  client --certs-dir "$tmp/certs" --connect "$addr" describe
grep -q "^cn $addr$" "$tmp/out" && grep -q "^table kv id 2 value_bytes 16 capacity 1024$" "$tmp/out" &&
  ok "describe names this server and every table" || { fail "describe"; cat "$tmp/out"; }
# Every other way in is refused before a request runs (server/client_tls_test.cc has the rest).
expect 2 "a client that says nothing of TLS: exit 2" "say how to reach the server" \
  client --connect "$addr" describe
expect 6 "a plaintext client to the TLS port: unreachable, exit 6" "$addr" \
  client --insecure --timeout-ms 2000 --connect "$addr" describe
"$pond" certs --certs-dir "$tmp/other" >/dev/null 2>&1
expect 6 "a client of another cluster's CA: unreachable, exit 6" "$addr" \
  client --certs-dir "$tmp/other" --timeout-ms 2000 --connect "$addr" describe
expect 0 "put" "^COMMITTED$" client --certs-dir "$tmp/certs" --connect "$addr" put kv 7 hello
expect 0 "get" '^kv 7 = hex:68656c6c6f0000000000000000000000 ("hello")$' client --certs-dir "$tmp/certs" --connect "$addr" get kv 7
"$pond" client --certs-dir "$tmp/certs" --connect "$addr" get kv 8 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "^kv 8: not found$" "$tmp/out" && [ ! -s "$tmp/err" ] &&
  ok "get of an absent key: not found, exit 1" || fail "get absent: exit $rc, $(cat "$tmp/out" "$tmp/err")"
expect 0 "txn with a condition that holds" "^kv 7 = " client --certs-dir "$tmp/certs" --connect "$addr" txn get:kv:7 \
  if:kv:7:hello put:kv:7:i64:99 insert:kv:9:x
expect 3 "txn whose condition fails: ABORTED, exit 3" "ABORTED (condition failed): kv 7 has another value" \
  client --certs-dir "$tmp/certs" --connect "$addr" txn if:kv:7:hello put:kv:7:y
expect 3 "insert of a present key: ABORTED, exit 3" "duplicate key" client --certs-dir "$tmp/certs" --connect "$addr" txn insert:kv:9:z
expect 0 "read-only txn" "^checking 4097 = hex:" client --certs-dir "$tmp/certs" --connect "$addr" txn --read-only get:checking:4097 absent:kv:10
expect 0 "call" "^reply hex:" client --certs-dir "$tmp/certs" --connect "$addr" call smallbank.deposit_checking u64:3 u64:0 i64:25 u64:0
# A deposit, payment or amalgamation that would take a balance past int64's range is declined
# (reply: net 0, declined 1), and the balance stays. Account 3's rows (key 3 << 12 | 3) are put
# back as they were at the end, so that the money check of the run below still holds.
expect 0 "get account 3's checking" "^checking 12291 = hex:" client --certs-dir "$tmp/certs" --connect "$addr" get checking 12291
was=$(sed -n 's/^checking 12291 = \(hex:[0-9a-f]*\).*/\1/p' "$tmp/out")
expect 0 "put a balance 7 below int64's largest" "^COMMITTED$" \
  client --certs-dir "$tmp/certs" --connect "$addr" put checking 12291 i64:9223372036854775800
for call in "deposit_checking u64:3 u64:0" "send_payment u64:4 u64:3" "amalgamate u64:4 u64:3"; do
  # shellcheck disable=SC2086  # the procedure and its accounts, as words
  expect 0 "$call that would overflow the balance: declined" "^reply hex:000000000000000001 " \
    client --certs-dir "$tmp/certs" --connect "$addr" call smallbank.$call i64:25 u64:0
done
expect 0 "the balance stays" "^checking 12291 = hex:f8ffffffffffff7f" \
  client --certs-dir "$tmp/certs" --connect "$addr" get checking 12291
# Balance answers the account's total, savings plus checking.
expect 0 "get account 3's savings" "^savings 12291 = hex:" client --certs-dir "$tmp/certs" --connect "$addr" get savings 12291
saved=$(sed -n 's/^savings 12291 = \(hex:[0-9a-f]*\).*/\1/p' "$tmp/out")
expect 0 "put savings 1000" "^COMMITTED$" client --certs-dir "$tmp/certs" --connect "$addr" put savings 12291 i64:1000
expect 0 "put checking 234" "^COMMITTED$" client --certs-dir "$tmp/certs" --connect "$addr" put checking 12291 i64:234
expect 0 "balance answers the total" "^reply hex:d204000000000000.. (i64 1234)$" \
  client --certs-dir "$tmp/certs" --connect "$addr" call smallbank.balance u64:3 u64:0 i64:0 u64:0
expect 0 "put the balances back" "^COMMITTED$" client --certs-dir "$tmp/certs" --connect "$addr" txn \
  "put:savings:12291:$saved" "put:checking:12291:$was"
expect 4 "call with arguments of the wrong size: REJECTED, exit 4" "REJECTED: smallbank.amalgamate takes 32 bytes" \
  client --certs-dir "$tmp/certs" --connect "$addr" call smallbank.amalgamate u64:1
expect 4 "call the procedure refuses: REJECTED, exit 4" "a1 must be an account" \
  client --certs-dir "$tmp/certs" --connect "$addr" call smallbank.send_payment u64:3 u64:3 i64:5 u64:0
expect 0 "probe: every shard commits" "^$addr: 4096 of 4096 shards committed in" \
  client --certs-dir "$tmp/certs" --connect "$addr" probe probe --within-ms 30000
# pond client batch: many lines on one pipeline, each answered behind its number.
for k in $(seq 500 799); do echo "txn put:kv:$k:b$k"; done >"$tmp/batch.txt"
printf '# a comment, then a blank line\n\nro get:kv:650 absent:kv:1000\n' >>"$tmp/batch.txt"
expect 0 "batch: 301 lines, 16 in flight" '^303 kv 650 = hex:62363530' \
  client --certs-dir "$tmp/certs" --connect "$addr" batch "$tmp/batch.txt" --in-flight 16
[ "$(grep -c ' COMMITTED$' "$tmp/out")" -eq 301 ] && grep -q "301 transaction(s): 301 committed" "$tmp/err" &&
  ok "batch: every line COMMITTED, and counted" || { fail "batch's answers"; cat "$tmp/out" "$tmp/err"; }
expect 0 "a batch's last put landed" '^kv 799 = hex:62373939' client --certs-dir "$tmp/certs" --connect "$addr" get kv 799
printf 'txn put:kv:1000:x\ntxn put:kv\n' >"$tmp/batch.txt"
expect 2 "batch with a malformed line: exit 2" 'line 2: "put:kv" is not OP:TABLE:KEY' \
  client --certs-dir "$tmp/certs" --connect "$addr" batch "$tmp/batch.txt"
"$pond" client --certs-dir "$tmp/certs" --connect "$addr" get kv 1000 >"$tmp/out" 2>&1
[ $? -eq 1 ] && grep -q "^kv 1000: not found$" "$tmp/out" && ok "nothing of a refused batch was sent" ||
  { fail "a refused batch's first line landed"; cat "$tmp/out"; }
printf 'txn put:kv:801:y\ntxn insert:kv:7:z\n' | timeout 60 "$pond" client --certs-dir "$tmp/certs" --connect "$addr" batch \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "^1 COMMITTED$" "$tmp/out" && grep -q "^2 ABORTED (duplicate key)" "$tmp/out" &&
  ok "batch from standard input: an insert of a present key ABORTED, exit 3, the other line committed" ||
  { fail "batch from standard input (exit $rc)"; cat "$tmp/out" "$tmp/err"; }
expect 2 "batch of a file that is not there: exit 2" "cannot read" \
  client --certs-dir "$tmp/certs" --connect "$addr" batch "$tmp/no-such-file"
expect 2 "probe of a table too small for it: exit 2" "table kv holds 1024 keys; the probe writes keys up to 8191" \
  client --certs-dir "$tmp/certs" --connect "$addr" probe kv
expect 2 "probe of a table the server lacks: exit 2" 'no table "nope"' client --certs-dir "$tmp/certs" --connect "$addr" probe nope
expect 2 "put to a table the server lacks: exit 2" 'no table "nope"' client --certs-dir "$tmp/certs" --connect "$addr" put nope 1 x
expect 2 "value longer than the table's" "17 bytes; table kv holds 16" \
  client --certs-dir "$tmp/certs" --connect "$addr" put kv 1 hex:0000000000000000000000000000000000
expect 2 "malformed key" "not a number" client --certs-dir "$tmp/certs" --connect "$addr" get kv seven
expect 2 "malformed txn op" "OP:TABLE:KEY" client --certs-dir "$tmp/certs" --connect "$addr" txn put:kv
expect 2 "client without --connect" "connect" client describe
expect 6 "no server there: exit 6" "cannot reach 127.0.0.1:1" client --insecure --connect 127.0.0.1:1 --timeout-ms 2000 describe

timeout 120 "$pond" bench smallbank --certs-dir "$tmp/certs" --connect "$addr" --seconds 2 --clients 3 --json "$tmp/sb.json" \
  >"$tmp/bench.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^money check  ok" "$tmp/bench.out" && grep -q "transport grpc" "$tmp/bench.out" &&
   grep -q '"money_check"' "$tmp/sb.json" && grep -q "^abort rate" "$tmp/bench.out"; then
  ok "bench smallbank --connect: $(grep '^throughput' "$tmp/bench.out" | cut -c14-40), money adds up"
else
  fail "bench smallbank --connect (exit $rc)"; cat "$tmp/bench.out"
fi
expect 2 "bench --connect with an embedded cluster's flag" "--cns shapes an embedded cluster" \
  bench smallbank --certs-dir "$tmp/certs" --connect "$addr" --cns 4
expect 2 "bench tatp --connect to a server without TATP" 'no table "subscriber"' \
  bench tatp --certs-dir "$tmp/certs" --connect "$addr" --seconds 1
expect 2 "--clients without --connect" "goes with --connect" bench kvs --clients 2
expect 2 "bench tpcc --connect to a server without TPC-C" 'no table "tpcc_runs"' \
  bench tpcc --certs-dir "$tmp/certs" --connect "$addr" --seconds 1

if timeout 60 /usr/bin/python3 "$example" --stubs "$stubs" --certs-dir "$tmp/certs" --connect "$addr" --table kv >"$tmp/py.out" 2>&1 &&
   grep -q "^interactive: COMMITTED, counter 43 is 1$" "$tmp/py.out" && grep -q "^get 42: py!$" "$tmp/py.out" &&
   grep -q "^pipeline: 100 puts and 100 gets COMMITTED" "$tmp/py.out"; then
  ok "the Python example: describe, put, get, an interactive transaction, a pipeline"
else
  fail "the Python example"; cat "$tmp/py.out"
fi

# Requests of 100 MiB, 25 times the message limit, 8 at once: refused, the server answers on, its
# peak stays near its buffer quota (--buffer-mib 32), and what they took is given back (oversized_test.py).
if timeout 120 /usr/bin/python3 "$(dirname "$0")/oversized_test.py" "$stubs" "$addr" "$spid" "$tmp/certs" \
    >"$tmp/oversized.out" 2>&1; then
  ok "oversized requests refused, memory given back: $(tail -1 "$tmp/oversized.out")"
else
  fail "oversized requests"; cat "$tmp/oversized.out"
fi

# TPC-C served: two runs of the remote terminals against one server (each its own run number, so
# their Payments' history keys differ), the consistency conditions read back on the server after
# each, and inputs out of range refused before they run.
main_addr="$addr" main_spid="$spid"
if SERVE_REGION="" start_serve tpcc --insecure --workload tpcc --warehouses 2 --items 200 --customers 30 \
    --order-room 2000; then
  taddr="$addr"
  for run in 1 2; do
    timeout 120 "$pond" bench tpcc --insecure --connect "$taddr" --seconds 1 --clients 4 >"$tmp/tpcc.out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q "^consistency  ok" "$tmp/tpcc.out" &&
       grep -q "served (run $run)" "$tmp/tpcc.out" && grep -q "duplicate key 0," "$tmp/tpcc.out" &&
       grep -q "^answers *0 unknown" "$tmp/tpcc.out"; then
      ok "bench tpcc --connect, run $run: $(sed -n 's/^committed *//p' "$tmp/tpcc.out"); conditions 1-4 hold"
    else
      fail "bench tpcc --connect, run $run (exit $rc)"; cat "$tmp/tpcc.out"
    fi
  done
  expect 4 "tpcc call with a short input: REJECTED, exit 4" "TPC-C's are at least 36" \
    client --insecure --connect "$taddr" call tpcc.payment u64:1
  # A Payment of warehouse 9 of 2 (36 bytes: tag, amount, c_id, w=9, d, c_w, c_d, last, kind=1).
  expect 4 "tpcc call of a warehouse the server lacks: REJECTED, exit 4" "w 9 is not 1 to 2" \
    client --insecure --connect "$taddr" call tpcc.payment \
    hex:0100000000000000e8030000000000000100000009000100010001000000010000000000
  kill -TERM "$spid"
  wait "$spid"
else
  fail "pond serve --workload tpcc did not start"; cat "$tmp/tpcc.err"
fi
addr="$main_addr" spid="$main_spid"

# Roles (docs/clients.md "Roles"): an access file naming root admin, and a read-only token made
# by pond token; a certificate of the cluster the file does not name gets nothing.
printf '[users]\nroot = "admin"\n' >"$tmp/access.toml"
"$pond" token --access "$tmp/access.toml" --name viewer --role read-only --days 1 \
  >"$tmp/viewer.token" 2>"$tmp/err" && grep -q 'name = "viewer"' "$tmp/access.toml" &&
  ! grep -q "$(cat "$tmp/viewer.token")" "$tmp/access.toml" &&
  ok "pond token: a read-only token, its hash (not it) in the access file" || { fail "pond token"; cat "$tmp/err"; }
"$pond" certs --certs-dir "$tmp/certs" --client other >/dev/null 2>&1
if start_serve roles --certs-dir "$tmp/certs" --access "$tmp/access.toml" --table kv:16:64; then
  viewer=(client --certs-dir "$tmp/certs" --token-file "$tmp/viewer.token" --connect "$addr")
  "$pond" "${viewer[@]}" get kv 3 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 1 ] && grep -q "^kv 3: not found$" "$tmp/out" &&
    ok "a read-only token reads (kv 3: not found)" || fail "token read: exit $rc, $(cat "$tmp/out" "$tmp/err")"
  expect 4 "a read-only token's put: REJECTED, exit 4" "token:viewer is read-only" \
    "${viewer[@]}" put kv 3 x
  expect 4 "a certificate the access file does not name: REJECTED, exit 4" "not in the access file" \
    client --certs-dir "$tmp/certs" --user other --connect "$addr" describe
  expect 0 "root, an admin, writes" "^COMMITTED$" client --certs-dir "$tmp/certs" --connect "$addr" put kv 3 x
  # The same refusals from Python: the read-only token's put, and another CA's client.
  timeout 60 /usr/bin/python3 "$example" --stubs "$stubs" --certs-dir "$tmp/certs" \
    --token-file "$tmp/viewer.token" --connect "$addr" --table kv >"$tmp/py.out" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] && grep -q "put: REJECTED: token:viewer is read-only" "$tmp/py.out" &&
    ok "Python, a read-only token: its put REJECTED with the reason" || { fail "Python, read-only token (exit $rc)"; cat "$tmp/py.out"; }
  timeout 60 /usr/bin/python3 "$example" --stubs "$stubs" --certs-dir "$tmp/other" \
    --connect "$addr" --table kv >"$tmp/py.out" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] && grep -q "cannot reach $addr: UNAVAILABLE" "$tmp/py.out" &&
    ok "Python, another CA's client: refused at the handshake" || { fail "Python, another CA (exit $rc)"; cat "$tmp/py.out"; }
  timeout 60 /usr/bin/python3 "$example" --stubs "$stubs" --certs-dir "$tmp/certs" --user other \
    --connect "$addr" --table kv >"$tmp/py.out" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] && grep -q "UNAUTHENTICATED: client certificate \"other\" is not in the access file" "$tmp/py.out" &&
    ok "Python, a certificate the access file does not name: UNAUTHENTICATED" || { fail "Python, unnamed certificate (exit $rc)"; cat "$tmp/py.out"; }
  kill -TERM "$spid"
else
  fail "pond serve --access did not start"; cat "$tmp/roles.err"
fi
expect 2 "serve --access with --insecure" "needs TLS" serve --insecure --access "$tmp/access.toml"
addr="$main_addr" spid="$main_spid"
# Too little memory for what is served: refused before anything starts, naming a size that fits.
expect 2 "serve tpcc with too little memory: one line, exit 2" \
  "region-mib 64 cannot hold the served tables.*give --region-mib [0-9]" \
  serve --workload tpcc --warehouses 2 --region-mib 64 --listen 127.0.0.1:0

# A second server cannot take the same port: one line, exit 1.
expect 1 "serve on a port in use: exit 1" "cannot listen on $addr" serve --insecure --listen "$addr" --region-mib 64

kill -TERM "$spid"
for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$spid" 2>/dev/null; then
  fail "pond serve still runs 10 s after SIGTERM"
else
  wait "$spid"
  rc=$?
  [ "$rc" -eq 0 ] && grep -q "stopping (SIGTERM)" "$tmp/main.err" && grep -q "^pond serve: stopped; answered" "$tmp/main.err" &&
    ok "SIGTERM: pond serve stops cleanly, exit 0" || { fail "SIGTERM: exit $rc"; cat "$tmp/main.err"; }
fi
expect 6 "the stopped server is gone" "cannot reach" client --certs-dir "$tmp/certs" --connect "$addr" --timeout-ms 2000 describe

# Bad flags: one line, exit 2, before anything starts.
expect 2 "serve --listen without a port" "not HOST:PORT" serve --listen localhost
expect 2 "serve --listen with a bad port" "no port 0 to 65535" serve --listen 127.0.0.1:99999
expect 2 "serve --table of 0-byte values" "value bytes must be" serve --table kv:0:10
expect 2 "serve --table malformed" "NAME:VALUE_BYTES:CAPACITY" serve --table kv
expect 2 "serve --workload unknown" "workload" serve --workload tpch
expect 2 "serve --replication above the MNs" "replication" serve --mns 2 --replication 3
expect 2 "serve --threads-max at or below --interactive-max" "threads_max" serve --insecure --threads-max 8 --interactive-max 8
expect 2 "serve with neither --certs-dir nor --insecure" "serves clients over TLS" serve --region-mib 64
expect 2 "serve with a certs dir that has no certificates" "ca.crt: No such file" \
  serve --region-mib 64 --certs-dir "$tmp"
"$pond" serve --help >"$tmp/out" 2>&1 && grep -q -- "--listen" "$tmp/out" && ok "serve --help" || fail "serve --help"
"$pond" client --help >"$tmp/out" 2>&1 && grep -q "Exit codes" "$tmp/out" && ok "client --help lists exit codes" ||
  fail "client --help"

[ "$failures" -eq 0 ] && echo "all serve checks passed" || echo "$failures serve check(s) failed"
exit $((failures > 0))
