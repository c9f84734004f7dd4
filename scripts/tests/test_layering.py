"""tests/layering/check_layers.py: the source tree keeps the layer order of docs/ARCHITECTURE.md, and
the check itself catches an upward include, an include cycle, an unknown seqpar/<x> and a folder with
no layer (on small synthetic trees)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
CHECK = os.path.join(ROOT, "tests", "layering", "check_layers.py")
sys.path.insert(0, os.path.dirname(CHECK))

import check_layers  # noqa: E402


def write(root, rel, text=""):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def tree(tmp_path, files):
    for rel, text in files.items():
        write(tmp_path, rel, text)
    return check_layers.check(str(tmp_path))


CLEAN = {
    "core/include/seqpar/core/error.hpp": "#pragma once\n",
    "sim/include/seqpar/sim/model.hpp": '#include "seqpar/core/error.hpp"\n',
    "comm/src/mpi.cpp": '#include "seqpar/sim/model.hpp"\n#include "seqpar/core/error.hpp"\n',
    "bench/harness/include/seqpar/bench/timer.hpp": '#include "seqpar/comm/x.hpp"\n',
    "comm/include/seqpar/comm/x.hpp": "",
    "bench/comm/main.cpp": '#include "seqpar/bench/timer.hpp"\n#include "local.hpp"\n',
    "cli/main.cpp": '#include "seqpar/reports/r.hpp"\n',
    "reports/include/seqpar/reports/r.hpp": '#include "seqpar/sim/model.hpp"\n',
    "tests/sim/test.cpp": '#include "seqpar/reports/r.hpp"\n',  # tests stand outside the layers
}


def test_the_source_tree_keeps_the_layer_order():
    r = subprocess.run([sys.executable, CHECK, ROOT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_a_clean_tree_passes(tmp_path):
    assert tree(tmp_path, CLEAN) == []


def test_an_upward_include_names_file_line_and_include(tmp_path):
    files = dict(CLEAN)
    files["train/include/seqpar/train/step.hpp"] = ""
    files["sim/src/cost.cpp"] = '#include <vector>\n#include "seqpar/train/step.hpp"\n'
    findings = tree(tmp_path, files)
    assert len(findings) == 1, findings
    f = findings[0]
    assert f.startswith(os.path.join("sim", "src", "cost.cpp") + ":2:")
    assert '"seqpar/train/step.hpp"' in f and "higher layer train/" in f


def test_the_harness_may_not_include_a_bench_program(tmp_path):
    files = dict(CLEAN)
    files["bench/comm/include/seqpar/bench/collectives.hpp"] = ""
    files["bench/harness/include/seqpar/bench/dtype_map.hpp"] = '#include "seqpar/bench/collectives.hpp"\n'
    findings = tree(tmp_path, files)
    assert any("dtype_map.hpp" in f and "bench/harness/ may not include the higher layer bench/" in f for f in findings), findings


def test_an_include_cycle_between_folders_is_named(tmp_path):
    files = dict(CLEAN)
    files["core/src/uses_sim.cpp"] = '#include "seqpar/sim/model.hpp"\n'
    findings = tree(tmp_path, files)
    assert any(f.startswith("include cycle between folders:") and "core/ -> sim/" in f and "sim/ -> core/" in f
               for f in findings), findings


def test_unknown_names_and_folders_are_refused(tmp_path):
    files = dict(CLEAN)
    files["sim/src/a.cpp"] = '#include "seqpar/common/error.hpp"\n'
    files["extras/x.cpp"] = ""
    files["extras/y.cpp"] = ""
    findings = tree(tmp_path, files)
    assert any("no folder defines seqpar/common/" in f for f in findings), findings
    assert sum("folder 'extras/' is not a layer" in f for f in findings) == 1, findings


def test_the_command_exits_non_zero_naming_the_violation(tmp_path):
    files = dict(CLEAN)
    files["core/src/bad.cpp"] = '#include "seqpar/reports/r.hpp"\n'
    tree(tmp_path, files)
    r = subprocess.run([sys.executable, CHECK, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "bad.cpp:1" in r.stderr and "seqpar/reports/r.hpp" in r.stderr


def test_a_target_linking_a_higher_layer_is_named(tmp_path):
    files = dict(CLEAN)
    files["sim/CMakeLists.txt"] = "add_library(seqpar_sim src/a.cpp)\ntarget_link_libraries(seqpar_sim\n  PUBLIC seqpar_core\n  PRIVATE seqpar_comm)\n"
    files["comm/CMakeLists.txt"] = "add_library(seqpar_comm x.cpp)\ntarget_link_libraries(seqpar_comm PUBLIC seqpar_sim seqpar_core)\n"
    files["core/CMakeLists.txt"] = "add_library(seqpar_core x.cpp)\n"
    findings = tree(tmp_path, files)
    assert findings == [os.path.join("sim", "CMakeLists.txt") + ":2: target_link_libraries(seqpar_sim ... seqpar_comm): "
                        "sim/ may not link seqpar_comm of the higher layer comm/"], findings
