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
