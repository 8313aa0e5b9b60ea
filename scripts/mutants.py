#!/usr/bin/env python3
"""Mutation testing: do Pond's tests catch deliberate bugs in its protocol code?

Each mutant in scripts/mutants.txt is one exact text substitution in one source file (its
format is described at the top of that file). This script copies the tracked tree into a
build folder of its own (the checkout is never touched), builds the test programs there once,
then for each mutant in turn: applies it, rebuilds, runs the mutant's tests one after the other
until one fails, and puts the file back. A mutant is *caught* when a test fails (or crashes, or
runs past its time limit); it *survives* when every test passes. A mutant that does not compile
is an error of the list, not a result.

    scripts/mutants.py                      every mutant; the table on stdout
    scripts/mutants.py --only a,b           the mutants named
    scripts/mutants.py --subset ci          the small fixed subset `make test` runs
    scripts/mutants.py --out FILE           also write the table (markdown) to FILE
    scripts/mutants.py --check              only check that every mutant still applies (make test)

Exit status: 0 every mutant run was caught; 1 one survived or did not compile; 2 bad usage.
Seed tests run few seeds (POND_SIM_SEEDS, POND_FAULT_SEEDS below): a mutant must be caught
quickly to count.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The mutants `make test` runs (one of each kind of catch: a real-thread stress test and the
# simulator's jittered seeds), so that this script keeps working.
CI_SUBSET = ["backup-write-unordered", "no-sr-read-lock"]
TEST_TIMEOUT_S = 300
SEED_ENV = {"POND_SIM_SEEDS": "10", "POND_FAULT_SEEDS": "10"}


def parse_mutants(path):
    mutants, block = [], {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines + ["---"], 1):
        if line.startswith("#") or not line.strip():
            continue
        if line.strip() == "---":
            if block:
                missing = {"id", "file", "what", "from", "to", "tests"} - block.keys()
                if missing:
                    sys.exit(f"mutants: {path}:{n}: block lacks {', '.join(sorted(missing))}")
                block["tests"] = block["tests"].split()
                mutants.append(block)
            block = {}
            continue
        key, sep, value = line.partition(": ")
        if not sep or key not in ("id", "file", "what", "from", "to", "tests"):
            sys.exit(f"mutants: {path}:{n}: expected 'KEY: VALUE' (id, file, what, from, to, tests)")
        block[key] = value
    ids = [m["id"] for m in mutants]
    if len(set(ids)) != len(ids):
        sys.exit(f"mutants: {path}: an id is given twice")
    return mutants


def run(cmd, cwd, log, env=None, timeout=None):
    with open(log, "ab") as out:
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
                              timeout=timeout).returncode


def copy_tree(dest):
    """The tracked files of the checkout, as they are now (edits included), into dest."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           stdout=subprocess.PIPE).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        rel = f.decode()
        src, dst = os.path.join(ROOT, rel), os.path.join(dest, rel)
        if not os.path.isfile(src):
            continue  # deleted in the work tree
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.exists(dst) or open(src, "rb").read() != open(dst, "rb").read():
            shutil.copy2(src, dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", default=os.path.join(ROOT, "scripts", "mutants.txt"))
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--subset", choices=["ci"], help="the fixed subset make test runs")
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "mutants"),
                    help="where the copy and its build live (default build/mutants)")
    ap.add_argument("--out", help="also write the markdown table here")
    ap.add_argument("--jobs", default=str(os.cpu_count() or 2))
    ap.add_argument("--check", action="store_true",
                    help="check that every substitution applies to the checkout, and stop")
    a = ap.parse_args()

    mutants = parse_mutants(a.list)
    if a.check:
        # A mutant whose text the code no longer holds tests nothing, and only a full run would
        # notice: make test checks the list against the checkout instead.
        def applies(m):
            with open(os.path.join(ROOT, m["file"]), encoding="utf-8") as f:
                return f.read().count(m["from"]) == 1
        stale = [m for m in mutants if not applies(m)]
        for m in stale:
            print(f"mutants: {m['id']}: its text does not occur exactly once in {m['file']}",
                  file=sys.stderr)
        if not stale:
            print(f"mutants: all {len(mutants)} mutants apply")
        return 1 if stale else 0
    wanted = CI_SUBSET if a.subset == "ci" else (a.only.split(",") if a.only else None)
    if wanted:
        unknown = set(wanted) - {m["id"] for m in mutants}
        if unknown:
            print(f"mutants: unknown mutant(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m["id"] in wanted]

    src, build = os.path.join(a.dir, "src"), os.path.join(a.dir, "build")
    log = os.path.join(a.dir, "log.txt")
    os.makedirs(src, exist_ok=True)
    open(log, "w").close()
    copy_tree(src)
    # Every substitution must apply before anything is built: a stale list fails at once.
    for m in mutants:
        text = open(os.path.join(src, m["file"]), encoding="utf-8").read()
        if text.count(m["from"]) != 1:
            print(f"mutants: {m['id']}: the text to replace occurs {text.count(m['from'])} times "
                  f"in {m['file']}, not once", file=sys.stderr)
            return 1
    targets = sorted({t for m in mutants for t in m["tests"]})
    if not os.path.exists(os.path.join(build, "build.ninja")):
        if run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelAssert"],
               ROOT, log) != 0:
            print(f"mutants: cmake failed; see {log}", file=sys.stderr)
            return 1
    print(f"mutants: building {len(targets)} test programs in {build}", flush=True)
    if run(["cmake", "--build", build, "-j", a.jobs, "--target", *targets], ROOT, log) != 0:
        print(f"mutants: the unmutated tree does not build; see {log}", file=sys.stderr)
        return 1

    env = dict(os.environ, **SEED_ENV)
    rows, bad = [], False
    for i, m in enumerate(mutants, 1):
        path = os.path.join(src, m["file"])
        original = open(path, encoding="utf-8").read()
        started = time.monotonic()
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original.replace(m["from"], m["to"], 1))
            if run(["cmake", "--build", build, "-j", a.jobs, "--target", *m["tests"]], ROOT,
                   log) != 0:
                verdict, by, secs = "DID NOT COMPILE", "-", 0.0
            else:
                verdict, by, secs = "SURVIVED", "-", 0.0
                for t in m["tests"]:
                    t0 = time.monotonic()
                    cmd = [os.path.join(build, "src", "pond", t), "--gtest_fail_fast",
                           "--gtest_brief=1"]
                    try:
                        rc = run(cmd, build, log, env=env, timeout=TEST_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        rc = "timeout"
                    if rc != 0:
                        verdict, by = "caught", t + (" (time limit)" if rc == "timeout" else "")
                        secs = time.monotonic() - t0
                        break
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original)
        bad |= verdict != "caught"
        rows.append((m, verdict, by, secs))
        print(f"[{i}/{len(mutants)}] {m['id']}: {verdict}"
              + (f" by {by} after {secs:.1f} s" if verdict == "caught" else "")
              + f" ({time.monotonic() - started:.0f} s with the build)", flush=True)
    # Put back the build of the unmutated tree, so the next run starts from it.
    run(["cmake", "--build", build, "-j", a.jobs, "--target", *targets], ROOT, log)

    table = ["| mutant | file | the bug | verdict | caught by | seconds |",
             "|---|---|---|---|---|---|"]
    for m, verdict, by, secs in rows:
        table.append(f"| `{m['id']}` | `{m['file'].removeprefix('src/pond/')}` | {m['what']} | "
                     f"{verdict} | {by if verdict == 'caught' else '-'} | "
                     f"{f'{secs:.1f}' if verdict == 'caught' else '-'} |")
    text = "\n".join(table) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    caught = sum(1 for r in rows if r[1] == "caught")
    print(f"mutants: {caught} of {len(rows)} caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
