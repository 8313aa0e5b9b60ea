# What the peer scripts share, sourced after each sets `prog`: one-line errors (exit 2 for bad
# flags, 1 for a failed run), progress on stderr, and the CPU time of the whole machine.
bad_usage() {
  echo "$prog: $*" >&2
  exit 2
}
fail() {
  echo "$prog: $*" >&2
  exit 1
}
progress() { echo "$prog: $*" >&2; }
# busy_ticks: the CPU time every process on the machine has had since boot (/proc/stat: user,
# nice, system, irq, softirq, steal), in clock ticks of tick_hz a second; its change over a run
# is what every process — servers, clients and the kernel's work for them — cost.
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
tick_hz=$(getconf CLK_TCK)
