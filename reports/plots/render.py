#!/usr/bin/env python3
"""Draws every figure of a report-data.json (written by `seqpar report`) into OUT_DIR, one PNG per
figure spec, by type: lines.py, stacked_bars.py, parity.py. Exits non-zero naming each figure that
failed; the others are still drawn.
Usage: render.py REPORT_DATA.json OUT_DIR"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lines  # noqa: E402
import parity  # noqa: E402
import stacked_bars  # noqa: E402

DRAW = {"lines": lines.draw, "stacked_bars": stacked_bars.draw, "parity": parity.draw}


def render(data, out_dir):
    """Returns (written paths, error messages)."""
    written, errors = [], []
    for i, spec in enumerate(data.get("figures", [])):
        name = spec.get("file", f"figures[{i}]")
        try:
            if os.path.basename(name) != name or not name.endswith(".png"):
                raise ValueError("'file' must be a plain .png file name")
            kind = spec.get("type")
            if kind not in DRAW:
                raise ValueError(f"unknown figure type {kind!r} (expected one of {', '.join(sorted(DRAW))})")
            path = os.path.join(out_dir, name)
            DRAW[kind](spec, path)
            written.append(path)
        except (KeyError, ValueError, TypeError) as e:
            errors.append(f"{name}: {type(e).__name__}: {e}")
    return written, errors


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    try:
        with open(argv[1]) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"render.py: {argv[1]}: {e}")
    os.makedirs(argv[2], exist_ok=True)
    written, errors = render(data, argv[2])
    for e in errors:
        print(f"render.py: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
