#!/usr/bin/env python3
"""Issue 16's fidelity bands on `seqpar report`'s own output: the measured training steps NOT used
to fit the profile (`seqpar calibrate ... STEP.json`) must be predicted within 5% per-rank step
time and 3% peak memory. Reads report-data.json's `step_comparisons` (the report computed the
errors with the simulator; nothing is re-predicted here), prints one row per held-out step and a
pass/fail line last.

Usage: fidelity_check.py REPORT_DIR|report-data.json --fit STEP.json ... [--calibration PROFILE.json]
       [--time-band 0.05] [--memory-band 0.03] [--min-held-out N] [-J OUT.json]
Exit 0: every held-out step in both bands; 1: a step outside a band, fewer held-out steps than
--min-held-out (a step that failed to run is a failure, not a pass), or a --fit step the profile
(--calibration) was not fitted on; 2: unreadable input."""
import argparse
import json
import os
import sys


class InputError(Exception):
    pass


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: cannot read {what}: {e}") from e


def load_comparisons(path):
    if os.path.isdir(path):
        path = os.path.join(path, "report-data.json")
    data = load_json(path, "the report data (seqpar report --out DIR writes DIR/report-data.json)")
    sc = data.get("step_comparisons") if isinstance(data, dict) else None
    if not isinstance(sc, dict) or not isinstance(sc.get("rows"), list):
        raise InputError(f"{path}: no 'step_comparisons.rows': not a report-data.json of seqpar report")
    for i, r in enumerate(sc["rows"]):
        for k in ("file", "measured_step_time_s", "predicted_step_time_s", "time_error"):
            if not isinstance(r, dict) or r.get(k) is None:
                raise InputError(f"{path}: step_comparisons.rows[{i}] lacks '{k}'")
    return sc


def same_file(a, b):
    # The report records each file as it was named on its command line; the fit list may name it
    # by another relative path, so compare resolved paths too.
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def loo_errors(profile_path):
    """The calibration's own leave-one-out errors of the fitted steps (calibration.steps)."""
    prof = load_json(profile_path, "the calibrated profile")
    steps = prof.get("calibration", {}).get("steps") if isinstance(prof, dict) else None
    if not isinstance(steps, list):
        raise InputError(f"{profile_path}: no 'calibration.steps': not a profile fitted from training steps")
    return steps


def pct(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def size(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def check(sc, fit, time_band, memory_band, min_held_out):
    rows = sc["rows"]
    for f in fit:
        if not any(same_file(r["file"], f) for r in rows):
            raise InputError(f"--fit {f}: not among the report's training steps (pass the same files to both)")
    held = [r for r in rows if not any(same_file(r["file"], f) for f in fit)]
    out = []
    for r in held:
        t_ok = abs(r["time_error"]) <= time_band
        m = r.get("memory_error")
        m_ok = None if m is None else abs(m) <= memory_band
        out.append({"file": r["file"], "plan_label": r.get("plan_label", ""), "seq_len": r.get("seq_len"),
                    "time_error": r["time_error"], "memory_error": m, "time_ok": t_ok, "memory_ok": m_ok})
    t_in = sum(o["time_ok"] for o in out)
    with_mem = [o for o in out if o["memory_ok"] is not None]
    m_in = sum(o["memory_ok"] for o in with_mem)
    enough = len(out) >= min_held_out
    passed = enough and t_in == len(out) and m_in == len(with_mem) and len(with_mem) == len(out)
    worst_t = max((abs(o["time_error"]) for o in out), default=None)
    worst_m = max((abs(o["memory_error"]) for o in with_mem), default=None)
    return {"system": sc.get("system"), "fit": list(fit), "held_out": out, "time_band": time_band,
            "memory_band": memory_band, "min_held_out": min_held_out, "time_within": t_in,
            "memory_within": m_in, "memory_measured": len(with_mem), "max_abs_time_error": worst_t,
            "max_abs_memory_error": worst_m, "passed": passed}


def check_fit_count(res, fit, loo):
    """A --fit step the calibration skipped (e.g. a step recorded in fp32: calibrate fits bf16/fp16
    steps only) leaves a profile fitted on fewer steps than claimed: a failure, named."""
    fitted = [s for s in loo if any(same_file(str(s.get("file", "")), f) for f in fit)]
    res["fit_steps_fitted"] = len(fitted)
    if len(fitted) < len(fit):
        res["passed"] = False
        res["why"] = (f"the calibration fitted {len(fitted)} of the {len(fit)} --fit steps "
                      "(see seqpar calibrate's notes: a skipped step, e.g. one not in bf16/fp16)")


def print_result(res, loo):
    if loo:
        print("fitted steps (calibration's leave-one-out error):")
        for s in loo:
            print(f"  {os.path.basename(str(s.get('file', '?'))):34} time {pct(s.get('loo_time_error')):>7}"
                  f"  memory {pct(s.get('loo_memory_error')):>7}")
    print(f"held-out steps on '{res['system']}' (error = predicted / measured - 1):")
    for o in res["held_out"]:
        mark = "no peak" if o["memory_ok"] is None else "ok" if o["time_ok"] and o["memory_ok"] else "MISS"
        if o["memory_ok"] is None and not o["time_ok"]:
            mark = "MISS, no peak"
        print(f"  {os.path.basename(o['file']):34} {o['plan_label']:28} time {pct(o['time_error']):>7}"
              f"  memory {pct(o['memory_error']):>7}  {mark}")
    n = len(res["held_out"])
    line = (f"fidelity {'PASS' if res['passed'] else 'FAIL'}: {n} held-out steps "
            f"(at least {res['min_held_out']}); time within {100 * res['time_band']:g}%: {res['time_within']} of {n}"
            f" (largest {size(res['max_abs_time_error'])}); "
            f"memory within {100 * res['memory_band']:g}%: {res['memory_within']} of {n}"
            f" (largest {size(res['max_abs_memory_error'])})")
    if res["memory_measured"] < n:
        line += f"; {n - res['memory_measured']} without a measured peak"
    if res.get("why"):
        line += f"; {res['why']}"
    print(line)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="seqpar report's output folder or its report-data.json")
    ap.add_argument("--fit", nargs="*", default=[], help="the step files given to seqpar calibrate (left out)")
    ap.add_argument("--calibration", help="the profile seqpar calibrate wrote: print its leave-one-out errors")
    ap.add_argument("--time-band", type=float, default=0.05, help="largest |time error| (default 0.05)")
    ap.add_argument("--memory-band", type=float, default=0.03, help="largest |peak memory error| (default 0.03)")
    ap.add_argument("--min-held-out", type=int, default=1, help="fewer held-out steps fail (default 1)")
    ap.add_argument("-J", "--json", dest="json_out", help="write the result as JSON")
    a = ap.parse_args(argv)
    for name in ("time_band", "memory_band"):
        if not 0 < getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(a, name)}: must be in (0, 1)")
    if a.min_held_out < 0:
        ap.error(f"--min-held-out {a.min_held_out}: must be >= 0")
    try:
        res = check(load_comparisons(a.report), a.fit, a.time_band, a.memory_band, a.min_held_out)
        loo = loo_errors(a.calibration) if a.calibration else []
        if a.calibration:
            check_fit_count(res, a.fit, loo)
    except InputError as e:
        print(f"fidelity_check.py: {e}", file=sys.stderr)
        return 2
    print_result(res, loo)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
