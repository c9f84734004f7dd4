#!/usr/bin/env python3
"""One definition of plan labels: core's describe_structure (core/src/plan.cpp) is the only code
that spells a plan's structure ("dp-only sp=1", "hybrid U4xR2", "ulysses sp=8"). This check fails
when a string literal in the library or program sources spells a label itself, as four folders
once did ("dp only", "dp-only sp1", "hybrid {}x{}", "{} R{}").

usage: check_plan_labels.py SOURCE_ROOT   (exit 0: none found; 1: each offence printed)
Tests (tests/, scripts/tests/) may assert labels and are not searched; comments are skipped.
"""
import os
import re
import sys

# The layers whose code could print or store a label (docs/ARCHITECTURE.md layer order).
FOLDERS = ("core", "sim", "kernels", "comm", "train", "bench", "reports", "cli", "scripts")
SKIP_DIRS = {"tests", "presets", "fixtures", "__pycache__"}
DEFINITION = os.path.join("core", "src", "plan.cpp")
SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh", ".h", ".py")
# A label's pieces as they appear inside a string literal: the SP = 1 spellings, a hybrid's
# "U<n>xR<n>" or "<u>x<r>" format, a method followed by a degree ("sp=", "sp{", " R{", " U{").
# A benchmark's record name (".../sp{}/U{}xR{}/...", nccl-tests style path) is a key, not a label.
LABEL = re.compile(
    r"dp[- ]only|hybrid U|hybrid \{\}x\{\}|(?<!/)U\{\}xR\{\}|"
    r"(ulysses|ring|zigzag|\{\}) (sp=?\{\}|sp=?\d|[UR]\{\})")
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"' + r"|'(?:[^'\\\n]|\\.)*'")


def strip_comment(line, python):
    """The line without its comment (a marker outside string literals)."""
    marker = "#" if python else "//"
    out, i = [], 0
    for m in STRING.finditer(line):
        before = line[i:m.start()]
        if marker in before:
            return "".join(out) + before[:before.index(marker)]
        out.append(before + m.group(0))
        i = m.end()
    rest = line[i:]
    return "".join(out) + (rest[:rest.index(marker)] if marker in rest else rest)


def offences(root):
    for folder in FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if not name.endswith(SUFFIXES) or rel == DEFINITION:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        code = strip_comment(line, name.endswith(".py"))
                        for lit in STRING.finditer(code):
                            if LABEL.search(lit.group(0)):
                                yield f"{rel}:{n}: plan label spelled outside {DEFINITION}: {lit.group(0)}"


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: check_plan_labels.py SOURCE_ROOT (a directory)", file=sys.stderr)
        return 2
    found = list(offences(argv[1]))
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} plan label(s) spelled outside {DEFINITION}: call seqpar::describe_structure instead")
        return 1
    print("plan labels: one definition (core/src/plan.cpp)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
