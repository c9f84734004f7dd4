#!/usr/bin/env python3
"""The longest sequence a training step really fits, found by short runs, beside the length
`seqpar maxlen` predicted: PASS when the predicted length runs and 3% more does not (the prediction
is a length that fits, within 3% of the real maximum), else FAIL with the bracket found.

It runs TRAIN_CMD (measure.sh gives two steps: what the first keeps between calls is held through the
second, as in training) with `--seq-len L -J DIR/maxlen_L.json` appended, first at the
predicted length, then 3% above it (it ran) or well below it (it ran out of memory), then bisects
the bracket [longest that ran, shortest that ran out of memory] while the probe count and the time
budget allow: at about 90 s per step near 512K tokens on an H100, 3 two-step probes fit a 10-minute call.
A run that fails for any other reason than memory stops the search (its log is named).

Usage: maxlen_search.py --predicted N --dir DIR [--tolerance 0.03] [--max-probes 5] [--budget-s 540]
       [--step 1024] [-J OUT.json] -- TRAIN_CMD...
Exit 0: PASS; 1: FAIL (the prediction does not fit, is more than the tolerance short, or the search
hit a non-memory failure); 2: bad arguments."""
import argparse
import json
import os
import re
import subprocess
import sys
import time

OOM = re.compile(r"out of (GPU )?memory|cudaErrorMemoryAllocation|OUT_OF_MEMORY", re.IGNORECASE)


def probe(cmd, length, out_dir):
    """Runs one step at `length`: 'fits', 'oom' or 'error', the seconds it took and its log."""
    log = os.path.join(out_dir, f"maxlen_{length}.log")
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run([*cmd, "--seq-len", str(length), "-J", os.path.join(out_dir, f"maxlen_{length}.json")],
                            stdout=f, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - t0
    with open(log) as f:
        text = f.read()
    outcome = "fits" if rc == 0 else "oom" if OOM.search(text) else "error"
    return {"seq_len": length, "outcome": outcome, "rc": rc, "seconds": round(seconds, 1), "log": log}


def rounded(x, step):
    return max(step, int(x) // step * step)


def search(cmd, predicted, out_dir, tolerance=0.03, max_probes=5, budget_s=540.0, step=1024, clock=time.monotonic):
    start = clock()
    probes = []
    lo = hi = None  # longest length that ran, shortest that ran out of memory
    stop = None

    def run(length):
        nonlocal lo, hi, stop
        p = probe(cmd, length, out_dir)
        probes.append(p)
        print(f"maxlen probe {len(probes)}: {length} tokens: {p['outcome']} (rc {p['rc']}, {p['seconds']} s)", flush=True)
        if p["outcome"] == "fits":
            lo = length if lo is None else max(lo, length)
        elif p["outcome"] == "oom":
            hi = length if hi is None else min(hi, length)
        else:
            stop = f"the step at {length} tokens failed for another reason than memory (rc {p['rc']}, see {p['log']})"

    def room():
        if len(probes) >= max_probes:
            return False
        longest = max((p["seconds"] for p in probes), default=0.0)
        return clock() - start + longest <= budget_s

    run(predicted)
    upper = rounded(predicted * (1 + tolerance), step) + step  # just past the tolerance
    while stop is None and room():
        if lo is not None and hi is not None:
            if hi - lo <= step or (lo >= predicted and hi <= upper):
                break  # bracketed finely enough, or the prediction is confirmed within the tolerance
            nxt = rounded((lo + hi) / 2, step)
            if nxt <= lo:
                break
        elif hi is None:  # everything ran: look higher, first just past the tolerance
            nxt = upper if lo <= predicted else rounded(lo * 1.25, step)
        else:  # nothing ran: look lower, 20% at a time
            nxt = rounded(hi * 0.8, step)
        run(nxt)

    predicted_fits = any(p["seq_len"] == predicted and p["outcome"] == "fits" for p in probes)
    confirmed = predicted_fits and hi is not None and hi <= upper
    if stop:
        verdict = "FAIL"
        why = stop
    elif confirmed:
        verdict = "PASS"
        why = f"{predicted} runs and {hi} does not: the real maximum is within {tolerance:.0%} above the prediction"
    elif not predicted_fits:
        verdict = "FAIL"
        why = "the predicted length does not run"
    elif hi is None:
        verdict = "FAIL"
        why = f"{lo} runs too: the prediction is more than {tolerance:.0%} short of the real maximum"
    else:
        verdict = "FAIL"
        why = f"{predicted} runs, but the real maximum lies between {lo} and {hi}, more than {tolerance:.0%} above it"
    found = None if lo is None else lo
    bracket = f"[{lo if lo is not None else '-'}, {hi if hi is not None else '-'})"
    error = None if found is None else predicted / found - 1
    line = (f"maxlen {verdict}: predicted {predicted}, found {found if found is not None else 'none'} (runs) "
            f"bracket {bracket}{'' if error is None else f', predicted {error:+.1%} vs the longest that ran'}; {why}; "
            f"{len(probes)} probes in {clock() - start:.0f} s")
    return {"verdict": verdict, "predicted": predicted, "longest_that_ran": lo, "shortest_out_of_memory": hi,
            "predicted_vs_found": error, "tolerance": tolerance, "why": why, "probes": probes, "line": line}


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        print("maxlen_search.py: give the training command after --", file=sys.stderr)
        return 2
    cut = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predicted", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--max-probes", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--step", type=int, default=1024, help="probe lengths are multiples of this (the first is the prediction)")
    ap.add_argument("-J", dest="json_out")
    a = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    if not cmd or a.predicted <= 0 or a.max_probes < 1 or not (0 < a.tolerance < 1) or a.step < 1:
        print("maxlen_search.py: need a training command, --predicted > 0, --max-probes >= 1, 0 < --tolerance < 1",
              file=sys.stderr)
        return 2
    os.makedirs(a.dir, exist_ok=True)
    res = search(cmd, a.predicted, a.dir, a.tolerance, a.max_probes, a.budget_s, a.step)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(res, f, indent=1)
    print(res["line"])
    return 0 if res["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
