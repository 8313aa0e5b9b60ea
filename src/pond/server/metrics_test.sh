#!/usr/bin/env bash
# The daemons' metrics and config files, end to end (docs/deploy.md "Metrics", "Config files"):
# `pond up` gives every daemon a metrics port on loopback and records it in cluster.json; GET
# /metrics of a CN and an MN answers in Prometheus's text format; a CN's commits grow with a
# client run; a restarted CN serves its metrics on the same port; and a daemon reads its flags
# from a file, the command line winning; an idle connection does not block a scrape. Usage: metrics_test.sh PATH_TO_POND
set -u
pond="$1"
source "$(dirname "$0")/cluster_test_lib.sh"
d="$tmp/cluster"
dirs+=("$d")

# The metrics address of ROLE ID, from cluster.json.
metrics_of() {
  python3 - "$d/cluster.json" "$1" "$2" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["processes"]:
    if p["role"] == sys.argv[2] and p["id"] == int(sys.argv[3]):
        print(p.get("metrics", ""))
PY
}

# scrape ADDRESS: GET /metrics, checked line by line against the text exposition format; prints
# "NAME{LABELS} VALUE" per sample, or fails (exit 1) naming the first bad line.
scrape() {
  python3 - "$1" <<'PY'
import re, sys, urllib.request
with urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=10) as r:
    if r.status != 200:
        sys.exit("status %d" % r.status)
    if not r.headers.get("Content-Type", "").startswith("text/plain"):
        sys.exit("content type %s" % r.headers.get("Content-Type"))
    text = r.read().decode()
name = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# NaN as Prometheus reads it: any case (prometheus-cpp writes "Nan").
sample = re.compile(r"^(%s)(\{([a-zA-Z_][a-zA-Z0-9_]*=\"[^\"]*\",?)*\})? [-+]?([0-9.]+(e[-+]?[0-9]+)?|Inf|(?i:nan))$" % name)
comment = re.compile(r"^# (HELP|TYPE) (%s) ?(.*)$" % name)
types = {}
for line in text.splitlines():
    if not line:
        continue
    c = comment.match(line)
    if c:
        if c.group(1) == "TYPE":
            if c.group(3) not in ("counter", "gauge", "histogram", "summary", "untyped"):
                sys.exit("bad type: " + line)
            types[c.group(2)] = c.group(3)
        continue
    m = sample.match(line)
    if not m:
        sys.exit("not a sample: " + line)
    family = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
    if m.group(1) not in types and family not in types:
        sys.exit("sample without a TYPE: " + line)
    print(line)
PY
}

# value FILE SAMPLE: the value of SAMPLE (name with labels, as written) in a scrape.
value() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }

if ! "$pond" up --dir "$d" --mns 1 --replication 1 --cns 2 --region-mib 64 --ucx-tls shm \
    --workload smallbank --accounts 500 --timeout 120 >"$tmp/up.out" 2>&1; then
  fail "pond up"; cat "$tmp/up.out"; exit 1
fi
ok "pond up: 1 MN, 2 CNs"
coord=$(sed -n 's/^coord //p' "$tmp/up.out")
client=$(sed -n 's/^client \([^ ]*\) (CN 0)$/\1/p' "$tmp/up.out")
cn0=$(metrics_of cn 0)
mn0=$(metrics_of mn 0)
if [ -n "$cn0" ] && [ -n "$mn0" ] && [ -n "$(metrics_of cn 1)" ] &&
   grep -q "^metrics http://$cn0/metrics (cn 0)$" "$tmp/up.out"; then
  ok "cluster.json and pond up name each daemon's metrics address"
else
  fail "metrics addresses: cn0 '$cn0' mn0 '$mn0'"; cat "$tmp/up.out" "$d/cluster.json"
fi

if scrape "$mn0" >"$tmp/mn.txt" 2>"$tmp/err"; then
  beats1=$(value "$tmp/mn.txt" pond_mn_beats_total)
  region=$(value "$tmp/mn.txt" pond_region_bytes)
  [ "$region" = "67108864" ] && [ -n "$beats1" ] &&
    grep -q '^pond_info{role="mn",id="0",cluster="pond"} 1$' "$tmp/mn.txt" &&
    ok "MN 0's metrics parse: region 64 MiB, $beats1 beats" ||
    { fail "MN 0's metrics"; cat "$tmp/mn.txt"; }
else
  fail "MN 0's metrics do not parse: $(cat "$tmp/err")"
fi

if scrape "$cn0" >"$tmp/cn-before.txt" 2>"$tmp/err"; then
  before=$(value "$tmp/cn-before.txt" 'pond_commits_total{kind="read_write"}')
  [ "$(value "$tmp/cn-before.txt" pond_serving)" = "1" ] && [ -n "$before" ] &&
    [ -n "$(value "$tmp/cn-before.txt" 'pond_one_sided_ops_total{verb="read",phase="serving"}')" ] &&
    awk -v v="$(value "$tmp/cn-before.txt" 'pond_one_sided_ops_total{verb="write",phase="loading"}')" \
      'BEGIN { exit !(v + 0 > 0) }' &&
    [ -n "$(value "$tmp/cn-before.txt" pond_lock_slots)" ] &&
    [ -n "$(value "$tmp/cn-before.txt" 'pond_commit_latency_seconds_bucket{le="+Inf"}')" ] &&
    ok "CN 0's metrics parse: serving, $before commits before the run, the tables' loading counted apart" ||
    { fail "CN 0's metrics"; cat "$tmp/cn-before.txt"; }
else
  fail "CN 0's metrics do not parse: $(cat "$tmp/err")"
fi

# A client that connects and sends nothing does not keep the metrics from a scraper. A server
# that waited for it would hold the first scrape for its 2 s request timeout
# (kMetricsRequestTimeoutMs); the bound leaves the two Python scrapes 1.8 s, as on a loaded host
# they took just over 1 s.
exec 3<>"/dev/tcp/${cn0%:*}/${cn0##*:}"
start=$(date +%s%N)
scrape "$cn0" >/dev/null 2>"$tmp/err" && scrape "$cn0" >/dev/null 2>>"$tmp/err"
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
exec 3<&-
[ "$rc" -eq 0 ] && [ "$ms" -lt 1800 ] &&
  ok "two scrapes of CN 0 beside an idle connection to its metrics port ($ms ms)" ||
  { fail "a scrape beside an idle connection: exit $rc after $ms ms"; cat "$tmp/err"; }

# Every client starts at CN 0: its commits are CN 0's unless routed elsewhere.
timeout 120 "$pond" bench smallbank --dir "$d" --connect "$client" --clients 2 --seconds 1 >"$tmp/run.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] && ok "a SmallBank run against the CNs" || { fail "SmallBank run (exit $rc)"; cat "$tmp/run.out"; }
total() { awk '/^pond_commits_total/ { n += $2 } END { print n + 0 }' "$1"; }
scrape "$cn0" >"$tmp/cn0-after.txt" 2>/dev/null
scrape "$(metrics_of cn 1)" >"$tmp/cn1-after.txt" 2>/dev/null
after=$(( $(total "$tmp/cn0-after.txt") + $(total "$tmp/cn1-after.txt") ))
count=$(value "$tmp/cn0-after.txt" pond_commit_latency_seconds_count)
if [ "$after" -gt "$(total "$tmp/cn-before.txt")" ] && [ "${count:-0}" != "0" ]; then
  ok "pond_commits_total grew to $after over the CNs; CN 0's latency histogram counted $count"
else
  fail "commits did not grow: $after"; cat "$tmp/cn0-after.txt"
fi
beats2=$(scrape "$mn0" 2>/dev/null | awk '$1 == "pond_mn_beats_total" { print $2 }')
[ "${beats2:-0}" -gt "${beats1:-0}" ] && ok "MN 0's beats went on ($beats1, then $beats2)" ||
  fail "MN 0's beats: $beats1, then $beats2"

# A CN restarted keeps its metrics port; the other CN saw it fail and come back.
pid1=$(python3 -c 'import json,sys; print([p["pid"] for p in json.load(open(sys.argv[1]))["processes"] if p["role"] == "cn" and p["id"] == 1][0])' "$d/cluster.json")
cn1=$(metrics_of cn 1)
kill -9 -- "-$pid1"
if timeout 120 "$pond" restart --dir "$d" --cn 1 --timeout 90 >"$tmp/restart.out" 2>&1 &&
   [ "$(metrics_of cn 1)" = "$cn1" ] && scrape "$cn1" >"$tmp/cn1-back.txt" 2>/dev/null &&
   [ "$(value "$tmp/cn1-back.txt" pond_serving)" = "1" ]; then
  ok "CN 1, killed and restarted, serves its metrics at $cn1 again"
else
  fail "CN 1's restart"; cat "$tmp/restart.out" "$tmp/cn1-back.txt" 2>/dev/null
fi
# CN 0 applies the epoch that lets CN 1 back in within a period of its own: looked for a while.
seen=0
for _ in $(seq 50); do
  scrape "$cn0" >"$tmp/cn0-seen.txt" 2>/dev/null
  if [ "$(value "$tmp/cn0-seen.txt" 'pond_failures_declared_total{node="cn"}')" = "1" ] &&
     [ "$(value "$tmp/cn0-seen.txt" pond_cns_rejoined_total)" = "1" ] &&
     [ "$(value "$tmp/cn0-seen.txt" pond_recoveries_total)" = "1" ]; then
    seen=1; break
  fi
  sleep 0.2
done
if [ "$seen" -eq 1 ]; then
  ok "CN 0 counted CN 1's failure, recovery and return"
else
  fail "CN 0's recovery counts"; grep -E "failures|recover|rejoin|epoch" "$tmp/cn0-seen.txt"
fi

# Config files: a file sets the flags, the command line wins over it.
cat >"$tmp/mn.toml" <<EOF
coord = "$coord"
cluster = "nosuch"
id = 0
wait = 0.2
certs-dir = "$d/certs"
EOF
"$pond" mn --config "$tmp/mn.toml" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "/pond/nosuch/spec after 0.2 s" "$tmp/err" &&
  ok "pond mn takes --coord, --cluster, --wait from its config file" ||
  fail "config file: exit $rc, $(cat "$tmp/err")"
"$pond" mn --config "$tmp/mn.toml" --cluster other >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "/pond/other/spec" "$tmp/err" &&
  ok "a flag on the command line wins over the file" ||
  fail "command line over config file: exit $rc, $(cat "$tmp/err")"
printf 'coord = "%s"\nid = 0\nmetrics = "127.0.0.1:%s"\ninsecure = true\n' "$coord" "${mn0##*:}" >"$tmp/taken.toml"
"$pond" mn --config "$tmp/taken.toml" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "cannot serve metrics" "$tmp/err" &&
  ok "a metrics port already taken: one line, exit 1" ||
  fail "metrics port taken: exit $rc, $(cat "$tmp/err")"

# Metrics closed to strangers (docs/deploy.md "Metrics"): HTTPS with the cluster's node
# certificate and a token, from the command line. The MN waits for a spec that never comes, and
# serves its metrics meanwhile.
python3 -c 'import secrets; print(secrets.token_hex(24))' >"$tmp/metrics.token"
"$pond" mn --coord "$coord" --cluster nosuch --id 0 --wait 30 --certs-dir "$d/certs" \
  --metrics 127.0.0.1:0 --metrics-tls --metrics-token-file "$tmp/metrics.token" >"$tmp/tls-mn.log" 2>&1 &
tls_mn=$!
for _ in $(seq 100); do grep -q "metrics at https://" "$tmp/tls-mn.log" && break; sleep 0.1; done
tls_addr=$(sed -n 's|.*metrics at https://\([^/]*\)/metrics.*|\1|p' "$tmp/tls-mn.log")
python3 - "$tls_addr" "$d/certs/ca.crt" "$tmp/metrics.token" <<'PY' &&
import base64, ssl, sys, urllib.error, urllib.request
addr, ca, token = sys.argv[1], sys.argv[2], open(sys.argv[3]).read().strip()
ctx = ssl.create_default_context(cafile=ca)
def get(password):
    r = urllib.request.Request("https://%s/metrics" % addr)
    if password is not None:
        r.add_header("Authorization", "Basic " + base64.b64encode(("prometheus:" + password).encode()).decode())
    try:
        with urllib.request.urlopen(r, timeout=10, context=ctx) as a:
            return a.status, a.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
status, body = get(token)
assert status == 200 and 'pond_info{role="mn",id="0",cluster="nosuch"} 1' in body, (status, body[:200])
assert get(None)[0] == 401 and get("x" * len(token))[0] == 401
PY
  ok "metrics over HTTPS: the token's scraper reads them, no token or a wrong one gets 401" ||
  { fail "metrics over HTTPS with a token"; cat "$tmp/tls-mn.log"; }
kill -TERM "$tls_mn" 2>/dev/null
wait "$tls_mn" 2>/dev/null
"$pond" mn --coord "$coord" --id 0 --insecure --metrics 127.0.0.1:0 --metrics-tls >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "metrics-tls serves node.crt and node.key: give --certs-dir" "$tmp/err" &&
  ok "--metrics-tls without a certs directory: exit 2, says why" ||
  fail "--metrics-tls without certs: exit $rc, $(cat "$tmp/err")"

"$pond" down --dir "$d" >"$tmp/down.out" 2>&1 && ok "pond down" || { fail "pond down"; cat "$tmp/down.out"; }
python3 - "$cn0" "$mn0" <<'PY' && ok "no metrics served after pond down" || fail "metrics still served after pond down"
import socket, sys
for a in sys.argv[1:]:
    host, port = a.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        sys.exit(1)
    except OSError:
        pass
PY

[ "$failures" -eq 0 ] && echo "all metrics checks passed" || echo "$failures metrics check(s) failed"
exit $((failures > 0))
