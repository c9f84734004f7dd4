"""Ulysses vs Ring for your model, from Python (notebook style: run it, or paste the cells).

    PYTHONPATH=build/python python3 docs/python_example.py [MODEL] [SYSTEM]

MODEL is a preset name, a seqpar model JSON or a Hugging Face config.json (default llama3-8b);
SYSTEM a system preset (default dgx-h100). Draws tokens/s per GPU against the sequence length for
each method (ulysses_vs_ring.png in the current folder) when matplotlib is installed, else prints the table.
Every number is the simulator's prediction, not a measurement.
"""
import sys

import seqpar

model = sys.argv[1] if len(sys.argv) > 1 else "llama3-8b"
system = sys.argv[2] if len(sys.argv) > 2 else "dgx-h100"
gpus = 8
seq_lens = ["32K", "64K", "128K", "256K", "512K"]

# %% Each method at every sequence length, with the memory options that make it fit (as `advise`
# picks them); seqpar.Error carries the CLI's message for bad input.
rows = {}
for method in ("ulysses", "ring"):
    for n in seq_lens:
        advice = seqpar.advise(model=model, system=system, gpus=gpus, seq_len=n, method=method, sp=gpus)
        # "ranked": the fitting plans, fastest first; "best" is null when nothing fits.
        rows[(method, n)] = advice["ranked"][0]["tokens_per_s_per_gpu"] if advice["best"] else None

# %% Draw, or print.
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
if plt is None:
    print(f"{model} on {system}, {gpus} GPUs, SP={gpus}: tokens/s per GPU (predicted)")
    print(f"{'seq_len':>8} {'ulysses':>10} {'ring':>10}")
    for n in seq_lens:
        cells = [rows[(m, n)] for m in ("ulysses", "ring")]
        print(f"{n:>8} " + " ".join(f"{c:>10.0f}" if c is not None else f"{'no fit':>10}" for c in cells))
else:
    for method in ("ulysses", "ring"):
        xs = [n for n in seq_lens if rows[(method, n)] is not None]
        plt.plot(xs, [rows[(method, n)] for n in xs], marker="o", label=method)
    plt.xlabel("sequence length")
    plt.ylabel("tokens/s per GPU (predicted)")
    plt.title(f"{model} on {system}, {gpus} GPUs")
    plt.legend()
    plt.savefig("ulysses_vs_ring.png", dpi=120)
    print("wrote ulysses_vs_ring.png")

# %% The same question under packed documents (documents= is --documents: a histogram CSV, a lengths
# file or a form such as "lognormal:8:1.5"): each method's best plan and load balancer at 128K under
# the document mask, beside its best on one causal sequence.
mix = "lognormal:8:1.5"
print(f"\n{model} on {system}, {gpus} GPUs, 128K tokens: tokens/s per GPU under --documents {mix} (predicted)")
for method in ("ulysses", "ring-zigzag"):
    under = seqpar.advise(model=model, system=system, gpus=gpus, seq_len="128K", method=method, sp=gpus, documents=mix)
    one = seqpar.advise(model=model, system=system, gpus=gpus, seq_len="128K", method=method, sp=gpus)
    if under["best"] and one["best"]:
        best = under["ranked"][0]
        # A load balancer shards the ring; Ulysses splits by heads, even whatever the mask.
        balancer = best["balancer"] if best["plan"]["ring_degree"] > 1 else "none: by heads"
        print(f"  {method:>12}: {best['tokens_per_s_per_gpu']:.0f} (balancer {balancer}), "
              f"one causal sequence {one['ranked'][0]['tokens_per_s_per_gpu']:.0f}")
