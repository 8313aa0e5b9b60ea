#!/usr/bin/env bash
# Pond on several hosts, made on this machine: each host is a Linux network namespace with one
# interface, eth0, on a bridge of its own; host H has the address 10.77.0.(10+H), which exists only
# inside the namespaces. Host 0 runs ZooKeeper; every host runs one `pond mn` and one `pond cn`,
# over UCX's TCP transport on that interface (with --vary-ifnames host H's is ethH, and its
# daemons are told so with --ucx-net-devices, the spec saying eth0). Traffic of a host can then be cut, healed, or dropped in part,
# as a switch port going down or a lossy link would (docs/deploy.md "Several hosts").
#
#   hosts.sh up DIR [--hosts N] [--lease-ms MS] [--replication R] [--pond PATH] [--vary-ifnames]
#                   [-- CN_FLAGS...]
#   hosts.sh down DIR           stop every process, remove the namespaces and the bridge
#   hosts.sh cut DIR H          host H's link goes down: nothing in or out
#   hosts.sh heal DIR H         it comes back (and its drop rule, if any, goes)
#   hosts.sh drop DIR H PCT     PCT percent of host H's packets, either way, are lost
#   hosts.sh block DIR H G      nothing passes between hosts H and G (both stay up otherwise)
#   hosts.sh unblock DIR H G    it passes again
#   hosts.sh delay DIR H MS     host H's packets wait MS ms (needs the kernel's netem)
#   hosts.sh exec DIR H CMD...  run CMD inside host H
#   hosts.sh pid DIR ROLE H     the pid of `pond ROLE` on host H (ROLE: mn, cn, zookeeper)
#   hosts.sh sweep              remove what runs of this script left behind whose owner is gone
#
# `up` prints each CN's client address; the CNs serve TLS with DIR/certs (`pond client --certs-dir
# DIR/certs`). Every process's log is DIR/ROLE-H.log; DIR/hosts.env
# says what `up` made, and `down` (or `sweep`) removes all of it whatever state it is in. Needs
# root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and Debian's iproute2, nftables and zookeeper.
set -euo pipefail

die() { echo "hosts.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

subnet=10.77.0
addr_of() { echo "$subnet.$((10 + $1))"; }
zk_port=2181

# The names of what one run makes carry the pid of the `up` that made it, so that two runs can
# coexist, and `sweep` can tell whose owner is gone: namespaces pond<PID>h<H>, the bridge pb<PID>,
# host H's root-side link pv<PID>h<H> (interface names have at most 15 characters).
ns_of() { echo "pond${id}h$1"; }
veth_of() { echo "pv${id}h$1"; }
ifname_of() { sed -n "s/^ifname_$1=//p" "$dir/hosts.env"; }

need_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces); run it as root or under sudo"
  command -v ip >/dev/null || die "no ip command (Debian's iproute2)"
}

load() {
  [ -f "$1/hosts.env" ] || die "no hosts in $1 (no $1/hosts.env): run hosts.sh up $1 first"
  # shellcheck disable=SC1091
  source "$1/hosts.env"
  dir=$1
}

host_arg() {
  [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -lt "$hosts" ] || die "no host $1 (the hosts are 0 to $((hosts - 1)))"
}

# Waits up to $3 seconds for file $1 to hold a line matching $2.
await_line() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# Starts `$@` in host $1's namespace in a session of its own, output to $2; records its pid as
# ROLE_H ($3) in hosts.env. Without job control bash starts it in no group of its own, so setsid
# need not fork: the pid recorded is the process's.
start_in() {
  local h=$1 log=$2 key=$3
  shift 3
  ip netns exec "$(ns_of "$h")" setsid "$@" >"$log" 2>&1 </dev/null &
  echo "pid_$key=$!" >>"$dir/hosts.env"
}

remove_run() {  # $1: the run's id
  local id=$1 ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^pond${id}h[0-9]*$" || true); do
    # Whatever still runs inside goes with it: a daemon left in a deleted namespace would hold
    # ports and memory with no network at all.
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "pb${id}" 2>/dev/null || true
}

cmd_up() {
  dir=$1
  shift
  hosts=3 lease_ms=1000 replication=2 pond="" vary=0
  cn_flags=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --hosts) hosts=$2; shift 2 ;;
      --lease-ms) lease_ms=$2; shift 2 ;;
      --replication) replication=$2; shift 2 ;;
      --pond) pond=$2; shift 2 ;;
      --vary-ifnames) vary=1; shift ;;
      --) shift; cn_flags=("$@"); break ;;
      *) die "up: unknown flag $1 (hosts.sh --help)" ;;
    esac
  done
  [[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 2 ] && [ "$hosts" -le 16 ] || die "--hosts: 2 to 16"
  [ -n "$pond" ] || pond=$(command -v pond || true)
  [ -x "$pond" ] || die "no pond binary (--pond PATH)"
  pond=$(realpath "$pond")
  need_root
  [ -x /usr/share/zookeeper/bin/zkServer.sh ] || die "no ZooKeeper (scripts/install-deps.sh)"
  command -v nft >/dev/null || die "no nft command (Debian's nftables)"
  mkdir -p "$dir"
  dir=$(realpath "$dir")
  [ -f "$dir/hosts.env" ] && die "$dir already holds hosts (hosts.sh down $dir first)"
  id=$$
  cat >"$dir/hosts.env" <<EOF
id=$id
hosts=$hosts
pond=$pond
coord=$(addr_of 0):$zk_port
EOF
  # A failure from here on removes what was made.
  trap 'echo "hosts.sh: up failed; removing what it made" >&2; cmd_down "$dir" >/dev/null 2>&1' ERR

  ip link add "pb$id" type bridge
  ip link set "pb$id" up
  for ((h = 0; h < hosts; h++)); do
    local ns veth
    ns=$(ns_of "$h") veth=$(veth_of "$h")
    ip netns add "$ns"
    local ifname=eth0
    [ "$vary" -eq 0 ] || ifname="eth$h"
    echo "ifname_$h=$ifname" >>"$dir/hosts.env"
    ip link add "$veth" type veth peer name "$ifname" netns "$ns"
    ip link set "$veth" master "pb$id" up
    ip -n "$ns" addr add "$(addr_of "$h")/24" dev "$ifname"
    ip -n "$ns" link set "$ifname" up
    ip -n "$ns" link set lo up
  done

  # ZooKeeper on host 0: its data under DIR, reached at 10.77.0.10:2181.
  mkdir -p "$dir/zookeeper/data"
  cat >"$dir/zookeeper/zoo.cfg" <<EOF
tickTime=500
dataDir=$dir/zookeeper/data
clientPort=$zk_port
clientPortAddress=$(addr_of 0)
admin.enableServer=false
maxClientCnxns=200
EOF
  start_in 0 "$dir/zookeeper-0.log" zookeeper_0 \
    env SERVER_JVMFLAGS="-Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
    ZOO_LOG_DIR="$dir/zookeeper" /usr/share/zookeeper/bin/zkServer.sh start-foreground \
    "$dir/zookeeper/zoo.cfg"
  local i
  for ((i = 0; i < 300; i++)); do
    ip netns exec "$(ns_of 0)" bash -c "exec 3<>/dev/tcp/$(addr_of 0)/$zk_port" 2>/dev/null && break
    sleep 0.1
  done
  [ "$i" -lt 300 ] || { tail -n 3 "$dir/zookeeper-0.log" >&2; false; }

  # The cluster's security material (docs/deploy.md "Security"): one CA, a node certificate good
  # for every host's address, which is what clients dial, and the secret every daemon holds.
  local sans=()
  for ((h = 0; h < hosts; h++)); do sans+=(--host "$(addr_of "$h")"); done
  "$pond" certs --certs-dir "$dir/certs" --host localhost --host 127.0.0.1 "${sans[@]}" >/dev/null
  local secret
  secret=$(cat "$dir/certs/cluster.secret")

  # The spec, as docs/deploy.md says to write it by hand: guarded by the secret.
  local spec
  spec=$(printf '{"mns":%d,"cns":%d,"replication":%d,"region_mib":64,"ucx_tls":"tcp","ucx_net_devices":"eth0","lease_ms":%d}' \
    "$hosts" "$hosts" "$replication" "$lease_ms")
  # ZooKeeper listens before it serves, and zkCli then fails its create with ConnectionLoss
  # (exit 1), more so on a loaded machine: try again, as a create that landed says "exists".
  for ((i = 0; i < 10; i++)); do
    printf 'addauth digest pond:%s\ncreate /pond "" world:anyone:cr,auth::cdrwa\ncreate /pond/pond "" auth::cdrwa,world:anyone:r\ncreate /pond/pond/spec %s auth::cdrwa,world:anyone:r\nquit\n' \
      "$secret" "'$spec'" |
      ip netns exec "$(ns_of 0)" env JVMFLAGS=-Xmx64m /usr/share/zookeeper/bin/zkCli.sh \
        -server "$(addr_of 0):$zk_port" >"$dir/spec.out" 2>&1 || true
    grep -q "Created /pond/pond/spec\|Node already exists: /pond/pond/spec" "$dir/spec.out" && break
    sleep 1
  done
  [ "$i" -lt 10 ] || { tail -n 5 "$dir/spec.out" >&2; false; }

  source "$dir/hosts.env"
  for ((h = 0; h < hosts; h++)); do
    start_in "$h" "$dir/mn-$h.log" "mn_$h" "$pond" mn --coord "$coord" --id "$h" \
      --metrics "$(addr_of "$h"):9400" --ucx-net-devices "$(ifname_of "$h")" \
      --certs-dir "$dir/certs"
  done
  for ((h = 0; h < hosts; h++)); do
    await_line "$dir/mn-$h.log" "serving" 30 || { tail -n 3 "$dir/mn-$h.log" >&2; false; }
  done
  for ((h = 0; h < hosts; h++)); do
    start_in "$h" "$dir/cn-$h.log" "cn_$h" "$pond" cn --coord "$coord" --id "$h" --wait 60 \
      --listen 0.0.0.0:7400 --metrics "$(addr_of "$h"):9401" --certs-dir "$dir/certs" \
      --ucx-net-devices "$(ifname_of "$h")" "${cn_flags[@]}"
    # CN 0 makes the tables; the others open them.
    [ "$h" -gt 0 ] || await_line "$dir/cn-0.log" "made the tables" 60 ||
      { tail -n 3 "$dir/cn-0.log" >&2; false; }
  done
  for ((h = 0; h < hosts; h++)); do
    await_line "$dir/cn-$h.log" "serving; clients at" 60 || { tail -n 3 "$dir/cn-$h.log" >&2; false; }
    echo "host $h: $(addr_of "$h"), client $(addr_of "$h"):7400, metrics cn $(addr_of "$h"):9401 mn $(addr_of "$h"):9400"
  done
  trap - ERR
}

cmd_down() {
  load "$1"
  dir=$1
  local key pid
  # The CNs first, then the MNs, then ZooKeeper, as `pond down` does; SIGKILL after 10 s.
  for role in cn mn zookeeper; do
    local pids=()
    while IFS='=' read -r key pid; do
      [[ "$key" == pid_${role}_* ]] && kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    done <"$dir/hosts.env"
    for ((i = 0; i < 100; i++)); do
      local left=0
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
      [ "$left" -eq 0 ] && break
      sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  done
  remove_run "$id"
  rm -f "$dir/hosts.env"
}

# Host H's link from the bridge's side: down cuts it whole; the drop rule lives inside the host.
cmd_cut() { load "$1"; host_arg "$2"; ip link set "$(veth_of "$2")" down; }
cmd_heal() {
  load "$1"; host_arg "$2"
  ip link set "$(veth_of "$2")" up
  ip netns exec "$(ns_of "$2")" nft delete table inet pondfault 2>/dev/null || true
}
cmd_drop() {
  load "$1"; host_arg "$2"
  [[ "$3" =~ ^[0-9]+$ ]] && [ "$3" -le 100 ] || die "drop: PCT is 0 to 100, not $3"
  local ns
  ns=$(ns_of "$2")
  ip netns exec "$ns" nft delete table inet pondfault 2>/dev/null || true
  local dev
  dir=$1 dev=$(ifname_of "$2")
  ip netns exec "$ns" nft -f - <<EOF
table inet pondfault {
  chain in { type filter hook input priority 0; iifname "$dev" numgen random mod 100 < $3 drop; }
  chain out { type filter hook output priority 0; oifname "$dev" numgen random mod 100 < $3 drop; }
}
EOF
}
# A cut between two hosts only: each drops what comes from the other (its own table, so that
# drop and heal leave it alone).
block_rule() {  # $1: apply (add) or remove; $2, $3: the hosts
  local h g ns
  for pair in "$2 $3" "$3 $2"; do
    read -r h g <<<"$pair"
    ns=$(ns_of "$h")
    if [ "$1" = add ]; then
      ip netns exec "$ns" nft add table inet pondblock 2>/dev/null || true
      ip netns exec "$ns" nft add chain inet pondblock in \
        '{ type filter hook input priority 0; }' 2>/dev/null || true
      ip netns exec "$ns" nft add rule inet pondblock in ip saddr "$(addr_of "$g")" drop
    else
      local handle
      handle=$(ip netns exec "$ns" nft -a list chain inet pondblock in 2>/dev/null |
        sed -n "s/.*ip saddr $(addr_of "$g") drop # handle \([0-9]*\)/\1/p")
      for x in $handle; do ip netns exec "$ns" nft delete rule inet pondblock in handle "$x"; done
    fi
  done
}
cmd_block() {
  load "$1"; host_arg "$2"; host_arg "$3"
  [ "$2" != "$3" ] || die "block: two different hosts"
  block_rule "$4" "$2" "$3"
}

cmd_delay() {
  load "$1"; host_arg "$2"
  [[ "$3" =~ ^[0-9]+$ ]] || die "delay: MS is a number of milliseconds, not $3"
  dir=$1
  ip netns exec "$(ns_of "$2")" tc qdisc replace dev "$(ifname_of "$2")" root netem delay "$3ms" 2>/dev/null ||
    die "delay: this kernel has no netem (sch_netem), so packets cannot be held back here"
}

cmd_pid() {
  load "$1"
  local key="pid_$2_$3" pid
  pid=$(sed -n "s/^$key=//p" "$1/hosts.env" | tail -n 1)
  [ -n "$pid" ] || die "no $2 on host $3"
  echo "$pid"
}

cmd_sweep() {
  need_root
  local ns run
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^pond[0-9]*h[0-9]*$' || true); do
    run=${ns#pond}
    run=${run%h*}
    kill -0 "$run" 2>/dev/null || { echo "hosts.sh: removing run $run"; remove_run "$run"; }
  done
  for br in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | grep '^pb[0-9]*$' || true); do
    kill -0 "${br#pb}" 2>/dev/null || ip link del "$br" 2>/dev/null || true
  done
}

case "${1:-}" in
  up) [ $# -ge 2 ] || die "up DIR [flags]"; cmd_up "${@:2}" ;;
  down) [ $# -eq 2 ] || die "down DIR"; cmd_down "$2" ;;
  cut) [ $# -eq 3 ] || die "cut DIR H"; cmd_cut "$2" "$3" ;;
  heal) [ $# -eq 3 ] || die "heal DIR H"; cmd_heal "$2" "$3" ;;
  drop) [ $# -eq 4 ] || die "drop DIR H PCT"; cmd_drop "$2" "$3" "$4" ;;
  delay) [ $# -eq 4 ] || die "delay DIR H MS"; cmd_delay "$2" "$3" "$4" ;;
  block) [ $# -eq 4 ] || die "block DIR H G"; cmd_block "$2" "$3" "$4" add ;;
  unblock) [ $# -eq 4 ] || die "unblock DIR H G"; cmd_block "$2" "$3" "$4" remove ;;
  exec) [ $# -ge 4 ] || die "exec DIR H CMD..."; load "$2"; host_arg "$3"; ip netns exec "$(ns_of "$3")" "${@:4}" ;;
  pid) [ $# -eq 4 ] || die "pid DIR ROLE H"; cmd_pid "$2" "$3" "$4" ;;
  sweep) cmd_sweep ;;
  -h | --help | help) usage ;;
  "") usage >&2; exit 2 ;;
  *) die "unknown command $1 (hosts.sh --help)" ;;
esac
