#!/usr/bin/env bash
# The README and docs/ as a reader finds them: every docs/ path they name exists, the README says
# how to build and test, and no file has grown out of shape (an edit script once interleaved a
# paragraph into every character of the README, and only a reader would have noticed).
# Usage: docs_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
fail() { echo "docs_test: $*" >&2; exit 1; }

for cmd in "make run" "make test"; do
  grep -q "$cmd" README.md || fail "README.md does not say '$cmd'"
done
for f in README.md docs/*.md; do
  lines=$(wc -l <"$f")
  [ "$lines" -le 1500 ] || fail "$f has $lines lines (more than 1500: split it, or it was mangled)"
  longest=$(awk '{ if (length > m) m = length } END { print m + 0 }' "$f")
  [ "$longest" -le 1000 ] || fail "$f has a line of $longest characters"
done
# Paths like docs/perf/x_{a,b}.txt are brace patterns: only the part before the brace is a name.
missing=""
for p in $(grep -oh 'docs/[A-Za-z0-9_./-]*' README.md docs/*.md | sort -u); do
  case "$p" in *_ | */ | *. | *-) continue ;; esac
  p=${p%.}
  [ -e "$p" ] || missing="$missing $p"
done
[ -z "$missing" ] || fail "named but missing:$missing"
echo "docs_test: ok"
