"""Shared helpers of the report plots: a headless matplotlib, one style, and saving a figure."""
import json
import struct

import matplotlib

matplotlib.use("Agg")  # no display on CI machines and clusters
import matplotlib.pyplot as plt  # noqa: E402

DPI = 110


def new_figure(n_panels, panel_width=5.0, height=3.8):
    cols = min(n_panels, 3)
    rows = (n_panels + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(panel_width * cols, height * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


REFERENCE = "reference"  # the gid of a reference line (the best plan at 1.0, the device capacity)


def reference_line(ax, value, label, vertical=False):
    """A dashed reference line at `value` (y, or x when vertical), recorded in the PNG's metadata."""
    draw = ax.axvline if vertical else ax.axhline
    draw(value, color="black", linestyle="--", linewidth=1.2, label=label, gid=REFERENCE)


def axes_metadata(fig):
    """What a test needs to check a drawn figure without reading pixels: per visible panel its title,
    axis scales, reference lines and line labels."""
    panels = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        refs = []
        for line in ax.lines:
            if line.get_gid() == REFERENCE:
                xs, ys = line.get_xdata(), line.get_ydata()
                vertical = xs[0] == xs[-1] and ys[0] != ys[-1]
                refs.append({"axis": "x" if vertical else "y", "value": float(xs[0] if vertical else ys[0]),
                             "label": line.get_label()})
        panels.append({"title": ax.get_title(), "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
                       "ylim": [float(v) for v in ax.get_ylim()], "references": refs,
                       "series": [line.get_label() for line in ax.lines if line.get_gid() != REFERENCE]})
    return panels


def read_axes(path):
    """The panels axes_metadata recorded in the PNG at `path` (its "seqpar-axes" tEXt chunk), or None."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos = 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"tEXt":
            key, _, text = data[pos + 8:pos + 8 + length].partition(b"\0")
            if key == b"seqpar-axes":
                return json.loads(text.decode("latin-1"))
        pos += 12 + length
    return None


def save(fig, title, path):
    fig.suptitle(title)
    fig.tight_layout()
    # No version stamp (same data, same bytes); the axes in a tEXt chunk, "seqpar-axes", for tests.
    # bbox_inches="tight": a legend placed beside the panels is part of the picture.
    fig.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None,
                                         "seqpar-axes": json.dumps(axes_metadata(fig), sort_keys=True)})
    plt.close(fig)


def format_tokens(x, _pos=None):
    """131072 -> 128K, as sequence lengths are quoted."""
    for div, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if x >= div and x % div == 0:
            return f"{int(x // div)}{suffix}"
    return f"{x:g}"
