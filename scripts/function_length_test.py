#!/usr/bin/env python3
"""No function in the given C++ files is longer than a bound (default 70 lines).

The CLI's functions parse, call bench/ and print; one past the bound usually holds two steps
that want names of their own. Comments and literals are blanked first, so braces inside them do
not count. A function is a brace block opened after a closing parenthesis (a signature, perhaps
with const, override, noexcept, a trailing return type or a constructor's initialiser list)
outside any other function; lambdas inside functions count toward the function holding them.

Usage: function_length_test.py [--max N] FILE...   Exit 1 naming each function past the bound,
2 on bad usage.
"""

import argparse
import re
import sys

SIGNATURE_END = re.compile(
    r"\)\s*(const)?\s*(override)?\s*(noexcept)?\s*(->\s*[\w:<>, *&]+)?$|\)\s*:\s*.*$")


def blank(src):
    """The source with comments and string and character literals blanked, newlines kept."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif src.startswith('R"(', i):
            j = src.find(')"', i + 3)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif src[i] in "\"'":
            quote, j = src[i], i + 1
            while j < n and src[j] != quote and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append("0")
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def long_functions(path, bound):
    """(first line, length) of each function in `path` longer than `bound` lines."""
    with open(path, encoding="utf-8") as f:
        text = blank(f.read())
    found, stack, before = [], [], ""
    for number, line in enumerate(text.split("\n"), 1):
        for ch in line:
            if ch == "{":
                outside = all(kind == "scope" for kind, _ in stack)
                head = before.rstrip()
                if outside and SIGNATURE_END.search(head) and not re.search(r"\bnamespace\b", head):
                    kind = "function"
                elif outside and re.search(r"\b(namespace|class|struct|union|enum)\b", head):
                    kind = "scope"
                else:
                    kind = "block"
                stack.append((kind, number))
                before = ""
            elif ch == "}":
                if stack:
                    kind, start = stack.pop()
                    if kind == "function" and number - start + 1 > bound:
                        found.append((start, number - start + 1))
                before = ""
            elif ch == ";":
                before = ""
            else:
                before += ch
        before += " "
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--max", type=int, default=70, help="the longest a function may be, in lines")
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    if args.max < 1:
        print("function_length_test: --max must be at least 1", file=sys.stderr)
        return 2
    bad = 0
    for path in args.files:
        try:
            for start, length in long_functions(path, args.max):
                print(f"{path}:{start}: a function of {length} lines (at most {args.max})")
                bad += 1
        except OSError as e:
            print(f"function_length_test: {e}", file=sys.stderr)
            return 2
    if bad:
        return 1
    print(f"function_length_test: ok, {len(args.files)} file(s), no function past {args.max} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
