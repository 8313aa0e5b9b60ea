#!/usr/bin/env bash
# bench/plot.py end to end: a tiny simulated SmallBank sweep of two protocols, written by
# `pond sim compare --json`, becomes a PNG with one line per protocol; bad input is refused
# with one line and exit 2. Usage: plot_test.sh PYTHON POND
set -euo pipefail
python=$1
pond=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "plot_test: $*" >&2; exit 1; }

"$pond" sim compare --workload smallbank --protocols lotus,motor --sweep coros=1,2 \
  --accounts 2000 --cns 2 --workers 1 --virtual-seconds 0.0005 --no-check \
  --json "$tmp/sweep.json" >"$tmp/pond.out" 2>&1 || fail "pond sim compare failed: $(tail -3 "$tmp/pond.out")"

"$python" "$here/plot.py" "$tmp/sweep.json" -o "$tmp/curve.png" >"$tmp/plot.out" ||
  fail "plot.py failed"
grep -q "plotted 2 line(s) (lotus, motor), 4 point(s)" "$tmp/plot.out" ||
  fail "unexpected summary: $(cat "$tmp/plot.out")"
[ -s "$tmp/curve.png" ] || fail "no PNG written"
# A real PNG, of the size asked for (11 x 4.2 in at 110 dpi), not an empty canvas: more than a
# handful of distinct colours.
"$python" - "$tmp/curve.png" <<'PY' || fail "the PNG is not a drawn figure"
import sys
import matplotlib.image as mpimg
img = mpimg.imread(sys.argv[1])
h, w = img.shape[:2]
assert (w, h) == (1210, 462), (w, h)
colours = {tuple(px) for px in img.reshape(-1, img.shape[2])[::7].tolist()}
assert len(colours) > 20, len(colours)
PY

# Bad input: one line on stderr, exit 2, no PNG.
echo '{"rows": [{"protocol": "lotus"}]}' >"$tmp/bad.json"
set +e
"$python" "$here/plot.py" "$tmp/bad.json" -o "$tmp/bad.png" 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad rows: exit $rc, expected 2"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "bad rows: stderr is not one line: $(cat "$tmp/err")"
[ ! -e "$tmp/bad.png" ] || fail "bad rows: a PNG was written"
set +e
"$python" "$here/plot.py" "$tmp/missing.json" -o "$tmp/x.png" 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "missing file: exit $rc"
echo "plot_test: ok"
