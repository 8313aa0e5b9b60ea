# What the shell tests of local clusters share (sourced by daemons_test.sh, kill_test.sh and
# metrics_test.sh; needs $pond set): a temp dir that goes away with every cluster started under
# it, ok/FAIL lines with a count, and how to find and watch the daemons.

tmp=$(mktemp -d)
dirs=()  # the --dir of every cluster started: each is stopped at exit
failures=0
cleanup() {
  for d in "${dirs[@]}"; do
    [ -f "$d/cluster.json" ] && "$pond" down --dir "$d" --grace 2 >/dev/null 2>&1
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
ok() { echo "ok   $1"; }

# Every pid in a cluster file.
pids_of() { grep -o '"pid": [0-9]*' "$1" | grep -o '[0-9]*$'; }
# The pid of ROLE ID in a cluster file.
pid_of() {
  python3 -c "import json,sys; print([p['pid'] for p in json.load(open(sys.argv[1]))['processes']
    if p['role'] == sys.argv[2] and p['id'] == int(sys.argv[3])][0])" "$1" "$2" "$3"
}
# Running, not a zombie: a daemon whose starter exited is init's child, and an init that does not
# reap at once (a container's) leaves it a zombie for a while after it exits.
alive() {
  [ -r "/proc/$1/stat" ] || return 1
  [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != "Z" ]
}
# Waits up to $3 seconds for file $1 to hold a line matching $2.
await_line() {
  for _ in $(seq 1 $(($3 * 10))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
