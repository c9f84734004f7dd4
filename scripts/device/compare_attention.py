#!/usr/bin/env python3
"""Sets seqpar-bench-attention's engines beside PyTorch SDPA's back ends on the shapes both measured
(the same run, the same GPU) and prints the ratio to SDPA's cuDNN back end, which issue 14 holds
the cuDNN engine to (>= 0.95x). Reads the two measurement JSON files; writes a JSON summary with -J.
Exit 1 when a seqpar engine row named by --hold falls below --min-ratio, 2 on bad input."""
import argparse
import json
import sys


def load_rows(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"compare_attention: {path}: {e}")
    rows = doc.get("results")
    if not isinstance(rows, list):
        raise SystemExit(f"compare_attention: {path}: no 'results' list (not a measurement document)")
    return rows


def shape_key(r):
    return (r.get("op"), r.get("dtype"), r.get("head_dim"), bool(r.get("causal")), r.get("seq_len"),
            r.get("batch"), r.get("heads"), r.get("kv_heads"))


def engine_of(r):
    # seqpar-bench-attention rows carry attention_engine; older files only backend "seqpar".
    if "attention_engine" in r:
        return "seqpar-" + r["attention_engine"]
    return r.get("backend", "?")


def compare(seqpar_rows, sdpa_rows, reference):
    table = {}
    for r in list(seqpar_rows) + list(sdpa_rows):
        if "tflops" not in r:
            continue
        name = engine_of(r) if r in seqpar_rows else r.get("backend", "?")
        table.setdefault(shape_key(r), {})[name] = float(r["tflops"])
    out = []
    for key in sorted(table, key=lambda k: tuple((x is None, str(type(x)), x if x is not None else 0) for x in k)):
        rates = table[key]
        ref = rates.get(reference)
        out.append({"op": key[0], "dtype": key[1], "head_dim": key[2], "causal": key[3], "seq_len": key[4],
                    "batch": key[5], "heads": key[6], "kv_heads": key[7], "tflops": rates,
                    "ratio_to_" + reference: {k: (v / ref if ref else None) for k, v in rates.items()}})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("seqpar_json")
    p.add_argument("sdpa_json")
    p.add_argument("--reference", default="sdpa-cudnn", help="the SDPA back end ratios are taken to")
    p.add_argument("--hold", default="seqpar-cudnn", help="the engine held to --min-ratio")
    p.add_argument("--min-ratio", type=float, default=0.95)
    p.add_argument("-J", "--json", dest="json_path")
    a = p.parse_args(argv)
    rows = compare(load_rows(a.seqpar_json), load_rows(a.sdpa_json), a.reference)
    if not rows:
        print("compare_attention: the two files share no shape", file=sys.stderr)
        return 2
    engines = sorted({e for r in rows for e in r["tflops"]})
    print(f"{'op':4} {'d':>4} {'mask':6} {'seq':>7}  " + "  ".join(f"{e:>14}" for e in engines) +
          f"  {a.hold + '/' + a.reference:>26}")
    below = []
    for r in rows:
        rate = r["tflops"]
        ratio = r["ratio_to_" + a.reference].get(a.hold)
        cells = "  ".join(f"{rate[e]:14.1f}" if e in rate else f"{'-':>14}" for e in engines)
        mark = "" if ratio is None else f"{ratio:26.3f}"
        print(f"{r['op']:4} {r['head_dim']:>4} {'causal' if r['causal'] else 'full':6} {r['seq_len']:>7}  {cells}  {mark}")
        if ratio is not None and ratio < a.min_ratio:
            below.append(r)
    if a.json_path:
        with open(a.json_path, "w", encoding="utf-8") as f:
            json.dump({"reference": a.reference, "hold": a.hold, "min_ratio": a.min_ratio, "rows": rows}, f, indent=1)
    held = [r for r in rows if r["ratio_to_" + a.reference].get(a.hold) is not None]
    print(f"{a.hold}: {len(held) - len(below)} of {len(held)} shapes at >= {a.min_ratio}x {a.reference}")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
