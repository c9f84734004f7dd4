"""The seqpar Python module (cli/python) against the seqpar program: the same plan gives the same
document, and bad input raises seqpar.Error with the CLI's own message. Both come from
$SEQPAR_BUILD_DIR (default build/): the module from its python/ folder, the program from cli/.
Skipped, with the reason, when the module was not built (no nanobind at configure time)."""
import glob
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SEQPAR_BUILD_DIR", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "cli", "seqpar")


@pytest.fixture(scope="module")
def seqpar():
    found = glob.glob(os.path.join(BUILD, "python", "seqpar*.so"))
    if not found:
        pytest.skip(f"the seqpar Python module is not built in {BUILD}/python "
                    "(pip install nanobind, then scripts/setup.sh)")
    if not os.path.exists(CLI):
        pytest.skip(f"the seqpar program is not built ({CLI})")
    spec = importlib.util.spec_from_file_location("seqpar", found[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["seqpar"] = module
    return module


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False)


# The envelope fields that name the run itself (when, where, how it was invoked), not the result;
# tool_version carries the commit each binary was linked at, which differs in a tree rebuilt in part.
RUN_FIELDS = ("created_utc", "host", "command", "tool_version")


def without_run(doc):
    return {k: v for k, v in doc.items() if k not in RUN_FIELDS}


def test_simulate_equals_the_cli_json(seqpar):
    plans = [dict(model="llama3-8b", gpus=8, seq_len="128K", method="ulysses", sp=8),
             dict(model="qwen2-7b", gpus=16, seq_len="256K", method="hybrid", ulysses_degree=4, ring_degree=4,
                  checkpoint="full", tiled_mlp=True),
             # A framework profile by name (sim/presets/frameworks/), and ZeRO-3's parameter offload.
             dict(model="llama3-8b", gpus=8, seq_len="64K", sp=8, framework="hf-transformers", zero=3,
                  offload_params=True),
             # torchtitan's profile, its per-op selective checkpointing
             dict(model="llama3-8b", gpus=8, seq_len="64K", sp=8, framework="torchtitan", method="allgather",
                  checkpoint="selective")]
    for kw in plans:
        args = ["simulate", "--json"]
        for k, v in kw.items():
            args += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
        run = cli(*args)
        assert run.returncode == 0, run.stderr
        expected = json.loads(run.stdout)
        got = seqpar.simulate(**kw)
        assert isinstance(got, dict)
        assert without_run(got) == without_run(expected)
        # The document says how it was asked for, in the CLI's words.
        assert got["command"].split()[1:] == args[:1] + args[2:] + ["--json"]


def test_an_invalid_plan_is_a_result_as_in_the_cli(seqpar):
    got = seqpar.simulate(model="llama3-8b", gpus=8, seq_len="64K", sp=3)
    expected = json.loads(cli("simulate", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "64K", "--sp", "3",
                              "--json").stdout)
    assert got["valid"] is False and got["errors"] == expected["errors"]


def test_errors_raise_with_the_cli_message(seqpar):
    run = cli("simulate", "--model", "no-such-model", "--seq-len", "64K")
    assert run.returncode == 2
    message = run.stderr.strip().removeprefix("seqpar: error: ")
    assert "no-such-model" in message
    with pytest.raises(seqpar.Error) as e:
        seqpar.simulate(model="no-such-model", seq_len="64K")
    assert str(e.value) == message
    with pytest.raises(ValueError, match="--no-such-flag"):  # seqpar.Error is a ValueError
        seqpar.simulate(seq_len="64K", no_such_flag=1)
    with pytest.raises(seqpar.Error, match="seq-len"):
        seqpar.simulate(model="llama3-8b")


def test_presets_advise_maxlen_and_sweep(seqpar, tmp_path):
    presets = seqpar.presets(kind="model")
    assert without_run(presets) == without_run(json.loads(cli("presets", "--kind", "model", "--json").stdout))
    advice = seqpar.advise(model="llama3-8b", gpus=8, seq_len="128K")
    assert without_run(advice) == without_run(json.loads(
        cli("advise", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "128K", "--json").stdout))
    longest = seqpar.maxlen(model="llama3-8b", gpus=8, method="ulysses")
    assert without_run(longest) == without_run(json.loads(
        cli("maxlen", "--model", "llama3-8b", "--gpus", "8", "--method", "ulysses", "--json").stdout))
    grid = seqpar.sweep(model="llama3-8b", gpus=[8], seq_len=["32K", "64K"], method=["ulysses", "ring"],
                        out=str(tmp_path))
    assert (tmp_path / "sweep.json").exists()
    assert without_run(grid) == without_run(json.loads((tmp_path / "sweep.json").read_text()))


def test_a_sweep_is_a_dict_and_prints_nothing(seqpar, tmp_path, capfd):
    # sweep --json copied its file to stdout, past the module's capture: every sweep from Python
    # raised "exited with status 0" after dumping megabytes on the terminal.
    grid = seqpar.sweep(seq_len="8K", out=str(tmp_path / "ok"))
    assert grid["best"][0]["plan"] is not None
    # No point valid (--tp 3 on 8 GPUs): the document, each point's errors in it, as advise's is.
    none = seqpar.sweep(seq_len="8K", tp=3, out=str(tmp_path / "none"))
    assert none["results"] and not any(p["valid"] for p in none["results"])
    assert "gpus: 8 GPUs are not divisible by tp 3 x sp 1" in none["results"][0]["errors"][0]
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out[:300], err[:300])


@pytest.mark.parametrize("kwargs,message", [
    (dict(help=True), "help: the module returns documents"),
    (dict(json=True), "json: the results are always dicts"),
    (dict(model="llama3-8b\0tail"), "model: contains a NUL character"),
    ({"seq\0len": "64K"}, "keyword argument: contains a NUL character"),
    (dict(gpus=True), "gpus: takes a value, not True"),
    (dict(gpus=False), "gpus: takes a value, not False"),  # was dropped silently: 8 GPUs instead
    (dict(sp=[True]), "sp: takes a value, not True"),
    (dict(gpus=[[8]]), "gpus: a list inside a list"),
    (dict(tiled_mlp=1), "tiled_mlp: an on/off flag; give True or False"),
    (dict(gpus=2**40), "gpus: 1099511627776 is above the limit of 1048576"),
    (dict(model={"name": "x"}), "model: a dict has no command-line spelling"),
    (dict(seq_len=b"64K"), "seq_len: a bytes has no command-line spelling"),
    (dict(no_such_flag=True), "--no-such-flag"),
    (dict(framework=""), "framework: empty value"),  # was the default framework, silently
    (dict(framework="no-such"), "unknown framework preset 'no-such'"),
    (dict(offload_params="yes"), "offload_params: an on/off flag; give True or False"),
    (dict(grad_accum_steps=True), "grad_accum_steps: takes a value, not True"),
])
def test_bad_keyword_arguments_raise_seqpar_error(seqpar, kwargs, message):
    args = dict(seq_len="64K")
    args.update(kwargs)
    with pytest.raises(seqpar.Error) as e:
        seqpar.simulate(**args)
    assert message in str(e.value)


def test_a_path_object_is_a_path(seqpar, tmp_path):
    import pathlib
    out = seqpar.sweep(seq_len=["32K"], method="ulysses", out=pathlib.Path(tmp_path) / "grid")
    assert (tmp_path / "grid" / "sweep.json").exists() and out["best"]


def test_flags_take_booleans_and_values_take_values(seqpar):
    on = seqpar.simulate(seq_len="64K", tiled_mlp=True)
    off = seqpar.simulate(seq_len="64K", tiled_mlp=False)
    assert on["plan"]["tiled_mlp"] is True and off["plan"]["tiled_mlp"] is False
    assert seqpar.simulate(seq_len="64K", gpus=16)["plan"]["gpus"] == 16


def test_a_fixed_global_batch_from_python(seqpar, tmp_path):
    # advise, maxlen and sweep take the batch as the CLI does (global_batch_tokens= is
    # --global-batch-tokens); every plan advised runs exactly that batch per optimizer step.
    kw = dict(model="llama3-8b", gpus=8, seq_len="512K", global_batch_tokens="512K")
    advice = seqpar.advise(**kw)
    assert without_run(advice) == without_run(json.loads(
        cli("advise", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "512K", "--global-batch-tokens", "512K",
            "--json").stdout))
    assert advice["global_batch"] == {"tokens": 512 * 1024, "sequences": 1}
    assert advice["ranked"] and all(r["global_batch_sequences"] == 1 for r in advice["ranked"])
    assert any("cannot reach dp 8" in why for r in advice["rejected"] for why in r["reasons"])
    longest = seqpar.maxlen(model="llama3-8b", gpus=8, method="ulysses", global_batch=4)
    assert longest["result"]["global_batch_sequences"] == 4
    grid = seqpar.sweep(model="llama3-8b", gpus=[8], seq_len=["128K", "256K"], global_batch_tokens="1M",
                        out=str(tmp_path))
    for b in grid["best"]:
        assert b["plan"]["dp"] * b["plan"]["micro_batch"] * b["plan"]["grad_accum_steps"] * b["seq_len"] == 1 << 20
    with pytest.raises(seqpar.Error, match="global_batch_tokens"):
        seqpar.advise(model="llama3-8b", gpus=8, seq_len="64K", global_batch_tokens=100000)


def test_tensor_parallelism_from_python(seqpar, tmp_path):
    # tp= is --tp: the plan's TP degree for simulate, the one TP degree advise and maxlen search, a
    # list for sweep; the documents carry it in every plan and advise its reasons.
    kw = dict(model="llama3-8b", gpus=16, seq_len="128K", tp=2)
    got = seqpar.simulate(**kw)
    assert without_run(got) == without_run(json.loads(
        cli("simulate", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "128K", "--tp", "2", "--json").stdout))
    assert got["plan"]["tp"] == 2 and got["plan"]["sp"] == 8 and got["time"]["tp_comm_s"] > 0
    advice = seqpar.advise(**kw)
    assert advice["best"]["tp"] == 2 and advice["reasons"]
    assert all(r["plan"]["tp"] == 2 for r in advice["ranked"])
    longest = seqpar.maxlen(model="llama3-8b", gpus=8, tp=4, method="ring-zigzag")
    assert longest["plan"]["tp"] == 4
    grid = seqpar.sweep(model="llama3-8b", gpus=[8], seq_len=["32K"], tp=[1, 2], method=["ulysses"],
                        out=str(tmp_path))
    assert {r["plan"]["tp"] for r in grid["results"]} == {1, 2}
    with pytest.raises(seqpar.Error, match="tp"):
        seqpar.sweep(model="llama3-8b", gpus=[8], seq_len=["32K"], tp=[2, 2], out=str(tmp_path))


def test_documents_and_balancer_from_python(seqpar, tmp_path):
    # documents=, packing=, doc_seed=, doc_batches= and balancer= are the CLI's --documents ... --balancer
    # on every command that takes them; the documents are the CLI's own.
    docs = dict(documents="lognormal:8.5:1.3", doc_batches=4)
    kw = dict(model="llama3-8b", gpus=8, seq_len="128K", method="ring-zigzag", sp=8, balancer="per-document", **docs)
    got = seqpar.simulate(**kw)
    assert without_run(got) == without_run(json.loads(cli(
        "simulate", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "128K", "--method", "ring-zigzag", "--sp", "8",
        "--balancer", "per-document", "--documents", "lognormal:8.5:1.3", "--doc-batches", "4", "--json").stdout))
    assert got["workload"]["balancer"] == "per-document" and got["workload"]["batches"] == 4
    assert got["workload"]["work_ratio"]["mean"] < 0.5
    # One document filling the sequence: the step without documents.
    fixed = seqpar.simulate(model="llama3-8b", gpus=8, seq_len="128K", method="ring-zigzag", sp=8, documents="fixed:128K")
    plain = seqpar.simulate(model="llama3-8b", gpus=8, seq_len="128K", method="ring-zigzag", sp=8)
    assert fixed["step_time_s"] == plain["step_time_s"]
    assert got["step_time_s"] != plain["step_time_s"]

    advice = seqpar.advise(model="llama3-8b", gpus=8, seq_len="128K", tp=1, **docs)
    assert without_run(advice) == without_run(json.loads(cli(
        "advise", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "128K", "--tp", "1",
        "--documents", "lognormal:8.5:1.3", "--doc-batches", "4", "--json").stdout))
    assert "balancer" in advice["best"] and advice["workload"]["documents"] == "lognormal:8.5:1.3"

    longest = seqpar.maxlen(model="llama3-8b", gpus=8, method="ring-zigzag", sp=8, tp=1, **docs)
    assert without_run(longest) == without_run(json.loads(cli(
        "maxlen", "--model", "llama3-8b", "--gpus", "8", "--method", "ring-zigzag", "--sp", "8", "--tp", "1",
        "--documents", "lognormal:8.5:1.3", "--doc-batches", "4", "--json").stdout))
    assert longest["plan"]["balancer"] in ("zigzag", "per-document", "balanced")
    assert longest["workload"]["work_ratio"]["mean"] < 0.1

    grid = seqpar.sweep(model="llama3-8b", gpus=[8], seq_len=["64K", "128K"], method=["ring-zigzag"], sp=[8], tp=[1],
                        balancer=["zigzag", "per-document"], out=str(tmp_path), **docs)
    assert without_run(grid) == without_run(json.loads((tmp_path / "sweep.json").read_text()))
    assert [w["seq_len"] for w in grid["workloads"]] == [64 << 10, 128 << 10]
    assert {r["documents"]["balancer"] for r in grid["results"]} == {"zigzag", "per-document"}
    zigzag = [r["documents"]["imbalance"]["mean"] for r in grid["results"] if r["balancer"] == "zigzag"]
    assert zigzag and min(zigzag) > 1.1

    with pytest.raises(seqpar.Error, match="give it with --documents"):
        seqpar.simulate(model="llama3-8b", seq_len="64K", balancer="zigzag")
    with pytest.raises(seqpar.Error, match="balancer: maxlen searches every load balancer"):
        seqpar.maxlen(model="llama3-8b", gpus=8, documents="fixed:1K", balancer="zigzag")
    with pytest.raises(seqpar.Error, match="documents"):
        seqpar.sweep(seq_len=["64K"], out=str(tmp_path), documents="nonsense:1")


def test_fp8_from_python(seqpar):
    # fp8= and fp8_recipe= are --fp8 and --fp8-recipe; allow_fp8=True is the search flag.
    kw = dict(model="llama3-8b", gpus=8, seq_len="8K", method="ring-zigzag", sp=2, framework="megatron-core",
              fp8="gemm,weights", fp8_recipe="current")
    got = seqpar.simulate(**kw)
    assert without_run(got) == without_run(json.loads(cli(
        "simulate", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "8K", "--method", "ring-zigzag", "--sp", "2",
        "--framework", "megatron-core", "--fp8", "gemm,weights", "--fp8-recipe", "current", "--json").stdout))
    assert got["plan"]["fp8"] == "gemm,weights" and got["plan"]["fp8_recipe"] == "current"
    assert got["fp8"]["parameter_gather_bytes_per_param"] == 1 and got["time"]["fp8_casts_s"] > 0
    bf16 = seqpar.simulate(**{k: v for k, v in kw.items() if not k.startswith("fp8")})
    assert got["time"]["gemm_s"] < bf16["time"]["gemm_s"] and bf16["fp8"] == {"parts": "none"}
    advice = seqpar.advise(model="llama3-8b", gpus=8, seq_len="32K", tp=1, framework="megatron-core", allow_fp8=True)
    assert advice["best"]["fp8"] != "none"
    # The default framework trains in bf16: an FP8 plan is invalid, with the reason.
    invalid = seqpar.simulate(model="llama3-8b", gpus=8, seq_len="8K", fp8="gemm")
    assert invalid["valid"] is False and any("bf16 only" in e for e in invalid["errors"])
    with pytest.raises(seqpar.Error, match="unknown part"):
        seqpar.simulate(model="llama3-8b", seq_len="8K", fp8="gemm,fp4")
