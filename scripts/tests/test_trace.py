"""Step timelines: `seqpar simulate --trace` and `seqpar-train --trace` write Chrome trace event files
that load as JSON and follow the format Perfetto reads (complete events with ts/dur in microseconds on
named tracks); the predicted step's slices add up to its step time; the CPU training step writes one
track per stream it uses and phases per layer, one file per rank.

The programs come from $SEQPAR_CLI and $SEQPAR_TRAIN (ctest sets them: the `trace.pytest` test), else
from $SEQPAR_BUILD_DIR (default build/); a test skips when its program is not built."""
import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SEQPAR_BUILD_DIR", os.path.join(ROOT, "build"))
CLI = os.path.abspath(os.environ.get("SEQPAR_CLI", os.path.join(BUILD, "cli", "seqpar")))
TRAIN = os.path.abspath(os.environ.get("SEQPAR_TRAIN", os.path.join(BUILD, "bench", "train", "seqpar-train")))
STREAMS = {"compute", "ulysses all-to-all", "ring send/recv", "data-parallel reduction", "offload copies",
           "tensor-parallel all-gather/reduce-scatter"}


def need(program):
    if not os.access(program, os.X_OK):
        pytest.skip(f"{program} is not built")


def check_format(doc):
    """The trace event format's rules, independently of the C++ validator; returns the tracks by (pid, tid)."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    tracks, used = {}, set()
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            if e["name"] == "thread_name":
                tracks[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        assert isinstance(e["name"], str) and e["name"], e
        assert e["ts"] >= 0 and e["dur"] >= 0, e
        assert isinstance(e.get("args", {}), dict), e
        used.add((e["pid"], e["tid"]))
    assert used <= set(tracks), f"slices on unnamed tracks: {used - set(tracks)}"
    assert set(tracks.values()) <= STREAMS
    return tracks


def slices(doc, track_name=None, tracks=None):
    out = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    if track_name is not None:
        out = [e for e in out if tracks[(e["pid"], e["tid"])] == track_name]
    return out


@pytest.mark.parametrize("plan", [
    ["--method", "ulysses", "--sp", "8", "--gpus", "8"],
    ["--method", "ring-zigzag", "--sp", "8", "--gpus", "16", "--zero", "3"],
    ["--method", "hybrid", "--ulysses-degree", "4", "--ring-degree", "4", "--gpus", "16", "--checkpoint", "full",
     "--offload-checkpoints"],
])
def test_simulate_trace_adds_up_to_the_step_time(tmp_path, plan):
    need(CLI)
    path = tmp_path / "predicted.json"
    base = [CLI, "simulate", "--model", "llama3-8b", "--system", "dgx-h100", "--seq-len", "128K", *plan]
    r = subprocess.run([*base, "--trace", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(path.read_text())
    tracks = check_format(doc)
    step_us = json.loads(subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=120,
                                        check=True).stdout)["step_time_s"] * 1e6
    xs = slices(doc)
    assert max(e["ts"] + e["dur"] for e in xs) == pytest.approx(step_us, rel=1e-9)
    compute = sum(e["dur"] for e in slices(doc, "compute", tracks))
    exposed = sum(e["args"]["exposed_s"] * 1e6 for e in xs if tracks[(e["pid"], e["tid"])] != "compute")
    assert compute + exposed == pytest.approx(step_us, rel=1e-9)
    names = {e["name"] for e in xs}
    assert "L0 fwd gemm (q,k,v,o,mlp)" in names and "L31 bwd elementwise" in names


def test_simulate_trace_of_an_invalid_plan_writes_nothing(tmp_path):
    need(CLI)
    path = tmp_path / "predicted.json"
    r = subprocess.run([CLI, "simulate", "--model", "llama3-8b", "--system", "dgx-h100", "--seq-len", "128K",
                        "--method", "ulysses", "--sp", "3", "--gpus", "3", "--trace", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert not path.exists()


def test_train_cpu_trace_has_a_track_per_stream_used_and_phases_per_layer(tmp_path):
    need(TRAIN)
    path = tmp_path / "measured.json"
    r = subprocess.run([TRAIN, "--comm", "virtual", "--method", "hybrid", "--ulysses-degree", "2", "--ring-degree",
                        "2", "--gpus", "8", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
                        "--head-dim", "16", "--ffn-hidden", "128", "--vocab", "128", "--seq-len", "64", "--steps", "2",
                        "--trace", str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for rank in range(8):
        doc = json.loads((tmp_path / f"measured.rank{rank}.json").read_text())
        tracks = check_format(doc)
        assert {e["pid"] for e in slices(doc)} == {rank}
        # Hybrid with dp = 2 and no tensor parallelism: every stream but offload and TP.
        assert set(tracks.values()) == STREAMS - {"offload copies", "tensor-parallel all-gather/reduce-scatter"}
        names = {e["name"] for e in slices(doc)}
        for layer in (0, 1):
            for phase in ("fwd", "bwd", "fwd attention", "bwd attention"):
                assert f"L{layer} {phase}" in names, (rank, layer, phase)
        assert "fwd K,V hop 0" in names and "all-to-all" in names and "gradient all-reduce" in names
        assert "optimizer" in names
    assert not path.exists()  # several ranks: one file each, none under the plain name


def test_train_without_trace_writes_no_file(tmp_path):
    need(TRAIN)
    r = subprocess.run([TRAIN, "--comm", "virtual", "--method", "ulysses", "--sp", "2", "--layers", "1", "--hidden",
                        "32", "--heads", "2", "--kv-heads", "2", "--head-dim", "16", "--ffn-hidden", "64", "--vocab",
                        "64", "--seq-len", "32", "--steps", "1", "--warmup", "0"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []
