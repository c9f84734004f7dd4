"""scripts/derive_saved_tensors.py and the table it wrote (sim/presets/frameworks/derived/hf-llama.json).

Always (CI has no torch): the committed table holds together (every total is the sum of its entries,
evaluated with the reference models' own dims; every symbol and sub-phase is one the schema knows; the
reference dims are the simulator's model presets), the width matching refuses ambiguous widths, and a
missing torch is refused clearly. Where torch and transformers are importable at the versions the table
was derived with: the derivation, rerun, gives the committed file byte for byte."""
import importlib.util
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "derive_saved_tensors.py"
sys.path.insert(0, str(SCRIPT.parent))
import derive_saved_tensors as dst  # noqa: E402  (imports no torch at module level)

TABLE = json.loads(dst.OUTPUT.read_text())
CONFIGS = {(c["precision"], c["checkpoint"]): c for c in TABLE["configurations"]}
REFS = {name: (dst.symbol_values(d), dst.constant_values(d), dst.layer_params(d))
        for name, d in TABLE["reference_models"].items()}


def bytes_form(entries, key):
    """Sum of an entry list's per-token (or per-layer) values, weighted by bytes per value."""
    out = {}
    for e in entries:
        for sym, coef in e.get(key, {}).items():
            out[sym] = out.get(sym, 0) + Fraction(coef) * e["bytes"]
    return {k: v for k, v in out.items() if v != 0}


def test_every_configuration_is_there_once():
    assert sorted(CONFIGS) == sorted((p, c) for p in dst.PRECISIONS for c in dst.CHECKPOINTS)
    assert len(TABLE["configurations"]) == len(CONFIGS)


def test_entries_use_known_symbols_dtypes_and_phases():
    token_syms, const_syms = set(dst.TOKEN_SYMBOLS), set(dst.constant_values(dst.TEST_DIMS))
    for (p, c), conf in CONFIGS.items():
        lists = {"layer": conf["layer"], "model": conf["model"], "loss": conf["loss"]["kept_after_forward"],
                 "at_loss": conf["layer_alive_at_loss_not_kept"]}
        for where, entries in lists.items():
            for e in entries:
                label = f"{p}/{c} {where}: {e['name']}"
                assert e.get("per_token") or e.get("per_layer") or e.get("constant"), label
                assert set(e.get("per_token", {})) <= token_syms, label
                assert set(e.get("per_layer", {})) | set(e.get("constant", {})) <= const_syms, label
                assert e["bytes"] in (1, 2, 4, 8), label
                assert e["saved_by"], label
                if where == "layer":
                    assert e["until"] in dst.PHASES, label
                    assert "vocab" not in e.get("per_token", {}), label


def test_layer_totals_are_the_sum_of_the_entries():
    for (p, c), conf in CONFIGS.items():
        tot = conf["layer_totals"]
        per_token = bytes_form(conf["layer"], "per_token")
        per_layer = bytes_form(conf["layer"], "per_layer")
        assert {k: Fraction(v) for k, v in tot["per_token_bytes"].items()} == per_token, (p, c)
        assert {k: Fraction(v) for k, v in tot.get("per_layer_bytes", {}).items()} == per_layer, (p, c)
        for ref, (sv, cv, params) in REFS.items():
            assert tot[ref]["bytes_per_token"] == dst.evaluate(per_token, sv), (p, c, ref)
            if per_layer:
                assert tot[ref]["bytes_per_layer"] == dst.evaluate(per_layer, cv), (p, c, ref)
                assert tot[ref]["bytes_per_layer_param"] == pytest.approx(
                    float(dst.evaluate(per_layer, cv) / params), abs=1e-6), (p, c, ref)


def test_loss_totals_are_the_sum_of_the_entries():
    for (p, c), conf in CONFIGS.items():
        kept = conf["loss"]["kept_after_forward"]
        tot = conf["loss"]["kept_totals"]
        assert {k: Fraction(v) for k, v in tot["per_token_bytes"].items()} == bytes_form(kept, "per_token")
        # the loss keeps the fp32 log-softmax of the logits: 4 bytes per logit, whatever the precision
        assert tot["per_token_bytes"]["vocab"] == 4, (p, c)


def test_peaks_evaluate_their_own_forms():
    """Each reported peak is its per-token form evaluated at the reference model's dims."""
    for (p, c), conf in CONFIGS.items():
        peaks = [conf["layer_backward"]["peak"], conf["layer_forward"]["peak"],
                 conf["loss"]["forward"]["peak"], conf["loss"]["backward"]["peak"],
                 *conf["layer_backward"]["phases"].values(), *conf["layer_backward"]["phases_beyond_kept"].values()]
        for peak in peaks:
            for ref, (sv, cv, _) in REFS.items():
                got = peak[ref]
                assert got["bytes_per_token"] == dst.evaluate(got["per_token_bytes"], sv), (p, c, ref)
                at = got[f"at_{dst.REFERENCE_TOKENS}_tokens"]
                assert got[f"bytes_at_{dst.REFERENCE_TOKENS}_tokens"] == (
                    dst.evaluate(at["per_token_bytes"], sv) * dst.REFERENCE_TOKENS
                    + dst.evaluate(at["constant_bytes"], cv)), (p, c, ref)


def test_full_checkpointing_keeps_the_layer_input_alone():
    for p in dst.PRECISIONS:
        layer = CONFIGS[(p, "full")]["layer"]
        assert len(layer) == 1 and layer[0]["per_token"] == {"hidden": 1}, p


def test_reference_models_are_the_simulator_presets():
    for name, d in TABLE["reference_models"].items():
        assert {k: d[k] for k in dst.TEST_DIMS} == dst.reference_dims(name), name
        assert d["layer_params"] == dst.layer_params(d), name


def test_width_matching_prefers_exact_symbols_and_refuses_ambiguity():
    vals = dst.symbol_values(dst.TEST_DIMS)
    assert dst.width_form(vals["q"], vals, "t") == {"q": 1}  # q is also 3 x kv here: the exact symbol wins
    assert dst.width_form(vals["q"] // 2, vals, "t") == {"q": Fraction(1, 2)}
    assert dst.width_form(2 * vals["ffn"], vals, "t") == {"ffn": 2}
    assert dst.width_form(1, vals, "t") == {"one": 1}
    clash = dict(vals, hidden=2 * vals["kv"])  # dims where 2 x hidden == 4 x kv
    with pytest.raises(SystemExit, match="several symbols"):
        dst.width_form(4 * vals["kv"], clash, "t")  # 2 x hidden or 4 x kv
    with pytest.raises(SystemExit, match="no symbol"):
        dst.width_form(vals["hidden"] + 1, vals, "t")


def test_missing_torch_is_refused_clearly(tmp_path):
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "-o", str(out)], capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert "needs torch and transformers" in r.stderr
    assert not out.exists()


def test_rederivation_gives_the_committed_table():
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("torch and transformers are not installed (CI does not install them): "
                    "the committed table's consistency is checked above")
    import torch
    import transformers
    have = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    if have != TABLE["versions"]:
        pytest.skip(f"the table was derived with {TABLE['versions']}, this machine has {have}: "
                    "rerun scripts/derive_saved_tensors.py to compare")
    assert dst.render(dst.derive()) == dst.OUTPUT.read_text()


# ----------------------------------------------------------------------------------------------------
# The torchtitan table (sim/presets/frameworks/derived/torchtitan-llama3.json, --family torchtitan-llama3):
# the same consistency always, its own facts, and a rerun where torch and torchtitan of its versions are.

TITAN = dst.FAMILIES["torchtitan-llama3"]
TITAN_TABLE = json.loads(TITAN["output"].read_text())
TITAN_CONFIGS = {(c["precision"], c["checkpoint"]): c for c in TITAN_TABLE["configurations"]}


def test_torchtitan_table_has_every_mode_once_and_holds_together():
    assert sorted(TITAN_CONFIGS) == sorted((p, c) for p in TITAN["precisions"] for c in TITAN["checkpoints"])
    token_syms = set(dst.TOKEN_SYMBOLS)
    for (p, c), conf in TITAN_CONFIGS.items():
        tot = conf["layer_totals"]
        assert {k: Fraction(v) for k, v in tot["per_token_bytes"].items()} == bytes_form(conf["layer"], "per_token")
        for e in conf["layer"]:
            assert set(e.get("per_token", {})) <= token_syms and e["until"] in dst.PHASES, (c, e["name"])
        for peak in [conf["layer_backward"]["peak"], conf["loss"]["forward"]["peak"],
                     *conf["layer_backward"]["phases_beyond_kept"].values()]:
            for ref, (sv, cv, _) in REFS.items():
                assert peak[ref]["bytes_per_token"] == dst.evaluate(peak[ref]["per_token_bytes"], sv), (c, ref)


def test_torchtitan_modes_keep_what_its_checkpointing_says():
    """none keeps the whole layer; per-op SAC keeps the layer input and the outputs of the ops it must save
    (every other linear: wqkv, w1, w2; the attention op); full keeps the bf16 layer input alone."""
    full = TITAN_CONFIGS[("bf16-params", "full")]["layer"]
    assert len(full) == 1 and full[0]["per_token"] == {"hidden": 1} and full[0]["bytes"] == 2
    sac = TITAN_CONFIGS[("bf16-params", "selective")]["layer"]
    assert sorted(e["op"] for e in sac if e["op"] == "mm") == ["mm"] * 3
    assert {e["module"] for e in sac if e["op"] == "mm"} == {"attention.qkv_linear.wqkv", "feed_forward.w1",
                                                            "feed_forward.w2"}
    assert [e["per_token"] for e in sac if e["module"] == "attention.qkv_linear.wqkv"] == [{"kv": 2, "q": 1}]
    none = TITAN_CONFIGS[("bf16-params", "none")]
    # everything bf16 but the CPU norm's fp32 copies, the fp32 log-sum-exp and the complex64 RoPE rows
    assert {e["dtype"] for e in none["layer"]} == {"bfloat16", "float32", "complex64"}
    assert [e["per_token"] for e in none["layer"] if e["dtype"] == "complex64"] == [{"head_dim": Fraction(1, 2)}]


def test_torchtitan_chunked_loss_holds_one_chunk_of_logits():
    """ChunkedLossWrapper (8 chunks) runs each chunk's backward inside the loss call: nothing per logit is
    kept after the forward, the forward's peak holds one chunk's logits (vocab / 8 per token), and the
    loss.backward() that follows adds nothing per token."""
    for (p, c), conf in TITAN_CONFIGS.items():
        assert "vocab" not in conf["loss"]["kept_totals"]["per_token_bytes"], c
        fwd = conf["loss"]["forward"]["peak"]["llama3-8b"]["per_token_bytes"]
        assert Fraction(fwd["vocab"]) == Fraction(14, TITAN["loss_chunks"]), c
        assert conf["loss"]["backward"]["peak"]["llama3-8b"]["per_token_bytes"] == {}, c


def test_torchtitan_widths_match_fused_and_chunked_tensors(monkeypatch):
    vals = dst.symbol_values(dst.TEST_DIMS)
    assert dst.width_form(vals["q"] + 2 * vals["kv"], vals, "t") == {"q": 1, "kv": 2}  # the fused wqkv output
    monkeypatch.setattr(dst, "FAM", TITAN)
    assert dst.width_form(Fraction(vals["vocab"], 8), vals, "t") == {"vocab": Fraction(1, 8)}  # one loss chunk
    cv = dst.constant_values(dst.TEST_DIMS)
    assert dst.constant_form(cv["hidden*q"] + 2 * cv["hidden*kv"], cv) == {"hidden*q": 1, "hidden*kv": 2}


def test_missing_torchtitan_is_refused_clearly(tmp_path):
    (tmp_path / "torchtitan.py").write_text("raise ImportError('no torchtitan here')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--family", "torchtitan-llama3", "-o", str(out)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert "needs torch and torchtitan" in r.stderr
    assert not out.exists()


def test_torchtitan_rederivation_gives_the_committed_table(monkeypatch):
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchtitan") is None:
        pytest.skip("torch and torchtitan are not installed (CI does not install them): "
                    "the committed table's consistency is checked above")
    import torch
    import torchtitan
    have = {"torch": torch.__version__.split("+")[0], "torchtitan": torchtitan.__version__.split("+")[0]}
    if have != TITAN_TABLE["versions"]:
        pytest.skip(f"the table was derived with {TITAN_TABLE['versions']}, this machine has {have}: "
                    "rerun scripts/derive_saved_tensors.py --family torchtitan-llama3 to compare")
    monkeypatch.setattr(dst, "FAM", TITAN)
    assert dst.render(dst.derive()) == TITAN["output"].read_text()
