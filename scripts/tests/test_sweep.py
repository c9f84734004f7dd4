"""scripts/sweep.py: commands per launcher, progress, resume after an interruption, failures, gathering."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP = os.path.join(HERE, "..", "sweep.py")
FAKE = os.path.join(HERE, "fake_bench.py")


def write_spec(tmp_path, **extra):
    spec = {"program": FAKE, "args": ["--dtype", "bf16"], "grid": {"--seq-len": [1024, 2048, 4096], "--causal": [True, False]}}
    spec.update(extra)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def run(spec, out, *more, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, SWEEP, str(spec), "--out", str(out), *more], capture_output=True, text=True,
                          env=e, timeout=120)


def invocations(log):
    return log.read_text().splitlines() if log.exists() else []


def test_runs_every_point_with_progress_and_gathers(tmp_path):
    spec, out, log = write_spec(tmp_path), tmp_path / "out", tmp_path / "log"
    r = run(spec, out, "--launcher", "local", env={"FAKE_BENCH_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    assert "[1/6]" in r.stdout and "[6/6]" in r.stdout
    assert len(invocations(log)) == 6
    assert "--dtype bf16 --seq-len 1024 --causal" in invocations(log)[0]
    assert "--causal" not in invocations(log)[1]  # false leaves the flag out
    results = json.loads((out / "results.json").read_text())
    assert results["kind"] == "collection" and results["finished"] == 6 and len(results["documents"]) == 6
    assert results["documents"][0]["sweep_point"]["params"] == {"--seq-len": 1024, "--causal": True}


def test_interrupted_sweep_resumes_without_rerunning_finished_points(tmp_path):
    spec, out, log = write_spec(tmp_path), tmp_path / "out", tmp_path / "log"
    r = run(spec, out, "--launcher", "local", env={"FAKE_BENCH_LOG": str(log), "FAKE_BENCH_INTERRUPT_ON": "4096"})
    assert r.returncode == 130, r.stdout + r.stderr
    assert "interrupted" in r.stderr
    first = invocations(log)
    assert len(first) == 5  # four points finished, the fifth was interrupted
    state = json.loads((out / "state.json").read_text())
    assert sorted(p for p, e in state["points"].items() if e["status"] == "done") == sorted(
        p for p in state["points"])[:4]
    r = run(spec, out, "--launcher", "local", env={"FAKE_BENCH_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("done earlier, skipped") == 4
    second = invocations(log)[len(first):]
    assert len(second) == 2 and all("4096" in line for line in second)  # only the unfinished points ran
    assert json.loads((out / "results.json").read_text())["finished"] == 6


def test_failed_point_is_reported_and_retried(tmp_path):
    spec, out, log = write_spec(tmp_path), tmp_path / "out", tmp_path / "log"
    r = run(spec, out, "--launcher", "local", env={"FAKE_BENCH_LOG": str(log), "FAKE_BENCH_FAIL_ON": "2048"})
    assert r.returncode == 1
    assert r.stdout.count("FAILED (exit status 3)") == 2
    assert json.loads((out / "results.json").read_text())["finished"] == 4
    r = run(spec, out, "--launcher", "local", env={"FAKE_BENCH_LOG": str(log)})
    assert r.returncode == 0
    assert r.stdout.count("skipped") == 4


def test_corrupt_point_file_is_rerun(tmp_path):
    spec, out, log = write_spec(tmp_path), tmp_path / "out", tmp_path / "log"
    assert run(spec, out, "--launcher", "local").returncode == 0
    victim = sorted((out / "points").iterdir())[0]
    victim.write_text("{not json")
    r = run(spec, out, "--launcher", "local", env={"FAKE_BENCH_LOG": str(log)})
    assert r.returncode == 0
    assert len(invocations(log)) == 1 and r.stdout.count("skipped") == 5


@pytest.mark.parametrize("launcher,prefix", [("mpirun", ["mpirun", "-np", "4", "--bind-to", "none"]),
                                             ("srun", ["srun", "--ntasks", "4", "--bind-to", "none"])])
def test_launchers_and_ranks_from_grid(tmp_path, launcher, prefix):
    spec = write_spec(tmp_path, grid={"--sp": [2, 4]}, ranks="--sp", launcher_args=["--bind-to", "none"])
    r = run(spec, tmp_path / "out", "--launcher", launcher, "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("[2/2]")]
    assert lines and (" ".join(prefix) + " " + FAKE) in lines[0]
    assert not (tmp_path / "out" / "points" / "p0000_sp=2.json").exists()


def test_print_launcher_writes_commands_for_a_batch_system(tmp_path):
    spec = write_spec(tmp_path)
    r = run(spec, tmp_path / "out", "--launcher", "print")
    assert r.returncode == 0
    lines = (tmp_path / "out" / "commands.sh").read_text().splitlines()
    assert len([line for line in lines if not line.startswith("#")]) == 6
    assert not (tmp_path / "out" / "state.json").exists()


@pytest.mark.parametrize("spec_text,message", [
    ("{not json", "malformed JSON"),
    ('{"args": []}', "missing field 'program'"),
    ('{"program": "x", "grid": {"--sp": []}}', "grid['--sp'] must be a non-empty list"),
    ('{"program": "x", "ranks": "--sp"}', "not a grid option"),
])
def test_bad_specs_give_clear_errors(tmp_path, spec_text, message):
    path = tmp_path / "spec.json"
    path.write_text(spec_text)
    r = run(path, tmp_path / "out", "--launcher", "local")
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr


def test_changed_spec_is_refused(tmp_path):
    out = tmp_path / "out"
    assert run(write_spec(tmp_path), out, "--launcher", "local").returncode == 0
    r = run(write_spec(tmp_path, args=["--dtype", "fp16"]), out, "--launcher", "local")
    assert r.returncode == 2 and "different spec" in r.stderr


def test_resume_from_another_working_directory(tmp_path):
    # The first run uses a relative --out from one directory; the resume runs from another with an
    # absolute --out. The state must not keep paths relative to the first run's directory.
    first_cwd, other_cwd = tmp_path / "a", tmp_path / "b"
    first_cwd.mkdir()
    other_cwd.mkdir()
    spec, log = write_spec(tmp_path), tmp_path / "log"
    env = dict(os.environ, FAKE_BENCH_LOG=str(log), FAKE_BENCH_INTERRUPT_ON="4096")
    r = subprocess.run([sys.executable, SWEEP, str(spec), "--out", "out", "--launcher", "local"], cwd=first_cwd,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 130, r.stdout + r.stderr
    out = first_cwd / "out"
    state = json.loads((out / "state.json").read_text())
    assert state["points"] and all(not os.path.isabs(e["file"]) and e["file"].startswith("points" + os.sep)
                                   for e in state["points"].values())
    env.pop("FAKE_BENCH_INTERRUPT_ON")
    r = subprocess.run([sys.executable, SWEEP, str(spec), "--out", str(out), "--launcher", "local"], cwd=other_cwd,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert r.stdout.count("done earlier, skipped") == 4
    results = json.loads((out / "results.json").read_text())
    assert results["finished"] == 6 and len(results["documents"]) == 6


def test_state_written_with_cwd_relative_paths_is_still_gathered(tmp_path):
    # A state file from an older sweep.py names files relative to the first run's directory.
    spec, out = write_spec(tmp_path), tmp_path / "out"
    assert run(spec, out, "--launcher", "local").returncode == 0
    state = json.loads((out / "state.json").read_text())
    for e in state["points"].values():
        e["file"] = os.path.join("elsewhere", "out", "points", os.path.basename(e["file"]))
    (out / "state.json").write_text(json.dumps(state))
    r = run(spec, out, "--launcher", "local")
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "results.json").read_text())["finished"] == 6


@pytest.mark.parametrize("grid,message", [
    ({"--seq-len": [1024, 2048, 1024]}, "grid['--seq-len'] lists the value 1024 more than once"),
    ({"--seq-len": [1024, "1024"]}, "grid['--seq-len'] lists the value \"1024\" more than once (same argument as 1024)"),
    ({"--causal": [False, None]}, "grid['--causal'] lists the value null more than once (same argument as false)"),
])
def test_duplicate_grid_values_are_refused(tmp_path, grid, message):
    spec, log = write_spec(tmp_path, grid=grid), tmp_path / "log"
    r = run(spec, tmp_path / "out", "--launcher", "local", env={"FAKE_BENCH_LOG": str(log)})
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not invocations(log)  # refused before anything ran


def test_a_global_batch_sets_each_points_micro_batch_and_skips_what_cannot_reach_it(tmp_path):
    # 4 ranks at sp 2: dp 2. 4K tokens per step: 4, 2 and 1 sequences of 1K, 2K and 4K; one
    # sequence cannot keep two replicas busy, so the 4K points are skipped with the reason.
    spec = write_spec(tmp_path, args=["--sp", "2"], ranks=4)
    out, log = tmp_path / "out", tmp_path / "log"
    r = run(spec, out, "--launcher", "local", "--global-batch-tokens", "4K", env={"FAKE_BENCH_LOG": str(log)})
    assert r.returncode == 2 and "runs one process" in r.stderr  # local cannot start 4 ranks
    r = run(spec, out, "--launcher", "mpirun", "--dry-run", "--global-batch-tokens", "4K")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 4
    assert all("--seq-len 1024" not in line or "--micro-batch 2" in line for line in lines)
    assert all("--seq-len 2048" not in line or "--micro-batch 1" in line for line in lines)
    assert r.stdout.count("SKIPPED, cannot reach the global batch: 1 sequence(s) per step cannot reach dp 2") == 2


def test_a_global_batch_of_sequences_over_sp_degrees(tmp_path):
    spec = write_spec(tmp_path, args=[], grid={"--sp": [1, 2, 4]}, ranks=4)
    r = run(spec, tmp_path / "out", "--launcher", "mpirun", "--dry-run", "--global-batch", "2")
    assert r.returncode == 0, r.stderr
    cmds = r.stdout
    assert "--sp 2 --micro-batch 1" in cmds and "--sp 4 --micro-batch 2" in cmds and "--sp 1 " not in cmds
    assert "p0000_sp=1: SKIPPED" in r.stdout


@pytest.mark.parametrize("spec_extra,flags,message", [
    ({"args": ["--micro-batch", "2"]}, ["--global-batch", "4"], "leave it out of the spec"),
    ({"args": [], "grid": {"--sp": [1]}}, ["--global-batch-tokens", "1M"], "need --seq-len"),
    ({}, ["--global-batch-tokens", "4Q"], "is not a count"),
    ({}, ["--global-batch-tokens", "4M", "--global-batch", "2"], "not allowed with argument"),
])
def test_bad_global_batches_give_clear_errors(tmp_path, spec_extra, flags, message):
    r = run(write_spec(tmp_path, **spec_extra), tmp_path / "out", "--dry-run", *flags)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_a_sweep_is_resumed_only_with_its_own_global_batch(tmp_path):
    spec, out = write_spec(tmp_path, args=[], grid={"--seq-len": [1024]}), tmp_path / "out"
    assert run(spec, out, "--launcher", "local", "--global-batch", "1").returncode == 0
    r = run(spec, out, "--launcher", "local", "--global-batch", "2")
    assert r.returncode == 2 and "another global batch" in r.stderr
    assert run(spec, out, "--launcher", "local", "--global-batch", "1").returncode == 0
