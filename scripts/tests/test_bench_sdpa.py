"""scripts/bench_sdpa.py without a GPU: --help works, bad options are refused, and a missing torch
(or CUDA) gives a clear message and a non-zero exit instead of numbers."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench_sdpa.py"


def run(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env)


def test_help_lists_the_shared_options():
    r = run("--help")
    assert r.returncode == 0
    for flag in ("--seq-lens", "--head-dims", "--masks", "--ops", "--backends", "-J"):
        assert flag in r.stdout


def test_bad_option_value_is_refused():
    r = run("--masks", "sliding")
    assert r.returncode != 0
    assert "--masks" in r.stderr and "sliding" in r.stderr


def test_missing_torch_or_cuda_fails_clearly(tmp_path):
    # A stub 'torch' that cannot be imported stands in for an absent PyTorch, whatever is installed.
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")
    import os
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = tmp_path / "out.json"
    r = run("--seq-lens", "1K", "-J", str(out), env=env)
    assert r.returncode != 0
    assert "PyTorch is not installed" in r.stderr
    assert not out.exists()
