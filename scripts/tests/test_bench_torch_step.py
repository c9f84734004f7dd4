"""scripts/bench_torch_step.py: its options spell seqpar-train's, its FLOP count is seqpar-train's for the
same shapes (against a seqpar-train JSON committed from the H100 and, when built, the binary itself), its
JSON has seqpar-train's fields, a missing torch or CUDA is refused clearly, and a tiny --device cpu step
trains when PyTorch is importable."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_torch_step.py"
TRAIN_SP1 = ROOT / "tests" / "reports" / "fixtures" / "h100-2026-11" / "train_sp1.json"
sys.path.insert(0, str(SCRIPT.parent))
import bench_torch_step as bts  # noqa: E402

TINY = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "16",
        "--ffn-hidden", "96", "--vocab", "128", "--seq-len", "32", "--micro-batch", "2"]


def run(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env)


def seqpar_train_binary():
    """The built seqpar-train: $SEQPAR_BUILD_DIR (as scripts/test.sh sets it) or build/, else None."""
    build = Path(os.environ.get("SEQPAR_BUILD_DIR", ROOT / "build"))
    exe = build / "bench" / "train" / "seqpar-train"
    return exe if exe.exists() else None


def flops_of(doc):
    """The FLOP count a seqpar-train JSON implies: TFLOP/s per GPU x step time x GPUs."""
    return doc["tflops_per_gpu"] * 1e12 * doc["step_time_s"] * doc["plan"]["gpus"]


def fake_doc(args, samples=(0.5, 0.25, 0.75), peak=1 << 30):
    a = bts.parse_args(args)
    a.impl_used = "torch"
    return bts.measurement_doc(a, args, {"gpu": None}, [5.0] * a.steps, list(samples), peak, peak)


def test_help_lists_seqpar_trains_options():
    r = run("--help")
    assert r.returncode == 0
    for flag in ("--model", "--layers", "--hidden", "--heads", "--kv-heads", "--head-dim", "--ffn-hidden", "--vocab",
                 "--seq-len", "--micro-batch", "--steps", "--warmup", "--iters", "--checkpoint", "--lr", "--seed",
                 "--device", "-J"):
        assert flag in r.stdout, flag


def test_shapes_parse_like_seqpar_train():
    a = bts.parse_args(["--model", "llama3-8b", "--layers", "4", "--vocab", "32000", "--seq-len", "16K",
                        "--checkpoint", "full", "--warmup", "2", "--iters", "3"])
    assert a.seq_len == 16384
    assert a.steps == 5 and a.warmup == 2
    c = a.model_config
    assert (c["name"], c["layers"], c["hidden"], c["heads"], c["kv_heads"], c["head_dim"], c["ffn_hidden"],
            c["vocab"]) == ("llama3-8b", 4, 4096, 32, 8, 128, 14336, 32000)
    assert bts.plan_json(a)["checkpoint"] == "full"
    # Without --model: seqpar-train's tiny default; --ffn is accepted for --ffn-hidden.
    d = bts.parse_args(["--ffn", "96"]).model_config
    assert (d["layers"], d["hidden"], d["heads"], d["kv_heads"], d["head_dim"], d["ffn_hidden"]) == (2, 64, 4, 2, 16, 96)


@pytest.mark.parametrize("args,message", [
    (["--checkpoint", "selective"], "--checkpoint selective"),
    (["--checkpoint", "sometimes"], "accepted: none, full"),
    (["--seq-len", "4X"], "--seq-len: '4X' is not a count"),
    (["--seq-len", "0"], "--seq-len: 0 must be positive"),
    (["--heads", "6", "--kv-heads", "4"], "heads = 6 must be divisible by kv_heads = 4"),
    (["--head-dim", "15"], "head_dim = 15 must be even"),
    (["--hidden", "0"], "hidden = 0: must be positive"),
    (["--model", "no-such-model"], "--model no-such-model: no such preset"),
    (["--model", "gpt-1.3b"], "mlp must be swiglu"),
    (["--steps", "2", "--warmup", "2"], "at least one step must be timed"),
    (["--steps", "4", "--warmup", "1", "--iters", "2"], "contradicts"),
    (["--micro-batch", "0"], "--micro-batch = 0"),
    (["--lr", "nan"], "--lr = nan"),
    (["--gpu", "no-such-gpu"], "--gpu no-such-gpu: no such GPU preset"),
])
def test_bad_options_are_refused_naming_the_flag(args, message):
    r = run(*args, "--device", "cpu")
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("field, kind, llama", [("norm", "layernorm", "rmsnorm"), ("positions", "learned", "rope")])
def test_a_preset_whose_block_is_not_llamas_is_refused(tmp_path, field, kind, llama):
    preset = json.loads((ROOT / "sim" / "presets" / "models" / "llama3-8b.json").read_text())
    preset[field] = kind
    path = tmp_path / "block.json"
    path.write_text(json.dumps(preset))
    r = run("--model", str(path), "--device", "cpu")
    assert r.returncode != 0
    assert f"{field} must be {llama} for the training step (a Llama-style decoder), not '{kind}'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_flops_equal_seqpar_trains_on_the_h100_measurement():
    # A seqpar-train JSON from the H100 (Llama-3-8B shapes, 4 layers, 32K vocab, 16K tokens).
    doc = json.loads(TRAIN_SP1.read_text())
    m, plan = doc["config"]["model"], doc["plan"]
    args = ["--layers", str(m["layers"]), "--hidden", str(m["hidden"]), "--heads", str(m["heads"]),
            "--kv-heads", str(m["kv_heads"]), "--head-dim", str(m["head_dim"]), "--ffn-hidden", str(m["ffn_hidden"]),
            "--vocab", str(m["vocab"]), "--seq-len", str(plan["seq_len"]), "--micro-batch", str(plan["micro_batch"])]
    a = bts.parse_args(args)
    assert bts.model_flops(a.model_config, a.micro_batch, a.seq_len) == pytest.approx(flops_of(doc), rel=1e-9)
    assert bts.total_params(a.model_config) == m["params"]


def test_flops_equal_the_built_seqpar_trains(tmp_path):
    exe = seqpar_train_binary()
    if exe is None:
        pytest.skip("seqpar-train is not built (looked in $SEQPAR_BUILD_DIR or build/)")
    out = tmp_path / "train.json"
    r = subprocess.run([str(exe), "--comm", "loopback", "--steps", "2", "--warmup", "1", *TINY, "-J", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    a = bts.parse_args(TINY)
    assert bts.model_flops(a.model_config, a.micro_batch, a.seq_len) == pytest.approx(flops_of(doc), rel=1e-9)
    assert bts.total_params(a.model_config) == doc["config"]["model"]["params"]
    assert bts.plan_json(a) == doc["plan"]


def test_json_has_seqpar_trains_fields():
    ref = json.loads(TRAIN_SP1.read_text())
    doc = fake_doc(["--model", "llama3-8b", "--layers", "4", "--vocab", "32000", "--seq-len", "16K", "--steps", "4"])
    assert doc["program"] == "bench_torch_step" and doc["kind"] == "measurement"
    for key in ref:
        assert key in doc, key
    for part in ("config", "plan"):
        for key in ref[part]:
            assert key in doc[part], f"{part}.{key}"
    for key in ref["config"]["model"]:
        assert key in doc["config"]["model"], f"config.model.{key}"
    for key in ref["results"][0]:
        assert key in doc["results"][0], f"results[0].{key}"
    # The H100 file predates later plan keys (placement); test_flops_equal_the_built_seqpar_trains holds
    # the plan to the current seqpar-train's exactly.
    assert set(ref["plan"]) <= set(doc["plan"])
    # The median of the timed steps, and the figures from it.
    assert doc["step_time_s"] == 0.5
    assert doc["tokens_per_s_per_gpu"] == pytest.approx(16384 / 0.5)
    assert doc["tflops_per_gpu"] == pytest.approx(flops_of(ref) / 0.5 / 1e12, rel=1e-9)
    assert doc["results"][0]["stats"]["count"] == 3 and doc["results"][0]["stats"]["p90_s"] == pytest.approx(0.7)
    assert doc["mfu"] is None and doc["peak_memory_bytes"] == 1 << 30


def test_mfu_from_the_gpu_preset():
    doc = fake_doc(["--gpu", "h100-sxm", "--steps", "2"], samples=(0.5,))
    peak = json.loads((ROOT / "sim" / "presets" / "gpus" / "h100-sxm.json").read_text())["bf16_tflops"]["value"]
    assert doc["mfu"] == pytest.approx(doc["tflops_per_gpu"] / peak)


def test_missing_torch_fails_clearly(tmp_path):
    # A stub 'torch' that cannot be imported stands in for an absent PyTorch, whatever is installed.
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = tmp_path / "out.json"
    r = run("-J", str(out), env=env)
    assert r.returncode != 0
    assert "PyTorch is not installed" in r.stderr
    assert not out.exists()


def test_no_cuda_is_refused_without_device_cpu(tmp_path):
    # A stub torch that sees no CUDA device: the default --device cuda must refuse, not fall back to the CPU.
    (tmp_path / "torch.py").write_text("class cuda:\n    @staticmethod\n    def is_available():\n        return False\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = tmp_path / "out.json"
    r = run("-J", str(out), env=env)
    assert r.returncode != 0
    assert "sees no CUDA device" in r.stderr and "--device cpu" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("impl,checkpoint", [("torch", "none"), ("torch", "full"), ("transformers", "full")])
def test_tiny_cpu_step_trains(tmp_path, impl, checkpoint):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed here: the tiny --device cpu step was not run")
    if impl == "transformers" and importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed here: its LlamaForCausalLM step was not run")
    out = tmp_path / "torch.json"
    # The script also checks that the model's parameter count is seqpar-train's (the same model).
    r = run("--device", "cpu", "--impl", impl, "--steps", "3", "--warmup", "1", "--checkpoint", checkpoint, *TINY,
            "-J", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["device"] == "cpu" and doc["config"]["implementation"] == impl
    assert len(doc["results"][0]["losses"]) == 3 and len(doc["results"][0]["samples_s"]) == 2
    assert all(x == x and abs(x) < 100 for x in doc["results"][0]["losses"])
    assert doc["step_time_s"] > 0 and doc["plan"]["checkpoint"] == checkpoint
    a = bts.parse_args(TINY)
    assert doc["tflops_per_gpu"] * 1e12 * doc["step_time_s"] == pytest.approx(
        bts.model_flops(a.model_config, a.micro_batch, a.seq_len), rel=1e-9)
