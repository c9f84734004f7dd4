#!/usr/bin/env python3
"""The layering rule of docs/ARCHITECTURE.md, checked on the source tree: every C++/CUDA file belongs
to the layer of its top-level folder (core < sim < kernels < comm < train < bench < reports < cli;
tests/ and scripts/ stand outside), and may include `seqpar/<x>/...` headers of its own layer or a
lower one only. Inside bench/, the harness (bench/harness) is below the programs. Also refuses
include cycles between folders, `seqpar/<x>` names that no folder defines, and source folders that
have no layer, and CMake targets that link a target of a higher layer. Prints one line per finding, naming the file, line and include; exits 1 if any.
Usage: check_layers.py [SOURCE_ROOT]"""
import os
import re
import sys

LAYERS = ["core", "sim", "kernels", "comm", "train", "bench", "reports", "cli"]
OUTSIDE = {"tests", "scripts", "cmake", "docs", "build", "out"}  # not layers: may include anything
SOURCE_EXT = (".hpp", ".h", ".cpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"(seqpar/([A-Za-z0-9_]+)/[^"]+)"')


def top_folder(rel):
    return rel.split(os.sep, 1)[0]


def unit_of(rel):
    """The folder a file counts in: its layer, with bench/harness apart from the bench programs."""
    top = top_folder(rel)
    if top == "bench":
        return "bench/harness" if rel.startswith(os.path.join("bench", "harness") + os.sep) else "bench"
    return top


def rank_of(unit):
    """Order of units: bench/harness sits between train and the bench programs."""
    if unit == "bench/harness":
        return LAYERS.index("bench") - 0.5
    return LAYERS.index(unit)


def source_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            # build folders (build, build-*), hidden folders and the folders outside the layers
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "build")) and d not in OUTSIDE]
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXT):
                yield os.path.join(rel_dir, name)


def header_index(files):
    """include path (seqpar/x/y.hpp) -> the files that provide it (FOLDER/.../include/seqpar/x/y.hpp)."""
    index = {}
    for rel in files:
        parts = rel.split(os.sep)
        if "include" in parts:
            i = parts.index("include")
            index.setdefault("/".join(parts[i + 1:]), []).append(rel)
    return index


def check(root):
    """Returns the findings (strings); empty when the tree keeps the layering."""
    findings = []
    files = list(source_files(root))
    index = header_index(files)
    edges = {}  # unit -> {unit: (file, line, include)} for the cycle check
    unlayered = set()
    for rel in files:
        top = top_folder(rel)
        if top not in LAYERS:
            if rel.count(os.sep) > 0 and top not in unlayered:
                unlayered.add(top)
                findings.append(f"{rel}: folder '{top}/' is not a layer (add it to LAYERS in "
                                f"tests/layering/check_layers.py and to docs/ARCHITECTURE.md)")
            continue
        unit = unit_of(rel)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            path, name = m.group(1), m.group(2)
            providers = index.get(path, [])
            if providers:
                target = unit_of(providers[0])
            elif name in LAYERS:
                target = name
            else:
                findings.append(f"{rel}:{lineno}: #include \"{path}\": no folder defines seqpar/{name}/")
                continue
            if target == unit or top_folder(target) not in LAYERS:
                continue  # a header in a folder with no layer is reported where it lies
            edges.setdefault(unit, {}).setdefault(target, (rel, lineno, path))
            if rank_of(target) > rank_of(unit):
                findings.append(f"{rel}:{lineno}: #include \"{path}\": {unit}/ may not include the higher layer {target}/ "
                                f"(order, lowest first: core, sim, kernels, comm, train, bench/harness, bench, reports, cli)")
    findings += cycles(edges)
    findings += link_findings(root)
    return findings


ADD_TARGET = re.compile(r"\badd_(?:library|executable)\(\s*([A-Za-z0-9_.+-]+)")
LINK = re.compile(r"\btarget_link_libraries\(([^)]*)\)", re.S)


def cmake_files(root):
    for top in LAYERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            if "CMakeLists.txt" in filenames:
                yield os.path.relpath(os.path.join(dirpath, "CMakeLists.txt"), root)


def link_findings(root):
    """A CMake target of a layer may link targets of its own or lower layers only: a link runs up a
    layer as surely as an include does (the include search path comes with it)."""
    files = list(cmake_files(root))
    texts = {rel: open(os.path.join(root, rel), encoding="utf-8", errors="replace").read() for rel in files}
    owner = {}  # target -> unit of the folder that defines it
    for rel, text in texts.items():
        for m in ADD_TARGET.finditer(text):
            owner[m.group(1)] = unit_of(rel)
    out = []
    for rel, text in texts.items():
        unit = unit_of(rel)
        for m in LINK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            words = m.group(1).split()
            for lib in words[1:]:
                target = owner.get(lib)
                if target is None or target == unit:
                    continue
                if rank_of(target) > rank_of(unit):
                    out.append(f"{rel}:{line}: target_link_libraries({words[0]} ... {lib}): {unit}/ may not link "
                               f"{lib} of the higher layer {target}/")
    return out


def cycles(edges):
    """One finding per include cycle between folders, each naming an include on it."""
    out, seen_cycles = [], set()
    state = {}

    def visit(unit, stack):
        state[unit] = "open"
        stack.append(unit)
        for nxt in sorted(edges.get(unit, {})):
            if state.get(nxt) == "open":
                cyc = stack[stack.index(nxt):] + [nxt]
                key = frozenset(cyc)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    steps = []
                    for a, b in zip(cyc, cyc[1:]):
                        f, line, inc = edges[a][b]
                        steps.append(f"{a}/ -> {b}/ ({f}:{line} includes \"{inc}\")")
                    out.append("include cycle between folders: " + "; ".join(steps))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[unit] = "done"

    for unit in sorted(edges):
        if unit not in state:
            visit(unit, [])
    return out


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    if not os.path.isdir(root):
        print(f"check_layers.py: {root}: not a directory", file=sys.stderr)
        return 2
    findings = check(root)
    for f in findings:
        print(f"check_layers.py: {f}", file=sys.stderr)
    if not findings:
        print("check_layers.py: every include and target link keeps to the layer order; no include cycle between folders")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
