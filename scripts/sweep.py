#!/usr/bin/env python3
"""Runs a benchmark sweep: a spec file -> one run per grid point under mpirun or srun (or the list
of commands for a batch system), with progress, resumable after an interruption, and every point's
JSON gathered into one file that `seqpar report` and `seqpar gate` read.

Spec (JSON):
  {
    "program": "build/bench/attention/seqpar-bench-attention",   # executable (path or name on PATH)
    "args": ["--dtype", "bf16"],                                  # fixed arguments
    "grid": {"--seq-len": ["4K", "8K"], "--sp": [2, 4]},          # option -> values; the cartesian product
    "ranks": 4,              # processes per point: a number, or the name of a grid option ("--sp")
    "json_flag": "-J",       # how the program is told where to write its JSON (default -J)
    "launcher_args": ["--bind-to", "none"]                        # extra mpirun/srun arguments (optional)
  }
A grid value is a number or a string (the option's value), true (the bare flag), or false or null
(the option left out). The values of one option must be distinct (1024 and "1024" are the same value).

A fixed global batch (--global-batch-tokens N or --global-batch N, counts such as 4M) makes every
point run that many tokens or sequences per step, so the points compare at the same batch: each
point's --micro-batch is the batch's sequences / data-parallel degree (ranks / sp, sp from --sp,
else U x R from --ulysses-degree and --ring-degree, else all ranks), as `seqpar advise
--global-batch-tokens` fills it. The measuring programs run one micro-step per step (no gradient
accumulation), so a point whose data-parallel degree does not divide the batch's sequences cannot
reach it: it is skipped, with the reason, and not run. The spec must then leave --micro-batch out.

Usage: sweep.py SPEC.json --out DIR [--launcher mpirun|srun|local|print] [--dry-run]
                [--global-batch-tokens N | --global-batch N]

--launcher print runs nothing: it writes DIR/commands.sh for a batch system, one line per point,
`launch N PROGRAM ARGS...` with N the point's ranks; the script's `launch` runs
${SEQPAR_LAUNCH:-mpirun -np} N PROGRAM ARGS... (SEQPAR_LAUNCH="srun --ntasks" for Slurm).

DIR/points/<id>.json   each point's output        DIR/state.json    finished and failed points
                                                  (file names relative to DIR: resume from any directory)
DIR/results.json       every finished point        DIR/commands.sh   the commands (launcher print)
A point counts as finished when the state file says so and its JSON exists and parses, so a rerun
after Ctrl-C, a crash or a lost allocation skips finished points and runs the rest. Failed points
are rerun on the next invocation too. On a terminal, a progress line says how many points are done,
how many are left and about how long they will take. Exit status: 0 when every point finished, 1
otherwise, 2 for a bad spec or --out, 130 when interrupted."""
import argparse
import datetime
import difflib
import itertools
import json
import math
import os
import re
import shlex
import socket
import subprocess
import sys

from progress import Progress

SCHEMA_VERSION = 1
POINTS_DIR = "points"


class SpecError(Exception):
    pass


def argument_of(value):
    """What a grid value adds to the command line: the bare flag (true), nothing (false, null),
    or the option followed by the value's text."""
    if value is True:
        return ("flag",)
    if value is False or value is None:
        return ("omitted",)
    return ("value", str(value))


def check_grid_value(path, opt, v):
    """A number, a string, true, false or null: anything else has no command-line spelling."""
    if v is None or isinstance(v, (bool, str)):
        return
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise SpecError(f"{path}: grid['{opt}'] has {v}, not a finite number")
        return
    raise SpecError(f"{path}: grid['{opt}'] has {json.dumps(v)}: a grid value must be a number, a string, "
                    "true, false or null")


def refuse_nul(path, value, where):
    """No argument can hold a NUL character: the launch would fail with a traceback."""
    if isinstance(value, str) and "\0" in value:
        raise SpecError(f"{path}: {where} contains a NUL character, which no command-line argument can hold")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str):
            refuse_nul(path, key, f"{where} key {json.dumps(key)}")
        refuse_nul(path, item, f"{where}[{json.dumps(key)}]")


# Every key the spec may hold (the docstring above says what each means).
SPEC_KEYS = ("program", "args", "grid", "ranks", "json_flag", "launcher_args")


def load_spec(path):
    try:
        with open(path) as f:
            spec = json.load(f)
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SpecError(f"{path}: malformed JSON: {e}")
    if not isinstance(spec, dict):
        raise SpecError(f"{path}: the spec must be a JSON object")
    refuse_nul(path, spec, "spec")
    # A misspelt key ("lanucher_args") would be ignored and the sweep run without it: refused by name.
    for key in spec:
        if key not in SPEC_KEYS:
            near = difflib.get_close_matches(key, SPEC_KEYS, n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise SpecError(f"{path}: unknown field {json.dumps(key)} ({hint}known: {', '.join(SPEC_KEYS)})")
    if not isinstance(spec.get("program"), str) or not spec["program"]:
        raise SpecError(f"{path}: missing field 'program' (the benchmark executable)")
    for key in ("args", "launcher_args"):
        items = spec.get(key, [])
        if not isinstance(items, list) or not all(isinstance(a, (str, int, float)) and not isinstance(a, bool)
                                                  for a in items):
            raise SpecError(f"{path}: field '{key}' must be a list of strings")
    if not isinstance(spec.get("json_flag", "-J"), str) or not spec.get("json_flag", "-J"):
        raise SpecError(f"{path}: field 'json_flag' must be a non-empty string (the option that names the JSON file)")
    grid = spec.get("grid", {})
    if not isinstance(grid, dict):
        raise SpecError(f"{path}: field 'grid' must be an object of option -> list of values")
    for opt, values in grid.items():
        if not opt:
            raise SpecError(f"{path}: grid has an empty option name")
        if not isinstance(values, list) or not values:
            raise SpecError(f"{path}: grid['{opt}'] must be a non-empty list")
        for v in values:
            check_grid_value(path, opt, v)
        # Two values that give the same command line would run the same point twice and gather two
        # documents with the same benchmark names, which `seqpar gate` rejects as ambiguous.
        seen = {}
        for v in values:
            key = argument_of(v)
            if key in seen:
                same = "" if seen[key] == v else f" (same argument as {json.dumps(seen[key])})"
                raise SpecError(f"{path}: grid['{opt}'] lists the value {json.dumps(v)} more than once{same}; "
                                "each grid value must be distinct")
            seen[key] = v
    ranks = spec.get("ranks", 1)
    if isinstance(ranks, str):
        if ranks not in grid:
            raise SpecError(f"{path}: field 'ranks' names '{ranks}', which is not a grid option")
    elif not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
        raise SpecError(f"{path}: field 'ranks' must be a positive integer or a grid option name")
    return spec


def points(spec):
    """[(id, {option: value})] in a stable order: the grid's cartesian product."""
    grid = spec.get("grid", {})
    keys = list(grid)
    out = []
    for i, combo in enumerate(itertools.product(*(grid[k] for k in keys))):
        params = dict(zip(keys, combo))
        label = "_".join(f"{k.lstrip('-')}={v}" for k, v in params.items())
        label = re.sub(r"[^A-Za-z0-9=._+-]+", "-", label)  # '+' kept: 1e+308 must not read as 1e-308
        out.append((f"p{i:04d}" + (f"_{label}" if label else ""), params))
    return out


def ranks_of(spec, params):
    r = spec.get("ranks", 1)
    value = params[r] if isinstance(r, str) else r
    try:
        if isinstance(value, bool) or float(value) != int(float(value)):
            raise ValueError
        value = int(float(value))
    except (TypeError, ValueError, OverflowError):
        raise SpecError(f"ranks: grid value {json.dumps(value)} of '{r}' is not a whole number")
    if value < 1:
        raise SpecError(f"ranks: {value} must be at least 1")
    if value > MAX_GPUS:
        raise SpecError(f"ranks: {value} is above the limit of {MAX_GPUS}")
    return value


# seqpar's input limits (core/include/seqpar/core/limits.hpp, the README's "Input limits"; a test
# checks that these agree): a larger value is refused here rather than reaching a program as a
# micro-batch it would refuse at every point.
MAX_GPUS = 1 << 20
MAX_MICRO_BATCH = 1 << 16
MAX_GLOBAL_BATCH_TOKENS = 1 << 44
MAX_GLOBAL_BATCH_SEQUENCES = 1 << 40


def parse_count(text, flag, limit=None):
    """A count as seqpar takes it: 4096, 512K, 4M, 1G (binary multiples), at most `limit`."""
    m = re.fullmatch(r"\s*(\d+)\s*([KkMmGg]?)\s*", str(text))
    if not m:
        raise SpecError(f"{flag}: '{text}' is not a count (e.g. 4096, 512K, 4M)")
    n = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    if n < 1:
        raise SpecError(f"{flag}: {text} must be at least 1")
    if limit is not None and n > limit:
        raise SpecError(f"{flag}: {n} is above the limit of {limit}")
    return n


def option_value(spec, params, opt):
    """The point's value of `opt`: its grid value, else the value after it in the fixed args."""
    if opt in params:
        return params[opt]
    args = [str(a) for a in spec.get("args", [])]
    for i, a in enumerate(args[:-1]):
        if a == opt:
            return args[i + 1]
    return None


def batch_fill(spec, params, batch):
    """(micro_batch, None) that makes the point run the global batch, or (None, why it cannot)."""
    for where in (params, spec.get("args", [])):
        if "--micro-batch" in where:
            raise SpecError("--micro-batch: a global batch sets each point's micro-batch; leave it out of the spec")
    ranks = ranks_of(spec, params)
    sp = option_value(spec, params, "--sp")
    u, r = option_value(spec, params, "--ulysses-degree"), option_value(spec, params, "--ring-degree")
    sp = parse_count(sp, "--sp") if sp is not None else (
        parse_count(u, "--ulysses-degree") * parse_count(r, "--ring-degree") if u is not None and r is not None else ranks)
    if ranks % sp:
        return None, f"{ranks} ranks are not divisible by sp {sp}"
    dp = ranks // sp
    tokens, sequences = batch
    if tokens:
        seq = option_value(spec, params, "--seq-len")
        if seq is None:
            raise SpecError("--global-batch-tokens: the points need --seq-len (in the grid or args) to count sequences")
        seq = parse_count(seq, "--seq-len")
        if tokens % seq:
            return None, f"{tokens} tokens are not a whole number of {seq}-token sequences"
        sequences = tokens // seq
    if sequences % dp:
        if dp > sequences:
            return None, (f"{sequences} sequence(s) per step cannot reach dp {dp} (ranks {ranks} / sp {sp}): each "
                          "replica needs a sequence of its own")
        return None, f"{sequences} sequences per step do not split evenly over dp {dp} (ranks {ranks} / sp {sp})"
    if sequences // dp > MAX_MICRO_BATCH:
        return None, (f"{sequences} sequences per step over dp {dp} need micro-batch {sequences // dp}, above the "
                      f"limit of {MAX_MICRO_BATCH} (the measuring programs run no gradient accumulation)")
    return sequences // dp, None


def command(spec, params, out_file, launcher, micro_batch=None):
    argv = [spec["program"], *map(str, spec.get("args", []))]
    for opt, v in params.items():
        arg = argument_of(v)
        if arg[0] == "flag":
            argv.append(opt)
        elif arg[0] == "value":
            argv += [opt, arg[1]]
    if micro_batch is not None:
        argv += ["--micro-batch", str(micro_batch)]
    argv += [spec.get("json_flag", "-J"), out_file]
    n = ranks_of(spec, params)
    extra = [str(a) for a in spec.get("launcher_args", [])]
    if launcher == "mpirun":
        return ["mpirun", "-np", str(n), *extra, *argv]
    if launcher == "srun":
        return ["srun", "--ntasks", str(n), *extra, *argv]
    if launcher == "print":
        return ["launch", str(n), *argv]
    if n != 1 and launcher == "local":
        raise SpecError(f"launcher 'local' runs one process, but the point needs {n} ranks; use mpirun or srun")
    return argv


def parses(path):
    try:
        with open(path) as f:
            json.load(f)
        return True
    except (OSError, json.JSONDecodeError):
        return False


def write_json_atomic(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)  # a crash never leaves a half-written state or results file


def point_file(out_dir, pid):
    return os.path.join(out_dir, POINTS_DIR, pid + ".json")


def gather(out_dir, pts, state, argv):
    docs = []
    for pid, params in pts:
        entry = state["points"].get(pid)
        if not entry or entry.get("status") != "done":
            continue
        # The file is found from this run's --out, not from the state: a sweep resumed from another
        # working directory (or a state written by an older sweep.py with cwd-relative paths) still
        # finds its points.
        with open(point_file(out_dir, pid)) as f:
            doc = json.load(f)
        if isinstance(doc, dict):
            doc.setdefault("sweep_point", {"id": pid, "params": params})
        docs.append(doc)
    collection = {"schema_version": SCHEMA_VERSION, "tool_version": "scripts/sweep.py",
                  "command": shlex.join(argv), "host": socket.gethostname(),
                  "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "kind": "collection", "points": len(pts), "finished": len(docs), "documents": docs}
    path = os.path.join(out_dir, "results.json")
    write_json_atomic(path, collection)
    return path


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("spec")
    ap.add_argument("--out", required=True, help="output directory (created; holds the state of the sweep)")
    ap.add_argument("--launcher", choices=["mpirun", "srun", "local", "print"], default="mpirun",
                    help="how each point is started; print writes the commands and runs nothing")
    ap.add_argument("--dry-run", action="store_true", help="show what would run, run nothing")
    batch_group = ap.add_mutually_exclusive_group()
    batch_group.add_argument("--global-batch-tokens", help="tokens per step for every point (e.g. 4M)")
    batch_group.add_argument("--global-batch", help="sequences per step for every point")
    args = ap.parse_args(argv[1:])
    try:
        spec = load_spec(args.spec)
        pts = points(spec)
        batch = None
        if args.global_batch_tokens is not None:
            batch = (parse_count(args.global_batch_tokens, "--global-batch-tokens", MAX_GLOBAL_BATCH_TOKENS), 0)
        elif args.global_batch is not None:
            batch = (0, parse_count(args.global_batch, "--global-batch", MAX_GLOBAL_BATCH_SEQUENCES))
        skipped = {}  # point id -> why it cannot reach the global batch
        fills = {}
        if batch:
            for pid, params in pts:
                fills[pid], why = batch_fill(spec, params, batch)
                if why:
                    skipped[pid] = why
        if not args.out:
            raise SpecError("--out: empty; name the output directory")
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise SpecError(f"--out {args.out}: exists and is not a directory; name a directory (created if missing)")
        try:
            os.makedirs(os.path.join(args.out, POINTS_DIR), exist_ok=True)
        except OSError as e:
            raise SpecError(f"--out {args.out}: cannot create the output directory: {e.strerror}")
        state_path = os.path.join(args.out, "state.json")
        batch_state = None if batch is None else {"tokens": batch[0], "sequences": batch[1]}
        state = {"spec": spec, "points": {}}
        if batch_state:
            state["global_batch"] = batch_state
        if os.path.exists(state_path):
            try:
                with open(state_path) as f:
                    state = json.load(f)
            except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
                raise SpecError(f"{state_path}: unreadable or malformed state file ({e}); remove it to start the "
                                "sweep afresh")
            if not isinstance(state, dict) or not isinstance(state.get("points"), dict):
                raise SpecError(f"{state_path}: not a sweep state file; remove it to start the sweep afresh")
            if state.get("spec") != spec:
                raise SpecError(f"{state_path}: the sweep in this directory was started from a different spec; "
                                "use another --out or remove the directory")
            if state.get("global_batch") != batch_state:
                raise SpecError(f"{state_path}: the sweep in this directory was started with another global batch; "
                                "use another --out or remove the directory")
        cmds = []
        for pid, params in pts:
            if pid in skipped:
                continue
            out_file = point_file(args.out, pid)
            cmds.append((pid, params, out_file, command(spec, params, out_file, args.launcher, fills.get(pid))))
        for pid, why in skipped.items():
            print(f"{pid}: SKIPPED, cannot reach the global batch: {why}", flush=True)
        pts = [(pid, params) for pid, params in pts if pid not in skipped]
    except SpecError as e:
        print(f"sweep.py: error: {e}", file=sys.stderr)
        return 2

    if args.launcher == "print":
        path = os.path.join(args.out, "commands.sh")
        with open(path, "w") as f:
            f.write("#!/usr/bin/env bash\n# One line per point: `launch N PROGRAM ARGS...` starts it on N ranks. Set "
                    "SEQPAR_LAUNCH to your batch\n# system's launcher (default mpirun -np; Slurm: SEQPAR_LAUNCH=\"srun "
                    "--ntasks\").\n")
            f.write('launch() { local n=$1; shift; ${SEQPAR_LAUNCH:-mpirun -np} "$n" "$@"; }\n')
            for _, _, _, cmd in cmds:
                f.write(shlex.join(cmd) + "\n")
        for _, _, _, cmd in cmds:
            print(shlex.join(cmd))
        print(f"sweep.py: {len(cmds)} commands written to {path}", file=sys.stderr)
        return 0

    n = len(cmds)
    failed = done_earlier = 0
    progress = Progress("sweep.py", n)
    try:
        for k, (pid, params, out_file, cmd) in enumerate(cmds, 1):
            entry = state["points"].get(pid, {})
            if entry.get("status") == "done" and parses(out_file):
                print(f"[{k}/{n}] {pid}: done earlier, skipped", flush=True)
                done_earlier += 1
                continue
            print(f"[{k}/{n}] {pid}: {shlex.join(cmd)}", flush=True)
            if args.dry_run:
                continue
            if os.path.exists(out_file):
                os.remove(out_file)  # a partial file from an interrupted run must not pass as a result
            try:
                rc = subprocess.run(cmd).returncode
            except OSError as e:
                rc, why = 127, f"cannot start: {e.strerror}"
            else:
                why = f"exit status {rc}" if rc else ""
            if rc < 0 and -rc == 2:  # the child died of SIGINT: the user pressed Ctrl-C
                raise KeyboardInterrupt
            if rc == 0 and not parses(out_file):
                rc, why = 1, f"{out_file} is missing or not valid JSON"
            # The state names each point's file relative to the output directory, so the directory
            # can be resumed from anywhere (or moved).
            rel_file = os.path.relpath(out_file, args.out)
            if rc == 0:
                state["points"][pid] = {"status": "done", "file": rel_file, "command": shlex.join(cmd)}
                print(f"[{k}/{n}] {pid}: done", flush=True)
            else:
                failed += 1
                state["points"][pid] = {"status": "failed", "file": rel_file, "command": shlex.join(cmd),
                                        "reason": why}
                print(f"[{k}/{n}] {pid}: FAILED ({why})", flush=True)
            write_json_atomic(state_path, state)
            progress.update(k, done_earlier)
    except KeyboardInterrupt:
        write_json_atomic(state_path, state)
        results = gather(args.out, pts, state, argv)
        print(f"sweep.py: interrupted; finished points are kept in {state_path} (gathered in {results}); "
              "run the same command again to resume", file=sys.stderr)
        return 130
    if args.dry_run:
        return 0
    results = gather(args.out, pts, state, argv)
    done = sum(1 for pid, _ in pts if state["points"].get(pid, {}).get("status") == "done")
    unreachable = f", {len(skipped)} skipped (cannot reach the global batch)" if skipped else ""
    print(f"sweep.py: {done}/{n} points finished, {failed} failed this run{unreachable}; results in {results}",
          flush=True)
    return 0 if done == n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
