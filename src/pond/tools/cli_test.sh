#!/usr/bin/env bash
# CLI contract of `pond`: bad input -> exactly one line on stderr and a non-zero exit; good input
# -> the promised output. Usage: cli_test.sh PATH_TO_POND
set -u
pond="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

models="$(cd "$(dirname "$0")/../../.." && pwd)/models"

# expect_error DESCRIPTION PATTERN ARGS...: the command must exit 2 (bad input) with one stderr
# line matching.
expect_error() {
  local desc="$1" pattern="$2"
  shift 2
  "$pond" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne 2 ]; then
    echo "FAIL $desc: exit $rc, not 2"; cat "$tmp/err"; failures=$((failures + 1))
  elif [ "$lines" -ne 1 ]; then
    echo "FAIL $desc: $lines stderr lines:"; cat "$tmp/err"; failures=$((failures + 1))
  elif ! grep -q -- "$pattern" "$tmp/err"; then
    echo "FAIL $desc: stderr lacks '$pattern':"; cat "$tmp/err"; failures=$((failures + 1))
  else
    echo "ok   $desc"
  fi
}

expect_error "no subcommand" "subcommand"
expect_error "unknown subcommand" "frobnicate" frobnicate
expect_error "unknown flag" "--bogus" bench raw --bogus
expect_error "negative threads" "threads" bench raw --threads -1
expect_error "zero threads" "threads" bench raw --threads 0
expect_error "non-numeric seconds" "seconds" bench raw --seconds soon
expect_error "negative seconds" "seconds" bench raw --seconds -2
expect_error "size beyond region" "does not fit" bench raw --region-mib 1 --size 2000000
expect_error "unknown verb" "verbs" bench raw --verbs READ NOP
expect_error "unwritable json" "cannot write" bench raw --seconds 0.05 --region-mib 8 \
  --json "$tmp/no/such/dir/x.json"

printf 'hello\n' >"$tmp/bad.jsonl"
expect_error "malformed history" "bad.jsonl:1" check "$tmp/bad.jsonl"
expect_error "missing history" "no-such-file" check "$tmp/no-such-file.jsonl"
expect_error "unknown model" "model" check --model eventual "$tmp/bad.jsonl"
expect_error "restart of nothing named" "say what to restart" restart --dir "$tmp"
expect_error "restart of a CN and ZooKeeper at once" "excludes" restart --dir "$tmp" --cn 1 --coord
expect_error "restart of a CN and an MN at once" "excludes" restart --dir "$tmp" --cn 1 --mn 1
expect_error "probe without a table" "TABLE" client --connect 127.0.0.1:1 probe
# Served tables that cannot fit the region given: refused at once, naming a size that fits,
# not with OutOfSpace after the daemons have loaded for seconds.
expect_error "up: tables past the region" "region-mib 64 cannot hold the served tables.*give --region-mib 512" \
  up --dir "$tmp/small" --workload smallbank,list-append --table kv:16:100000 --region-mib 64
expect_error "kvs bad isolation" "isolation" bench kvs --isolation rc
expect_error "kvs bad rw ratio" "rw-ratio" bench kvs --rw-ratio 1.5
expect_error "kvs replication above MNs" "replication" bench kvs --mns 2 --replication 3

# A daemon's config file (docs/deploy.md "Config files"): a bad one is one line and exit 2, before
# the daemon reaches for anything.
printf 'coord = "127.0.0.1:1"\nid = 0\nbogus = 1\n' >"$tmp/unknown.toml"
expect_error "config: unknown key" 'unknown key "bogus"' mn --config "$tmp/unknown.toml"
# A quoted key may hold a newline; the message shows it escaped and stays one line.
printf '"bo\\ngus" = 1\n' >"$tmp/newline.toml"
expect_error "config: a key with a newline" 'unknown key "bo\\x0agus"' mn --config "$tmp/newline.toml"
expect_error "config: missing file" "nowhere.toml" cn --config "$tmp/nowhere.toml"
printf 'coord = "127.0.0.1:1"\nid = 99\n' >"$tmp/range.toml"
expect_error "config: value out of range" "--id" mn --config "$tmp/range.toml"
printf 'coord = "127.0.0.1:1"\nid = 0\nwait = "soon"\n' >"$tmp/value.toml"
expect_error "config: not a number" "--wait" cn --config "$tmp/value.toml"
# What TOML refuses is refused, naming the line: an unterminated string, an unquoted address, a
# key given twice.
printf 'id = 0\ncoord = "127.0.0.1:44487\n' >"$tmp/unterminated.toml"
expect_error "config: an unterminated string" "unterminated.toml:2:.*not TOML" \
  cn --config "$tmp/unterminated.toml"
printf 'id = 0\ncoord = 127.0.0.1:44487\n' >"$tmp/unquoted.toml"
expect_error "config: an unquoted string" "unquoted.toml:2:.*not TOML" cn --config "$tmp/unquoted.toml"
printf 'id = 0\nid = 1\ncoord = "127.0.0.1:1"\n' >"$tmp/twice.toml"
expect_error "config: a key twice" "twice.toml:2:.*not TOML" cn --config "$tmp/twice.toml"
# A flag of several values takes a list, and a flag of one value a scalar.
printf 'id = 0\ncoord = "127.0.0.1:1"\nworkload = "smallbank"\n' >"$tmp/scalar.toml"
expect_error "config: a scalar for a list" "workload takes a list" cn --config "$tmp/scalar.toml"
printf 'id = [0]\ncoord = "127.0.0.1:1"\n' >"$tmp/list.toml"
expect_error "config: a list for a scalar" "id takes one value" cn --config "$tmp/list.toml"
printf 'id = 0\ncoord = "127.0.0.1:1"\nwait = { s = 1 }\n' >"$tmp/inline.toml"
expect_error "config: an inline table" "wait.*not a table" cn --config "$tmp/inline.toml"
printf '[mn]\ncoord = "127.0.0.1:1"\nid = 0\n' >"$tmp/section.toml"
expect_error "config: a section" "sections" mn --config "$tmp/section.toml"
printf 'id = 0\n' >"$tmp/partial.toml"
expect_error "config: a required flag in neither" "--coord" mn --config "$tmp/partial.toml"
expect_error "config: not for bench" "--config" bench raw --config "$tmp/partial.toml"
printf 'coord = "127.0.0.1:1"\nid = 0\nmetrics = 9400\ninsecure = true\n' >"$tmp/metrics.toml"
"$pond" mn --config "$tmp/metrics.toml" >/dev/null 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "is not HOST:PORT" "$tmp/err"; then
  echo "ok   config: a metrics address without a port"
else
  echo "FAIL config: metrics address without a port: exit $rc"; cat "$tmp/err"; failures=$((failures + 1))
fi

# Exit code 2 for malformed input, as documented.
"$pond" check "$tmp/bad.jsonl" >/dev/null 2>&1
if [ $? -eq 2 ]; then echo "ok   check exit 2"; else echo "FAIL check exit code"; failures=$((failures + 1)); fi

# A valid one-transaction history passes (exit 0).
cat >"$tmp/good.jsonl" <<'H'
{"index":0,"type":"invoke","process":0,"time":1,"f":"txn","value":[["append",1,5]]}
{"index":1,"type":"ok","process":0,"time":2,"f":"txn","value":[["append",1,5]]}
H
if "$pond" check "$tmp/good.jsonl" >"$tmp/out" 2>&1; then echo "ok   check valid"; else echo "FAIL check valid:"; cat "$tmp/out"; failures=$((failures + 1)); fi

# A short kvs run works end to end.
if "$pond" bench kvs --seconds 0.5 --keys 2000 --region-mib 64 --json "$tmp/k.json" >"$tmp/out" 2>&1 &&
   grep -q '^throughput' "$tmp/out" && grep -q '"txn_per_sec"' "$tmp/k.json"; then
  echo "ok   bench kvs run"
else
  echo "FAIL bench kvs run:"; cat "$tmp/out"; failures=$((failures + 1))
fi

# The simulator: one seed, one output — byte for byte, but for the wall-clock line.
sim_args="sim kvs --cns 3 --workers 2 --coros 2 --keys 5000 --region-mib 64 --virtual-seconds 0.001"
"$pond" $sim_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/sim1" &&
"$pond" $sim_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/sim2" &&
"$pond" $sim_args --seed 12 2>/dev/null | grep -v '^wall clock' >"$tmp/sim3"
if cmp -s "$tmp/sim1" "$tmp/sim2" && ! cmp -s "$tmp/sim1" "$tmp/sim3" && grep -q '^throughput' "$tmp/sim1" &&
   grep -q '^MN 2 NIC' "$tmp/sim1"; then
  echo "ok   sim kvs is deterministic"
else
  echo "FAIL sim kvs determinism:"; diff "$tmp/sim1" "$tmp/sim2"; failures=$((failures + 1))
fi
if "$pond" $sim_args --sweep coros=1..2 >"$tmp/out" 2>/dev/null && [ "$(grep -cE '^[12] ' "$tmp/out")" -eq 2 ]; then
  echo "ok   sim kvs sweep prints one row per point"
else
  echo "FAIL sim kvs sweep:"; cat "$tmp/out"; failures=$((failures + 1))
fi
# Two keys: the cartesian product, first key outermost, one row per point, every key shown.
if "$pond" $sim_args --sweep coros=1..2,threads=1,2 --json "$tmp/sw.json" >"$tmp/out" 2>/dev/null &&
   grep -qE '^coros +threads +txn/s' "$tmp/out" &&
   [ "$(grep -E '^[12] +[12] ' "$tmp/out" | awk '{print $1 $2}' | tr '\n' ' ')" = "11 12 21 22 " ] &&
   [ "$(grep -c '"sweep_point"' "$tmp/sw.json")" -eq 4 ]; then
  echo "ok   sim kvs two-key sweep prints the product"
else
  echo "FAIL sim kvs two-key sweep:"; cat "$tmp/out"; failures=$((failures + 1))
fi
expect_error "sim unknown model" "model" sim kvs --model cx9
expect_error "sim bad sweep" "sweep" sim kvs --sweep nothing
expect_error "sim bad sweep key" "sweep key" sim kvs --sweep color=1,2
expect_error "sim bad second sweep key" "got 'bogus'" sim kvs --sweep coros=1..2,bogus=3
expect_error "sim sweep key twice" "twice" sim kvs --sweep workers=1,threads=2
expect_error "bench sweep non-integer" "not an integer" bench kvs --sweep coros=1,1.5
expect_error "bench sweep too many points" "256 points" bench kvs \
  --sweep coros=1..16,workers=1..16,cns=1..2
expect_error "sim sweep point invalid" "sweep point coros=0" sim kvs --sweep coros=0..1

# --protocol: passed through to the cluster, named in the header and the JSON.
expect_error "kvs unknown protocol" "unknown protocol 'paxos'" bench kvs --protocol paxos
expect_error "sim unknown protocol" "unknown protocol" sim kvs --protocol LOTUS
expect_error "kvs unknown pond step" "unknown protocol 'lotus+fast'" bench kvs --protocol lotus+fast
if "$pond" $sim_args --protocol +vt-cache --json "$tmp/p.json" >"$tmp/out" 2>/dev/null &&
   grep -q '^pond sim kvs: .*, protocol +vt-cache, ' "$tmp/out" &&
   grep -q '"protocol": "+vt-cache"' "$tmp/p.json"; then
  echo "ok   sim kvs --protocol"
else
  echo "FAIL sim kvs --protocol:"; cat "$tmp/out"; failures=$((failures + 1))
fi

# The checked-in model files are the presets: the same run, the same numbers (only the model's
# name, the file's path, differs).
for m in cx3 cx5; do
  "$pond" $sim_args --model "$m" 2>/dev/null | grep -v '^wall clock' | sed "s|$models/$m.json|$m|" >"$tmp/m1"
  "$pond" $sim_args --model "$models/$m.json" 2>/dev/null | grep -v '^wall clock' |
    sed "s|$models/$m.json|$m|" >"$tmp/m2"
  if grep -q '^throughput' "$tmp/m1" && cmp -s "$tmp/m1" "$tmp/m2"; then
    echo "ok   models/$m.json runs as --model $m"
  else
    echo "FAIL models/$m.json:"; diff "$tmp/m1" "$tmp/m2"; failures=$((failures + 1))
  fi
done
printf '{"base": "cx3", "one_way_nz": 5}\n' >"$tmp/typo.json"
expect_error "model file unknown key" "unknown field 'one_way_nz'" sim kvs --model "$tmp/typo.json"

# compare: every row on one workload and seed, one table, a history check per row; stdout is
# one seed's (the wall-clock line aside).
cmp_args="sim compare --cns 3 --workers 2 --coros 2 --keys 5000 --region-mib 64 --virtual-seconds 0.001 --check-txns 500"
# The default rows are the four protocols, with motor as the baseline.
"$pond" $cmp_args --seed 11 --json "$tmp/c.json" 2>/dev/null | grep -v '^wall clock' >"$tmp/c1"
rc1=${PIPESTATUS[0]}
"$pond" $cmp_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/c2"
if [ "$rc1" -eq 0 ] && grep -v '^results written' "$tmp/c1" | cmp -s - "$tmp/c2" &&
   grep -qE '^protocol +txn/s +vs motor +abort% +p50 us +p99 us +atomics/txn +READ%' "$tmp/c1" &&
   grep -qE '^lotus +[0-9]+ +[0-9.]+ ' "$tmp/c1" && grep -qE '^motor +[0-9]+ +1\.00 ' "$tmp/c1" &&
   grep -qE '^ford +[0-9]+ +[0-9.]+ ' "$tmp/c1" && grep -qE '^pond +[0-9]+ +[0-9.]+ ' "$tmp/c1" &&
   grep -q '^history check lotus: ok ([0-9]* txns, model strict-serializable)' "$tmp/c1" &&
   grep -q '^history check motor: ok ' "$tmp/c1" && grep -q '^history check ford: ok ' "$tmp/c1" &&
   grep -q '^history check pond: ok ' "$tmp/c1" &&
   [ "$(grep -c '"throughput_vs_baseline"' "$tmp/c.json")" -eq 4 ]; then
  echo "ok   sim compare: table, checks, JSON, deterministic"
else
  echo "FAIL sim compare:"; cat "$tmp/c1"; diff "$tmp/c1" "$tmp/c2"; failures=$((failures + 1))
fi
if "$pond" $cmp_args --protocols lotus,+vt-cache --isolation si --baseline +vt-cache >"$tmp/out" \
     2>/dev/null && grep -qE '^protocol .* vs \+vt-cache ' "$tmp/out" &&
   grep -qE '^\+vt-cache +[0-9]+ +1\.00 ' "$tmp/out" &&
   grep -q '^history check lotus: ok ([0-9]* txns, model snapshot-isolation)' "$tmp/out"; then
  echo "ok   sim compare --protocols --baseline under SI"
else
  echo "FAIL sim compare --protocols --baseline under SI:"; cat "$tmp/out"; failures=$((failures + 1))
fi
if "$pond" $cmp_args --ablation --no-check >"$tmp/out" 2>/dev/null &&
   [ "$(grep -cE '^(motor|\+full-record|\+log-visible|\+lock-sharding|\+load-balancing|\+vt-cache) +[0-9]+ ' "$tmp/out")" -eq 6 ] &&
   grep -qE '^protocol .* vs motor ' "$tmp/out" && ! grep -q '^history check' "$tmp/out"; then
  echo "ok   sim compare --ablation --no-check"
else
  echo "FAIL sim compare --ablation --no-check:"; cat "$tmp/out"; failures=$((failures + 1))
fi
if "$pond" bench compare --cns 2 --mns 3 --keys 2000 --region-mib 64 --seconds 0.2 \
     --check-txns 300 >"$tmp/out" 2>&1 && grep -qE '^motor +[0-9]+ +1\.00 ' "$tmp/out" &&
   [ "$(grep -c '^history check [a-z]*: ok' "$tmp/out")" -eq 4 ]; then
  echo "ok   bench compare"
else
  echo "FAIL bench compare:"; cat "$tmp/out"; failures=$((failures + 1))
fi
expect_error "compare unknown workload" "unknown workload 'tpce' (choices: kvs, smallbank, tatp, tpcc" \
  sim compare --workload tpce
if "$pond" $cmp_args --workload tatp --subscribers 1000 --protocols lotus,ford --no-check \
     >"$tmp/out" 2>/dev/null && grep -q '^pond sim compare: .*, workload tatp, ' "$tmp/out" &&
   [ "$(grep -c '^referential check [a-z]*: ok' "$tmp/out")" -eq 2 ]; then
  echo "ok   sim compare --workload tatp"
else
  echo "FAIL sim compare --workload tatp:"; cat "$tmp/out"; failures=$((failures + 1))
fi
if "$pond" $cmp_args --workload smallbank --accounts 2000 --json "$tmp/cs.json" >"$tmp/out" \
     2>/dev/null && grep -q '^pond sim compare: .*, workload smallbank, ' "$tmp/out" &&
   grep -qE '^motor +[0-9]+ +1\.00 ' "$tmp/out" &&
   [ "$(grep -c '^money check [a-z]*: ok' "$tmp/out")" -eq 4 ] &&
   [ "$(grep -c '^history check [a-z]*: ok' "$tmp/out")" -eq 4 ] &&
   [ "$(grep -c '^history check [a-z]* (smallbank): ok' "$tmp/out")" -eq 4 ] &&
   [ "$(grep -c '"money_check"' "$tmp/cs.json")" -eq 4 ] &&
   [ "$(grep -c '"smallbank_history_check"' "$tmp/cs.json")" -eq 4 ]; then
  echo "ok   sim compare --workload smallbank"
else
  echo "FAIL sim compare --workload smallbank:"; cat "$tmp/out"; failures=$((failures + 1))
fi
expect_error "compare smallbank one account" "accounts" sim compare --workload smallbank \
  --accounts 1
expect_error "compare unknown protocol" "unknown protocol 'nope'" sim compare --protocols lotus,nope
expect_error "compare empty protocol" "empty name" bench compare --protocols lotus,
expect_error "compare protocol twice" "twice" sim compare --protocols lotus,lotus
expect_error "compare baseline not a row" "not one of the rows" sim compare --protocols lotus \
  --baseline motor
expect_error "compare ablation with protocols" "excludes" sim compare --ablation --protocols lotus
expect_error "compare ford under SI" "ford" sim compare --protocols lotus,ford --isolation si
expect_error "compare check txns" "check-txns" bench compare --check-txns 0

# SmallBank: a short run on threads passes its money check; the simulator's stdout is one
# seed's (the wall-clock line aside); bad input is one line and exit 2.
if "$pond" bench smallbank --seconds 0.3 --accounts 2000 --region-mib 64 --json "$tmp/sb.json" \
     >"$tmp/out" 2>&1 && grep -q '^throughput' "$tmp/out" &&
   grep -q '^money check  ok: ' "$tmp/out" && grep -q '"money_check"' "$tmp/sb.json"; then
  echo "ok   bench smallbank run"
else
  echo "FAIL bench smallbank run:"; cat "$tmp/out"; failures=$((failures + 1))
fi
sb_args="sim smallbank --cns 3 --workers 2 --coros 2 --accounts 2000 --region-mib 64 --virtual-seconds 0.001"
"$pond" $sb_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/sb1" &&
"$pond" $sb_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/sb2" &&
"$pond" $sb_args --seed 12 --protocol ford 2>/dev/null | grep -v '^wall clock' >"$tmp/sb3"
if cmp -s "$tmp/sb1" "$tmp/sb2" && grep -q '^money check  ok: ' "$tmp/sb1" &&
   grep -q '^MN 2 NIC' "$tmp/sb1" && grep -q '^money check  ok: ' "$tmp/sb3" &&
   grep -q '^pond sim smallbank: .*, protocol ford, ' "$tmp/sb3"; then
  echo "ok   sim smallbank is deterministic and checks its money"
else
  echo "FAIL sim smallbank:"; cat "$tmp/sb1"; diff "$tmp/sb1" "$tmp/sb2"; failures=$((failures + 1))
fi
expect_error "smallbank one account" "accounts" bench smallbank --accounts 1
expect_error "smallbank bad hot fraction" "hot-fraction" sim smallbank --hot-fraction 0

# A recorded run stops at its call cap: a fault scheduled by hand after that end never happens,
# and the run says so on its last line and exits 3 — unless --allow-unplayed-faults.
unplayed="sim smallbank --cns 3 --workers 2 --coros 2 --accounts 2000 --region-mib 64 --virtual-seconds 0.2 --faults crash-cn:2@150ms --history $tmp/h.jsonl --json $tmp/u.json"
"$pond" $unplayed >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 3 ] && tail -n 1 "$tmp/err" | grep -q "1 of the schedule's faults never happened" &&
   grep -q '"faults_not_reached": 1' "$tmp/u.json" && grep -q "^exercised .*1 NEVER HAPPENED" "$tmp/out"; then
  echo "ok   a fault after a recorded run's end: said last, in the JSON, exit 3"
else
  echo "FAIL unplayed fault: exit $rc"; tail -n 3 "$tmp/err"; failures=$((failures + 1))
fi
if "$pond" $unplayed --allow-unplayed-faults >"$tmp/out" 2>&1; then
  echo "ok   --allow-unplayed-faults accepts it"
else
  echo "FAIL --allow-unplayed-faults"; tail -n 3 "$tmp/out"; failures=$((failures + 1))
fi
expect_error "smallbank bad isolation" "isolation" bench smallbank --isolation rc
expect_error "smallbank unknown protocol" "unknown protocol" sim smallbank --protocol paxos
expect_error "smallbank ford under SI" "ford" sim smallbank --protocol ford --isolation si
expect_error "smallbank unknown model" "model" sim smallbank --model cx9
for cmd in "sim smallbank" "bench smallbank"; do
  if "$pond" $cmd --help >"$tmp/out" 2>&1 && grep -q -- --accounts "$tmp/out" &&
     grep -q -- --hot-fraction "$tmp/out" && grep -q -- --protocol "$tmp/out"; then
    echo "ok   $cmd --help"
  else
    echo "FAIL $cmd --help"; failures=$((failures + 1))
  fi
done

# SmallBank --history: the recorded run is judged by the checker, whose verdict is printed.
if "$pond" sim smallbank --cns 2 --workers 2 --coros 2 --accounts 300 --region-mib 64 \
     --virtual-seconds 0.001 --history "$tmp/h.jsonl" >"$tmp/out" 2>/dev/null &&
   grep -q '^history .* transactions written to .*strict-serializable' "$tmp/out" &&
   grep -q '^valid: yes' "$tmp/out" && [ -s "$tmp/h.jsonl" ] &&
   "$pond" check "$tmp/h.jsonl" >/dev/null; then
  echo "ok   sim smallbank --history"
else
  echo "FAIL sim smallbank --history:"; cat "$tmp/out"; failures=$((failures + 1))
fi
expect_error "smallbank --history with --sweep" "does not go with --sweep" sim smallbank \
  --history "$tmp/x.jsonl" --sweep coros=1,2

# Lost messages: with 1% of CN messages dropped every protocol and ablation step completes its
# SmallBank run and passes the money check and both history checks (requests are resent).
sed 's/"drop_probability": *[0-9.]*/"drop_probability": 0.01/' "$models/cx3.json" >"$tmp/drop.json"
if grep -q '"drop_probability": 0.01' "$tmp/drop.json" &&
   "$pond" sim compare --workload smallbank --model "$tmp/drop.json" --ablation --cns 3 \
     --workers 2 --coros 3 --accounts 2000 --region-mib 64 --virtual-seconds 0.002 \
     --check-txns 400 >"$tmp/out" 2>/dev/null &&
   [ "$(grep -c '^money check .*: ok' "$tmp/out")" -eq 6 ] &&
   [ "$(grep -c '^history check .*: ok' "$tmp/out")" -eq 12 ]; then
  echo "ok   sim compare with 1% of messages lost"
else
  echo "FAIL sim compare with lost messages:"; cat "$tmp/out"; failures=$((failures + 1))
fi
if "$pond" sim compare --workload smallbank --model "$tmp/drop.json" --cns 3 --workers 2 \
     --coros 3 --accounts 2000 --region-mib 64 --virtual-seconds 0.002 --check-txns 400 \
     >"$tmp/out" 2>/dev/null &&
   [ "$(grep -c '^history check .*: ok' "$tmp/out")" -eq 8 ]; then
  echo "ok   sim compare, lotus motor ford pond, with 1% of messages lost"
else
  echo "FAIL sim compare (protocols) with lost messages:"; cat "$tmp/out"; failures=$((failures + 1))
fi

# --sweep on the OLTP workloads: one row per point, the workload's check per row, JSON rows
# carrying their point.
if "$pond" sim smallbank --cns 2 --workers 1 --accounts 2000 --region-mib 64 \
     --virtual-seconds 0.0005 --protocol motor --sweep coros=1,2 --json "$tmp/sw.json" \
     >"$tmp/out" 2>/dev/null &&
   [ "$(grep -cE '^[12] +motor +[0-9]+ ' "$tmp/out")" -eq 2 ] &&
   [ "$(grep -c '^money check motor coros=[12]: ok' "$tmp/out")" -eq 2 ] &&
   ! grep -q '^history check' "$tmp/out" &&
   [ "$(grep -c '"sweep_point"' "$tmp/sw.json")" -eq 2 ]; then
  echo "ok   sim smallbank --sweep"
else
  echo "FAIL sim smallbank --sweep:"; cat "$tmp/out"; failures=$((failures + 1))
fi
if "$pond" sim compare --workload tatp --protocols lotus,ford --cns 2 --workers 1 \
     --subscribers 1000 --region-mib 64 --virtual-seconds 0.0005 --sweep coros=1,2 \
     --check-txns 200 >"$tmp/out" 2>/dev/null &&
   [ "$(grep -cE '^[12] +(lotus|ford) +[0-9]+ ' "$tmp/out")" -eq 4 ] &&
   [ "$(grep -c '^referential check .* coros=[12]: ok' "$tmp/out")" -eq 4 ] &&
   [ "$(grep -c '^history check [a-z]*: ok' "$tmp/out")" -eq 2 ]; then
  echo "ok   sim compare --workload tatp --sweep"
else
  echo "FAIL sim compare --workload tatp --sweep:"; cat "$tmp/out"; failures=$((failures + 1))
fi
expect_error "tatp sweep of a kvs key" "is not a setting of the tatp workload" sim tatp --sweep theta=0,0.5
expect_error "compare sweep bad key" "--sweep key" sim compare --sweep frobs=1,2
expect_error "smallbank sweep bad point" "coros=0" sim smallbank --sweep coros=0,1

# TATP: the same contract, with the referential check.
if "$pond" bench tatp --seconds 0.3 --subscribers 2000 --region-mib 64 --json "$tmp/ta.json" \
     >"$tmp/out" 2>&1 && grep -q '^throughput' "$tmp/out" &&
   grep -q '^ref. check   ok: ' "$tmp/out" && grep -q '"referential_check"' "$tmp/ta.json"; then
  echo "ok   bench tatp run"
else
  echo "FAIL bench tatp run:"; cat "$tmp/out"; failures=$((failures + 1))
fi
ta_args="sim tatp --cns 3 --workers 2 --coros 2 --subscribers 2000 --region-mib 64 --virtual-seconds 0.001"
"$pond" $ta_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/ta1" &&
"$pond" $ta_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/ta2" &&
"$pond" $ta_args --seed 12 --protocol motor --isolation si 2>/dev/null | grep -v '^wall clock' >"$tmp/ta3"
if cmp -s "$tmp/ta1" "$tmp/ta2" && grep -q '^ref. check   ok: ' "$tmp/ta1" &&
   grep -q '^ref. check   ok: ' "$tmp/ta3" && grep -q '^pond sim tatp: .*, protocol motor, snapshot' "$tmp/ta3"; then
  echo "ok   sim tatp is deterministic and checks its rows"
else
  echo "FAIL sim tatp:"; cat "$tmp/ta1" "$tmp/ta3"; diff "$tmp/ta1" "$tmp/ta2"; failures=$((failures + 1))
fi
expect_error "tatp no subscribers" "subscribers" bench tatp --subscribers 0
expect_error "tatp ford under SI" "ford" sim tatp --protocol ford --isolation si
expect_error "tatp unknown flag" "--accounts" sim tatp --accounts 5
if "$pond" sim tatp --help >"$tmp/out" 2>&1 && grep -q -- --subscribers "$tmp/out"; then
  echo "ok   sim tatp --help"
else
  echo "FAIL sim tatp --help"; failures=$((failures + 1))
fi

# TPC-C: the same contract, with the consistency conditions and New-Order/s beside txn/s.
tp_small="--warehouses 2 --items 500 --customers 30 --order-room 3000"
if "$pond" bench tpcc --seconds 0.3 $tp_small --json "$tmp/tp.json" >"$tmp/out" 2>&1 &&
   grep -q '^New-Order/s ' "$tmp/out" && grep -q '^consistency  ok: 3.3.2.1 ok, ' "$tmp/out" &&
   grep -q '"consistency_check"' "$tmp/tp.json" && grep -q '"new_orders_per_sec"' "$tmp/tp.json"; then
  echo "ok   bench tpcc run"
else
  echo "FAIL bench tpcc run:"; cat "$tmp/out"; failures=$((failures + 1))
fi
tp_args="sim tpcc --cns 3 --workers 2 --coros 2 $tp_small --virtual-seconds 0.002"
"$pond" $tp_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/tp1" &&
"$pond" $tp_args --seed 11 2>/dev/null | grep -v '^wall clock' >"$tmp/tp2" &&
"$pond" $tp_args --seed 12 --protocol motor --isolation si 2>/dev/null | grep -v '^wall clock' >"$tmp/tp3"
if cmp -s "$tmp/tp1" "$tmp/tp2" && grep -q '^consistency  ok: ' "$tmp/tp1" &&
   grep -q '^consistency  ok: ' "$tmp/tp3" && grep -q '^pond sim tpcc: .*, protocol motor, snapshot' "$tmp/tp3"; then
  echo "ok   sim tpcc is deterministic and checks its conditions"
else
  echo "FAIL sim tpcc:"; cat "$tmp/tp1" "$tmp/tp3"; diff "$tmp/tp1" "$tmp/tp2"; failures=$((failures + 1))
fi
if "$pond" sim compare --workload tpcc --cns 2 --workers 1 --coros 2 $tp_small \
     --virtual-seconds 0.001 --check-txns 200 >"$tmp/out" 2>/dev/null &&
   grep -q '^protocol .* txn/s  *New-Order/s ' "$tmp/out" &&
   [ "$(grep -c '^consistency check [a-z]*: ok (conditions 1-4 hold in 2 warehouses' "$tmp/out")" -eq 4 ] &&
   [ "$(grep -c '^history check [a-z]*: ok' "$tmp/out")" -eq 4 ]; then
  echo "ok   sim compare --workload tpcc"
else
  echo "FAIL sim compare --workload tpcc:"; cat "$tmp/out"; failures=$((failures + 1))
fi
expect_error "tpcc no warehouses" "--warehouses must be 1 to 4095" bench tpcc --warehouses 0
expect_error "tpcc too many warehouses" "--warehouses must be 1 to 4095" sim tpcc --warehouses 4096
expect_error "tpcc too many customers" "--customers" sim tpcc --customers 5000
expect_error "tpcc compare no warehouses" "--warehouses" sim compare --workload tpcc --warehouses 0
expect_error "tpcc ford under SI" "ford" sim tpcc --protocol ford --isolation si $tp_small
expect_error "tpcc unknown flag" "--subscribers" sim tpcc --subscribers 5
expect_error "tpcc mix not summing to 100" "must sum to 100, not 90" sim tpcc --mix 50,0,0,40,0 \
  $tp_small
expect_error "tpcc mix of two" "needs 5 percentages" sim tpcc --mix 50,50 $tp_small
# A Delivery-heavy mix with and without the tree's cleaning: both hold every check, and the run
# that keeps deleted entries finds more entries of absent keys in its scans.
absent=()
for keep in "" "--keep-deleted-entries"; do
  if "$pond" $tp_args --mix 50,0,0,50,0 $keep >"$tmp/out" 2>&1 &&
     grep -q "mix 50/0/0/50/0" "$tmp/out" && grep -q "^consistency  ok" "$tmp/out"; then
    absent+=("$(sed -n 's/.*B+Tree leaves, \([0-9.]*\) entries of absent keys.*/\1/p' "$tmp/out")")
    echo "ok   sim tpcc --mix ${keep:-(cleaning)}"
  else
    echo "FAIL sim tpcc --mix $keep:"; cat "$tmp/out"; failures=$((failures + 1))
  fi
done
if [ "${#absent[@]}" -eq 2 ] && awk -v a="${absent[0]}" -v b="${absent[1]}" 'BEGIN { exit !(a < b) }'; then
  echo "ok   cleaning leaves scans fewer absent entries (${absent[0]} < ${absent[1]} per txn)"
else
  echo "FAIL absent entries per txn with and without cleaning: ${absent[*]}"; failures=$((failures + 1))
fi
# An MN crash and restart: the trees fail over to their copies, the restarted MN gets its copies
# back, and the replica check compares every reachable node on every copy.
if "$pond" sim tpcc --faults crash-mn:1@1ms,restart-mn:1@3ms $tp_small >"$tmp/out" 2>&1 &&
  grep -q "B+Tree nodes on every copy" "$tmp/out" && grep -q "^consistency  ok" "$tmp/out" &&
  grep -q "readable (R copies again)" "$tmp/out"; then
  echo "ok   tpcc through an MN crash and restart, every tree copy agreeing"
else
  echo "FAIL tpcc MN crash and restart:"; cat "$tmp/out"; failures=$((failures + 1))
fi
# The same under motor, whose lock words are on the MNs: its tree rounds end at the leaving MN,
# so the MN goes down and the copy onto it takes each key's word.
if "$pond" sim tpcc --protocol motor --faults crash-mn:1@1ms,restart-mn:1@3ms $tp_small \
    >"$tmp/out" 2>&1 && grep -q "B+Tree nodes on every copy" "$tmp/out" &&
  grep -q "^consistency  ok" "$tmp/out" && grep -q "readable (R copies again)" "$tmp/out"; then
  echo "ok   motor tpcc through an MN crash and restart"
else
  echo "FAIL motor tpcc MN crash and restart:"; cat "$tmp/out"; failures=$((failures + 1))
fi
# A long MN outage: New-Orders whose new keys have the down MN as primary abort again and again,
# retried with the same keys. None may leave a slot claimed for nobody on the MNs up — else their
# buckets fill, and those keys could never be inserted (OutOfSpace) even once the MN is back.
if "$pond" sim tpcc --mns 3 --cns 3 --replication 2 --warehouses 3 --items 1000 --customers 30 \
    --order-room 4000 --virtual-seconds 0.3 --faults crash-mn:1@50ms >"$tmp/out" 2>&1 &&
   grep -q "^consistency  ok" "$tmp/out" && grep -q "MN unreachable [1-9]" "$tmp/out"; then
  echo "ok   tpcc through a 250 ms MN outage: no slot claimed for nobody"
else
  echo "FAIL tpcc through a long MN outage:"; cat "$tmp/out"; failures=$((failures + 1))
fi
# CN faults are inside TPC-C's envelope: a crash and restart run to the end with every check held.
if "$pond" sim tpcc --faults crash-cn:1@1ms,restart-cn:1@3ms $tp_small >"$tmp/out" 2>&1 &&
   grep -q "^exercised *1 CN crash, 1 CN restart, 1 CN recovery" "$tmp/out" &&
   grep -q "^consistency  ok" "$tmp/out" && grep -q "^replicas     ok" "$tmp/out"; then
  echo "ok   sim tpcc through a CN crash"
else
  echo "FAIL sim tpcc through a CN crash:"; cat "$tmp/out"; failures=$((failures + 1))
fi
# The daemons' membership machine recovers a simulated run: what it cannot survive is refused in
# one line, and a CN crash and restart, an MN restart and a partition each run to the end with
# every check held.
expect_error "an outage that never ends" "needs a restart-coord after it" sim smallbank \
  --faults crash-coord@1ms
expect_error "zero lock buckets" "lock_buckets must be 1 to" sim smallbank --lock-buckets 0
expect_error "a huge cache" "must be at most" sim smallbank --vt-cache-entries 999999999
machine="sim smallbank --cns 3 --workers 2 --coros 2 --accounts 2000 --region-mib 64 --virtual-seconds 0.01 --faults crash-coord@1500us,crash-cn:2@2ms,restart-coord@3ms,restart-cn:2@5ms --history $tmp/m.jsonl"
if "$pond" $machine >"$tmp/out" 2>&1 && grep -q "^exercised *1 CN crash, 1 CN restart, 1 CN recovery" "$tmp/out" &&
   grep -q "1 coordination-service outage" "$tmp/out" &&
   grep -q "^anomalies: none" "$tmp/out" && grep -q "^replicas *ok" "$tmp/out"; then
  echo "ok   sim recovers a CN crash and restart across an outage of the service"
else
  echo "FAIL sim across an outage of the service"; tail -n 5 "$tmp/out"; failures=$((failures + 1))
fi
machine_mn="sim smallbank --cns 3 --workers 2 --coros 2 --accounts 2000 --region-mib 64 --virtual-seconds 0.01 --faults crash-mn:1@1ms,restart-mn:1@3ms"
if "$pond" $machine_mn >"$tmp/out" 2>&1 && grep -q "1 MN restart (1 readable again)" "$tmp/out" &&
   grep -q "^money check  ok" "$tmp/out" && grep -q "^replicas *ok" "$tmp/out"; then
  echo "ok   sim brings a restarted MN back to R copies"
else
  echo "FAIL sim restart-mn"; tail -n 5 "$tmp/out"; failures=$((failures + 1))
fi
machine_cut="sim smallbank --cns 3 --workers 2 --coros 2 --accounts 2000 --region-mib 64 --virtual-seconds 0.01 --faults partition-cn:1@2ms,heal-cn:1@6ms"
if "$pond" $machine_cut >"$tmp/out" 2>&1 &&
   grep -q "CN 1 partitioned at 2.000 ms: it fenced itself" "$tmp/out" &&
   grep -q "^failover *CN 1 restarted" "$tmp/out" &&
   grep -q "^money check  ok" "$tmp/out" && grep -q "^replicas *ok" "$tmp/out"; then
  echo "ok   sim fences a partitioned CN and takes it back once healed"
else
  echo "FAIL sim partition-cn"; tail -n 5 "$tmp/out"; failures=$((failures + 1))
fi
if "$pond" sim tpcc --help >"$tmp/out" 2>&1 && grep -q -- --warehouses "$tmp/out" &&
   grep -q -- --order-room "$tmp/out"; then
  echo "ok   sim tpcc --help"
else
  echo "FAIL sim tpcc --help"; failures=$((failures + 1))
fi

# Help works and exits 0.
if "$pond" --help >"$tmp/out" 2>&1 && grep -q bench "$tmp/out"; then
  echo "ok   --help"
else
  echo "FAIL --help"; failures=$((failures + 1))
fi
for cmd in mn cn; do
  if "$pond" $cmd --help >"$tmp/out" 2>&1 && grep -q -- "--config FILE" "$tmp/out" &&
     grep -q -- "--metrics" "$tmp/out"; then
    echo "ok   $cmd --help"
  else
    echo "FAIL $cmd --help"; failures=$((failures + 1))
  fi
done
if "$pond" bench raw --help >"$tmp/out" 2>&1 && grep -q -- --threads "$tmp/out"; then
  echo "ok   bench raw --help"
else
  echo "FAIL bench raw --help"; failures=$((failures + 1))
fi
for cmd in "sim compare" "bench compare"; do
  if "$pond" $cmd --help >"$tmp/out" 2>&1 && grep -q -- --protocols "$tmp/out" &&
     grep -q -- --ablation "$tmp/out" && grep -q -- --baseline "$tmp/out" &&
     grep -q -- --no-check "$tmp/out" && grep -q -- --workload "$tmp/out"; then
    echo "ok   $cmd --help"
  else
    echo "FAIL $cmd --help"; failures=$((failures + 1))
  fi
done

# A short real run prints a row per verb and writes JSON with one result per verb.
if "$pond" bench raw --seconds 0.05 --region-mib 8 --json "$tmp/r.json" >"$tmp/out" 2>&1 &&
   [ "$(grep -cE '^(READ|WRITE|CAS|FAA) ' "$tmp/out")" -eq 4 ] &&
   [ "$(grep -c '"ops_per_sec"' "$tmp/r.json")" -eq 4 ]; then
  echo "ok   bench raw run"
else
  echo "FAIL bench raw run:"; cat "$tmp/out"; failures=$((failures + 1))
fi

# Resharding (docs/resharding.md): a restless load policy moves shards in a short simulated run,
# says so in the report and the JSON (with the commits in each millisecond), and keeps the money;
# bad settings are one line and exit 2.
if "$pond" sim smallbank --cns 3 --workers 2 --coros 8 --accounts 20000 --virtual-seconds 0.01 \
     --reshard load --reshard-interval-ms 0.5 --reshard-over 1.1 --reshard-intervals 1 \
     --json "$tmp/rs.json" >"$tmp/out" 2>/dev/null &&
   grep -qE '^resharding   [1-9][0-9]* shard moves made \([1-9][0-9]* shards\)' "$tmp/out" &&
   grep -q '^money check  ok' "$tmp/out" && grep -q '"resharding"' "$tmp/rs.json" &&
   grep -qE '^per ms       [0-9]+ [0-9]+' "$tmp/out" && grep -q '"committed_per_ms": \[' "$tmp/rs.json"; then
  echo "ok   sim smallbank --reshard load"
else
  echo "FAIL sim smallbank --reshard load:"; cat "$tmp/out"; failures=$((failures + 1))
fi
# Locality: transfers routed by their first account lock the second's shard on another CN,
# which moves to the CN that requests it most.
if "$pond" sim smallbank --cns 3 --workers 2 --coros 8 --accounts 20000 --virtual-seconds 0.01 \
     --reshard locality --reshard-interval-ms 0.5 --reshard-intervals 1 >"$tmp/out" 2>/dev/null &&
   grep -q '^resharding   locality: every 0.500 ms' "$tmp/out" &&
   grep -qE '^resharding   [1-9][0-9]* shard moves made' "$tmp/out" &&
   grep -q '^money check  ok' "$tmp/out"; then
  echo "ok   sim smallbank --reshard locality"
else
  echo "FAIL sim smallbank --reshard locality:"; cat "$tmp/out"; failures=$((failures + 1))
fi
expect_error "reshard: unknown policy" "--reshard" sim smallbank --reshard bogus
expect_error "reshard: threshold" "reshard.over" sim smallbank --reshard load --reshard-over 1
expect_error "reshard: lock words on MNs" "resharding" sim smallbank --reshard load --protocol motor

[ "$failures" -eq 0 ]
