"""reports/plots: each figure type renders from the fixture figure specs (as `seqpar report` writes
them) to a real PNG of sensible size; bad specs are reported by name, never half-drawn silently; the
C++ figure-kind table (reports/include/seqpar/reports/figure_kinds.hpp) and the drawers agree."""
import json
import os
import re
import struct
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
PLOTS = os.path.join(ROOT, "reports", "plots")
KINDS_HPP = os.path.join(ROOT, "reports", "include", "seqpar", "reports", "figure_kinds.hpp")
REPORT_CPP = os.path.join(ROOT, "reports", "src", "report_build.cpp")
FIXTURE = os.path.join(HERE, "fixtures", "report-figures.json")
sys.path.insert(0, PLOTS)

import render  # noqa: E402
from common import read_axes  # noqa: E402


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def load_fixture():
    with open(FIXTURE) as f:
        return json.load(f)


def cpp_figure_kinds():
    """{type: drawer} of the FigureKind constants in figure_kinds.hpp."""
    with open(KINDS_HPP) as f:
        text = f.read()
    kinds = dict(re.findall(r'FigureKind k\w+Figure\{"(\w+)", "([\w.]+)"\}', text))
    assert kinds, f"no FigureKind constants found in {KINDS_HPP}"
    listed = re.search(r"kFigureKinds\{([^}]*)\}", text)
    assert listed, f"no kFigureKinds table in {KINDS_HPP}"
    assert len(re.findall(r"k\w+Figure", listed.group(1))) == len(kinds), "kFigureKinds lists every FigureKind constant"
    return kinds


def test_every_cpp_figure_kind_has_its_drawer_and_every_drawer_a_kind():
    kinds = cpp_figure_kinds()
    assert set(kinds) == set(render.DRAW), f"C++ kinds {sorted(kinds)} against render.py's {sorted(render.DRAW)}"
    for kind, drawer in kinds.items():
        assert os.path.isfile(os.path.join(PLOTS, drawer)), f"{kind}: drawer reports/plots/{drawer} is missing"
        module = render.DRAW[kind].__module__
        assert module + ".py" == drawer, f"{kind}: C++ names {drawer}, render.py dispatches to {module}.py"


def test_cpp_writes_figure_specs_only_through_the_kind_table():
    # A spec with a literal "type" would bypass figure_spec() and could name a kind with no drawer.
    with open(REPORT_CPP) as f:
        text = f.read()
    assert '{"type", "' not in text
    assert "figure_spec(" in text


def test_fixture_covers_every_figure_type():
    types = {f["type"] for f in load_fixture()["figures"]}
    assert types == set(render.DRAW)


def test_render_script_draws_every_figure(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(PLOTS, "render.py"), FIXTURE, str(tmp_path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for spec in load_fixture()["figures"]:
        path = tmp_path / spec["file"]
        assert path.exists(), spec["file"]
        w, h = png_size(path)
        assert 300 <= w <= 4000 and 200 <= h <= 3000, (spec["file"], w, h)
        assert path.stat().st_size > 5000  # axes, lines and labels, not an empty canvas


@pytest.mark.parametrize("kind", sorted(render.DRAW))
def test_each_script_runs_standalone(tmp_path, kind):
    spec = next(f for f in load_fixture()["figures"] if f["type"] == kind)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    script = cpp_figure_kinds()[kind]
    r = subprocess.run([sys.executable, os.path.join(PLOTS, script), str(spec_path), str(tmp_path / "out.png")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    png_size(tmp_path / "out.png")


def test_same_data_gives_same_png(tmp_path):
    spec = next(f for f in load_fixture()["figures"] if f["type"] == "stacked_bars")
    render.stacked_bars.draw(spec, str(tmp_path / "a.png"))
    render.stacked_bars.draw(spec, str(tmp_path / "b.png"))
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_bad_specs_are_named_and_the_rest_still_drawn(tmp_path):
    good = load_fixture()["figures"][0]
    data = {"figures": [good,
                        {"type": "pie", "file": "pie.png"},
                        {"type": "stacked_bars", "file": "short.png", "title": "t", "ylabel": "y",
                         "categories": ["a", "b"], "stacks": [{"label": "x", "values": [1.0]}]},
                        {"type": "lines", "file": "../escape.png", "panels": []}]}
    written, errors = render.render(data, str(tmp_path))
    assert [os.path.basename(p) for p in written] == [good["file"]]
    assert len(errors) == 3
    assert "pie.png" in errors[0] and "unknown figure type" in errors[0]
    assert "short.png" in errors[1] and "1 values for 2 categories" in errors[1]
    assert "plain .png file name" in errors[2]
    data_path = tmp_path / "data.json"
    data_path.write_text(json.dumps(data))
    r = subprocess.run([sys.executable, os.path.join(PLOTS, "render.py"), str(data_path), str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "pie.png" in r.stderr


def test_malformed_data_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    r = subprocess.run([sys.executable, os.path.join(PLOTS, "render.py"), str(bad), str(tmp_path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "bad.json" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("spec", [f for f in load_fixture()["figures"] if f["type"] in ("lines", "stacked_bars")],
                         ids=lambda f: f["file"])
def test_drawn_axes_follow_the_spec(tmp_path, spec):
    # The drawn figure's own axes (the seqpar-axes metadata common.save writes), not only that a PNG exists:
    # the scale of each axis, the reference line (the best plan at 1.0, the device capacity), the lines.
    path = tmp_path / spec["file"]
    render.DRAW[spec["type"]](spec, str(path))
    axes = read_axes(path)
    scale = {"log2": "log", "linear": "linear", None: "linear"}
    if spec["type"] == "lines":
        assert [a["title"] for a in axes] == [p["title"] for p in spec["panels"]]
        for a, panel in zip(axes, spec["panels"]):
            assert a["xscale"] == scale[spec.get("xscale")] and a["yscale"] == scale[spec.get("yscale")]
            assert a["series"] == [s["label"] for s in panel["series"]]
            expected = [{"axis": "y", "value": spec["hline"]["y"], "label": spec["hline"]["label"]}] if "hline" in spec else []
            assert a["references"] == expected
            if "ylim" in spec:
                assert a["ylim"] == pytest.approx(spec["ylim"])
    else:
        (a,) = axes
        expected = [{"axis": "x", "value": spec["hline"]["y"], "label": spec["hline"]["label"]}] if "hline" in spec else []
        assert a["references"] == expected


def test_relative_throughput_figure_has_the_best_plan_at_one():
    # The spec as `seqpar report` writes it: the length axis log-scaled, the reference line at 1.0, and at
    # every length of every panel some method on it (the best plan) and none above it.
    spec = next(f for f in load_fixture()["figures"] if f["file"].startswith("relative-throughput-"))
    assert spec["xscale"] == "log2" and spec["hline"]["y"] == 1.0
    for panel in spec["panels"]:
        best = {}
        for s in panel["series"]:
            for x, y in zip(s["x"], s["y"]):
                best[x] = max(best.get(x, 0.0), y)
        assert best and all(v == pytest.approx(1.0) for v in best.values()), panel["title"]
