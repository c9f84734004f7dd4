#!/usr/bin/env python3
"""Line plots in panels: throughput against sequence length (a panel per SP size, a line per method),
throughput relative to the best plan and peak memory against capacity (a panel per GPU count, a line
per method), and the same model on several systems. Spec (from `seqpar report`, report-data.json
"figures"):
{"type": "lines", "title", "xlabel", "ylabel", "xscale": "log2"|"linear", "yscale": "log2"|"linear" (optional),
 "ylim": [lo, hi] (optional), "hline": {"y", "label"} (optional: a reference line on every panel),
 "xinteger": true (optional: whole-number x ticks, e.g. ring ranks),
 "panels": [{"title", "series": [{"label", "x": [...], "y": [...]}]}]}
Usage: lines.py SPEC.json OUT.png"""
import json
import sys

from matplotlib.ticker import FuncFormatter, MaxNLocator

from common import format_tokens, new_figure, reference_line, save


def draw(spec, path):
    panels = spec["panels"]
    if not panels:
        raise ValueError(f"{spec.get('file', path)}: a lines figure needs at least one panel")
    fig, axes = new_figure(len(panels))
    # One colour per label in every panel, so a line keeps its colour where another is missing.
    labels = list(dict.fromkeys(s["label"] for panel in panels for s in panel["series"]))
    colours = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    for ax, panel in zip(axes, panels):
        for s in panel["series"]:
            if len(s["x"]) != len(s["y"]):
                raise ValueError(f"series '{s['label']}': x and y differ in length")
            ax.plot(s["x"], s["y"], marker="o", label=s["label"], color=colours[s["label"]])
        if "hline" in spec:
            reference_line(ax, spec["hline"]["y"], spec["hline"]["label"])
        if spec.get("xscale") == "log2":
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(format_tokens))
        if spec.get("yscale") == "log2":
            ax.set_yscale("log", base=2)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        if spec.get("xinteger"):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if "ylim" in spec:
            ax.set_ylim(*spec["ylim"])
        ax.set_title(panel["title"])
        ax.set_xlabel(spec["xlabel"])
        ax.set_ylabel(spec["ylabel"])
        ax.grid(True, alpha=0.3)
    # A line keeps its colour in every panel, so one legend, beside the panels, serves them all and
    # hides no line (a legend inside each panel covered the lines at 0.8-0.95 of the best plan).
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), fontsize="small", loc="upper left",
               bbox_to_anchor=(1.0, 0.95))
    save(fig, spec["title"], path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        draw(json.load(f), sys.argv[2])
