"""What Pond's plot scripts share: one-line errors with exit 2, and reading a result file."""

import argparse
import json
import os
import sys

EXIT_BAD_INPUT = 2


class BadInput(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, as every Pond command answers bad input; --help has the rest.
        name = os.path.basename(sys.argv[0])
        print(f"{name}: {message} (see --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def load_json(path):
    """The JSON in `path`, or BadInput saying in one line why it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise BadInput(f"cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: not JSON: {e.msg}")


def runs_over_time(doc, files_help, label_default, run_of):
    """The command line of a plot of runs over time: result files, -o PNG, --title, one --label
    per file. Returns (args, runs) with runs = [run_of(path) ...]; bad input prints one line and
    exits 2."""
    p = Parser(description=doc.splitlines()[0])
    p.add_argument("json", nargs="+", help=files_help)
    p.add_argument("-o", "--output", required=True, help="the PNG to write")
    p.add_argument("--title", default=None, help="the figure's title")
    p.add_argument("--label", action="append", default=None,
                   help=f"a line's label, once per file, in order (default: {label_default})")
    args = p.parse_args()
    try:
        runs = [run_of(path) for path in args.json]
        if args.label is not None and len(args.label) != len(runs):
            raise BadInput(f"{len(args.label)} --label(s) for {len(runs)} file(s)")
    except BadInput as e:
        print(f"{os.path.basename(sys.argv[0])}: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    return args, runs
