"""scripts/sweep.py: commands per launcher, progress, resume after an interruption, failures, gathering."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = Path(HERE).parent.parent
SWEEP = os.path.join(HERE, "..", "sweep.py")
sys.path.insert(0, os.path.join(HERE, ".."))
import sweep  # noqa: E402
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
    assert len([line for line in lines if line.startswith("launch 1 ")]) == 6
    assert not (tmp_path / "out" / "state.json").exists()


@pytest.mark.parametrize("spec_text,message", [
    ("{not json", "malformed JSON"),
    ('{"args": []}', "missing field 'program'"),
    ('{"program": "x", "grid": {"--sp": []}}', "grid['--sp'] must be a non-empty list"),
    ('{"program": "x", "ranks": "--sp"}', "not a grid option"),
    ('{"program": "x", "rank": 2}', "unknown field \"rank\" (did you mean 'ranks'?"),
    ('{"program": "x", "lanucher_args": []}', "unknown field \"lanucher_args\" (did you mean 'launcher_args'?"),
    ('{"program": "x", "zzz": 1}', "unknown field \"zzz\" (known: program, args"),
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


def test_print_launcher_writes_multi_rank_points_with_their_ranks(tmp_path):
    # The batch-system mode: each line carries the ranks its point needs, and the script runs as written.
    spec = write_spec(tmp_path, grid={"--sp": [2, 4]}, ranks="--sp")
    r = run(spec, tmp_path / "out", "--launcher", "print")
    assert r.returncode == 0, r.stderr
    script = tmp_path / "out" / "commands.sh"
    lines = [line for line in script.read_text().splitlines() if line.startswith("launch ")]
    assert [line.split()[:2] for line in lines] == [["launch", "2"], ["launch", "4"]]
    assert all(FAKE in line and "--sp" in line for line in lines)
    ran = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, SEQPAR_LAUNCH="echo"))
    assert ran.returncode == 0, ran.stderr
    assert [line.split()[:2] for line in ran.stdout.splitlines()] == [["2", FAKE], ["4", FAKE]]


def test_out_naming_a_file_is_a_clear_error(tmp_path):
    target = tmp_path / "results.json"
    target.write_text("{}")
    r = run(write_spec(tmp_path), target, "--launcher", "local")
    assert r.returncode == 2
    assert f"--out {target}: exists and is not a directory" in r.stderr and "Traceback" not in r.stderr
    r = run(write_spec(tmp_path), "", "--launcher", "local")
    assert r.returncode == 2 and "--out: empty" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("extra,message", [
    ({"grid": {"--seq-len": [[1024, 2048]]}}, "grid['--seq-len'] has [1024, 2048]: a grid value must be a number"),
    ({"grid": {"--seq-len": [{"v": 1}]}}, "grid['--seq-len'] has {\"v\": 1}: a grid value must be a number"),
    ({"grid": {"--seq-len": [float("nan")]}}, "grid['--seq-len'] has nan, not a finite number"),
    ({"grid": {"": [1]}}, "grid has an empty option name"),
    ({"args": ["--dtype", ["bf16"]]}, "field 'args' must be a list of strings"),
    ({"json_flag": 7}, "field 'json_flag' must be a non-empty string"),
    ({"ranks": True}, "field 'ranks' must be a positive integer"),
    ({"grid": {"--sp": [2.5]}, "ranks": "--sp"}, "ranks: grid value 2.5 of '--sp' is not a whole number"),
    ({"grid": {"--sp": [True]}, "ranks": "--sp"}, "ranks: grid value true of '--sp' is not a whole number"),
    ({"args": ["--dtype", "bf\u000016"]}, "spec[\"args\"][1] contains a NUL character"),
    ({"grid": {"--seq-len": ["1\u00002"]}}, "spec[\"grid\"][\"--seq-len\"][0] contains a NUL character"),
])
def test_values_without_a_command_line_spelling_are_refused(tmp_path, extra, message):
    spec, log = write_spec(tmp_path, **extra), tmp_path / "log"
    r = run(spec, tmp_path / "out", "--launcher", "local", env={"FAKE_BENCH_LOG": str(log)})
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not invocations(log)


def test_progress_line_on_a_terminal_only(tmp_path):
    import pty
    spec = write_spec(tmp_path)
    piped = run(spec, tmp_path / "piped", "--launcher", "local")
    # (" left," as the progress line says it: a checkout path may hold "left", as wt-leftovers does)
    assert piped.returncode == 0 and " left," not in piped.stdout + piped.stderr
    # On a terminal (a pseudo-terminal here) the same sweep says what is done, what is left and how long.
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, SWEEP, str(spec), "--out", str(tmp_path / "tty"), "--launcher", "local"],
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    text = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        text += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    lines = text.decode().replace("\r", "").splitlines()
    assert any(line.startswith("sweep.py: 1/6 done, 5 left, about ") and line.endswith(" to go") for line in lines), lines
    assert any(line.startswith("sweep.py: 6/6 done, 0 left, took ") for line in lines), lines


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
    # Beyond seqpar's limits: was passed on as --micro-batch 107374182399999999998926258176.
    ({}, ["--global-batch", "99999999999999999999G"],
     "--global-batch: 107374182399999999998926258176 is above the limit of 1099511627776"),
    ({}, ["--global-batch-tokens", "16385G"], "--global-batch-tokens: 17593259786240 is above the limit of 17592186044416"),
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


def test_a_micro_batch_above_the_limit_skips_the_point(tmp_path):
    spec = write_spec(tmp_path, args=[], grid={"--sp": [1]}, ranks=1)
    r = run(spec, tmp_path / "out", "--launcher", "mpirun", "--dry-run", "--global-batch", "128K")
    assert r.returncode == 0, r.stderr
    assert "--micro-batch" not in r.stdout
    assert "need micro-batch 131072, above the limit of 65536" in r.stdout


def test_the_limits_are_seqpars():
    header = (ROOT / "core" / "include" / "seqpar" / "core" / "limits.hpp").read_text()

    def bound(name):
        m = re.search(rf"k{name}\s*=\s*(?:std::int64_t\{{1\}}|1)\s*<<\s*(\d+);", header)
        assert m, name
        return 1 << int(m.group(1))

    assert sweep.MAX_GPUS == bound("MaxGpus")
    assert sweep.MAX_MICRO_BATCH == bound("MaxMicroBatch")
    assert sweep.MAX_GLOBAL_BATCH_TOKENS == bound("MaxGlobalBatchTokens")
    assert sweep.MAX_GLOBAL_BATCH_SEQUENCES == bound("MaxGlobalBatchSequences")


def test_ranks_from_a_grid_value_keep_seqpars_gpu_limit_and_its_sign(tmp_path):
    # 1e308 as --sp once became a 309-digit rank count, and its point file read "sp=1e-308".
    spec = write_spec(tmp_path, args=[], grid={"--sp": [1e308]}, ranks="--sp")
    r = run(spec, tmp_path / "out", "--launcher", "print")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"ranks: {int(1e308)} is above the limit of 1048576" in r.stderr
    spec = write_spec(tmp_path, args=[], grid={"--scale": [1e20]}, ranks=1)
    r = run(spec, tmp_path / "out2", "--launcher", "print")
    assert r.returncode == 0, r.stderr
    commands = (tmp_path / "out2" / "commands.sh").read_text()
    assert "p0000_scale=1e+20.json" in commands and "1e-20" not in commands, commands
