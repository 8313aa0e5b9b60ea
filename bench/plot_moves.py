#!/usr/bin/python3
"""Throughput over time with shard moves, from `pond sim ... --moving-hotspot-ms T --reshard P --json FILE`, as PNG.

Each file is one run: its commits in every millisecond of virtual time (result.committed_per_ms)
become one line, in thousands of transactions per second, with a short tick on the line's colour
at each shard move it made (result.resharding.made_ms). Grey lines mark where the hot set jumped
(every settings.moving_hotspot_ms, if the run had one). Several files draw several lines on one
figure, labelled with their --reshard policy unless --label names them. The last millisecond,
which the run's end cuts short, is left out.

Uses Debian's matplotlib (python3-matplotlib), without a display. Bad input: one line on
stderr, exit 2.
"""

import sys

from plot_common import BadInput, load_json, runs_over_time


def run_of(path):
    data = load_json(path)
    try:
        result = data["result"]
        per_ms = [int(x) for x in result["committed_per_ms"]]
        moving = result.get("resharding")
        moves = [float(x) for x in moving["made_ms"]] if moving is not None else []
        jump_ms = float(data.get("settings", {}).get("moving_hotspot_ms", 0))
    except (KeyError, TypeError, ValueError) as e:
        raise BadInput(f"{path}: not a Pond run's JSON ({e})")
    if len(per_ms) < 2:
        raise BadInput(f"{path}: the run is shorter than 2 ms")
    return {"per_ms": per_ms[:-1], "moves": moves, "jump_ms": jump_ms,
            "policy": moving.get("policy", "load") if moving is not None else "none",
            "protocol": data.get("protocol", "?"), "bench": data.get("bench", "?")}


def main():
    args, runs = runs_over_time(__doc__, "result files (--json) of runs", "its resharding", run_of)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    top = max(max(r["per_ms"]) for r in runs)
    longest = max(len(r["per_ms"]) for r in runs)
    jump_ms = max(r["jump_ms"] for r in runs)
    if jump_ms > 0:
        at = jump_ms
        while at < longest:
            ax.axvline(at, color="grey", linewidth=1.0, alpha=0.6)
            at += jump_ms
    for i, run in enumerate(runs):
        label = args.label[i] if args.label else f"resharding {run['policy']}"
        if run["moves"]:
            label += f" ({len(run['moves'])} moves)"
        xs = [ms + 0.5 for ms in range(len(run["per_ms"]))]
        line, = ax.plot(xs, run["per_ms"], label=label, linewidth=1.5)
        # A move's tick stands above the curves, one row per run, so that runs do not hide
        # each other's.
        y = top * (1.04 + 0.04 * i)
        for ms in run["moves"]:
            ax.plot([ms, ms], [y - top * 0.015, y + top * 0.015], color=line.get_color(),
                    linewidth=1.5)
    ax.set_xlabel("virtual time (ms); grey: the hot set jumps, ticks above: a shard move made")
    ax.set_ylabel("throughput (K txn/s, per 1 ms)")
    ax.set_ylim(bottom=0, top=top * (1.1 + 0.04 * len(runs)))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(args.title or f"{runs[0]['bench']}: throughput with a moving hot set")
    fig.tight_layout()
    fig.savefig(args.output)
    moves = sum(len(r["moves"]) for r in runs)
    print(f"plotted {len(runs)} run(s), {sum(len(r['per_ms']) for r in runs)} millisecond(s), "
          f"{moves} move(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
