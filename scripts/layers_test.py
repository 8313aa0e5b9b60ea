#!/usr/bin/env python3
"""Layers import only downward (README "Layers"): no file under src/pond/ includes a header of a
layer with a higher number than its own, and neither the transactions (txn/) nor the compute-node
runtime (node/) links UCX or ZooKeeper — only the deployments above them do (deploy/).

Usage: layers_test.py SOURCE_DIR [BUILD_DIR]
With BUILD_DIR, also reads the link lines CMake wrote for txn_test and sim_cluster_test, which
link pond_txn and pond_node alone: their closures are those libraries'.
"""
import os
import re
import sys

# The README's table, folder by folder.
RANK = {
    "base": 0, "runtime": 1, "check": 1, "sim": 2, "transport": 3, "store": 4, "btree": 4,
    "lock": 5, "cache": 5, "cluster": 5, "recovery": 5, "txn": 6, "node": 7,
    "deploy": 8, "server": 8, "bench": 8, "tools": 8, "client": 8,
}
INCLUDE = re.compile(r'^\s*#\s*include\s*"pond/([a-z_]+)/', re.M)
# What a test program that links only `library` must not link: the UCX transport, the
# coordination service, the layers above. (They do link the simulator's engine: pond_transport
# holds the simulated fabric beside the local one, and both need only the Endpoint interface.)
CHECKED = {
    "txn_test": ("libpond_txn", ("libpond_ucx", "libpond_zk", "libpond_node", "libpond_deploy",
                                 "libucp", "libzookeeper")),
    "sim_cluster_test": ("libpond_node", ("libpond_ucx", "libpond_zk", "libpond_deploy",
                                          "libucp", "libzookeeper")),
}


def upward_includes(src):
    bad = []
    root = os.path.join(src, "src", "pond")
    folders = sorted(os.listdir(root))
    unknown = [f for f in folders if os.path.isdir(os.path.join(root, f)) and f not in RANK]
    for f in unknown:
        bad.append(f"src/pond/{f}/ is in no layer (add it to the README's table and here)")
    for layer in folders:
        if layer not in RANK:
            continue
        for dirpath, _, files in os.walk(os.path.join(root, layer)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, errors="replace") as fh:
                    text = fh.read()
                for to in INCLUDE.findall(text):
                    if to in RANK and RANK[to] > RANK[layer]:
                        rel = os.path.relpath(path, src)
                        bad.append(f"{rel} includes pond/{to}/ (layer {RANK[to]} above {layer}'s {RANK[layer]})")
    return bad


def link_line(build, target):
    # Ninja and Makefile generators keep the link line in different places.
    ninja = os.path.join(build, "build.ninja")
    if os.path.exists(ninja):
        with open(ninja) as fh:
            text = fh.read()
        m = re.search(r"^build src/pond/" + target + r"[ :][^\n]*CXX_EXECUTABLE_LINKER[^\n]*\n(?:  [^\n]*\n)*",
                      text, re.M)
        return m.group(0) if m else None
    link = os.path.join(build, "src", "pond", "CMakeFiles", target + ".dir", "link.txt")
    if os.path.exists(link):
        with open(link) as fh:
            return fh.read()
    return None


def links(build):
    bad = []
    for target, (library, forbidden) in CHECKED.items():
        line = link_line(build, target)
        if line is None:
            bad.append(f"no link line for {target} in {build}")
        elif library not in line:
            bad.append(f"{target}'s link line names no {library}: this check reads the wrong line")
        else:
            bad += [f"{library[3:]} links {f[3:]}" for f in forbidden if f in line]
    return bad


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    bad = upward_includes(sys.argv[1])
    if len(sys.argv) == 3:
        bad += links(sys.argv[2])
    for b in bad:
        print("layers_test: " + b, file=sys.stderr)
    if bad:
        return 1
    print("layers_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
