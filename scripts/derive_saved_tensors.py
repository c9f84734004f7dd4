#!/usr/bin/env python3
"""Derives, with PyTorch itself, what a Hugging Face Llama decoder layer and its loss keep in memory
per token, and writes it as data: sim/presets/frameworks/derived/hf-llama.json.

On the CPU it trains one step of a tiny LlamaForCausalLM (SDPA attention) whose widths are all distinct,
at three token counts, for each precision (fp32 parameters under bf16 autocast, as Hugging Face's Trainer
runs; bf16 parameters without autocast, as DeepSpeed bf16 / ZeRO runs) and each checkpoint mode (none;
full, Transformers' gradient_checkpointing_enable()). Two instruments watch the step:
  - saved_tensors_hooks: every tensor autograd saves for backward, and (walking the graph) which grad_fn
    saved it;
  - a TorchDispatchMode live-bytes tracker: every op output's storage, from the op that made it until
    its last reference dies (weakref.finalize on the untyped storage), with the module and backward
    sub-phase it was made or freed in.
A storage's element count at the three token counts is w*T + c; w is matched to one symbol (hidden, ffn,
q, kv, heads, head_dim, one, vocab) with a coefficient, c to a parameter shape (hidden*q, ...). Every
size, peak and total in the output is a sum of such forms, so it can be evaluated for any model; the
script checks each form against the bytes it measured.

The step runs as shared/measurements/hf-h100/hf_step.py ran its steps: the model in training mode with
the config's use_cache (True), so each layer's K and V also go through a DynamicCache (torch.cat copies;
under autocast the K copy is fp32 and lives until the model's forward returns).
Where the CPU differs from CUDA, for the ops involved:
  - autocast: CPU and CUDA both cast linear/matmul/mm and scaled_dot_product_attention to bf16; CUDA also
    runs pow/rsqrt in fp32 and log_softmax/softmax/sum with an fp32 dtype, the CPU runs cross_entropy_loss
    in fp32. RMSNorm upcasts to fp32 itself and ForCausalLMLoss calls logits.float() first, so the saved
    dtypes are the same on both (ATen's autocast_mode.cpp lists).
  - attention: the CPU runs _scaled_dot_product_flash_attention_for_cpu, which saves query, key, value,
    output and the fp32 log-sum-exp; CUDA's _scaled_dot_product_flash_attention and
    _scaled_dot_product_cudnn_attention save the same five (plus seeds and offsets of a few bytes: their
    derivatives.yaml entries). All three take grouped-query K/V without repeating them (enable_gqa).
  - kernel scratch is not an op output and is seen on neither: FlashAttention-2's backward allocates an
    fp32 dq_accum (4 bytes per q value), an fp32 softmax_d (4 per head) and, when kv heads < heads,
    expanded bf16 dk and dv (2 x 2 per q value) inside the kernel.

Needs torch and transformers (it installs nothing). Usage:
  python3 scripts/derive_saved_tensors.py            # writes the JSON
  python3 scripts/derive_saved_tensors.py --check    # exit 1 if the committed JSON differs
  python3 scripts/derive_saved_tensors.py -o FILE    # writes elsewhere
"""
import argparse
import gc
import importlib
import json
import sys
import warnings
import weakref
from contextlib import nullcontext
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "sim" / "presets" / "frameworks" / "derived" / "hf-llama.json"
MODEL_PRESETS = ROOT / "sim" / "presets" / "models"

# The test model: every width (and half width: RoPE's rotate_half) distinct, so a tensor's width names one
# symbol. q != hidden (head_dim is set apart from hidden / heads, which Transformers still wants whole);
# the GQA group is 3, so K/V heads repeated
# for attention would show as 3 x kv.
TEST_DIMS = {"hidden": 90, "ffn": 136, "heads": 9, "head_dim": 14, "kv_heads": 3, "vocab": 97, "layers": 3}
TOKENS = (64, 96, 128)  # two separate per-token and constant parts; the third checks they are linear
MEASURED_LAYER = 1  # a middle layer: a layer on each side, so its backward starts and ends like any other
REFERENCE_MODELS = ("llama3-8b", "llama2-7b", "qwen2-7b")  # the shapes measured in shared/measurements/hf-h100
REFERENCE_TOKENS = 16384
PRECISIONS = ("fp32-params-autocast-bf16", "bf16-params")
CHECKPOINTS = ("none", "full")
TOKEN_SYMBOLS = ("hidden", "ffn", "q", "kv", "heads", "head_dim", "one", "vocab")
PHASES = ("mlp", "attention", "qkv")  # a layer's backward, in the order it runs
# Per-token widths that are one tensor over several symbols: torchtitan's fused wqkv projection writes
# q, k and v into one output (q + 2 kv values per token), which selective checkpointing saves whole.
COMPOSITE_WIDTHS = ({"q": 1, "kv": 2},)

# The model families this script derives: where each keeps its layers and sub-modules (the phase marks
# hang on them), its precisions and checkpoint modes, and the file it writes. hf-llama is the default
# (PRECISIONS, CHECKPOINTS and OUTPUT above are its); torchtitan_llama.py holds the torchtitan step.
FAMILIES = {
    "hf-llama": {"output": OUTPUT, "precisions": PRECISIONS, "checkpoints": CHECKPOINTS,
                 "layers": "model.layers.", "attention": "self_attn", "qkv": ("q_proj", "k_proj", "v_proj"),
                 "loss_marks": "lm_head", "needs": ("torch", "transformers"),
                 "test_model": {"attn_implementation": "sdpa"},
                 "description": "What a Hugging Face Transformers LlamaDecoderLayer (SDPA attention) and its "
                                "LlamaForCausalLM loss keep in memory, derived on the CPU by "
                                "scripts/derive_saved_tensors.py; regenerate with it, do not edit by hand."},
    "torchtitan-llama3": {"output": OUTPUT.parent / "torchtitan-llama3.json", "precisions": ("bf16-params",),
                          "checkpoints": ("none", "selective", "full"), "layers": "layers.",
                          "attention": "attention", "qkv": ("qkv_linear",), "loss_marks": "step",
                          "loss_chunks": 8,
                          "needs": ("torch", "torchtitan"),
                          "test_model": {"fuse_qkv": True, "rope": "ComplexRoPE (scaling llama)",
                                         "inner_attention": "FlexAttention, run as SDPA's CPU kernel "
                                                            "(cpu_attention: no flex backward on the CPU)",
                                         "loss": "ChunkedLossWrapper, 8 chunks, CrossEntropyLoss"},
                          "description": "What torchtitan's Llama 3 (torchtitan.models.llama3: fused wqkv, "
                                         "ComplexRoPE, SwiGLU, bf16 compute as under FSDP2's MixedPrecisionPolicy) "
                                         "layer and its chunked loss keep in memory, per activation checkpointing "
                                         "mode (none, torchtitan's per-op SelectiveAC, FullAC), derived on the CPU "
                                         "by scripts/derive_saved_tensors.py --family torchtitan-llama3; "
                                         "regenerate with it, do not edit by hand."},
}
FAM = FAMILIES["hf-llama"]  # the family being derived (main sets it)


def layer_of(module):
    """(layer index, the rest of the module path) of a module inside a decoder layer, else (None, None)."""
    prefix = FAM["layers"]
    if not module.startswith(prefix):
        return None, None
    head, _, rest = module[len(prefix):].partition(".")
    return (int(head), rest) if head.isdigit() else (None, None)


def symbol_values(d):
    """Per-token widths of a model: the schema's symbols (head_dim only for the RoPE tables)."""
    return {"hidden": d["hidden"], "ffn": d["ffn"], "q": d["heads"] * d["head_dim"],
            "kv": d["kv_heads"] * d["head_dim"], "heads": d["heads"], "head_dim": d["head_dim"], "one": 1,
            "vocab": d["vocab"]}


def constant_values(d):
    """Sizes that do not grow with tokens: the parameter shapes (a weight, its cast copy or its gradient)."""
    s = symbol_values(d)
    return {"hidden*q": s["hidden"] * s["q"], "hidden*kv": s["hidden"] * s["kv"],
            "hidden*ffn": s["hidden"] * s["ffn"], "vocab*hidden": s["vocab"] * s["hidden"],
            "hidden": s["hidden"], "one": 1}


def layer_params(d):
    """Parameters of one Llama decoder layer (no biases): q, k, v, o, gate, up, down, two RMSNorm weights."""
    s = symbol_values(d)
    return s["hidden"] * (2 * s["q"] + 2 * s["kv"]) + 3 * s["hidden"] * s["ffn"] + 2 * s["hidden"]


def reference_dims(name):
    """A model preset of the simulator (sim/presets/models) as the dims this script uses."""
    doc = json.loads((MODEL_PRESETS / f"{name}.json").read_text())

    def v(key):
        x = doc[key]
        return x["value"] if isinstance(x, dict) else x
    return {"hidden": v("hidden"), "ffn": v("ffn_hidden"), "heads": v("heads"), "head_dim": v("head_dim"),
            "kv_heads": v("kv_heads"), "vocab": v("vocab"), "layers": v("layers")}


# ----------------------------------------------------------------------------------------------------
# Forms: a size as {symbol: coefficient} per token plus {parameter shape: coefficient} per step.

def as_number(x):
    x = Fraction(x)
    return int(x) if x.denominator == 1 else float(x)


def clean(form):
    return {k: as_number(v) for k, v in sorted(form.items()) if v != 0}


def add_into(acc, form, sign=1):
    for k, v in form.items():
        acc[k] = acc.get(k, 0) + sign * v


def evaluate(form, values):
    return sum(Fraction(c) * values[k] for k, c in form.items())


def width_form(width, values, where):
    """The symbol (and coefficient) a per-token width is: an exact symbol first, else one multiple."""
    if width == 0:
        return {}
    exact = [s for s in TOKEN_SYMBOLS if s != "one" and values[s] == width]
    if exact:
        return {exact[0]: 1}
    composite = [c for c in COMPOSITE_WIDTHS if sum(k * values[s] for s, k in c.items()) == width]
    if composite:
        return dict(composite[0])
    chunks = FAM.get("loss_chunks", 1)  # one of the loss's chunks: a symbol's width over the chunk count
    chunked = [s for s in TOKEN_SYMBOLS if s != "one" and chunks > 1 and values[s] == width * chunks]
    if len(chunked) == 1:
        return {chunked[0]: Fraction(1, chunks)}
    multiples = [(s, k) for s in TOKEN_SYMBOLS if s != "one" for k in (Fraction(1, 2), 2, 3, 4) if k * values[s] == width]
    if len(multiples) == 1:
        return {multiples[0][0]: multiples[0][1]}
    if width <= 4:
        return {"one": width}
    raise SystemExit(f"derive_saved_tensors: {where}: per-token width {width} matches "
                     f"{'several symbols ' + str(multiples) if multiples else 'no symbol'}; "
                     f"the test model's dims {TEST_DIMS} must keep widths apart")


def constant_form(count, values):
    if count == 0:
        return {}
    for k, v in values.items():
        if k != "one" and v == count:
            return {k: 1}
    if values["hidden*q"] + 2 * values["hidden*kv"] == count:  # the fused wqkv weight (or its gradient)
        return {"hidden*q": 1, "hidden*kv": 2}
    return {"one": count}


# ----------------------------------------------------------------------------------------------------
# The instruments.

def in_checkpoint_code():
    """Whether torch.utils.checkpoint is on the Python stack: it saves a checkpointed layer's inputs itself."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename.replace("\\", "/").endswith("torch/utils/checkpoint.py"):
            return True
        f = f.f_back
    return False


def make_tracker_class():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Tracker(TorchDispatchMode):
        """Live bytes of op outputs, storage by storage, with the module and phase each was made and freed in;
        also the saved-tensor pack/unpack hooks and the phase marks of the backward."""

        def __init__(self, model):
            super().__init__()
            self.recs = []         # one per storage: made by an op (counted) or met as an input (external)
            self.live_ids = {}     # id(untyped storage) -> rec index, while the storage lives
            self.events = []       # ("a", rec) allocation, ("f", rec) free, ("m", name) phase mark
            self.phase = "setup"
            self.stack = []        # qualified names of the modules running
            self.packs = []        # one per tensor autograd saved under our hooks
            self.reading = None    # the grad_fn whose saved tensors the graph walk is reading
            self.layer_inputs = {}  # layer index -> rec index of its input's storage
            self.last_output = None  # rec index of the last layer's output (the final norm's input)
            # torch.distributed's checkpoint_wrapper (torchtitan's activation checkpointing) inserts a module
            # level; the names drop it, and the wrapper itself is not watched (its inner module is)
            self.names = {m: n.replace("._checkpoint_wrapped_module", "") for n, m in model.named_modules()}
            self.params = {id(p.untyped_storage()): n.replace("._checkpoint_wrapped_module", "")
                           for n, p in model.named_parameters()}
            self.handles = []
            for m in model.modules():
                if type(m).__name__ == "CheckpointWrapper":
                    continue
                self.handles.append(m.register_forward_pre_hook(self._pre))
                self.handles.append(m.register_forward_hook(self._post))

        # -- storages
        def _rec_of(self, t, op, module, external, param=None):
            st = t.untyped_storage()
            key = id(st)
            if key in self.live_ids or key in self.params:
                return self.live_ids.get(key)
            rid = len(self.recs)
            self.recs.append({"op": op, "module": module, "phase": self.phase, "dtype": str(t.dtype)[6:],
                              "elem": t.element_size(), "nbytes": st.nbytes(), "external": external,
                              "param": param, "freed_phase": None, "shape": list(t.shape), "role": None,
                              "with_param": False})
            self.live_ids[key] = rid
            fin = weakref.finalize(st, self._freed, key, rid)
            fin.atexit = False
            if not external:
                self.events.append(("a", rid))
            return rid

        def _freed(self, key, rid):
            self.live_ids.pop(key, None)
            rec = self.recs[rid]
            rec["freed_phase"] = self.phase
            if not rec["external"]:
                self.events.append(("f", rid))

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            for t in inputs:  # storages made before the tracker: not counted, but outputs may alias them
                self._rec_of(t, "external", None, True)
            out = func(*args, **kwargs)
            op = str(func.overloadpacket.__name__)
            in_params = [self.params.get(id(t.untyped_storage())) for t in inputs]
            param = in_params[0] if op == "_to_copy" and inputs else None
            module = self.stack[-1] if self.stack else ""
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    rid = self._rec_of(t, op, module, False, param)
                    if rid is not None and self.recs[rid]["op"] == op:
                        self.recs[rid]["with_param"] = any(in_params)
            if op.startswith("_scaled_dot_product") and not op.endswith("_backward"):  # name what attention reads
                for role, t in zip(("query", "key", "value"), inputs):
                    rid = self.live_ids.get(id(t.untyped_storage()))
                    if rid is not None:
                        self.recs[rid]["role"] = role
            return out

        # -- phases
        def mark(self, name):
            self.events.append(("m", name))
            self.phase = name
            if not name.startswith("forward"):
                # a checkpoint's recompute stops early by raising, past the post-hooks of the modules it was in
                self.stack = []

        def _hook_marks(self, t, names):
            if self.phase.startswith("forward") and t.requires_grad and t.grad_fn is not None:
                def fire(_grad):
                    for n in names:
                        if n.endswith(".qkv") and self.phase == n:
                            continue  # q, k and v: the first of the three starts the phase
                        self.mark(n)
                t.register_hook(fire)

        def _pre(self, module, args):
            name = self.names[module]
            self.stack.append(name)
            if FAM["loss_marks"] == "lm_head" and name == "lm_head" and self.phase.startswith("forward"):
                self.mark("forward.loss")
                self._hook_marks(args[0], ["final_norm.backward"])
            i, rest = layer_of(name)
            if i is not None and rest == "" and self.phase.startswith("forward"):
                self.mark(f"forward.L{i}")
                self.layer_inputs[i] = self._rec_of(args[0], "external", None, True)
                if i == 0:
                    self._hook_marks(args[0], ["L0.end"])

        def _post(self, module, args, output):
            name = self.names[module]
            if self.stack:
                self.stack.pop()
            i, rest = layer_of(name)
            if i is None:
                return
            out = output[0] if isinstance(output, tuple) else output
            if rest == "":  # the decoder layer: its output's gradient ends the layer above, starts it
                if self.phase.startswith("forward"):
                    self.last_output = self._rec_of(out, "external", None, True)
                    self.mark(f"forward.L{i}.end")
                above = [f"L{i + 1}.end"] if i + 1 < TEST_DIMS["layers"] else []
                self._hook_marks(out, above + [f"L{i}.mlp"])
            elif rest == FAM["attention"]:
                self._hook_marks(out, [f"L{i}.attention"])
            elif rest in tuple(f"{FAM['attention']}.{q}" for q in FAM["qkv"]):
                # a fused projection returns q, k and v: the first gradient of the three starts the phase
                for t in (output if isinstance(output, tuple) else (output,)):
                    self._hook_marks(t, [f"L{i}.qkv"])

        # -- saved tensors
        def pack(self, t):
            rid = self._rec_of(t, "external", None, True)
            param = self.params.get(id(t.untyped_storage()))
            by = {"torch.utils.checkpoint (the layer's inputs)"} if in_checkpoint_code() else set()
            self.packs.append({"rec": rid, "param": param, "module": self.stack[-1] if self.stack else "",
                               "savers": by})
            return (len(self.packs) - 1, t)

        def unpack(self, packed):
            idx, t = packed
            if self.reading is not None:
                self.packs[idx]["savers"].add(self.reading)
            return t

        def walk_graph(self, root):
            """Reads every saved tensor of the graph once, so unpack learns which grad_fn saved it. Only
            without checkpointing: a checkpointed tensor's unpack would recompute the layer."""
            seen, todo = set(), [root.grad_fn]
            while todo:
                node = todo.pop()
                if node is None or node in seen:
                    continue
                seen.add(node)
                for attr in sorted(dir(node)):
                    if attr.startswith("_saved_"):
                        self.reading = node.name()
                        try:
                            getattr(node, attr)
                        finally:
                            self.reading = None
                todo.extend(f for f, _ in node.next_functions)

        def detach(self):
            for h in self.handles:
                h.remove()

    return Tracker


def build_model(precision, checkpoint):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    d = TEST_DIMS
    cfg = LlamaConfig(hidden_size=d["hidden"], intermediate_size=d["ffn"], num_hidden_layers=d["layers"],
                      num_attention_heads=d["heads"], num_key_value_heads=d["kv_heads"], head_dim=d["head_dim"],
                      vocab_size=d["vocab"], max_position_embeddings=max(TOKENS), attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    if precision == "bf16-params":
        model = model.to(torch.bfloat16)
    model.train()
    if checkpoint == "full":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gradient_checkpointing_enable is a deprecated alias in 5.x
            model.gradient_checkpointing_enable()
    return model


def build_titan_model(checkpoint):
    """torchtitan's Llama 3 built with its own config functions (torchtitan/models/llama3/__init__.py,
    _build_llama3_layers: fused wqkv, ComplexRoPE with Llama scaling, FlexAttention, SwiGLU FeedForward),
    at the test dims (head_dim set apart from hidden / heads through make_gqa_config's head_dim), its
    parameters in bf16 as FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16) computes them, and
    torchtitan's own activation checkpointing applied (SelectiveAC: per-op; FullAC)."""
    import torch
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
    from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
    from torchtitan.models.common.config_utils import get_attention_config, make_ffn_config, make_gqa_config
    from torchtitan.models.llama3 import (_EMBEDDING_INIT, _LINEAR_INIT, _NORM_INIT, Llama3Model,
                                          Llama3TransformerBlock, _depth_init, _output_linear_init)
    d = TEST_DIMS
    rope = ComplexRoPE.Config(dim=d["head_dim"], max_seq_len=max(TOKENS), theta=500000, scaling="llama")
    layers = [Llama3TransformerBlock.Config(
        attention_norm=RMSNorm.Config(normalized_shape=d["hidden"], param_init=_NORM_INIT),
        ffn_norm=RMSNorm.Config(normalized_shape=d["hidden"], param_init=_NORM_INIT),
        attention=make_gqa_config(dim=d["hidden"], n_heads=d["heads"], n_kv_heads=d["kv_heads"],
                                  head_dim=d["head_dim"], wqkv_param_init=_LINEAR_INIT,
                                  wo_param_init=_depth_init(i), inner_attention=get_attention_config("flex"),
                                  fuse_qkv=True, rope=rope),
        feed_forward=make_ffn_config(dim=d["hidden"], hidden_dim=d["ffn"], w1_param_init=_LINEAR_INIT,
                                     w2w3_param_init=_depth_init(i)))
        for i in range(d["layers"])]
    cfg = Llama3Model.Config(
        dim=d["hidden"], vocab_size=d["vocab"], layers=layers,
        tok_embeddings=Embedding.Config(num_embeddings=d["vocab"], embedding_dim=d["hidden"],
                                        param_init=_EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=d["hidden"], param_init=_NORM_INIT),
        lm_head=Linear.Config(in_features=d["hidden"], out_features=d["vocab"],
                              param_init=_output_linear_init(d["hidden"])))
    torch.manual_seed(0)
    model = cfg.build()
    model.init_states(buffer_device=torch.device("cpu"))
    for prm in model.parameters():  # FSDP2 casts parameters only: the RoPE cache stays complex64
        prm.data = prm.data.to(torch.bfloat16)
    model.train()

    class CpuSelectiveAC(SelectiveAC):
        """torchtitan's per-op SAC saves the flex_attention op's outputs (_get_default_save_ops); on the
        CPU the SDPA kernel stands in for it (cpu_attention below), so it is saved in its place."""

        def get_save_ops(self):
            return super().get_save_ops() | {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}

    if checkpoint == "selective":
        CpuSelectiveAC(SelectiveAC.Config()).apply(model)
    elif checkpoint == "full":
        FullAC(FullAC.Config()).apply(model)
    return model


def cpu_attention(q, k, v, *, score_mod, block_mask, scale, enable_gqa, return_aux, kernel_options):
    """FlexAttention has no CPU backward (torch 2.15: 'FlexAttention does not support backward on CPU'), so
    the derivation runs SDPA's CPU flash kernel in its place, causal, with grouped-query K/V: it saves query,
    key, value, output and the fp32 log-sum-exp, as the flex_attention op does (FlexAttentionAutogradOp in
    torch/_higher_order_ops/flex_attention.py also saves max_scores, fp32 per head and token, and the block
    mask: the profile adds the first, torchtitan.json says so)."""
    import torch.nn.functional as F
    del score_mod, block_mask, return_aux, kernel_options
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=enable_gqa), None


def run_titan_step(checkpoint, tokens):
    """One step as torchtitan's Trainer runs it (torchtitan/trainer.py, _forward_backward_body): the model
    with _skip_lm_head, then ChunkedLossWrapper (8 chunks; lm_head, cross entropy and each chunk's backward
    run inside the loss call), then loss.backward() through the decoder."""
    import torch
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
    from torchtitan.models.common.attention import FlexAttention
    FlexAttention.compiled_flex_attn = staticmethod(cpu_attention)
    model = build_titan_model(checkpoint)
    loss_fn = ChunkedLossWrapper(ChunkedLossWrapper.Config(
        loss_fn=CrossEntropyLoss.Config(global_vocab_size=TEST_DIMS["vocab"])))
    loss_fn.set_lm_head(model.lm_head)
    model._skip_lm_head = True
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, TEST_DIMS["vocab"], (1, tokens), generator=gen)
    labels = torch.randint(0, TEST_DIMS["vocab"], (1, tokens), generator=gen)
    positions = torch.arange(tokens).unsqueeze(0)
    masks = model.get_attention_masks(positions)  # made with the batch, before the step (post_dataloading_process)
    valid = torch.tensor(tokens)

    def forward(tracker):
        pred = model(ids, positions=positions, attention_masks=masks)
        tracker.mark("forward.loss")
        tracker._hook_marks(pred, ["final_norm.backward"])
        loss, _ = loss_fn(pred, labels, valid)
        del pred
        tracker.mark("forward.end")
        return loss
    return instrumented_step(model, checkpoint, forward)


def run_step(precision, checkpoint, tokens):
    """One training step (forward with labels, backward) under the instruments; returns the tracker."""
    if FAM is FAMILIES["torchtitan-llama3"]:
        return run_titan_step(checkpoint, tokens)
    import torch
    import transformers
    transformers.logging.set_verbosity_error()  # checkpointing turns use_cache off, and says so each time
    model = build_model(precision, checkpoint)
    ids = torch.randint(0, TEST_DIMS["vocab"], (1, tokens), generator=torch.Generator().manual_seed(1))
    autocast = (torch.autocast(device_type="cpu", dtype=torch.bfloat16)
                if precision == "fp32-params-autocast-bf16" else nullcontext())

    def forward(tracker):
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss  # the output object is dropped, as hf_step.py does
            tracker.mark("forward.end")
        return loss
    return instrumented_step(model, checkpoint, forward)


def instrumented_step(model, checkpoint, forward):
    """forward(tracker) -> loss (it marks forward.end itself), then the backward, under the instruments;
    returns the tracker."""
    import torch
    tracker = make_tracker_class()(model)
    gc.disable()  # frees happen when references die, in the same order at every token count
    try:
        with tracker, torch.autograd.graph.saved_tensors_hooks(tracker.pack, tracker.unpack):
            tracker.mark("forward")
            loss = forward(tracker)
            tracker.mark("forward.after_autocast")
        with tracker:
            if checkpoint == "none":
                tracker.walk_graph(loss)
            tracker.mark("backward")
            loss.backward()
            tracker.mark("backward.end")
            del loss
    finally:
        tracker.detach()
        gc.enable()
    return tracker


# ----------------------------------------------------------------------------------------------------
# From three steps to forms.

def event_index(events, name):
    return next(i for i, e in enumerate(events) if e == ("m", name))


def canonical_frees(events):
    """Frees between two allocations, in storage order: autocast's cache is a hash map keyed by address, so
    leaving autocast frees its copies in an order that changes from run to run (and does not matter: peaks
    are read after allocations)."""
    out, run = [], []
    for e in events + [("end", None)]:
        if e[0] == "f":
            run.append(e)
            continue
        out.extend(sorted(run, key=lambda x: x[1]))
        run = []
        if e[0] != "end":
            out.append(e)
    return out


def align(runs):
    """The runs at each token count did the same ops in the same order; returns each storage's form."""
    for r in runs.values():
        r.events = canonical_frees(r.events)
    base = runs[TOKENS[0]]
    for t, r in runs.items():
        if len(r.recs) != len(base.recs) or [e[:2] for e in r.events] != [e[:2] for e in base.events]:
            raise SystemExit(f"derive_saved_tensors: the step at {t} tokens ran other ops than at {TOKENS[0]}")
    svals, cvals = symbol_values(TEST_DIMS), constant_values(TEST_DIMS)
    forms = []
    t0, t1, t2 = TOKENS
    for i, rec in enumerate(base.recs):
        n = [runs[t].recs[i]["nbytes"] // rec["elem"] for t in TOKENS]
        width = Fraction(n[1] - n[0], t1 - t0)
        const = n[0] - width * t0
        where = f"{rec['module'] or '(top)'} {rec['op']} {rec['shape']}"
        if (width * t2 + const != n[2] or (width * FAM.get("loss_chunks", 1)).denominator != 1
                or const.denominator != 1 or const < 0):
            raise SystemExit(f"derive_saved_tensors: {where}: sizes {n} at {TOKENS} tokens are not w*T + c")
        pt = {k: v * rec["elem"] for k, v in width_form(width, svals, where).items()}
        ct = {k: v * rec["elem"] for k, v in constant_form(int(const), cvals).items()}
        for t in TOKENS:  # the form must give back the bytes measured at every token count
            if evaluate(pt, svals) * t + evaluate(ct, cvals) != runs[t].recs[i]["nbytes"]:
                raise SystemExit(f"derive_saved_tensors: {where}: form {pt} + {ct} misses the measured bytes")
        forms.append((pt, ct))
    return forms


def rel(module, layer):
    prefix = f"{FAM['layers']}{layer}"
    if module == prefix:
        return "(layer)"
    return module[len(prefix) + 1:] if module.startswith(prefix + ".") else module


def phase_of(name, layer):
    """A phase mark as the schema's backward sub-phase of the measured layer, or as it is."""
    if name and name.startswith(f"L{layer}.") and name.split(".")[1] in PHASES:
        return name.split(".")[1]
    return name


UNREAD = "(saved; grad_fn not read)"


def savers_of(tracker):
    out = {}
    for p in tracker.packs:
        if p["rec"] is not None:
            out.setdefault(p["rec"], set()).update(p["savers"] or {UNREAD})
    return out


NORMS = ("input_layernorm", "post_attention_layernorm", "model.norm")
PRODUCERS = {"add": "RoPE output", "cat": "its DynamicCache copy (use_cache)", "_to_copy": "cast by autocast",
             "mm": "the projection's output"}


def entry_name(rec, module, is_input, layer):
    """What a kept storage is, in words, from the op that made it and where."""
    op, dt = rec["op"], rec["dtype"]
    if is_input:
        return "layer input (residual stream: the previous layer's output)"
    if rec["param"]:
        name = rec["param"].split(".", 3)[-1] if layer is not None else rec["param"]
        return f"{name}: {dt} copy made by autocast (its cache, then saved by the GEMM)"
    if rec["role"]:
        return f"SDPA {rec['role']} ({PRODUCERS.get(op, op)}, {dt})"
    if op.startswith("_scaled_dot_product"):
        return f"SDPA output ({dt})" if len(rec["shape"]) == 4 else f"SDPA log-sum-exp ({dt}, one per head)"
    last = module.split(".")[-1]
    if module.endswith(NORMS):
        return {"_to_copy": f"{module}: {'fp32 upcast of its input' if dt == 'float32' else 'normalized input cast back to ' + dt}",
                "rsqrt": f"{module}: rsqrt of the mean square (fp32, one per token)",
                "mul": f"{module}: {'output (weight * normalized), ' + dt if rec['with_param'] else 'normalized input (x * rsqrt), ' + dt}",
                }.get(op, f"{module}: {op} output")
    if module.endswith("_proj"):
        return (f"{last} input cast to {dt} by autocast (each projection casts its own copy)" if op == "_to_copy"
                else f"{last} output ({dt})")
    if module == "lm_head" and op == "_to_copy":
        return f"lm_head input (final norm output) cast to {dt} by autocast"
    if module.endswith("act_fn"):
        return f"SiLU(gate_proj output) ({dt})"
    if module.endswith("mlp") and op == "mul":
        return f"SiLU(gate) * up: down_proj input ({dt})"
    if module.endswith("self_attn") and op == "cat":
        return f"K copied into the DynamicCache (use_cache; {dt})"
    if module in ("(layer)",) and op == "add":
        return f"residual stream after attention: post_attention_layernorm input ({dt})"
    if layer_of(module)[0] is not None and op == "add":
        return f"last layer's output: final norm input ({dt})"
    if module == "model.rotary_emb":
        return f"RoPE cos or sin table ({dt}, shared by all layers)"
    if module == "model" and op == "add":
        return "position ids (int64)"
    if op == "constant_pad_nd":
        return "labels padded by one (ForCausalLMLoss's shift; int64)"
    if op == "_log_softmax":
        return f"log-softmax of the fp32 logits (cross entropy; {dt})"
    if op == "nll_loss_forward":
        return "loss or total weight (scalar)"
    return f"{module}: {op} output ({dt})"


def alive_at(tracker, mark):
    """The counted storages alive when `mark` was reached."""
    alive = set()
    for kind, rid in tracker.events[:event_index(tracker.events, mark)]:
        if kind == "a":
            alive.add(rid)
        elif kind == "f":
            alive.discard(rid)
    return alive


def layer_entries(tracker, forms, layer, rids):
    """The storages of `rids` that belong to `layer` (its input, or made inside it but not the last layer's
    output, which the final norm keeps), as entries; layer=None: those of no layer (embedding, RoPE tables,
    final norm, head, loss). Each entry comes with its byte forms (per token, constant)."""
    inputs = {rid: i for i, rid in tracker.layer_inputs.items() if rid is not None}
    savers = savers_of(tracker)
    entries = []
    for rid in sorted(rids):
        rec = tracker.recs[rid]
        owner = inputs.get(rid)
        if owner is None and rid != tracker.last_output:
            owner = layer_of(rec["module"])[0]
        if owner != layer:
            continue
        module = rel(rec["module"], layer) if layer is not None else (rec["module"] or "(top)")
        pt, ct = forms[rid]
        e = {"name": entry_name(rec, module, rid in inputs, layer), "module": module,
             "op": rec["op"], "dtype": rec["dtype"], "bytes": rec["elem"]}
        if pt:
            e["per_token"] = clean({k: Fraction(v, rec["elem"]) for k, v in pt.items()})
        if ct:
            e["per_layer" if layer is not None else "constant"] = clean(
                {k: Fraction(v, rec["elem"]) for k, v in ct.items()})
        if rec["param"]:
            e["cast_of"] = rec["param"] if layer is None else rec["param"].split(".", 3)[-1]
        e["saved_by"] = sorted(savers.get(rid, ())) or ["(not saved: held by reference)"]
        e["until"] = phase_of(rec["freed_phase"], layer) if layer is not None else rec["freed_phase"]
        entries.append((e, pt, ct))
    return entries


def window_peaks(tracker, forms, start_mark, end_mark, sub_marks, refs, offsets=None):
    """Peak of live bytes in [start_mark, end_mark) beyond what was live at start_mark: the running sum of
    allocations minus frees, as a form, maximised after each allocation. sub_marks: {mark: label} splits the
    window; each part's peak is measured against the same start, plus offsets[label] (a form) if given."""
    offsets = offsets or {}
    ev = tracker.events
    s, e = event_index(ev, start_mark), event_index(ev, end_mark)
    pt, ct = {}, {}
    label = sub_marks.get(start_mark, "all")
    best = {}  # (part, ref, "per_token" | "at_reference") -> (value, per-token form, constant form, where)

    def consider(part, where):
        o_pt, o_ct = offsets.get(part, ({}, {}))
        p, c = dict(pt), dict(ct)
        add_into(p, o_pt)
        add_into(c, o_ct)
        for ref, (rs, rc) in refs.items():
            for key, value in (("per_token", evaluate(p, rs)),
                               ("at_reference", evaluate(p, rs) * REFERENCE_TOKENS + evaluate(c, rc))):
                k = (part, ref, key)
                if k not in best or value > best[k][0]:
                    best[k] = (value, p, c, where)

    for kind, x in ev[s + 1:e]:
        if kind == "m":
            label = sub_marks.get(x, label)
            continue
        f_pt, f_ct = forms[x]
        add_into(pt, f_pt, 1 if kind == "a" else -1)
        add_into(ct, f_ct, 1 if kind == "a" else -1)
        if kind == "a":
            rec = tracker.recs[x]
            where = (f"{rec['op']} in {rec['module'] or '(top)'}" if rec["phase"].startswith("forward")
                     else f"{rec['op']} in backward phase {rec['phase']}")
            consider("all", where)
            if label != "all":
                consider(label, where)
    # check_window compares the same running sum with the bytes measured at each test token count
    return best, (pt, ct)


def describe_peak(best, part, refs):
    out = {}
    for ref in refs:
        v, pt, ct, where = best[(part, ref, "per_token")]
        out[ref] = {"bytes_per_token": as_number(v), "per_token_bytes": clean(pt), "at_op": where}
        v2, pt2, ct2, where2 = best[(part, ref, "at_reference")]
        out[ref][f"bytes_at_{REFERENCE_TOKENS}_tokens"] = as_number(v2)
        out[ref][f"at_{REFERENCE_TOKENS}_tokens"] = {"per_token_bytes": clean(pt2), "constant_bytes": clean(ct2),
                                                      "at_op": where2}
    return out


def check_window(runs, forms, start_mark, end_mark):
    """The forms' running sum equals the live bytes the tracker measured, at each token count."""
    svals, cvals = symbol_values(TEST_DIMS), constant_values(TEST_DIMS)
    for t, r in runs.items():
        s, e = event_index(r.events, start_mark), event_index(r.events, end_mark)
        measured = form_sum = 0
        for kind, x in r.events[s + 1:e]:
            if kind == "m":
                continue
            sign = 1 if kind == "a" else -1
            measured += sign * r.recs[x]["nbytes"]
            pt, ct = forms[x]
            form_sum += sign * (evaluate(pt, svals) * t + evaluate(ct, cvals))
            if measured != form_sum:
                raise SystemExit(f"derive_saved_tensors: {start_mark}..{end_mark} at {t} tokens: "
                                 f"forms give {form_sum} live bytes, the tracker {measured}")


def totals(entries, refs_full):
    """Per-token bytes (as a form and for each reference model) and per-layer bytes of a list of entries."""
    pt, ct = {}, {}
    for _, p, c in entries:
        add_into(pt, p)
        add_into(ct, c)
    out = {"per_token_bytes": clean(pt)}
    if ct:
        out["per_layer_bytes"] = clean(ct)
    for ref, (rs, rc, params) in refs_full.items():
        x = {"bytes_per_token": as_number(evaluate(pt, rs))}
        if ct:
            x["bytes_per_layer"] = as_number(evaluate(ct, rc))
            x["bytes_per_layer_param"] = round(float(evaluate(ct, rc) / params), 6)
        out[ref] = x
    return out


def derive_configuration(precision, checkpoint, refs):
    runs = {t: run_step(precision, checkpoint, t) for t in TOKENS}
    forms = align(runs)
    tr = runs[TOKENS[0]]
    refs_full = refs
    refs_sym = {name: (rs, rc) for name, (rs, rc, p) in refs.items()}
    layer = MEASURED_LAYER
    kept = alive_at(tr, "backward")
    lay = layer_entries(tr, forms, layer, kept)
    # every layer keeps the same: compare the measured layer with the others, entry by entry
    for other in range(TEST_DIMS["layers"]):
        o = layer_entries(tr, forms, other, kept)
        strip = [(e["name"], e.get("per_token"), e.get("per_layer"), e["bytes"], e["saved_by"]) for e, _, _ in o]
        mine = [(e["name"], e.get("per_token"), e.get("per_layer"), e["bytes"], e["saved_by"]) for e, _, _ in lay]
        if strip != mine:
            raise SystemExit(f"derive_saved_tensors: {precision}/{checkpoint}: layer {other} keeps "
                             f"{strip}, layer {layer} {mine}")
    outside = layer_entries(tr, forms, None, kept)
    # alive when the loss starts but not kept for backward: a forward-only cost of every layer at once
    at_loss = layer_entries(tr, forms, layer, alive_at(tr, "forward.loss") - kept)
    subs = {f"L{layer}.{p}": p for p in PHASES}
    check_window(runs, forms, f"L{layer}.mlp", f"L{layer}.end")
    best, net_end = window_peaks(tr, forms, f"L{layer}.mlp", f"L{layer}.end", subs, refs_sym)
    # the schema's model of the backward: a kept tensor lives to the end of its `until` phase. What a phase
    # holds beyond that is the running sum plus what the kept list says is already gone before the phase.
    offsets = {}
    for i, ph in enumerate(PHASES):
        o_pt, o_ct = {}, {}
        for e, p, c in lay:
            if e["until"] in PHASES[:i]:
                add_into(o_pt, p)
                add_into(o_ct, c)
        offsets[ph] = (o_pt, o_ct)
    beyond, _ = window_peaks(tr, forms, f"L{layer}.mlp", f"L{layer}.end", subs, refs_sym, offsets)
    layer_bwd = {"window": f"layer {layer}'s backward: from its output's gradient to its input's gradient",
                 "baseline": "live bytes when the layer's backward starts (its kept tensors included)",
                 "peak": describe_peak(best, "all", refs_sym),
                 "phases": {p: describe_peak(best, p, refs_sym) for p in PHASES},
                 "phases_beyond_kept": {p: describe_peak(beyond, p, refs_sym) for p in PHASES},
                 "net_at_end": {"per_token_bytes": clean(net_end[0]), "constant_bytes": clean(net_end[1])}}
    check_window(runs, forms, f"forward.L{layer}", f"forward.L{layer}.end")
    fwd_best, fwd_net = window_peaks(tr, forms, f"forward.L{layer}", f"forward.L{layer}.end", {}, refs_sym)
    layer_fwd = {"window": f"layer {layer}'s forward, from its input to its output",
                 "baseline": "live bytes when the layer's forward starts (its input included)",
                 "peak": describe_peak(fwd_best, "all", refs_sym),
                 "net_at_end": {"per_token_bytes": clean(fwd_net[0]), "constant_bytes": clean(fwd_net[1])}}
    loss_fwd_best, loss_fwd_net = window_peaks(tr, forms, "forward.loss", "forward.end", {}, refs_sym)
    check_window(runs, forms, "forward.loss", "forward.end")
    loss_bwd_best, loss_bwd_net = window_peaks(tr, forms, "backward", "final_norm.backward", {}, refs_sym)
    check_window(runs, forms, "backward", "final_norm.backward")
    loss_kept = [x for x in outside if x[0]["module"] in ("lm_head", "(top)")]
    loss = {"kept_after_forward": [e for e, _, _ in loss_kept],
            "kept_totals": totals(loss_kept, refs_full),
            "forward": {"window": "from lm_head's start to the end of the forward (the output object dropped)",
                        "peak": describe_peak(loss_fwd_best, "all", refs_sym),
                        "net_at_end": {"per_token_bytes": clean(loss_fwd_net[0]),
                                       "constant_bytes": clean(loss_fwd_net[1])}},
            "backward": {"window": "from loss.backward() to the gradient of lm_head's input",
                         "peak": describe_peak(loss_bwd_best, "all", refs_sym),
                         "net_at_end": {"per_token_bytes": clean(loss_bwd_net[0]),
                                        "constant_bytes": clean(loss_bwd_net[1])}}}
    casts = weight_casts(tr, forms, refs_full)
    return {"precision": precision, "checkpoint": checkpoint,
            "layer": [e for e, _, _ in lay],
            "layer_totals": totals(lay, refs_full),
            "layer_alive_at_loss_not_kept": [e for e, _, _ in at_loss],
            "layer_alive_at_loss_not_kept_totals": totals(at_loss, refs_full),
            "model": [e for e, _, _ in outside if e["module"] not in ("lm_head", "(top)")],
            "loss": loss,
            "layer_forward": layer_fwd,
            "layer_backward": layer_bwd,
            "weight_casts": casts}


def entry_lists(config):
    return [config["layer"], config["model"], config["loss"]["kept_after_forward"]]


def fill_savers(config, plain):
    """Under checkpointing the graph walk would recompute the layers, so the grad_fn names of tensors saved
    outside them come from the same precision's run without checkpointing, tensor for tensor."""
    key = ("module", "op", "dtype", "per_token", "per_layer", "constant")
    known = {tuple(json.dumps(e.get(k)) for k in key): e["saved_by"] for lst in entry_lists(plain) for e in lst}
    for lst in entry_lists(config):
        for e in lst:
            if e["saved_by"] == [UNREAD]:
                e["saved_by"] = known.get(tuple(json.dumps(e.get(k)) for k in key), e["saved_by"])


def weight_casts(tracker, forms, refs_full):
    """Autocast's bf16 copies of the weights: how many values per layer parameter are alive at the end of
    the forward (inside autocast: its cache), after autocast is left (only those saved for backward), and in
    which phase of their layer's backward they die."""
    out = {}
    layer = MEASURED_LAYER
    prefix = f"{FAM['layers']}{layer}."
    for m in ("forward.end", "forward.after_autocast"):
        mine = [r for r in alive_at(tracker, m) if (tracker.recs[r]["param"] or "").startswith(prefix)]
        ct = {}
        for r in mine:
            add_into(ct, forms[r][1])
        x = {"per_layer_bytes": clean(ct)}
        for ref, (rs, rc, params) in refs_full.items():
            x[ref] = {"bytes_per_layer_param": round(float(evaluate(ct, rc) / params), 6)}
        out["alive_at_" + m.replace(".", "_")] = x
    # each copy of a weight: the phase it was made in and the phase it died in (under checkpointing a weight
    # is cast twice: in the forward, and again by the recompute in its layer's backward)
    out["copies_made_and_freed"] = {}
    for rec in tracker.recs:
        if (rec["param"] or "").startswith(prefix):
            made = "forward" if rec["phase"].startswith("forward") else phase_of(rec["phase"], layer)
            out["copies_made_and_freed"].setdefault(rec["param"][len(prefix):], []).append(
                [made, phase_of(rec["freed_phase"], layer)])
    return out


def reference_values():
    refs = {}
    for name in REFERENCE_MODELS:
        d = reference_dims(name)
        refs[name] = (symbol_values(d), constant_values(d), layer_params(d))
    return refs


def derive():
    import torch
    torch.set_num_threads(1)  # one thread: the CPU kernels' scratch (not seen here anyway) stays small
    vals = symbol_values(TEST_DIMS)
    named = [vals[s] for s in TOKEN_SYMBOLS if s != "one"]
    if len(set(named)) != len(named):
        raise SystemExit(f"derive_saved_tensors: the test model's widths {vals} are not all distinct")
    refs = reference_values()
    configs = []
    for p in FAM["precisions"]:
        for c in FAM["checkpoints"]:
            configs.append(derive_configuration(p, c, refs))
            if c == "none":
                plain = configs[-1]
            else:
                fill_savers(configs[-1], plain)
    return {
        "description": FAM["description"],
        "versions": {m: importlib.import_module(m).__version__.split("+")[0] for m in FAM["needs"]},
        "method": {
            "saved": "torch.autograd.graph.saved_tensors_hooks (saved_by: the grad_fn names, read by walking "
                     "the graph; without checkpointing only)",
            "live": "a TorchDispatchMode counting each op output's untyped storage from the op that made it to "
                    "its weakref.finalize; kernel-internal scratch is not an op output and is not seen",
            "kept": "'layer': storages alive after the forward (autocast left, the output object dropped) that "
                    "belong to the measured layer: made inside it, or its input. Deduplicated by storage",
            "forms": "a storage's elements at the test token counts are w*T + c: w is matched to one symbol "
                     "(per_token: values per token), c to a parameter shape (per_layer: values per layer, "
                     "e.g. hidden*ffn); bytes = bytes per value. per_token_bytes sums bytes per token by symbol",
            "until": "the backward sub-phase of the layer in which the storage died: mlp (from the layer "
                     "output's gradient to self_attn's output gradient: MLP and post_attention_layernorm), "
                     "attention (o_proj, SDPA, RoPE), qkv (q/k/v projections, input_layernorm, residual)",
            "peaks": "live bytes beyond the window's start, after each allocation; per_token: the largest "
                     "per-token part (long sequences); at N tokens: largest total with the constant part",
        },
        "test_model": dict(TEST_DIMS, q=vals["q"], kv=vals["kv"], tokens=list(TOKENS),
                           measured_layer=MEASURED_LAYER, **FAM["test_model"], device="cpu"),
        "reference_models": {name: dict(reference_dims(name), layer_params=refs[name][2],
                                        source=f"sim/presets/models/{name}.json") for name in REFERENCE_MODELS},
        "configurations": configs,
    }


def render(table):
    return json.dumps(table, indent=1, sort_keys=False) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=sorted(FAMILIES), default="hf-llama",
                    help="the model family to derive (default hf-llama)")
    ap.add_argument("-o", "--output", type=Path, help="where to write (default: the family's file, "
                    "sim/presets/frameworks/derived/<family>.json)")
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    a = ap.parse_args(argv)
    global FAM
    FAM = FAMILIES[a.family]
    a.output = a.output or FAM["output"]
    try:
        for m in FAM["needs"]:
            importlib.import_module(m)
    except ImportError as e:
        print(f"derive_saved_tensors: needs {' and '.join(FAM['needs'])} ({e}); "
              f"install them with pip (pip install {' '.join(FAM['needs'])})", file=sys.stderr)
        return 2
    text = render(derive())
    if a.check:
        if not a.output.exists() or a.output.read_text() != text:
            print(f"derive_saved_tensors: {a.output} differs from what this derivation gives", file=sys.stderr)
            return 1
        print(f"{a.output}: up to date")
        return 0
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(text)
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
