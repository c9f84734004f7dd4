#!/usr/bin/env python3
"""The PyTorch peer of seqpar-train: one training step of the same Llama-style decoder (RMSNorm,
RoPE, GQA attention through scaled_dot_product_attention, SwiGLU MLP, untied LM head unless the
preset ties it), randomly initialised, in bf16 autocast with fp32 master weights and fused AdamW,
optionally with full activation checkpointing. The model is transformers' LlamaForCausalLM when that
package is installed (--impl auto), else a plain PyTorch definition of the same block.

Same flags and shapes as seqpar-train (--model preset or file, --layers --hidden --heads --kv-heads
--head-dim --ffn-hidden --vocab, --seq-len 16K, --micro-batch, --steps, --warmup, --checkpoint,
--seed, --lr, -J) and the same measurement JSON fields (program "bench_torch_step"): step time
(CUDA events; the median of the steps after the warm-up), tokens/s, TFLOP/s by seqpar's FLOP
convention (model_flops below), peak memory, the plan and the model, so `seqpar report` sets the
two side by side. Refuses to run without CUDA unless --device cpu is given (tiny test runs).
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from measurement_common import environment, parse_count, run_info, summarize

PROG = "bench_torch_step"
ROOT = Path(__file__).resolve().parents[1]
PRESETS = ROOT / "sim" / "presets"
# seqpar-train's tiny default model (train::ModelConfig) when no --model is given.
DEFAULT_MODEL = {"name": "custom", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
                 "ffn_hidden": 128, "vocab": 256, "tied_embeddings": False}
SIZE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab")
# seqpar-train's fixed model constants (ModelConfig) and AdamW settings (AdamWConfig).
ROPE_THETA, NORM_EPS = 10000.0, 1e-5
BETAS, ADAM_EPS, WEIGHT_DECAY = (0.9, 0.95), 1e-8, 0.0


def fail(message):
    raise SystemExit(f"{PROG}: error: {message}")


def preset_value(doc, key, where):
    # Built-in presets give {"value": v, "source": ...}; a bare value is accepted too (as sim's loader).
    if key not in doc:
        fail(f"{where}: missing field '{key}'")
    v = doc[key]
    if isinstance(v, dict):
        if "value" not in v:
            fail(f"{where}: field '{key}' has no \"value\"")
        v = v["value"]
    return v


def load_model_preset(name):
    """A preset name under sim/presets/models or a JSON file, as seqpar-train's --model."""
    path = Path(name)
    if not (name.endswith(".json") or path.exists()):
        path = PRESETS / "models" / f"{name}.json"
        if not path.exists():
            known = sorted(p.stem for p in (PRESETS / "models").glob("*.json"))
            fail(f"--model {name}: no such preset (known: {', '.join(known)}) and no such file")
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail(f"--model {name}: cannot read {path}: {e}")
    where = f"--model {name} ({path})"
    for field, llama in (("mlp", "swiglu"), ("norm", "rmsnorm"), ("positions", "rope")):
        kind = doc.get(field, llama)
        if kind != llama:
            fail(f"{where}: {field} must be {llama} for the training step (a Llama-style decoder), not '{kind}'")
    cfg = {"name": doc.get("name", path.stem)}
    for k in SIZE_FIELDS:
        v = preset_value(doc, k, where)
        if isinstance(v, bool) or not isinstance(v, int):
            fail(f"{where}: field '{k}' must be an integer, not {v!r}")
        cfg[k] = v
    tied = doc.get("tied_embeddings", False)
    cfg["tied_embeddings"] = bool(tied["value"] if isinstance(tied, dict) else tied)
    return cfg


def resolve_model(a):
    """The preset (or the tiny default) with the explicit sizes on top, validated like train::validate."""
    cfg = load_model_preset(a.model) if a.model else dict(DEFAULT_MODEL)
    for k in SIZE_FIELDS:
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    for k in SIZE_FIELDS:
        if cfg[k] <= 0:
            fail(f"{k} = {cfg[k]}: must be positive")
    if cfg["heads"] % cfg["kv_heads"]:
        fail(f"heads = {cfg['heads']} must be divisible by kv_heads = {cfg['kv_heads']}")
    if cfg["head_dim"] % 2:
        fail(f"head_dim = {cfg['head_dim']} must be even (rotary embedding rotates pairs)")
    return cfg


def total_params(c):
    per_layer = (c["hidden"] + 2 * c["hidden"] * c["heads"] * c["head_dim"] + 2 * c["hidden"] * c["kv_heads"] * c["head_dim"]
                 + c["hidden"] + 3 * c["hidden"] * c["ffn_hidden"])
    embeddings = c["vocab"] * c["hidden"] * (1 if c["tied_embeddings"] else 2)
    return c["layers"] * per_layer + embeddings + c["hidden"]


def model_flops(c, batch, seq_len):
    """seqpar's FLOP convention (train::model_flops): GEMMs 2mnk forward and twice that backward;
    causal attention 4*b*s^2*heads*d/2 forward and 2.5x that backward; the LM head; never the
    recomputation of checkpointing."""
    t = float(batch) * float(seq_len)
    h, q, kv = float(c["hidden"]), float(c["heads"] * c["head_dim"]), float(c["kv_heads"] * c["head_dim"])
    gemm_fwd = 2.0 * t * h * (q + 2 * kv) + 2.0 * t * q * h + 2.0 * t * h * c["ffn_hidden"] * 3
    attn_fwd = 4.0 * float(batch) * float(seq_len) * float(seq_len) * c["heads"] * c["head_dim"] / 2.0
    block = 3.0 * gemm_fwd + 3.5 * attn_fwd
    return c["layers"] * block + 3.0 * 2.0 * t * c["hidden"] * c["vocab"]


def load_gpu_peak(name):
    """bf16 dense FLOP/s of a GPU preset (sim/presets/gpus), the MFU denominator."""
    path = PRESETS / "gpus" / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in (PRESETS / "gpus").glob("*.json"))
        fail(f"--gpu {name}: no such GPU preset (known: {', '.join(known)})")
    return float(preset_value(json.loads(path.read_text()), "bf16_tflops", f"--gpu {name}")) * 1e12


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench_torch_step.py", description=__doc__, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="", help="model preset name (sim/presets/models) or JSON file (default: "
                                                "seqpar-train's tiny 2-layer model)")
    p.add_argument("--layers", type=int, help="override: decoder layers")
    p.add_argument("--hidden", type=int, help="override: hidden size")
    p.add_argument("--heads", type=int, help="override: attention heads")
    p.add_argument("--kv-heads", type=int, help="override: KV heads (GQA)")
    p.add_argument("--head-dim", type=int, help="override: head dimension")
    p.add_argument("--ffn-hidden", "--ffn", dest="ffn_hidden", type=int, help="override: SwiGLU hidden size")
    p.add_argument("--vocab", type=int, help="override: vocabulary size")
    p.add_argument("--seq-len", default="64", help="tokens per sequence (accepts 64K, 1M)")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per step")
    p.add_argument("--steps", type=int, help="training steps, warm-up included (seqpar-train's flag; default 5)")
    p.add_argument("--iters", type=int, help="timed steps after the warm-up (--steps = --warmup + --iters)")
    p.add_argument("--warmup", type=int, default=1, help="steps left out of the timing")
    p.add_argument("--checkpoint", default="none", help="activation checkpointing: none | full (every decoder "
                                                        "block recomputed in the backward)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate")
    p.add_argument("--seed", type=int, default=1234, help="seed of the parameters and the synthetic data")
    p.add_argument("--device", "--backend", dest="device", default="cuda", choices=["cuda", "cpu"],
                   help="cuda (default; refused when PyTorch sees no CUDA device) or cpu (tiny test runs)")
    p.add_argument("--impl", default="auto", choices=["auto", "transformers", "torch"],
                   help="the model class: transformers' LlamaForCausalLM, the plain PyTorch block, or auto "
                        "(transformers when installed)")
    p.add_argument("--gpu", default="", help="GPU preset whose bf16 peak gives MFU (default: MFU null)")
    p.add_argument("-J", "--json", dest="json_path", default="", help="write the measurement JSON to FILE")
    a = p.parse_args(argv)
    a.seq_len = parse_count(a.seq_len, "--seq-len", PROG)
    if a.micro_batch <= 0:
        fail(f"--micro-batch = {a.micro_batch}: must be >= 1")
    if a.warmup < 0:
        fail(f"--warmup = {a.warmup}: must be >= 0")
    if a.iters is not None:
        if a.iters < 1:
            fail(f"--iters = {a.iters}: must be >= 1")
        if a.steps is not None and a.steps != a.warmup + a.iters:
            fail(f"--steps = {a.steps} contradicts --warmup {a.warmup} + --iters {a.iters}: give one of --steps, --iters")
        a.steps = a.warmup + a.iters
    if a.steps is None:
        a.steps = 5
    if a.steps < 1:
        fail(f"--steps = {a.steps}: must be >= 1")
    if a.warmup >= a.steps:
        fail(f"--warmup = {a.warmup} with --steps = {a.steps}: at least one step must be timed")
    if a.checkpoint not in ("none", "full"):
        extra = " (selective checkpointing has no PyTorch peer here)" if a.checkpoint == "selective" else ""
        fail(f"--checkpoint {a.checkpoint}: accepted: none, full{extra}")
    if not a.lr > 0 or a.lr == float("inf"):
        fail(f"--lr = {a.lr}: must be a finite number > 0")
    a.model_config = resolve_model(a)
    a.peak_flops = load_gpu_peak(a.gpu) if a.gpu else None
    return a


def plan_json(a):
    """seqpar's plan object of this run: SP = 1 and TP = 1 on one device, one micro-step per step, the
    checkpointing asked for, bf16 throughout (no part in FP8)."""
    return {"checkpoint": a.checkpoint, "dp": 1, "fp8": "none", "fp8_recipe": "delayed", "gpus": 1,
            "grad_accum_steps": 1, "method": "ulysses",
            "micro_batch": a.micro_batch, "offload_checkpoints": False, "offload_optimizer": False, "offload_params": False,
            "placement": "ulysses-inner",
            "ring_degree": 1, "seq_len": a.seq_len,
            "sp": 1, "tiled_loss": False, "tp": 1, "tiled_mlp": False, "ulysses_degree": 1, "zero": 0}


def load_torch(device):
    try:
        import torch  # noqa: PLC0415 - optional dependency, only on GPU machines
    except ImportError:
        fail("PyTorch is not installed (pip install torch); nothing was measured")
    if device == "cuda" and not torch.cuda.is_available():
        fail("PyTorch sees no CUDA device; nothing was measured (--device cpu runs a tiny model on the CPU, "
             "for tests only)")
    return torch


def build_plain_model(torch, c, checkpoint):
    """The block seqpar-train runs, in plain PyTorch: pre-norm RMSNorm, interleaved-pair RoPE, GQA
    attention through SDPA (causal), SwiGLU MLP, final norm, LM head."""
    nn, F = torch.nn, torch.nn.functional
    from torch.utils.checkpoint import checkpoint as recompute  # noqa: PLC0415
    # SDPA shares K, V heads itself from PyTorch 2.5 on (enable_gqa), without copying them.
    native_gqa = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)

    class RMSNorm(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + NORM_EPS)).to(x.dtype) * self.weight

    def rope(x, cos, sin):  # x [b, s, heads, d]; rotates pairs (2i, 2i+1) as seqpar's kernel
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            h, d = c["hidden"], c["head_dim"]
            self.attn_norm, self.mlp_norm = RMSNorm(h), RMSNorm(h)
            self.wq = nn.Linear(h, c["heads"] * d, bias=False)
            self.wk = nn.Linear(h, c["kv_heads"] * d, bias=False)
            self.wv = nn.Linear(h, c["kv_heads"] * d, bias=False)
            self.wo = nn.Linear(c["heads"] * d, h, bias=False)
            self.w1 = nn.Linear(h, c["ffn_hidden"], bias=False)
            self.w3 = nn.Linear(h, c["ffn_hidden"], bias=False)
            self.w2 = nn.Linear(c["ffn_hidden"], h, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            d = c["head_dim"]
            hn = self.attn_norm(x)
            q = rope(self.wq(hn).view(b, s, c["heads"], d), cos, sin)
            k = rope(self.wk(hn).view(b, s, c["kv_heads"], d), cos, sin)
            v = self.wv(hn).view(b, s, c["kv_heads"], d)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # SDPA's [b, heads, s, d]
            gqa = c["kv_heads"] != c["heads"]
            if gqa and not native_gqa:  # before PyTorch 2.5: K and V copied up to every head
                rep = c["heads"] // c["kv_heads"]
                k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            extra = {"enable_gqa": True} if gqa and native_gqa else {}
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, **extra)
            x = x + self.wo(o.transpose(1, 2).reshape(b, s, c["heads"] * d))
            hn = self.mlp_norm(x)
            return x + self.w2(F.silu(self.w1(hn)) * self.w3(hn))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(c["vocab"], c["hidden"])
            self.layers = nn.ModuleList(Block() for _ in range(c["layers"]))
            self.final_norm = RMSNorm(c["hidden"])
            self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)
            if c["tied_embeddings"]:
                self.lm_head.weight = self.embed.weight

        def forward(self, tokens):
            s = tokens.shape[1]
            d = c["head_dim"]
            inv = ROPE_THETA ** (-torch.arange(0, d, 2, device=tokens.device, dtype=torch.float32) / d)
            ang = torch.arange(s, device=tokens.device, dtype=torch.float32)[:, None] * inv[None, :]
            cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
            x = self.embed(tokens)
            for layer in self.layers:
                x = recompute(layer, x, cos, sin, use_reentrant=False) if checkpoint == "full" else layer(x, cos, sin)
            return self.lm_head(self.final_norm(x))

    model = Decoder()
    for prm in model.parameters():  # seqpar's Model::init: N(0, 0.02), norms 1
        if prm.dim() > 1:
            torch.nn.init.normal_(prm, 0.0, 0.02)
    return model


def build_transformers_model(c, checkpoint, seq_len):
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415
    cfg = LlamaConfig(vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["ffn_hidden"],
                      num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                      num_key_value_heads=c["kv_heads"], head_dim=c["head_dim"], rms_norm_eps=NORM_EPS,
                      rope_theta=ROPE_THETA, max_position_embeddings=seq_len, tie_word_embeddings=c["tied_embeddings"],
                      initializer_range=0.02, use_cache=False, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg)
    if checkpoint == "full":
        # Every decoder layer recomputed, as --checkpoint full. transformers 5 renamed the call (the
        # old name warns); older releases have only gradient_checkpointing_enable.
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def choose_impl(impl):
    if impl != "auto":
        return impl
    try:
        import transformers  # noqa: F401, PLC0415
    except ImportError:
        return "torch"
    return "transformers"


def measure(torch, a):
    """Runs --steps steps; returns (losses, timed samples in s, peak bytes allocated, peak bytes reserved)."""
    c = a.model_config
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    if a.impl_used == "transformers":
        try:
            model = build_transformers_model(c, a.checkpoint, a.seq_len)
        except ImportError:
            fail("--impl transformers: the transformers package is not installed")
        forward = lambda tokens: model(input_ids=tokens).logits  # noqa: E731
    else:
        model = build_plain_model(torch, c, a.checkpoint)
        forward = model
    # The same model as seqpar-train's, or the comparison means nothing: its parameter count must agree.
    count = sum(p.numel() for p in model.parameters())
    if count != total_params(c):
        fail(f"--impl {a.impl_used}: the model has {count} parameters, seqpar-train's has {total_params(c)}: "
             "not the same model")
    model = model.to(dev)  # fp32 master weights; autocast runs the GEMMs and attention in bf16
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=BETAS, eps=ADAM_EPS, weight_decay=WEIGHT_DECAY,
                            **({"fused": True} if a.device == "cuda" else {"foreach": True}))
    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    tokens = torch.randint(0, c["vocab"], (a.micro_batch, a.seq_len), generator=gen).to(dev)
    labels = torch.randint(0, c["vocab"], (a.micro_batch, a.seq_len), generator=gen).to(dev)
    cuda = a.device == "cuda"

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=a.device, dtype=torch.bfloat16):
            logits = forward(tokens)
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, c["vocab"]), labels.view(-1))
        loss.backward()
        opt.step()
        return loss

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    losses, samples = [], []
    for i in range(a.steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = step()
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) * 1e-3
        else:
            t0 = time.perf_counter()
            loss = step()
            elapsed = time.perf_counter() - t0
        value = float(loss.item())
        if value != value or value in (float("inf"), float("-inf")):
            fail(f"step {i + 1}: the loss is {value}, not finite: the training diverged (try a smaller --lr)")
        losses.append(value)
        if i >= a.warmup:
            samples.append(elapsed)
        print(f"{i + 1:6d} {value:12.6f} {elapsed * 1e3:12.3f}{'  (warm-up)' if i < a.warmup else ''}")
    peak = torch.cuda.max_memory_allocated() if cuda else None
    reserved = torch.cuda.max_memory_reserved() if cuda else None
    return losses, samples, peak, reserved


def measurement_doc(a, argv, env, losses, samples, peak, reserved):
    """The measurement JSON with seqpar-train's fields."""
    c = a.model_config
    tokens = a.seq_len * a.micro_batch
    flops = model_flops(c, a.micro_batch, a.seq_len)
    median = statistics.median(samples)
    tf = flops / median / 1e12
    mfu = tf * 1e12 / a.peak_flops if a.peak_flops else None
    model = {"name": c["name"], "layers": c["layers"], "hidden": c["hidden"], "heads": c["heads"],
             "kv_heads": c["kv_heads"], "head_dim": c["head_dim"], "ffn_hidden": c["ffn_hidden"], "vocab": c["vocab"],
             "tied_embeddings": c["tied_embeddings"], "params": total_params(c)}
    plan = plan_json(a)
    result = {"name": f"train_step/{c['name']}/L{c['layers']}/{plan['method']}/sp1/seq{a.seq_len}",
              "losses": losses, "peak_memory_bytes": peak, "peak_memory_bytes_per_rank": [peak],
              "peak_memory_reserved_bytes": reserved, "memory": None, "time_s": median, "samples_s": samples,
              "stats": summarize(samples), "step_time_s": median, "tokens_per_s_per_gpu": tokens / median,
              "tflops_per_gpu": tf, "mfu": mfu, "flops": flops}
    doc = {**run_info(argv), "kind": "measurement", "program": PROG, "mode": "real-ranks",
           # The framework profile seqpar predicts this step with (its transformers implementation is
           # Hugging Face's LlamaForCausalLM; the plain one has no profile of its own).
           **({"framework": "hf-transformers"} if a.impl_used == "transformers" else {}),
           "device": "gpu" if a.device == "cuda" else "cpu", "environment": env,
           "config": {"model": model, "steps": a.steps, "warmup": a.warmup, "lr": a.lr, "seed": a.seed,
                      "backend": a.device, "comm": None, "world_size": 1, "validate": False, "dtype": "fp32",
                      "precision": "bf16", "kv_replication": 1,  # SP = 1: no KV head is replicated
                      "implementation": a.impl_used,
                      "optimizer": "AdamW (fused)" if a.device == "cuda" else "AdamW (foreach)",
                      "autocast": "bf16", "attention": "torch.nn.functional.scaled_dot_product_attention"},
           "plan": plan}
    for k in ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "peak_memory_bytes"):
        doc[k] = result[k]
    doc["memory"] = None  # PyTorch's allocator gives no part-by-part accounting
    doc["results"] = [result]
    return doc


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    torch = load_torch(a.device)
    a.impl_used = choose_impl(a.impl)
    c = a.model_config
    print(f"# {PROG}: one device (SP = 1), checkpoint {a.checkpoint}, {a.device}, {a.impl_used}, bf16 autocast\n"
          f"# model {c['name']}: {c['layers']} layers, hidden {c['hidden']}, heads {c['heads']}/{c['kv_heads']} kv, "
          f"params {total_params(c)}, seq {a.seq_len} x {a.micro_batch}\n{'step':>6} {'loss':>12} {'time_ms':>12}")
    losses, samples, peak, reserved = measure(torch, a)
    doc = measurement_doc(a, argv, environment(torch), losses, samples, peak, reserved)
    peak_text = f"{peak / (1 << 20):.2f} MiB" if peak is not None else "not measured on the CPU"
    print(f"# median {doc['step_time_s'] * 1e3:.3f} ms, {doc['tokens_per_s_per_gpu']:.1f} tokens/s, "
          f"{doc['tflops_per_gpu']:.4f} TFLOP/s, peak {peak_text}")
    if a.json_path:
        try:
            Path(a.json_path).write_text(json.dumps(doc, indent=2) + "\n")
        except OSError as e:
            fail(f"-J {a.json_path}: cannot write: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
