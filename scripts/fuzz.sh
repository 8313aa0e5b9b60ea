#!/usr/bin/env bash
# Runs Pond's fuzz targets (fuzz/, docs/checker.md "Fuzzing") over their corpora for a fixed
# budget each. `make fuzz` builds them (build/fuzz, clang) and calls this with FUZZ_SECONDS.
#
#   scripts/fuzz.sh [--seconds N] [--grow] [TARGET...]
#     --seconds N  fuzzing time per target (default 30)
#     --grow       merge the inputs that found new coverage into fuzz/corpus/TARGET (minimized),
#                  for a long run whose corpus is to be kept
#     TARGET...    some targets only (default: every one built)
#
# A crash, a sanitizer report or an input slower than 10 s fails the run: the input is kept
# in build/fuzz/artifacts/ and the line to replay it is printed. New inputs otherwise go to a
# scratch directory, so the repository's corpus changes only with --grow.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=30
grow=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ && "$2" -gt 0 ]] || { echo "fuzz.sh: --seconds takes a positive whole number" >&2; exit 2; }
      seconds="$2"; shift 2 ;;
    --grow) grow=1; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
bin=build/fuzz/fuzz
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$bin"/*_fuzz; do [[ -x "$f" ]] && targets+=("$(basename "$f" _fuzz)"); done
  [[ ${#targets[@]} -gt 0 ]] || { echo "fuzz.sh: no targets in $bin (make fuzz builds them)" >&2; exit 2; }
fi
for t in "${targets[@]}"; do
  [[ -x "$bin/${t}_fuzz" ]] || { echo "fuzz.sh: no $bin/${t}_fuzz (make fuzz builds the targets)" >&2; exit 2; }
done
mkdir -p build/fuzz/artifacts
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
for t in "${targets[@]}"; do
  mkdir -p "$scratch/$t" "fuzz/corpus/$t"
  log="$scratch/$t.log"
  echo "fuzz: $t for ${seconds}s ($(ls "fuzz/corpus/$t" | wc -l) inputs in its corpus)"
  # -timeout: an input running longer is a hang; -rss_limit_mb: a parser must not balloon.
  if ! "$bin/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build/fuzz/artifacts/$t-" \
      "$scratch/$t" "fuzz/corpus/$t" > "$log" 2>&1; then
    failed=1
    # The report, the first frames of its stack and the input's first bytes, so that a CI log
    # alone says what failed.
    grep -E "ERROR|SUMMARY|Test unit written|deadly signal|timeout|^ *#[0-9]+ |^0x|^Base64" "$log" \
      | grep -vE "in (fuzzer::|__sanitizer|__asan|__ubsan|__interceptor|__libc_start|_start)" \
      | head -40 >&2 || true
    echo "fuzz: $t FAILED; replay with: $bin/${t}_fuzz build/fuzz/artifacts/$t-<the file named above>" >&2
    continue
  fi
  runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" || echo "?")
  cov=$(grep -oE "cov: [0-9]+" "$log" | tail -1 | grep -oE "[0-9]+" || echo "?")
  echo "fuzz: $t ok: $runs inputs run, $cov coverage points, $(ls "$scratch/$t" | wc -l) new inputs"
  if [[ $grow -eq 1 ]]; then
    "$bin/${t}_fuzz" -merge=1 "fuzz/corpus/$t" "$scratch/$t" > "$scratch/$t.merge" 2>&1
    echo "fuzz: $t corpus now $(ls "fuzz/corpus/$t" | wc -l) inputs"
  fi
done
exit $failed
