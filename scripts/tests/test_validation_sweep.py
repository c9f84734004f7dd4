"""scripts/validation_sweep.py: its plan, length and seed choices and its verdicts on stand-in
programs (a fake `seqpar advise` and a fake `seqpar-train` that pass, fail, crash or refuse on cue),
then, when the real programs are built ($SEQPAR_BUILD_DIR, default build/), the reduced sweep CI runs
(every plan of the method table on virtual ranks and under mpirun, zero false failures) and the
check that the README's mutation matrix is the one test_train's ValidationMatrix produces."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "validation_sweep.py"
BUILD = Path(os.environ.get("SEQPAR_BUILD_DIR", ROOT / "build"))

spec = importlib.util.spec_from_file_location("validation_sweep", SCRIPT)
vs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vs)

# A stand-in `seqpar`: advise lists ring and ulysses at the asked SP (ulysses as rejected).
FAKE_SEQPAR = """\
#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
sp = int(a[a.index("--sp") + 1])
def plan(method, u, r):
    return {"plan": {"method": method, "ulysses_degree": u, "ring_degree": r, "sp": sp}}
print(json.dumps({"ranked": [plan("ring", 1, sp)], "rejected": [plan("ulysses", sp, 1)]}))
"""

# A stand-in `seqpar-train`: refuses odd lengths (exit 2, a clean error), and on --backend cuda
# length 64 (an engine's own limit); appends each back end it runs on to FAKE_TRAIN_LOG; on FAKE_TRAIN_FAIL=<seed>
# reports a failed check, on FAKE_TRAIN_CRASH=<seed> exits 3 without JSON; else writes the
# validation JSON of --steps passing steps.
FAKE_TRAIN = """\
#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
val = lambda f: a[a.index(f) + 1]
n, seed, steps = int(val("--seq-len")), val("--seed"), int(val("--steps"))
if os.environ.get("FAKE_TRAIN_LOG"):
    with open(os.environ["FAKE_TRAIN_LOG"], "a") as f:
        f.write(f"{val('--backend')} {n} {val('--head-dim')}\\n")
if val("--backend") == "cuda" and n == 64:
    sys.stderr.write("seqpar-train: error: cudnn: this engine does not take 64 tokens\\n")
    sys.exit(2)
if n % 2:
    sys.stderr.write(f"seqpar-train: error: seq_len: {n} is not divisible by 2\\n")
    sys.exit(2)
if os.environ.get("FAKE_TRAIN_CRASH") == seed:
    sys.exit(3)
failed = os.environ.get("FAKE_TRAIN_FAIL") == seed
check = {"sharded_error": 2.0 if failed else 0.5, "allowed_error": 1.0}
doc = {"results": [{"validation": {
    "passed": not failed, "failures": 1 if failed else 0,
    "steps": [{"step": i + 1} for i in range(steps)],
    "closest_to_bound": {"check": check, "explanation": "loss: made up"}}}]}
with open(val("-J"), "w") as f:
    json.dump(doc, f)
if failed:
    sys.stderr.write("rank 0 step 1: MISMATCH loss: made up\\n")
sys.exit(1 if failed else 0)
"""


SMALL = ("--degrees", "2", "--shapes", "mha,gqa")


@pytest.fixture
def fake_build(tmp_path):
    for rel, text in (("cli/seqpar", FAKE_SEQPAR), ("bench/train/seqpar-train", FAKE_TRAIN)):
        exe = tmp_path / rel
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text(text)
        exe.chmod(0o755)
    return tmp_path


def run(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def test_the_gpu_sweep_asks_for_the_cuda_back_end_and_its_head_dims():
    case = {"plan": ("ring", 1, 2, 2), "shape": "gqa", "seq_len": 64, "memory": vs.MEMORY[0], "seed": 1}
    cmd = vs.train_command("seqpar-train", case, 2, "virtual", "out.json", "cuda", "cuda")
    assert cmd[cmd.index("--backend") + 1] == "cuda" and cmd[cmd.index("--head-dim") + 1] == "64"
    probe = vs.train_command("seqpar-train", case, 2, "virtual", "out.json", "cpu", "cuda")
    assert probe[probe.index("--backend") + 1] == "cpu" and probe[probe.index("--head-dim") + 1] == "64"
    assert vs.train_command("seqpar-train", case, 2, "virtual", "out.json")[cmd.index("--head-dim") + 1] == "8"


def test_plans_come_from_the_method_table_listing_ranked_and_rejected():
    doc = {"ranked": [{"plan": {"method": "ring", "ulysses_degree": 1, "ring_degree": 4, "sp": 4}},
                      {"plan": {"method": "ring", "ulysses_degree": 1, "ring_degree": 4, "sp": 4}}],
           "rejected": [{"plan": {"method": "hybrid", "ulysses_degree": 2, "ring_degree": 2, "sp": 4}}]}
    assert vs.plans_from_advise(doc) == [("hybrid", 2, 2, 4), ("ring", 1, 4, 4)]
    with pytest.raises(vs.SweepError):
        vs.plans_from_advise({"ranked": [{"plan": {"method": "ring"}}]})


def test_twenty_seeds_give_every_plan_every_length_and_memory_option():
    lengths = {(("ring", 1, 4, 4), "mha"): [4, 64, 100, 128], (("ulysses", 2, 1, 2), "gqa"): [2, 64, 128]}
    runs = vs.cases(lengths, 20, quick=False)
    assert len(runs) == 40
    for key, ls in lengths.items():
        mine = [c for c in runs if (c["plan"], c["shape"]) == key]
        assert {c["seq_len"] for c in mine} == set(ls)
        assert {c["memory"][0] for c in mine} == {m for m, _ in vs.MEMORY}
        assert len({c["seed"] for c in mine}) == 20
    # Three lengths and six options: every (length, option) pair within 18 seeds.
    three = [c for c in runs if c["shape"] == "gqa"]
    assert len({(c["seq_len"], c["memory"][0]) for c in three}) == 6


def test_quick_runs_each_plan_once_on_one_shape():
    plans = {s: [("ring", 1, 2, 2), ("ring", 1, 4, 4), ("ulysses", 4, 1, 4)] for s in vs.SHAPES}
    chosen = vs.pairs(plans, quick=True)
    assert sorted(p for p, _ in chosen) == sorted(plans["mha"])
    assert {s for _, s in chosen} == set(vs.SHAPES)  # the shapes take turns
    assert len(vs.pairs(plans, quick=False)) == 9


def test_sweep_counts_validated_steps_and_clean_refusals(fake_build):
    r = run("--build", str(fake_build), "--modes", "virtual", "--seeds", "3", "--steps", "4", "--min-steps", "0",
            *SMALL)
    assert r.returncode == 0, r.stdout + r.stderr
    # The fake runs every plan it lists: 2 shapes x (ring, ulysses) at SP 2 = 4 pairs, 3 seeds of 4
    # steps each; odd lengths are refused.
    assert "validated steps: 48 (virtual 48) in 12 runs; false failures: 0" in r.stdout
    assert "refused (clean errors naming the rule)" in r.stdout
    assert "seq_len: 3 is not divisible by 2" in r.stdout
    assert "closest to its allowance: 50% of it" in r.stdout


def test_a_false_failure_or_a_crash_fails_the_sweep(fake_build):
    for cue in ("FAKE_TRAIN_FAIL", "FAKE_TRAIN_CRASH"):
        r = run("--build", str(fake_build), "--modes", "virtual", "--seeds", "2", "--min-steps", "0",
                "--degrees", "2", "--shapes", "mha", env={cue: "2"})
        assert r.returncode == 1, r.stdout + r.stderr
        assert "FALSE FAILURE:" in r.stdout
        assert ("MISMATCH loss" if cue == "FAKE_TRAIN_FAIL" else "exit 3, no validation JSON") in r.stdout


def test_too_few_validated_steps_fail(fake_build):
    r = run("--build", str(fake_build), "--modes", "virtual", "--seeds", "1", "--steps", "1", "--degrees", "2",
            "--shapes", "mha")
    assert r.returncode == 1
    assert "fewer than --min-steps 10000" in r.stderr


def test_unbuilt_programs_and_bad_modes_are_errors(tmp_path, fake_build):
    r = run("--build", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "is not built" in r.stderr
    r = run("--build", str(fake_build), "--modes", "virtual,threads")
    assert r.returncode == 2 and "unknown mode 'threads'" in r.stderr
    r = run("--build", str(fake_build), "--shapes", "moe")
    assert r.returncode == 2 and "unknown shape 'moe'" in r.stderr
    r = run("--build", str(fake_build), "--backend", "cuda", "--modes", "mpi")
    assert r.returncode == 2 and "MPI moves host buffers" in r.stderr


def test_the_matrix_goes_between_the_readme_markers():
    text = f"intro\n{vs.MATRIX_BEGIN}\nold\n{vs.MATRIX_END}\nafter\n"
    assert vs.splice(text, "| new |\n") == f"intro\n{vs.MATRIX_BEGIN}\n| new |\n{vs.MATRIX_END}\nafter\n"
    with pytest.raises(vs.SweepError):
        vs.splice("no markers", "| new |")


def built(*rel):
    return all(os.access(BUILD / r, os.X_OK) for r in rel)


@pytest.mark.skipif(not built("bench/train/seqpar-train", "cli/seqpar"),
                    reason=f"seqpar-train and seqpar are not built in {BUILD}")
def test_reduced_sweep_has_no_false_failure():
    modes = "virtual,mpi" if shutil.which("mpirun") else "virtual"
    r = run("--build", str(BUILD), "--quick", "--modes", modes)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("validated steps:")][0]
    assert "false failures: 0" in line and int(line.split()[2]) >= 20, line
    for method in ("ulysses", "ring", "ring-zigzag", "hybrid"):  # at least these are in the table
        assert f"\n# {method} U" in r.stdout, method


@pytest.mark.skipif(not built("tests/train/test_train"), reason=f"test_train is not built in {BUILD}")
def test_readme_matrix_is_what_the_test_produces():
    r = run("matrix", "--build", str(BUILD), "--check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_gpu_sweep_probes_lengths_on_the_cpu_and_reports_the_gpus_own_refusals(fake_build, tmp_path):
    log = tmp_path / "runs.log"
    r = run("--build", str(fake_build), "--backend", "cuda", "--quick", "--seeds", "2", "--min-steps", "0",
            *SMALL, env={"FAKE_TRAIN_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [ln.split() for ln in log.read_text().splitlines()]
    # Lengths are probed on the CPU back end with the GPU's shapes; only the chosen cases run on the GPU.
    assert {hd for _, _, hd in runs} == {"64"}
    probes = [n for be, n, _ in runs if be == "cpu"]
    gpu = [n for be, n, _ in runs if be == "cuda"]
    assert probes and gpu and set(gpu) <= set(probes)
    # Length 64 passes the plan's rules but the fake GPU engine refuses it: reported, not a false failure.
    assert "refused by the cuda back end after the plan's rules accepted them" in r.stdout
    assert "does not take 64 tokens" in r.stdout and "false failures: 0" in r.stdout
