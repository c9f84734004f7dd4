"""scripts/device/: the GPU session's comparison of attention engines against PyTorch SDPA (on the
H100 measurements and on synthetic files, since no GPU runs here), and the shell scripts' syntax."""
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    # A --fit step the calibration did not fit (calibrate skips steps not in bf16/fp16) fails, named.
    rows = [step_row("/x/sp1_8K_none.json", 0.0), step_row("/x/sp1_16K_full.json", 0.0), step_row("held.json", 0.0)]
    r = check(report_dir(tmp_path, rows), "--fit", "/x/sp1_8K_none.json", "/x/sp1_16K_full.json", "--calibration", prof)
    assert r.returncode == 1 and "the calibration fitted 1 of the 2 --fit steps" in r.stdout
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


# ---- measure.sh fidelity: the whole phase with stand-ins for the GPU programs ----

H100_GPU = "NVIDIA H100 80GB HBM3"

# Stand-ins for the GPU programs: each logs its arguments and writes what the real one would
# (kernel rows copied from the H100 fixtures; minimal-format training steps from a made-up cost).
FAKE_GPU = r'''#!/usr/bin/env python3
import json, os, sys
prog, args = os.path.basename(sys.argv[0]), sys.argv[1:]
with open(os.environ["FAKE_GPU_LOG"], "a") as f:
    f.write(json.dumps([prog] + args) + "\n")
if prog == "nvidia-smi":
    print("name\n" + "%(gpu)s")
    sys.exit(0)
out = args[args.index("-J") + 1]
fixtures = "%(fixtures)s"
if prog == "seqpar-bench-gemm":
    doc = json.load(open(os.path.join(fixtures, "gemm.json")))
elif prog == "seqpar-bench-attention":
    doc = json.load(open(os.path.join(fixtures, "attn_seqpar.json")))
    for r in doc["results"]:
        r["attention_engine"] = "cudnn"
else:  # seqpar-train
    def opt(name, default=None):
        return args[args.index(name) + 1] if name in args else default
    seq = int(opt("--seq-len").rstrip("K")) * 1024
    method = opt("--method")
    u = int(opt("--ulysses-degree", 0) or 0)
    r = int(opt("--ring-degree", 0) or 0)
    sp = u * r if method == "hybrid" else int(opt("--sp"))
    if method == "ulysses":
        u, r = sp, 1
    elif method != "hybrid":
        u, r = 1, sp
    full = opt("--checkpoint") == "full"
    tokens = seq / sp
    doc = {"model": "llama3-8b", "layers": int(opt("--layers")), "vocab": int(opt("--vocab")), "dtype": "bf16",
           "gpu_name": "%(gpu)s", "name": os.path.basename(out),
           "plan": {"method": method, "gpus": sp, "seq_len": seq, "sp": sp, "ulysses_degree": u, "ring_degree": r,
                    "zero": 0, "checkpoint": opt("--checkpoint")},
           "step_time_s": 4e-5 * tokens * (1 + seq / 32768) * (1.3 if full else 1.0),
           "peak_memory_bytes": 2.2e10 + tokens * (2e5 if full else 1.2e6)}
json.dump(doc, open(out, "w"))
'''


def seqpar_cli():
    """The built `seqpar` command: $SEQPAR_BUILD_DIR (as scripts/test.sh sets it) or build/, else None."""
    exe = Path(os.environ.get("SEQPAR_BUILD_DIR", ROOT / "build")) / "cli" / "seqpar"
    return exe if exe.exists() else None


def test_fidelity_phase_calibrates_predicts_and_checks(tmp_path):
    seqpar = seqpar_cli()
    if seqpar is None:
        pytest.skip("seqpar is not built (set SEQPAR_BUILD_DIR)")
    bindir = tmp_path / "carry" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "seqpar").symlink_to(seqpar)
    fake = FAKE_GPU % {"gpu": H100_GPU, "fixtures": str(H100)}
    for prog in ("seqpar-train", "seqpar-bench-gemm", "seqpar-bench-attention", "nvidia-smi"):
        p = (tmp_path / "path" if prog == "nvidia-smi" else bindir) / prog
        p.parent.mkdir(exist_ok=True)
        p.write_text(fake)
        p.chmod(0o755)
    log = tmp_path / "gpu.log"
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), FAKE_GPU_LOG=str(log),
               PATH=f"{tmp_path / 'path'}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "device" / "measure.sh"), "fidelity", str(tmp_path / "carry")],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    # measure.sh exits 1 when any step of the phase failed (here the made-up steps miss the bands).
    assert (out / "summary-fidelity.txt").exists(), r.stdout[-3000:] + r.stderr[-3000:]
    status = (out / "summary-fidelity.txt").read_text()
    assert r.returncode == (1 if re.search(r"rc=[1-9]", status) else 0), status
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    trains = [c[1:] for c in calls if c[0] == "seqpar-train"]
    assert len(trains) == 15
    for a in trains:
        for want in (["--backend", "cuda"], ["--comm", "loopback"], ["--attention", "cudnn"], ["--layers", "4"],
                     ["--vocab", "32000"]):
            assert any(a[i:i + 2] == want for i in range(len(a))), (want, a)
    methods = {a[a.index("--method") + 1] for a in trains}
    assert methods == {"ulysses", "ring-zigzag", "hybrid"}
    assert {a[a.index("--seq-len") + 1] for a in trains} >= {"8K", "16K", "32K"}
    assert {a[a.index("--checkpoint") + 1] for a in trains} == {"none", "selective", "full"}
    # Every flag the phase gives seqpar-train exists there (when it is built).
    train_exe = Path(os.environ.get("SEQPAR_BUILD_DIR", ROOT / "build")) / "bench" / "train" / "seqpar-train"
    if train_exe.exists():
        helptext = subprocess.run([str(train_exe), "--help"], capture_output=True, text=True).stdout
        for a in trains:
            for flag in (x for x in a if x.startswith("--")):
                assert flag in helptext, flag
    gemm = next(c for c in calls if c[0] == "seqpar-bench-gemm")
    assert "layer" in gemm and "llama3-8b" in gemm
    attn = next(c for c in calls if c[0] == "seqpar-bench-attention")
    assert attn[attn.index("--attention") + 1] == "cudnn"

    summary = (out / "summary-fidelity.txt").read_text()
    for name in ("calibrate_kernels", "calibrate_steps", "fidelity_report", "fidelity_check",
                 "fidelity_report_kernels_only"):
        assert name in summary
    verdict = [x for x in summary.splitlines() if x.startswith("fidelity ")]
    assert len(verdict) == 1 and "12 held-out steps (at least 12)" in verdict[0], summary
    assert "--fit steps" not in verdict[0]  # the profile was fitted on all three
    # The summary is printed last, and the archive holds the steps, profiles, report and check.
    assert r.stdout.rstrip().endswith(summary.rstrip().splitlines()[-1])
    listing = subprocess.run(["tar", "-tzf", str(out / "measure-fidelity.tar.gz")], capture_output=True,
                             text=True).stdout
    for member in ("steps/sp1_8K_none.json", "steps/hybrid2x2_64K_full.json", "calib/profile_kernels.json",
                   "calib/profile_steps.json", "calib/fidelity_check.json", "fidelity_report/report-data.json",
                   "kernels/gemm_layer.json", "kernels/attn_cudnn.json"):
        assert f"./{member}" in listing, member
    (tmp_path / "x").mkdir()
    subprocess.run(["tar", "-xzf", str(out / "measure-fidelity.tar.gz"), "-C", str(tmp_path / "x")], check=True)
    res = json.loads((tmp_path / "x" / "calib" / "fidelity_check.json").read_text())
    assert sorted(Path(f).name for f in res["fit"]) == ["sp1_16K_full.json", "sp1_32K_none.json", "sp1_8K_none.json"]
    data = json.loads((tmp_path / "x" / "fidelity_report" / "report-data.json").read_text())
    assert len(data["step_comparisons"]["rows"]) == 15
    assert data["step_comparisons"]["system"] == json.loads(
        (tmp_path / "x" / "calib" / "profile_steps.json").read_text())["name"]
    prof = json.loads((tmp_path / "x" / "calib" / "profile_steps.json").read_text())
    assert prof["calibration"]["fits"]["attention_engine"] == "cudnn" and len(prof["calibration"]["steps"]) == 3


# ---- measure.sh maxlen: the real maximum by short runs (scripts/device/maxlen_search.py) ----

SEARCH = ROOT / "scripts" / "device" / "maxlen_search.py"

# A training step that fits up to MAXLEN tokens and runs out of memory above, as seqpar-train says it
# (or fails otherwise above BROKEN_ABOVE); it logs each length it is given.
FAKE_TRAIN = r'''#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[1:]
seq = int(args[args.index("--seq-len") + 1])
with open(os.environ["FAKE_TRAIN_LOG"], "a") as f:
    f.write(f"{seq}\n")
time.sleep(float(os.environ.get("FAKE_TRAIN_SLEEP", "0")))
if seq > int(os.environ.get("BROKEN_ABOVE", "1000000000000")):
    print("seqpar-train: error: something else broke")
    sys.exit(3)
if seq > int(os.environ["MAXLEN"]):
    print(f"seqpar rank 0: error: out of GPU memory: allocating 2 bytes for attention_buffers while {seq} are held")
    sys.exit(2)
json.dump({"kind": "measurement", "seq_len": seq}, open(args[args.index("-J") + 1], "w"))
'''


def search_run(tmp_path, predicted, maxlen, *extra, sleep=0.0, broken_above=None):
    train = tmp_path / "fake-train"
    train.write_text(FAKE_TRAIN)
    train.chmod(0o755)
    log = tmp_path / "lengths.log"
    log.write_text("")
    env = dict(os.environ, FAKE_TRAIN_LOG=str(log), MAXLEN=str(maxlen), FAKE_TRAIN_SLEEP=str(sleep))
    if broken_above:
        env["BROKEN_ABOVE"] = str(broken_above)
    out = tmp_path / "search.json"
    r = subprocess.run([sys.executable, str(SEARCH), "--predicted", str(predicted), "--dir", str(tmp_path / "probes"),
                        "-J", str(out), *extra, "--", str(train), "--steps", "1"],
                       capture_output=True, text=True, env=env, timeout=120)
    lengths = [int(x) for x in log.read_text().split()]
    return r, (json.loads(out.read_text()) if out.exists() else None), lengths


def test_maxlen_a_prediction_that_fits_within_3_percent_passes_in_two_steps(tmp_path):
    r, res, lengths = search_run(tmp_path, 520000, 530000)
    assert r.returncode == 0, r.stdout + r.stderr
    assert lengths[0] == 520000 and len(lengths) == 2 and 530000 < lengths[1] <= 520000 * 1.03 + 2048
    assert res["verdict"] == "PASS" and res["longest_that_ran"] == 520000
    assert r.stdout.strip().splitlines()[-1].startswith("maxlen PASS: predicted 520000")


def test_maxlen_the_h100_over_prediction_fails_and_is_bracketed(tmp_path):
    # The H100 run: 631,547 predicted; 512K ran, the real maximum lies a little above it.
    r, res, lengths = search_run(tmp_path, 631547, 540000)
    assert r.returncode == 1
    assert res["verdict"] == "FAIL" and "the predicted length does not run" in res["why"]
    assert len(lengths) == 5 and lengths[0] == 631547
    lo, hi = res["longest_that_ran"], res["shortest_out_of_memory"]
    assert lo <= 540000 < hi and (hi - lo) / lo < 0.06, res
    assert abs(res["predicted_vs_found"] - (631547 / lo - 1)) < 1e-12 and res["predicted_vs_found"] > 0.15
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith("maxlen FAIL: predicted 631547") and f"bracket [{lo}, {hi})" in line


def test_maxlen_a_prediction_too_short_fails(tmp_path):
    r, res, lengths = search_run(tmp_path, 400000, 520000)
    assert r.returncode == 1 and res["verdict"] == "FAIL"
    assert lengths[:2] == [400000, (int(400000 * 1.03) // 1024 + 1) * 1024]
    assert res["longest_that_ran"] <= 520000 < (res["shortest_out_of_memory"] or 10**12)
    assert "short of the real maximum" in res["why"] or "more than 3% above it" in res["why"]


def test_maxlen_another_failure_stops_the_search_and_the_budget_is_kept(tmp_path):
    r, res, lengths = search_run(tmp_path, 500000, 600000, broken_above=510000)
    assert r.returncode == 1 and lengths == [500000, (int(500000 * 1.03) // 1024 + 1) * 1024]
    assert "another reason than memory" in res["why"] and "maxlen_" in res["why"]
    # Each step takes 1 s and the budget is 2.5 s: the third probe would not finish inside it.
    r, res, lengths = search_run(tmp_path, 631547, 540000, "--budget-s", "2.5", sleep=1.0)
    assert r.returncode == 1 and len(lengths) == 2, lengths


def test_maxlen_search_bad_arguments_exit_2(tmp_path):
    r = subprocess.run([sys.executable, str(SEARCH), "--predicted", "5", "--dir", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "after --" in r.stderr


# ---- measure.sh check: every --validate case is a valid plan of the model it names ----

# A stand-in for seqpar-train --validate: logs its arguments and writes the H200 run's document
# (reports/results/h200/check/) with the plan it was given; FAIL_METHOD's runs fail 2 checks.
FAKE_VALIDATE = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
open(os.environ["CALLS"], "a").write(json.dumps([os.path.basename(sys.argv[0])] + args) + "\n")
def opt(name):
    return int(args[args.index(name) + 1]) if name in args else None
method = args[args.index("--method") + 1]
u, r = {"hybrid": (opt("--ulysses-degree"), opt("--ring-degree")), "ulysses": (opt("--sp"), 1)}.get(method, (1, opt("--sp")))
doc = json.load(open(os.environ["VALIDATE_DOC"]))
doc["plan"].update(method=method, sp=u * r, gpus=u * r, ulysses_degree=u, ring_degree=r)
if method == os.environ.get("FAIL_METHOD"):
    # A failing run as its numbers say (the report recomputes every verdict): two checks of the
    # last step at ten times their allowance, the closest to its bound one of them.
    v = doc["results"][0]["validation"]
    step = v["steps"][-1]
    for t in step["tensors"][:2]:
        t.update(sharded_error=10 * t["allowed_error"], passed=False,
                 ratio=10 * t["allowed_error"] / t["unsharded_error_per_term"])
    step["failures"] = 2
    v.update(passed=False, failures=2.0,
             closest_to_bound=dict(v["closest_to_bound"], step=step["step"], check=step["tensors"][0]))
json.dump(doc, open(args[args.index("-J") + 1], "w"))
'''


def run_check_phase(tmp_path, seqpar=None, fail_method=""):
    """measure.sh check with stand-ins for the GPU programs (and the real seqpar when given);
    returns the seqpar-train calls it made."""
    bindir = tmp_path / "carry" / "bin"
    bindir.mkdir(parents=True)
    log = tmp_path / "calls.log"
    record = ("#!/usr/bin/env python3\nimport json, os, sys\n"
              "open(os.environ['CALLS'], 'a').write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + '\\n')\n")
    for prog in ("seqpar-train", "seqpar-bench-attention", "seqpar_test_kernels_gpu", "test_train"):
        (bindir / prog).write_text(FAKE_VALIDATE if prog == "seqpar-train" else record)
        (bindir / prog).chmod(0o755)
    if seqpar:
        (bindir / "seqpar").symlink_to(Path(seqpar).resolve())
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "nvidia-smi").write_text("#!/bin/sh\necho name\necho fake\n")
    (tmp_path / "path" / "nvidia-smi").chmod(0o755)
    env = dict(os.environ, OUT=str(tmp_path / "out"), CALLS=str(log), FAIL_METHOD=fail_method,
               VALIDATE_DOC=str(ROOT / "reports" / "results" / "h200" / "check" / "validate_ring_sp_4.json"),
               PATH=f"{tmp_path / 'path'}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(["bash", str(ROOT / "scripts" / "device" / "measure.sh"), "check", str(tmp_path / "carry")],
                   capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    return [json.loads(x)[1:] for x in log.read_text().splitlines() if json.loads(x)[0] == "seqpar-train"]


def test_check_phase_report_holds_the_validate_verdicts(tmp_path):
    """The closing report reads the --validate documents: a verdict per case, a FAIL first, no timing."""
    seqpar = seqpar_cli()
    if seqpar is None:
        pytest.skip("seqpar is not built (set SEQPAR_BUILD_DIR)")
    cases = run_check_phase(tmp_path, seqpar, fail_method="ring-zigzag")
    assert len(cases) == 8
    (tmp_path / "x").mkdir()
    subprocess.run(["tar", "-xzf", str(tmp_path / "out" / "measure-check.tar.gz"), "-C", str(tmp_path / "x")], check=True)
    report = tmp_path / "x" / "report"
    assert (report / "report-data.json").exists(), (tmp_path / "x" / "report.log").read_text()
    data = json.loads((report / "report-data.json").read_text())
    verdicts = {v["plan_label"]: v["passed"] for v in data["validations"]}
    assert verdicts == {"ulysses sp=2": True, "ulysses sp=4": True, "ulysses sp=8": True, "ring sp=4": True,
                        "ring-zigzag sp=4": False, "ring-zigzag sp=8": False, "hybrid U2xR2": True,
                        "hybrid U4xR2": True}
    assert data["points"] == [] and data["benchmarks"] == [] and data["peer_comparisons"] == []
    md = (report / "report.md").read_text()
    section = md[md.index("## Validation verdicts"):]
    assert section.split("\n\n")[1].startswith("FAIL: 2 of 8 validated runs failed."), section[:500]
    assert "2 of 8 FAIL" in (tmp_path / "x" / "report.log").read_text()


def test_check_phase_validate_cases_run_on_one_model_shape(tmp_path):
    """The check phase's --validate cases, as the phase gives them, run by the real seqpar-train on
    the CPU back end (where it is built): every plan is accepted and passes (on the H100, Ulysses 8
    was rejected on the 4-head default model before it ran)."""
    cases = run_check_phase(tmp_path)
    assert len(cases) == 8 and all("--validate" in c for c in cases)

    def opt(c, name):
        return int(c[c.index(name) + 1]) if name in c else None

    shapes = {(opt(c, "--heads"), opt(c, "--kv-heads"), opt(c, "--hidden"), opt(c, "--head-dim")) for c in cases}
    assert len(shapes) == 1, shapes
    heads, kv_heads, hidden, head_dim = shapes.pop()
    assert hidden == heads * head_dim and head_dim % 8 == 0
    ulysses = [opt(c, "--sp") if "ulysses" == c[c.index("--method") + 1] else opt(c, "--ulysses-degree") or 1 for c in cases]
    assert all(heads % u == 0 for u in ulysses)
    assert any(u > kv_heads for u in ulysses)  # grouped-query attention with SP above the KV head count
    train = Path(os.environ.get("SEQPAR_BUILD_DIR", ROOT / "build")) / "bench" / "train" / "seqpar-train"
    if not train.exists():
        pytest.skip("seqpar-train is not built (set SEQPAR_BUILD_DIR): the plans' acceptance is not run")
    for c in cases:
        # The same plan and model on the CPU back end, 128 tokens and one step: seconds, not minutes.
        args = list(c[:c.index("-J")])
        args[args.index("--backend") + 1] = "cpu"
        args[args.index("--seq-len") + 1] = "128"
        args[args.index("--steps") + 1] = "1"
        r = subprocess.run([str(train), *args, "--warmup", "0"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "validate: PASS" in r.stdout, (c, r.stdout[-2000:], r.stderr[-2000:])
