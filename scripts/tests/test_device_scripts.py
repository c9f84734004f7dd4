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


# ---- scripts/device/fidelity_check.py: issue 16's bands on seqpar report's step_comparisons ----

CHECK = ROOT / "scripts" / "device" / "fidelity_check.py"


def check(*args):
    return subprocess.run([sys.executable, str(CHECK), *map(str, args)], capture_output=True, text=True)


def step_row(file, time_error, memory_error=0.0, measured_s=1.0, measured_peak=40e9):
    return {"file": str(file), "name": str(file), "plan_label": "ulysses sp=4", "seq_len": 32768,
            "measured_step_time_s": measured_s, "predicted_step_time_s": measured_s * (1 + time_error),
            "time_error": time_error,
            "measured_peak_memory_bytes": None if memory_error is None else measured_peak,
            "predicted_peak_memory_bytes": measured_peak * (1 + (memory_error or 0)),
            "memory_error": memory_error}


def report_dir(tmp_path, rows):
    d = tmp_path / "report"
    d.mkdir(exist_ok=True)
    (d / "report-data.json").write_text(json.dumps({"step_comparisons": {"system": "h100-calibrated", "rows": rows}}))
    return d


def test_fidelity_held_out_steps_in_both_bands_pass(tmp_path):
    rows = [step_row("fit_a.json", 0.20, 0.10), step_row("held_b.json", -0.049, 0.029),
            step_row("held_c.json", 0.01, -0.02)]
    out = tmp_path / "fc.json"
    # The fitted step misses by 20% and is left out; both held-out steps are inside the bands.
    r = check(report_dir(tmp_path, rows), "--fit", "fit_a.json", "--min-held-out", "2", "-J", out)
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("fidelity PASS: 2 held-out steps") and "time within 5%: 2 of 2 (largest 4.9%)" in last
    res = json.loads(out.read_text())
    assert [o["file"] for o in res["held_out"]] == ["held_b.json", "held_c.json"]
    assert res["passed"] and abs(res["max_abs_memory_error"] - 0.029) < 1e-12
    # Without --fit the 20% step counts and fails the check.
    r = check(report_dir(tmp_path, rows))
    assert r.returncode == 1 and "fidelity FAIL: 3 held-out steps" in r.stdout


def test_fidelity_a_miss_in_either_band_fails(tmp_path):
    r = check(report_dir(tmp_path, [step_row("a.json", 0.051, 0.0), step_row("b.json", 0.0, 0.0)]))
    assert r.returncode == 1 and "time within 5%: 1 of 2 (largest 5.1%)" in r.stdout and "MISS" in r.stdout
    r = check(report_dir(tmp_path, [step_row("a.json", 0.0, -0.031)]))
    assert r.returncode == 1 and "memory within 3%: 0 of 1 (largest 3.1%)" in r.stdout
    # The bands are options: 6% takes the 5.1% step.
    r = check(report_dir(tmp_path, [step_row("a.json", 0.051, 0.0)]), "--time-band", "0.06")
    assert r.returncode == 0, r.stdout


def test_fidelity_missing_steps_and_peaks_fail(tmp_path):
    # A step that did not run leaves fewer held-out steps than asked for: a failure, not a pass.
    r = check(report_dir(tmp_path, [step_row("a.json", 0.0)]), "--min-held-out", "9")
    assert r.returncode == 1 and "fidelity FAIL: 1 held-out steps (at least 9)" in r.stdout
    # Peak memory is part of the band: a step without a measured peak cannot pass it.
    r = check(report_dir(tmp_path, [step_row("a.json", 0.0, None)]))
    assert r.returncode == 1 and "1 without a measured peak" in r.stdout and "no peak" in r.stdout


def test_fidelity_fit_files_match_by_resolved_path(tmp_path, monkeypatch):
    steps = tmp_path / "steps"
    steps.mkdir()
    rows = [step_row(steps / "fit.json", 0.5), step_row(steps / "held.json", 0.0)]
    d = report_dir(tmp_path, rows)
    r = subprocess.run([sys.executable, str(CHECK), str(d), "--fit", "steps/../steps/fit.json"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_fidelity_prints_the_calibrations_leave_one_out_errors(tmp_path):
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"calibration": {"steps": [
        {"file": "/x/sp1_8K_none.json", "loo_time_error": 0.1035, "loo_memory_error": -0.004}]}}))
    r = check(report_dir(tmp_path, [step_row("a.json", 0.0)]), "--calibration", prof)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sp1_8K_none.json" in r.stdout and "+10.3%" in r.stdout and "-0.4%" in r.stdout
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"name": "dgx-h100"}))
    r = check(report_dir(tmp_path, [step_row("a.json", 0.0)]), "--calibration", bare)
    assert r.returncode == 2 and "calibration.steps" in r.stderr


def test_fidelity_bad_input_is_named(tmp_path):
    d = report_dir(tmp_path, [step_row("a.json", 0.0)])
    r = check(d, "--fit", "other.json")
    assert r.returncode == 2 and "--fit other.json" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = check(bad)
    assert r.returncode == 2 and "bad.json" in r.stderr
    r = check(tmp_path / "missing")
    assert r.returncode == 2 and "report-data.json" in r.stderr
    noreport = tmp_path / "sim.json"
    noreport.write_text(json.dumps({"kind": "prediction"}))
    r = check(noreport)
    assert r.returncode == 2 and "step_comparisons" in r.stderr
    r = check(report_dir(tmp_path, [{"file": "a.json"}]))
    assert r.returncode == 2 and "'measured_step_time_s'" in r.stderr
    r = check(d, "--time-band", "5")
    assert r.returncode == 2 and "--time-band" in r.stderr
