"""scripts/device/: the GPU session's comparison of attention engines against PyTorch SDPA (on the
H100 measurements and on synthetic files, since no GPU runs here), and the shell scripts' syntax."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPARE = ROOT / "scripts" / "device" / "compare_attention.py"
H100 = ROOT / "tests" / "reports" / "fixtures" / "h100-2026-11"


def run(*args):
    return subprocess.run([sys.executable, str(COMPARE), *map(str, args)], capture_output=True, text=True)


def doc(rows):
    return {"kind": "measurement", "results": rows}


def row(backend, tflops, seq=4096, engine=None, op="fwd", causal=False):
    r = {"backend": backend, "op": op, "dtype": "bf16", "head_dim": 128, "causal": causal, "seq_len": seq,
         "batch": 1, "heads": 16, "kv_heads": 16, "tflops": tflops}
    if engine:
        r["attention_engine"] = engine
    return r


def test_h100_files_hold_the_own_kernel_far_below_sdpa_cudnn(tmp_path):
    out = tmp_path / "cmp.json"
    r = run(H100 / "attn_seqpar.json", H100 / "attn_sdpa.json", "--hold", "seqpar", "-J", out)
    assert r.returncode == 1, r.stdout + r.stderr  # 0.06-0.38x: every shape below 0.95x
    assert "0 of 32 shapes" in r.stdout
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 32
    one = next(x for x in rows if x["op"] == "fwd" and x["head_dim"] == 128 and not x["causal"] and x["seq_len"] == 16384)
    assert abs(one["ratio_to_sdpa-cudnn"]["seqpar"] - one["tflops"]["seqpar"] / one["tflops"]["sdpa-cudnn"]) < 1e-12
    # Sorted numerically: 1K before 16K.
    seqs = [x["seq_len"] for x in rows if x["op"] == "bwd" and x["head_dim"] == 64 and not x["causal"]]
    assert seqs == sorted(seqs)


def test_engines_are_told_apart_and_held_to_the_ratio(tmp_path):
    ours = tmp_path / "ours.json"
    sdpa = tmp_path / "sdpa.json"
    ours.write_text(json.dumps(doc([row("seqpar", 600.0, engine="cudnn"), row("seqpar", 60.0, engine="seqpar"),
                                    row("seqpar", 500.0, seq=8192, engine="cudnn")])))
    sdpa.write_text(json.dumps(doc([row("sdpa-cudnn", 620.0), row("sdpa-flash", 350.0),
                                    row("sdpa-cudnn", 600.0, seq=8192)])))
    r = run(ours, sdpa)
    assert r.returncode == 1  # 500/600 = 0.83 at 8K
    assert "seqpar-cudnn: 1 of 2 shapes" in r.stdout
    assert "0.968" in r.stdout and "0.833" in r.stdout
    r = run(ours, sdpa, "--min-ratio", "0.8")
    assert r.returncode == 0, r.stdout


def test_bad_input_is_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = run(bad, H100 / "attn_sdpa.json")
    assert r.returncode != 0 and "bad.json" in r.stderr
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"kind": "measurement"}))
    r = run(empty, H100 / "attn_sdpa.json")
    assert r.returncode != 0 and "results" in r.stderr


def test_shell_scripts_parse():
    for name in ("pack.sh", "measure.sh"):
        subprocess.run(["bash", "-n", str(ROOT / "scripts" / "device" / name)], check=True)
