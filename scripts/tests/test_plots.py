"""scripts/plots: each figure type renders from the fixture figure specs (as `seqpar report` writes
them) to a real PNG of sensible size; bad specs are reported by name, never half-drawn silently."""
import json
import os
import struct
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PLOTS = os.path.join(HERE, "..", "plots")
FIXTURE = os.path.join(HERE, "fixtures", "report-figures.json")
sys.path.insert(0, PLOTS)

import render  # noqa: E402


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def load_fixture():
    with open(FIXTURE) as f:
        return json.load(f)


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
    script = {"lines": "lines.py", "stacked_bars": "stacked_bars.py", "parity": "parity.py"}[kind]
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
