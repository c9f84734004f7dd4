#!/usr/bin/env python3
"""Line plots in panels: throughput against sequence length (a panel per SP size, a line per method)
and the same model on several systems. Spec (from `seqpar report`, report-data.json "figures"):
{"type": "lines", "title", "xlabel", "ylabel", "xscale": "log2"|"linear",
 "panels": [{"title", "series": [{"label", "x": [...], "y": [...]}]}]}
Usage: lines.py SPEC.json OUT.png"""
import json
import sys

from matplotlib.ticker import FuncFormatter

from common import format_tokens, new_figure, save


def draw(spec, path):
    panels = spec["panels"]
    if not panels:
        raise ValueError(f"{spec.get('file', path)}: a lines figure needs at least one panel")
    fig, axes = new_figure(len(panels))
    for ax, panel in zip(axes, panels):
        for s in panel["series"]:
            if len(s["x"]) != len(s["y"]):
                raise ValueError(f"series '{s['label']}': x and y differ in length")
            ax.plot(s["x"], s["y"], marker="o", label=s["label"])
        if spec.get("xscale") == "log2":
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(format_tokens))
        ax.set_title(panel["title"])
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
