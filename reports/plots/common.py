"""Shared helpers of the report plots: a headless matplotlib, one style, and saving a figure."""
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


def save(fig, title, path):
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata={"Software": None})  # no version stamp: same data, same bytes
    plt.close(fig)


def format_tokens(x, _pos=None):
    """131072 -> 128K, as sequence lengths are quoted."""
    for div, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if x >= div and x % div == 0:
            return f"{int(x // div)}{suffix}"
    return f"{x:g}"
