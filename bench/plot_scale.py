#!/usr/bin/python3
"""Scale-out of a simulated cluster, as PNG: throughput against CNs, one line per protocol.

Reads the files `pond sim smallbank|tatp --cns C ... --json FILE` writes (one run each, any
order) and draws each protocol's throughput over its runs' CN counts on log-log axes, beside the
line a cluster that scaled linearly from that protocol's smallest run would follow. Uses
Debian's matplotlib (python3-matplotlib), without a display. Bad input: one line on stderr, exit 2.
"""

import os
import sys

from plot_common import EXIT_BAD_INPUT, BadInput, Parser, load_json


def point(path):
    """(protocol, cns, txn/s) of one run's result file."""
    d = load_json(path)
    try:
        return d["protocol"], int(d["settings"]["cns"]), float(d["result"]["txn_per_sec"])
    except (KeyError, TypeError, ValueError):
        raise BadInput(f"{path}: not a Pond run result (protocol, settings.cns, result.txn_per_sec)")


def main():
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("json", nargs="+", help="result files of `pond sim ... --json`")
    p.add_argument("-o", "--output", required=True, help="the PNG to write")
    p.add_argument("--title", default="Scale-out", help="the figure's title")
    args = p.parse_args()
    try:
        points = [point(f) for f in args.json]
    except BadInput as e:
        print(f"{os.path.basename(sys.argv[0])}: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for protocol in sorted({q[0] for q in points}):
        runs = sorted((c, t) for (name, c, t) in points if name == protocol)
        cns = [c for c, _ in runs]
        tps = [t / 1e6 for _, t in runs]
        line = ax.plot(cns, tps, marker="o", label=protocol)[0]
        base_c, base_t = cns[0], tps[0]
        ax.plot(cns, [base_t * c / base_c for c in cns], linestyle=":",
                color=line.get_color(), label=f"{protocol}, linear from {base_c} CNs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("CNs (MNs = CNs / 3)")
    ax.set_ylabel("committed M txn/s (virtual)")
    ax.set_title(args.title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)


if __name__ == "__main__":
    main()
