#!/usr/bin/env python3
"""End-to-end checks of `report`, `calibrate` and `gate` as a user runs them (exit codes, messages,
files), through the test driver that registers them like seqpar's main, plus scripts/sweep.py
feeding `report`. Usage: cli_checks.py SEQPAR_REPORTS_CLI SOURCE_DIR"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

CLI, SRC = sys.argv[1], sys.argv[2]
FIX = os.path.join(SRC, "tests", "reports", "fixtures")
sys.path.insert(0, os.path.join(SRC, "reports", "plots"))
from common import read_axes  # noqa: E402  the drawn axes a report PNG records
failures = []


def run(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)


def check(cond, what, r=None):
    if not cond:
        failures.append(what + ("" if r is None else f"\n  rc={r.returncode}\n  stdout={r.stdout[-2000:]}\n  stderr={r.stderr[-2000:]}"))


def measurement(results):
    return {"schema_version": 1, "tool_version": "t", "command": "bench -J x", "host": "h", "created_utc": "x",
            "kind": "measurement", "program": "seqpar-bench-attention", "mode": "single-rank-proxy", "device": "gpu",
            "environment": {"gpu": {"name": "NVIDIA H100 80GB HBM3"}}, "config": {},
            "results": [{"name": n, "time_s": statistics.median(s), "samples_s": s} for n, s in results]}


def noisy(mean, rel, n, rng):
    return [mean * max(0.05, 1 + rng.gauss(0, rel)) for _ in range(n)]


with tempfile.TemporaryDirectory() as tmp:
    def write(name, doc):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    for sub in ("report", "calibrate", "gate"):
        r = run(sub, "--help")
        check(r.returncode == 0 and "--json" in r.stdout, f"{sub} --help", r)

    # report: a sweep, a training-step measurement and a microbenchmark together.
    out = os.path.join(tmp, "report")
    r = run("report", *(os.path.join(FIX, f) for f in ("sweep.json", "train.json", "attention.json")), "--out", out)
    check(r.returncode == 0, "report on the fixtures", r)
    for f in ("report.md", "report.html", "report-data.json", "predicted-vs-measured.png"):
        check(os.path.exists(os.path.join(out, f)), f"report wrote {f}")
    if os.path.exists(os.path.join(out, "report.html")):
        html = open(os.path.join(out, "report.html")).read()
        check("data:image/png;base64," in html, "report.html embeds its plots")
        check("http://" not in html and "https://" not in html and "<script" not in html, "report.html is self-contained")
        check("mpirun -np 8 seqpar-train" in html, "report.html shows the command behind the measurement")
    r = run("report", os.path.join(FIX, "sweep.json"), "--out", os.path.join(tmp, "r2"), "--no-plots", "--json")
    check(r.returncode == 0 and json.loads(r.stdout)["images"] == [], "report --no-plots --json", r)

    # The first screen answers the question: one line per length and GPU count, the best plan at 1.00 and
    # each other method's best as a fraction of it, checked against the sweep's own points.
    sweep_doc = json.load(open(os.path.join(FIX, "sweep.json")))
    best_rate, method_rate = {}, {}
    for p in sweep_doc["results"]:
        if p["valid"] and p["fits"]:
            plan = p["plan"]
            cell = (p["system"]["name"], plan["gpus"], plan["seq_len"])
            method = "no SP" if plan["sp"] == 1 else plan["method"]
            best_rate[cell] = max(best_rate.get(cell, 0), p["tokens_per_s_per_gpu"])
            method_rate[cell + (method,)] = max(method_rate.get(cell + (method,), 0), p["tokens_per_s_per_gpu"])
    cells = {(p["system"]["name"], p["plan"]["gpus"], p["plan"]["seq_len"]) for p in sweep_doc["results"] if p["valid"]}
    answers_dir = os.path.join(tmp, "answers")
    r = run("report", os.path.join(FIX, "sweep.json"), "--out", answers_dir)
    check(r.returncode == 0, "report on the sweep fixture", r)
    md = open(os.path.join(answers_dir, "report.md")).read() if r.returncode == 0 else ""
    sections = md.split("\n## ")
    first = sections[1] if len(sections) > 1 else ""
    answer_lines = [line[2:] for line in first.splitlines() if line.startswith("- ")]
    check(first.startswith("Answer: the best plan at each length and GPU count") and len(answer_lines) == len(cells),
          f"report.md opens with one answer per length and GPU count ({len(answer_lines)} lines for {len(cells)} cells)")
    data = json.load(open(os.path.join(answers_dir, "report-data.json"))) if r.returncode == 0 else {"method_comparison": []}
    for c in data["method_comparison"]:
        cell = (c["system"], c["gpus"], c["seq_len"])
        line = c["answer"]
        check(line in answer_lines, f"answer of {cell} is in report.md: {line}")
        if cell not in best_rate:
            check("no plan fits" in line, f"{cell}: nothing fits and the answer says so: {line}")
            continue
        check(c["best"]["tokens_per_s_per_gpu"] == best_rate[cell] and ", 1.00" in line.split(";")[0],
              f"{cell}: the best plan is the fastest fitting point, at 1.00: {line}")
        for m in c["methods"]:
            key = cell + (m["method"],)
            if key in method_rate:
                rel = method_rate[key] / best_rate[cell]
                check(abs(m["relative"] - rel) < 1e-9, f"{cell} {m['method']}: relative {m['relative']} against {rel}")
                if m["method"] != c["best"]["method"]:
                    check(f": {rel:.2f}" in line, f"{cell}: the answer gives {m['method']} at {rel:.2f}: {line}")
            else:
                check(m["relative"] is None and f"{m['method']}: does not fit" in line,
                      f"{cell} {m['method']}: does not fit, and the answer says so: {line}")
    # The relative plot: a log-scaled length axis, the reference line at 1.0, and at every length the
    # best method on it; the memory plot: the capacity drawn, a log-scaled length axis. Both from the
    # figure specs and from the drawn PNGs' own axes (their seqpar-axes metadata).
    figs = {f["file"]: f for f in data.get("figures", [])}
    for system in ("dgx-h100", "l20-pcie"):
        rel_file, mem_file = f"relative-throughput-{system}-llama3-8b.png", f"memory-capacity-{system}-llama3-8b.png"
        rel = figs.get(rel_file)
        check(rel is not None and rel["xscale"] == "log2" and rel["hline"]["y"] == 1.0,
              f"{rel_file}: spec with a log2 length axis and the line at 1.0")
        for panel in (rel or {}).get("panels", []):
            by_x = {}
            for series in panel["series"]:
                check(series["x"] == sorted(series["x"]), f"{rel_file} {series['label']}: lengths in order")
                for x, y in zip(series["x"], series["y"]):
                    by_x[x] = max(by_x.get(x, 0), y)
            check(by_x and all(abs(v - 1.0) < 1e-12 for v in by_x.values()),
                  f"{rel_file} {panel['title']}: the best method is at 1.0 at every length: {by_x}")
        mem = figs.get(mem_file)
        caps = {m["memory_capacity_bytes"] for c in data["method_comparison"] if c["system"] == system
                for m in c["methods"]}
        check(mem is not None and len(caps) == 1 and abs(mem["hline"]["y"] - caps.pop() / 2**30) < 1e-9
              and mem["xscale"] == "log2", f"{mem_file}: spec with the capacity line and a log2 length axis")
        for f, ref in ((rel_file, 1.0), (mem_file, mem["hline"]["y"] if mem else None)):
            path = os.path.join(answers_dir, f)
            axes = (read_axes(path) or []) if os.path.exists(path) else []
            check(len(axes) == 2 and all(a["xscale"] == "log" and [x["value"] for x in a["references"]] == [ref]
                                         and a["series"] for a in axes),
                  f"{f}: drawn with a log length axis and the reference line at {ref} on each GPU count's panel: {axes}")
        mem_path = os.path.join(answers_dir, mem_file)
        mem_axes = (read_axes(mem_path) or []) if os.path.exists(mem_path) else []
        check(mem_axes and all(a["yscale"] == "log" for a in mem_axes), f"{mem_file}: memory on a log scale: {mem_axes}")
        for g in (8, 16):
            check(os.path.exists(os.path.join(answers_dir, f"throughput-{system}-llama3-8b-g{g}.png")),
                  f"the absolute throughput plot of {system}, {g} GPUs, is kept")
    html = open(os.path.join(answers_dir, "report.html")).read() if r.returncode == 0 else ""
    check(html.find("<h2>Answer") < html.find("<img") and "<li>" + answer_lines[0] in html if answer_lines else False,
          "report.html opens with the answers, before any plot")

    bad = write("bad.json", "{\"kind\": ")
    r = run("report", bad, "--out", os.path.join(tmp, "r3"))
    check(r.returncode == 2 and "bad.json: malformed JSON" in r.stderr, "report names a malformed file", r)
    r = run("report", write("kind.json", {"kind": "forecast"}), "--out", os.path.join(tmp, "r4"))
    check(r.returncode == 2 and "kind.json: unknown kind 'forecast'" in r.stderr, "report names an unknown kind", r)
    r = run("report", os.path.join(tmp, "absent.json"), "--out", os.path.join(tmp, "r5"))
    check(r.returncode == 2 and "absent.json: cannot open" in r.stderr, "report names a missing file", r)
    # report: the H200 seqpar-train --validate documents, a verdict each (printed and in --json);
    # the gate refuses them as timings; a result neither timed nor validated is refused naming 'time_s'.
    h200 = os.path.join(SRC, "reports", "results", "h200", "check")
    validated = sorted(os.path.join(h200, f) for f in os.listdir(h200) if f.startswith("validate_") and f.endswith(".json"))
    r = run("report", *validated, "--out", os.path.join(tmp, "validate1"), "--no-plots", "--json")
    rows = json.loads(r.stdout)["validations"] if r.returncode == 0 else []
    check(len(rows) == len(validated) == 8 and all(v["passed"] for v in rows),
          "report reads the --validate documents, a verdict each", r)
    r = run("report", *validated, "--out", os.path.join(tmp, "validate2"), "--no-plots")
    check(r.returncode == 0 and "validation verdicts (seqpar-train --validate): 0 of 8 FAIL" in r.stdout,
          "report prints the verdicts", r)
    r = run("gate", validated[0], validated[0])
    check(r.returncode == 2 and "records a verdict, not a time" in r.stderr, "gate refuses a --validate document", r)
    neither = json.load(open(validated[0]))
    del neither["results"][0]["validation"]
    r = run("report", write("neither.json", neither), "--out", os.path.join(tmp, "validate3"))
    check(r.returncode == 2 and "neither.json: results[0]: missing field 'time_s'" in r.stderr,
          "report refuses a result neither timed nor validated", r)
    # report: seqpar-train beside bench_torch_step, printed with the ratios and in --json.
    peers = [os.path.join(FIX, "peer", f) for f in ("seqpar_train_16k.json", "torch_step_16k.json", "torch_step_32k.json")]
    # The fixtures' GPU is made up: their steps are predicted on the system given.
    r = run("report", *peers, "--out", os.path.join(tmp, "r9"), "--no-plots", "--system", "dgx-h100")
    check(r.returncode == 0 and "seqpar-train against PyTorch" in r.stdout and " 2.00 " in r.stdout,
          "report prints the seqpar-train / PyTorch side-by-side", r)
    r = run("report", *peers, "--out", os.path.join(tmp, "r10"), "--no-plots", "--json", "--system", "dgx-h100")
    rows = json.loads(r.stdout)["peer_comparisons"] if r.returncode == 0 else []
    check(len(rows) == 2 and rows[0]["step_time_ratio"] == 2.0 and rows[1]["seqpar"] is None,
          "report --json carries the side-by-side, unmatched run included", r)
    r = run("report", *peers, "--out", os.path.join(tmp, "r11"), "--no-plots")
    check(r.returncode == 2 and "Test GPU (fixture)" in r.stderr and "--system" in r.stderr,
          "report refuses steps on an unknown GPU without --system, naming the flag", r)
    # report: measured training steps beside the simulator, the error summary printed last.
    h100_steps = [os.path.join(FIX, "h100-2026-11", f) for f in ("train_sp1.json", "train_proxy.json")]
    r = run("report", *h100_steps, "--out", os.path.join(tmp, "r12"), "--no-plots")
    lines = r.stdout.strip().splitlines()
    check(r.returncode == 0 and "predicted on 'dgx-h100'" in r.stdout and lines and
          lines[-1].startswith("largest |error|: step time "), "report prints the steps' errors last", r)
    data_path = os.path.join(tmp, "r12", "report-data.json")
    steps = json.load(open(data_path))["step_comparisons"] if os.path.exists(data_path) else {}
    check(len(steps.get("rows", [])) == 2 and steps["rows"][1]["mode"] == "single-rank-proxy",
          "report-data.json carries the step comparisons", r)

    # gate
    rng = random.Random(7)
    base_samples = noisy(1e-3, 0.01, 10, rng)
    base = write("base.json", measurement([("attn", base_samples), ("comm", noisy(2e-3, 0.01, 10, rng))]))
    same = write("same.json", measurement([("attn", base_samples), ("comm", noisy(2e-3, 0.01, 10, rng))]))
    slow = write("slow.json", measurement([("attn", noisy(1.1e-3, 0.01, 10, rng)), ("comm", noisy(2e-3, 0.01, 10, rng))]))
    missing = write("missing.json", measurement([("attn", base_samples)]))
    r = run("gate", base, same)
    check(r.returncode == 0 and "gate passed" in r.stdout, "gate passes identical runs", r)
    r = run("gate", base, slow)
    check(r.returncode == 1 and "SLOWER" in r.stdout and "GATE FAILED" in r.stdout, "gate fails a 10% regression", r)
    r = run("gate", base, slow, "--json")
    check(r.returncode == 1 and json.loads(r.stdout)["passed"] is False, "gate --json", r)
    r = run("gate", base, missing)
    check(r.returncode == 1 and "MISSING" in r.stdout, "gate reports a missing benchmark", r)
    check(run("gate", base, missing, "--allow-missing").returncode == 0, "gate --allow-missing")
    # The gate fails closed: nothing compared, a benchmark on one side only, too few samples.
    empty_a, empty_b = write("empty_a.json", measurement([])), write("empty_b.json", measurement([]))
    r = run("gate", empty_a, empty_b)
    check(r.returncode == 1 and "no benchmark was compared" in r.stdout and "GATE FAILED" in r.stdout,
          "gate fails two empty result files", r)
    r = run("gate", empty_a, empty_b, "--allow-missing", "--allow-new")
    check(r.returncode == 1, "gate fails an empty comparison even with --allow-missing --allow-new", r)
    added = write("added.json", measurement([("attn", base_samples), ("comm", noisy(2e-3, 0.01, 10, rng)),
                                             ("extra", noisy(1e-3, 0.01, 10, rng))]))
    r = run("gate", base, added)
    check(r.returncode == 1 and "NEW (no baseline)" in r.stdout and "--allow-new" in r.stdout,
          "gate fails a benchmark without a baseline", r)
    check(run("gate", base, added, "--allow-new").returncode == 0, "gate --allow-new")
    base3 = write("base3.json", measurement([("attn", noisy(1e-3, 0.01, 3, rng))]))
    slow3 = write("slow3.json", measurement([("attn", noisy(10e-3, 0.01, 3, rng))]))
    r = run("gate", base3, slow3)
    check(r.returncode == 1 and "SLOWER (median rule: the U test cannot reach p < 0.05 with 3/3 samples" in r.stdout,
          "gate fails a 10x slowdown with 3 repetitions by the median rule", r)
    r = run("gate", base3, slow3, "--json")
    check(r.returncode == 1 and json.loads(r.stdout)["benchmarks"][0]["rule"] == "median", "gate --json names the rule", r)
    r = run("gate", base, bad)
    check(r.returncode == 2 and "bad.json" in r.stderr, "gate names a malformed file", r)
    r = run("gate", base, same, "--alpha", "3")
    check(r.returncode == 2 and "--alpha" in r.stderr, "gate rejects a bad --alpha", r)

    # calibrate: attention rows only; the links stay the base preset's.
    rows = []
    for op, eff in (("fwd", 0.6), ("bwd", 0.45)):
        for L in (1024, 4096, 16384, 65536):
            rows.append({"name": f"attention_{op}/seq{L}", "op": op, "dtype": "bf16", "seq_len": L, "time_s": 1e-3,
                         "tflops": 989.4 * eff * L / (L + 1200)})
    doc = measurement([])
    doc["results"] = rows
    prof = os.path.join(tmp, "profile.json")
    r = run("calibrate", write("attn.json", doc), "--out", prof)
    check(r.returncode == 0 and "attention fwd: efficiency" in r.stdout, "calibrate", r)
    if r.returncode == 0:
        p = json.load(open(prof))
        check(abs(p["gpu"]["attention_half_tokens"]["value"] / 1200 - 1) < 0.01, "calibrate recovers L_half")
        check(p["name"] == "dgx-h100-calibrated", "calibrate picks the base from the GPU name")
    # calibrate on the committed H100 measurements (every file, as `*.json` gives them), then the
    # profile as --system.
    h100 = os.path.join(FIX, "h100-2026-11")
    h100_files = sorted(os.path.join(h100, f) for f in os.listdir(h100) if f.endswith(".json"))
    h100_prof = os.path.join(tmp, "h100.json")
    r = run("calibrate", *h100_files, "--out", h100_prof)
    check(r.returncode == 0 and "largest |residual|" in r.stdout and "not fitted" in r.stdout,
          "calibrate on the H100 measurements", r)
    r = run("calibrate", *h100_files, "--out", h100_prof, "--json")
    check(r.returncode == 0, "calibrate --json on the H100 measurements", r)
    if r.returncode == 0:
        p = json.loads(r.stdout)
        rows = p["calibration"]["rows"]
        check(len(rows) == 37 and all(abs(row["residual"]) <= 0.05 for row in rows),
              "calibrate --json: every fitted H100 row within 5% of the profile's prediction")
        effs = [p["gpu"]["gemm_efficiency"]["value"]] + [c["efficiency"] for c in p["gpu"]["attention_curves"]]
        check(all(0 < e <= 1 for e in effs), "calibrated efficiencies lie in (0, 1]")
        r = run("simulate", "--system", h100_prof, "--model", "llama3-8b", "--gpus", "8", "--seq-len", "128K",
                "--method", "ulysses", "--sp", "8", "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["valid"] is True and json.loads(r.stdout)["step_time_s"] > 0,
              "simulate --system <calibrated H100 profile>", r)
    r = run("calibrate", base, "--out", prof, "--base-system", "no-such-system")
    check(r.returncode == 2 and "no-such-system" in r.stderr, "calibrate names an unknown base", r)
    # calibrate from training steps (minimal format): steps of a "framework" that is the simulator
    # plus 50 ms per step and 2 GiB of memory; the profile recovers both and predicts a fourth length.
    # Eight GPUs with ZeRO-3: the whole llama3-8b on one GPU would not fit its 80 GiB, and calibrate
    # refuses a step whose peak is above its GPU's memory.
    def simulated(seq):
        r = run("simulate", "--model", "llama3-8b", "--gpus", "8", "--sp", "8", "--zero", "3", "--seq-len", str(seq),
                "--json")
        check(r.returncode == 0, f"simulate a step at {seq}", r)
        return json.loads(r.stdout) if r.returncode == 0 else None
    steps = []
    for seq in (4096, 8192, 16384):
        s = simulated(seq)
        if s:
            # A measured peak is what the framework allocated: the simulated peak less the device reserve.
            steps.append(write(f"step{seq}.json", {"model": "llama3-8b", "plan": s["plan"], "gpu_name": "NVIDIA H100 80GB HBM3",
                                                  "step_time_s": s["step_time_s"] + 0.05,
                                                  "peak_memory_bytes": s["peak_memory_bytes"] - s["memory"]["reserved_bytes"] + 2 * 1024**3}))
    step_prof = os.path.join(tmp, "steps_profile.json")
    r = run("calibrate", *steps, "--out", step_prof)
    check(r.returncode == 0 and "steps (measured" in r.stdout and "largest leave-one-out error" in r.stdout,
          "calibrate from training steps prints each step with its leave-one-out error", r)
    if r.returncode == 0:
        p = json.load(open(step_prof))
        fw = p["framework"]
        check(abs(fw["step_overhead_s"] - 0.05) < 0.002 and abs(fw["reserve_bytes"] / 2**31 - 1) < 0.01,
              f"calibrate recovers the steps' overhead and reserve: {fw}")
        check(len(p["calibration"]["steps"]) == 3 and all(abs(s["loo_time_error"]) < 0.01 for s in p["calibration"]["steps"]),
              "calibration.steps: one row per step, each predicted when left out")
        truth = simulated(32768)
        r = run("simulate", "--system", step_prof, "--model", "llama3-8b", "--gpus", "8", "--sp", "8", "--zero", "3",
                "--seq-len", "32768", "--json")
        check(r.returncode == 0 and truth and abs(json.loads(r.stdout)["step_time_s"] / (truth["step_time_s"] + 0.05) - 1) < 0.01,
              "simulate --system <step-calibrated profile> adds the framework's overhead", r)
    bad_step = write("bad_step.json", {"model": "llama3-8b", "plan": {"method": "ulysses", "gpus": 1, "seq_len": 4096, "sp": 1},
                                       "step_time_s": 1.0})
    r = run("calibrate", bad_step, "--base-system", "dgx-h100", "--out", os.path.join(tmp, "p9.json"))
    check(r.returncode == 2 and "bad_step.json" in r.stderr and "peak_memory_bytes" in r.stderr,
          "calibrate names a step file without peak_memory_bytes", r)

    # JSON-library failures on user input (issue 12) are errors naming the file, never aborts.
    gbench = write("gbench.json", {"context": {"date": "x"}, "benchmarks": [1]})
    for args in (("gate", gbench, gbench), ("report", gbench, "--out", os.path.join(tmp, "r7")),
                 ("gate", base, write("gbench_err.json", {"context": {}, "benchmarks": [
                     {"name": "a", "error_occurred": "yes", "real_time": 1, "time_unit": "ms"}]}))):
        r = run(*args)
        check(r.returncode == 2 and ".json: benchmarks[0]" in r.stderr, f"{args[0]} names a bad Google Benchmark entry", r)
    r = run("calibrate", gbench, "--base-system", "dgx-h100", "--out", os.path.join(tmp, "p7.json"))
    check(r.returncode == 2 and "gbench.json" in r.stderr, "calibrate names a Google Benchmark file it cannot use", r)
    huge = write("huge.json", json.dumps(measurement([("attn", [1e-3] * 3)])).replace("0.001", "1e400", 1))
    deep = write("deep.json", "{\"kind\": \"measurement\", \"results\": " + "[" * 100000 + "]" * 100000 + "}")
    for sub, extra in (("gate", (base,)), ("report", ("--out", os.path.join(tmp, "r8"))),
                       ("calibrate", ("--out", os.path.join(tmp, "p8.json")))):
        for path, needle in ((huge, "huge.json: malformed JSON: a number is out of range"),
                             (deep, "deep.json: malformed JSON: nested deeper than 256")):
            args = (sub, base, path) if sub == "gate" else (sub, path, *extra)
            r = run(*args)
            check(r.returncode == 2 and needle in r.stderr, f"{sub} names {os.path.basename(path)}", r)
    # A file name that is not UTF-8 lands in "command" of --json output: replaced, not an abort.
    odd = os.path.join(tmp, "base\udcff.json")  # the byte 0xff, by Python's surrogateescape
    with open(odd, "w") as f:
        f.write(open(base).read())
    rb = subprocess.run([CLI, "gate", odd, same, "--json"], capture_output=True, timeout=300)
    ok = rb.returncode == 0
    try:
        ok = ok and "\ufffd" in json.loads(rb.stdout.decode("utf-8"))["command"]
    except (ValueError, KeyError):
        ok = False
    check(ok, f"gate --json with a non-UTF-8 file name: rc={rb.returncode} stdout={rb.stdout[-500:]!r} "
              f"stderr={rb.stderr[-500:]!r}")

    # sweep.py -> results.json -> report
    spec = write("spec.json", {"program": os.path.join(SRC, "scripts", "tests", "fake_bench.py"),
                               "grid": {"--seq-len": [1024, 2048]}, "ranks": 1})
    sweep_out = os.path.join(tmp, "sweep")
    r = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "sweep.py"), spec, "--out", sweep_out,
                        "--launcher", "local"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "sweep.py with the fake benchmark", r)
    r = run("report", os.path.join(sweep_out, "results.json"), "--out", os.path.join(tmp, "r6"))
    check(r.returncode == 0, "report reads sweep.py's results", r)
    if r.returncode == 0:
        md = open(os.path.join(tmp, "r6", "report.md")).read()
        check("fake/seq-len/1024" in md and "No predictions in the inputs" in md, "report of a measured sweep", r)
    r = run("gate", os.path.join(sweep_out, "results.json"), os.path.join(sweep_out, "results.json"))
    check(r.returncode == 0 and "2 compared" in r.stdout, "gate reads sweep.py's results", r)

for f in failures:
    print("FAILED:", f)
print(f"{'all checks passed' if not failures else f'{len(failures)} checks failed'}")
sys.exit(1 if failures else 0)
