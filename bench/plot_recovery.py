#!/usr/bin/python3
"""Throughput around a crash or partition, from `pond sim smallbank|tatp|kvs --faults ... --json FILE`, as PNG.

Each file is one run with a fault schedule: its commits in every millisecond of virtual time
(result.faults.committed_per_ms) become one line, in thousands of transactions per second, with
a mark at each crash and where its shards were served again. Several files draw several lines
on one figure (say, a CN crash and an MN crash), labelled with their fault specs unless --label
names them. The last millisecond, which the run's end cuts short, is left out.

Uses Debian's matplotlib (python3-matplotlib), without a display. Bad input: one line on
stderr, exit 2.
"""

import sys

from plot_common import BadInput, load_json, runs_over_time


def run_of(path):
    data = load_json(path)
    try:
        faults = data["result"]["faults"]
        per_ms = [int(x) for x in faults["committed_per_ms"]]
        # A CN is back in service when its shards are; an MN when every CN uses the replicas left.
        failures = [(float(f["crash_ms"]), float(f["open_ms"])) for f in faults["failures"]]
        failures += [(float(f["crash_ms"]), float(f["down_ms"]))
                     for f in faults.get("mn_failures", [])]
        # A restarted CN is whole again when its shards are back home, a restarted MN when it is
        # read again with every replica copied (0: not restarted, or not that far).
        returned = [float(f.get("returned_ms", 0)) for f in faults["failures"]]
        returned += [float(f.get("readable_ms", 0)) for f in faults.get("mn_failures", [])]
        returned = [ms for ms in returned if ms > 0]
        # A partition's cut costs throughput from its start; its fence (if any) is a failure.
        cuts = [float(x["cut_ms"]) for x in faults.get("partitions", [])]
        spec = str(faults["spec"])
        recovery = faults.get("recovery_ms")
    except (KeyError, TypeError, ValueError) as e:
        raise BadInput(f"{path}: not a Pond run with --faults ({e})")
    if len(per_ms) < 2:
        raise BadInput(f"{path}: the run is shorter than 2 ms")
    return {"per_ms": per_ms[:-1], "failures": failures, "returned": returned, "cuts": cuts,
            "spec": spec,
            "recovery": recovery,
            "protocol": data.get("protocol", "?"), "bench": data.get("bench", "?")}


def main():
    args, runs = runs_over_time(__doc__, "result files of runs with --faults", "the fault spec", run_of)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    for i, run in enumerate(runs):
        label = args.label[i] if args.label else f"{run['protocol']}: {run['spec']}"
        if run["recovery"] is not None:
            label += f" (recovery_ms {run['recovery']:.0f})"
        xs = [ms + 0.5 for ms in range(len(run["per_ms"]))]
        ys = [n for n in run["per_ms"]]  # commits in a millisecond = thousands per second
        line, = ax.plot(xs, ys, label=label, linewidth=1.5)
        for crash_ms, open_ms in run["failures"]:
            ax.axvline(crash_ms, color=line.get_color(), linestyle="--", linewidth=0.8)
            ax.axvline(open_ms, color=line.get_color(), linestyle=":", linewidth=0.8)
        for cut_ms in run["cuts"]:
            ax.axvline(cut_ms, color=line.get_color(), linestyle=(0, (1, 3)), linewidth=1.2)
        for returned_ms in run["returned"]:
            ax.axvline(returned_ms, color=line.get_color(), linestyle="-.", linewidth=0.8)
    ax.set_xlabel("virtual time (ms); dashed: crash (or a cut-off CN fencing itself), sparse "
                  "dots: a partition's cut,\ndotted: served again (a CN's shards by survivors, an "
                  "MN's data by its replicas left),\ndash-dot: a restarted CN's shards back home, "
                  "a restarted MN read again")
    ax.set_ylabel("throughput (K txn/s, per 1 ms)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(args.title or f"{runs[0]['bench']}: throughput around failures")
    fig.tight_layout()
    fig.savefig(args.output)
    print(f"plotted {len(runs)} run(s), {sum(len(r['per_ms']) for r in runs)} millisecond(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
