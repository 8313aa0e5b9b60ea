#!/usr/bin/python3
"""Throughput-latency curves from Pond's JSON results, as PNG.

Reads what `pond bench|sim compare|smallbank|tatp|kvs --json FILE` writes — most usefully with
`--sweep coros=...`, one row per protocol and concurrency point — and draws one line per
protocol (per workload and protocol when the files hold several workloads): P50 latency against
throughput on the left, P99 on the right, as Lotus Fig. 13 does. Points are joined in the order
the run made them, so a concurrency sweep reads left to right as load grows.

Uses Debian's matplotlib (python3-matplotlib), without a display. Bad input: one line on
stderr, exit 2.
"""

import sys

from plot_common import EXIT_BAD_INPUT, BadInput, Parser, load_json


def rows_of(path):
    """The result rows in one file: a compare result's rows, a sweep's list, or one result."""
    data = load_json(path)
    if isinstance(data, dict) and "rows" in data:
        rows = data["rows"]
    elif isinstance(data, list):
        rows = data
    elif isinstance(data, dict) and "result" in data:
        rows = [data]
    else:
        raise BadInput(f"{path}: not a Pond result (no 'rows', no 'result')")
    out = []
    for i, row in enumerate(rows):
        try:
            result = row["result"]
            point = {
                "workload": row["bench"],
                "protocol": row["protocol"],
                "transport": row.get("transport", "local"),
                "build": row.get("build_type", "?"),
                "tput": float(result["txn_per_sec"]),
                "p50_us": float(result["latency_ns"]["p50"]) / 1e3,
                "p99_us": float(result["latency_ns"]["p99"]) / 1e3,
            }
        except (KeyError, TypeError, ValueError) as e:
            raise BadInput(f"{path}: row {i + 1} lacks a field the plot needs ({e})")
        if point["tput"] < 0 or point["p50_us"] < 0 or point["p99_us"] < 0:
            raise BadInput(f"{path}: row {i + 1} has a negative throughput or latency")
        out.append(point)
    if not out:
        raise BadInput(f"{path}: no rows")
    return out


def throughput_scale(points):
    """A unit that keeps the axis numbers short."""
    top = max(p["tput"] for p in points)
    if top >= 1e6:
        return 1e6, "M txn/s"
    if top >= 1e3:
        return 1e3, "K txn/s"
    return 1.0, "txn/s"


def main(argv):
    parser = Parser(
        prog="bench/plot.py",
        description="Draw throughput-latency curves (P50 and P99 against throughput, one line "
        "per protocol) from the JSON of `pond bench|sim ... --json`.",
    )
    parser.add_argument("results", nargs="+", help="JSON result files")
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("--title", help="figure title (default: workloads and transport)")
    args = parser.parse_args(argv)
    if not args.output.endswith(".png"):
        print(f"plot.py: --output must name a .png file, got '{args.output}'", file=sys.stderr)
        return EXIT_BAD_INPUT

    try:
        points = [p for path in args.results for p in rows_of(path)]
    except BadInput as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT

    import matplotlib

    matplotlib.use("Agg")  # no display: the PNG is the product
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(p["workload"] for p in points))
    transports = sorted({p["transport"] for p in points})
    builds = sorted({p["build"] for p in points})
    lines = {}  # (workload, protocol) -> points, in run order
    for p in points:
        lines.setdefault((p["workload"], p["protocol"]), []).append(p)

    scale, unit = throughput_scale(points)
    time_word = ", virtual time" if transports == ["sim"] else ""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, name in ((axes[0], "p50_us", "P50"), (axes[1], "p99_us", "P99")):
        for (workload, protocol), pts in lines.items():
            label = protocol if len(workloads) == 1 else f"{workload} {protocol}"
            ax.plot([p["tput"] / scale for p in pts], [p[key] for p in pts], marker="o",
                    label=label)
        ax.set_xlabel(f"throughput ({unit}{time_word})")
        ax.set_ylabel(f"{name} latency (µs)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend()
    title = args.title or "{}: latency against throughput, transport {}, build {}".format(
        ", ".join(workloads), "/".join(transports), "/".join(builds))
    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=110)
    except OSError as e:
        print(f"plot.py: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    names = ", ".join(p if len(workloads) == 1 else f"{w} {p}" for w, p in lines)
    print(f"plotted {len(lines)} line(s) ({names}), {len(points)} point(s), to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
