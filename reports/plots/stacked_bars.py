#!/usr/bin/env python3
"""Stacked horizontal bars, one per plan: the step-time breakdown (compute, exposed communication, ...) and the
memory breakdown with the device capacity as a line. Spec:
{"type": "stacked_bars", "title", "ylabel", "categories": [plan labels],
 "stacks": [{"label", "values": [one per category]}], "hline": {"y", "label"} (optional)}
Usage: stacked_bars.py SPEC.json OUT.png"""
import json
import sys

from common import new_figure, reference_line, save


def draw(spec, path):
    cats = spec["categories"]
    if not cats:
        raise ValueError(f"{spec.get('file', path)}: a stacked_bars figure needs at least one category")
    # Horizontal bars: plan labels are long, and read best as rows.
    fig, (ax,) = new_figure(1, panel_width=11.0, height=1.2 + 0.32 * len(cats))
    left = [0.0] * len(cats)
    ys = range(len(cats))
    for stack in spec["stacks"]:
        vals = stack["values"]
        if len(vals) != len(cats):
            raise ValueError(f"stack '{stack['label']}': {len(vals)} values for {len(cats)} categories")
        if any(v > 0 for v in vals):
            ax.barh(ys, vals, left=left, label=stack["label"])
        left = [a + v for a, v in zip(left, vals)]
    if "hline" in spec:
        reference_line(ax, spec["hline"]["y"], spec["hline"]["label"], vertical=True)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(cats, fontsize="small")
    ax.invert_yaxis()  # first plan on top, as in the table
    ax.set_xlabel(spec["ylabel"])
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, never over them
    save(fig, spec["title"], path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        draw(json.load(f), sys.argv[2])
