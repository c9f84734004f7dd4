#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention (flash and cuDNN backends) on the shapes of
seqpar-bench-attention and writes the same MEASUREMENT JSON (program "pytorch-sdpa"), so a report can
set the two side by side. Same FLOP convention: forward 4*b*s^2*heads*d (half when causal), backward
2.5x forward. CUDA-event timing, warm-up, every repetition kept, median reported.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

from measurement_common import environment, parse_count as parse_count_of, run_info
from progress import Progress

BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION"}


def parse_count(text, field):
    return parse_count_of(text, field, "bench_sdpa")


def split_list(text, field):
    items = [x.strip() for x in text.split(",")]
    if not all(items):
        raise SystemExit(f"bench_sdpa: {field}: empty item in '{text}'")
    return items


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench_sdpa.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq-lens", default="1K,2K,4K,8K,16K,32K,64K", help="comma-separated sequence lengths")
    p.add_argument("--head-dims", default="64,128", help="comma-separated head dims")
    p.add_argument("--masks", default="full,causal", help="comma-separated: full, causal")
    p.add_argument("--ops", default="fwd,bwd", help="comma-separated: fwd, bwd")
    p.add_argument("--backends", default="flash,cudnn", help="comma-separated: flash, cudnn")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=0, help="0 = same as --heads")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("-J", "--json", dest="json_path", help="write the measurement JSON to FILE")
    a = p.parse_args(argv)
    if a.batch <= 0 or a.heads <= 0 or a.kv_heads < 0 or a.iters <= 0 or a.warmup < 0:
        p.error("--batch, --heads, --iters must be positive; --kv-heads, --warmup non-negative")
    a.kv_heads = a.kv_heads or a.heads
    if a.heads % a.kv_heads:
        p.error(f"--heads {a.heads} must be divisible by --kv-heads {a.kv_heads}")
    for field, values, allowed in (("--masks", a.masks, {"full", "causal"}), ("--ops", a.ops, {"fwd", "bwd"}),
                                   ("--backends", a.backends, set(BACKENDS))):
        for v in split_list(values, field):
            if v not in allowed:
                p.error(f"{field}: unknown value '{v}' (accepted: {', '.join(sorted(allowed))})")
    return a


def load_torch():
    try:
        import torch  # noqa: PLC0415 - optional dependency, only on GPU machines
    except ImportError:
        raise SystemExit("bench_sdpa: PyTorch is not installed (pip install torch); nothing was measured")
    if not torch.cuda.is_available():
        raise SystemExit("bench_sdpa: PyTorch sees no CUDA device; nothing was measured")
    return torch


def attention_flops(b, s, h, d, causal, backward):
    f = 4.0 * b * s * s * h * d / (2 if causal else 1)
    return 2.5 * f if backward else f


def time_one(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3)
    return samples


def measure(torch, a):
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: PLC0415
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    results = []
    shapes = 1
    for field, values in (("--ops", a.ops), ("--head-dims", a.head_dims), ("--masks", a.masks),
                          ("--seq-lens", a.seq_lens), ("--backends", a.backends)):
        shapes *= len(split_list(values, field))
    progress = Progress("bench_sdpa.py", shapes)
    for op in split_list(a.ops, "--ops"):
        backward = op == "bwd"
        for d in (parse_count(x, "--head-dims") for x in split_list(a.head_dims, "--head-dims")):
            for mask in split_list(a.masks, "--masks"):
                causal = mask == "causal"
                for seq in (parse_count(x, "--seq-lens") for x in split_list(a.seq_lens, "--seq-lens")):
                    # SDPA's layout is [b, heads, s, d]; seqpar's is [b, s, heads, d]: transpose views, no copy.
                    def rand(h):
                        return (torch.rand(a.batch, seq, h, d, device="cuda", dtype=dtype) * 2 - 1).transpose(1, 2)
                    q, k, v = rand(a.heads), rand(a.kv_heads), rand(a.kv_heads)
                    gqa = a.kv_heads != a.heads
                    for backend in split_list(a.backends, "--backends"):
                        name = f"attention_{op}/{a.dtype}/d{d}/{mask}/seq{seq}/sdpa-{backend}"
                        flops = attention_flops(a.batch, seq, a.heads, d, causal, backward)
                        fields = {"backend": f"sdpa-{backend}", "op": op, "dtype": a.dtype, "head_dim": d,
                                  "causal": causal, "seq_len": seq, "batch": a.batch, "heads": a.heads,
                                  "kv_heads": a.kv_heads, "flops": flops}
                        try:
                            with sdpa_kernel(getattr(SDPBackend, BACKENDS[backend])):
                                if backward:
                                    qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
                                    out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, enable_gqa=gqa)
                                    grad = torch.rand_like(out) * 2 - 1

                                    def fn():
                                        torch.autograd.grad(out, (qg, kg, vg), grad, retain_graph=True)
                                else:
                                    def fn():
                                        F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
                                samples = time_one(torch, fn, a.warmup, a.iters)
                        except RuntimeError as e:  # backend unavailable for this shape/GPU: record why
                            results.append({"name": name, "error": str(e).splitlines()[0], **fields})
                            print(f"{name}: skipped: {str(e).splitlines()[0]}", file=sys.stderr)
                            progress.update(len(results))
                            continue
                        median = statistics.median(samples)
                        results.append({"name": name, "time_s": median, "samples_s": samples, **fields,
                                        "tflops": flops / median / 1e12})
                        print(f"{name:60s} {median * 1e3:10.3f} ms {flops / median / 1e12:8.1f} TFLOP/s")
                        progress.update(len(results))
    return results


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    torch = load_torch()
    results = measure(torch, a)
    if a.json_path:
        doc = {**run_info(argv), "kind": "measurement", "program": "pytorch-sdpa", "mode": "real-ranks",
               "device": "gpu", "environment": environment(torch),
               "config": {k: v for k, v in vars(a).items() if k != "json_path"}, "results": results}
        Path(a.json_path).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
