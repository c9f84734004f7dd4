#!/usr/bin/env python3
"""Predicted against measured, one point per plan, with the diagonal and each point's error. Spec:
{"type": "parity", "title", "xlabel", "ylabel", "points": [{"x": predicted, "y": measured, "label"}]}
Usage: parity.py SPEC.json OUT.png"""
import json
import sys

from common import new_figure, save


def draw(spec, path):
    pts = spec["points"]
    if not pts:
        raise ValueError(f"{spec.get('file', path)}: a parity figure needs at least one point")
    fig, (ax,) = new_figure(1, panel_width=6.0, height=5.0)
    xs, ys = [p["x"] for p in pts], [p["y"] for p in pts]
    lo, hi = min(xs + ys) * 0.9, max(xs + ys) * 1.1
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", label="prediction = measurement")
    ax.scatter(xs, ys, zorder=3)
    for p in pts:
        err = (p["x"] / p["y"] - 1) * 100
        ax.annotate(f"{p['label']} ({err:+.1f}%)", (p["x"], p["y"]), fontsize="x-small",
                    textcoords="offset points", xytext=(4, 4))
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(spec["xlabel"])
    ax.set_ylabel(spec["ylabel"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, spec["title"], path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        draw(json.load(f), sys.argv[2])
