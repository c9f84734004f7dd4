#!/usr/bin/env python3
"""The false-alarm sweep of `seqpar-train --validate`, and the README's mutation matrix.

sweep (the default): runs correct training steps with --validate over every plan the simulator's
method table gives for SP 2, 4 and 8 (`seqpar advise --json`: every method, every Ulysses x Ring
split, so a method added to the table is swept without a change here) x model shapes (MHA; GQA with
SP above the KV head count; an odd head dimension) x sequence lengths (the shortest the plan
accepts, 64, 128, and lengths that do not divide evenly, which a plan either refuses cleanly or
validates) x memory options (checkpointing none/selective/full, offload, tiled MLP, tiled loss) x
seeds, on the CPU back end on virtual ranks and under mpirun. Every validated step must pass: a
failure is a false alarm, since nothing is wrong with these steps. Prints the count of validated
steps, the plans and lengths refused (each refusal must be a clean error naming the rule, exit 2)
and the check that came closest to its allowance; exits 1 on any false failure, a crash, or fewer
validated steps than --min-steps.

  validation_sweep.py [--build DIR] [--quick] [--seeds N] [--steps N] [--modes virtual,mpi] [-j N]

--backend cuda runs the same sweep on the GPU (virtual ranks sharing it; shapes with head dims 64 and
128, which its attention kernels take), for a machine with one.

--quick is the reduced form CI runs (scripts/tests/test_validation_sweep.py): one shape and one
memory option per plan, one seed, two steps, mpirun for one plan per method; about a minute on 2 cores.
The full sweep (20 seeds per plan and shape in each mode, 10 steps each) validates over 10,000 steps.

--documents SPEC[,SPEC...] (or --documents default) sweeps packed documents under the document
mask: run i of a (plan, shape) takes workload i mod #specs (doc seed = the run's seed) and balancer i
mod 5 (the method's own, contiguous, zigzag, per-document, balanced; zigzag and contiguous skipped
where the length does not divide as they need).

matrix: runs the mutation-matrix test (test_train's ValidationMatrix) and writes its table into
README.md between the validation-matrix markers; with --check, exits 1 when the README's table
differs from what the test produces."""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEGREES = (2, 4, 8)
# name -> sizes (seqpar-train's flags and the simulator's model fields)
SHAPES = {
    "mha": {"heads": 4, "kv_heads": 4, "head_dim": 16},
    "gqa": {"heads": 8, "kv_heads": 2, "head_dim": 8},  # SP 4 and 8 above the 2 KV heads
    "odd-head-dim": {"heads": 4, "kv_heads": 2, "head_dim": 10},  # five rotary pairs
}
# --backend cuda: the GPU's attention kernels take head dims 64 and 128.
GPU_SHAPES = {
    "mha": {"heads": 4, "kv_heads": 4, "head_dim": 64},
    "gqa": {"heads": 8, "kv_heads": 2, "head_dim": 64},
    "head-dim-128": {"heads": 4, "kv_heads": 2, "head_dim": 128},
}
COMMON = {"layers": 2, "hidden": 64, "ffn_hidden": 128, "vocab": 128}
MEMORY = (
    ("none", ["--checkpoint", "none"]),
    ("selective", ["--checkpoint", "selective"]),
    ("full", ["--checkpoint", "full"]),
    ("full+offload", ["--checkpoint", "full", "--offload-checkpoints"]),
    ("tiled-mlp", ["--tiled-mlp"]),
    ("tiled-loss", ["--tiled-loss"]),
)
LENGTHS = (64, 128)  # besides the shortest each plan accepts
ODD_LENGTHS = (63, 100)  # with the shortest + 1: divisible by no SP degree above 1 (63), or not by 8 (100)
# --documents default: short and long documents, a heavy tail, and lengths that cross every shard edge.
DEFAULT_DOCUMENTS = ("uniform:1:64", "lognormal:3:1", "fixed:7", "powerlaw:1.5:1:128")
BALANCERS = (None, "contiguous", "zigzag", "per-document", "balanced")  # None: the method's own
MATRIX_BEGIN = "<!-- validation-matrix:begin (scripts/validation_sweep.py matrix writes this table) -->"
MATRIX_END = "<!-- validation-matrix:end -->"


class SweepError(Exception):
    pass


def shapes_of(backend):
    return GPU_SHAPES if backend == "cuda" else SHAPES


def model_flags(shape, backend="cpu"):
    sizes = {**COMMON, **shapes_of(backend)[shape]}
    return ["--layers", str(sizes["layers"]), "--hidden", str(sizes["hidden"]), "--heads", str(sizes["heads"]),
            "--kv-heads", str(sizes["kv_heads"]), "--head-dim", str(sizes["head_dim"]),
            "--ffn-hidden", str(sizes["ffn_hidden"]), "--vocab", str(sizes["vocab"])]


def plans_from_advise(doc):
    """The distinct (method, U, R, sp) of an `advise --json` document, ranked and rejected alike:
    the method table's splits. The step decides which it runs (a refusal is recorded, not failed)."""
    out = set()
    for key in ("ranked", "rejected"):
        for entry in doc.get(key, []):
            p = entry.get("plan", {})
            try:
                out.add((p["method"], int(p["ulysses_degree"]), int(p["ring_degree"]), int(p["sp"])))
            except (KeyError, TypeError, ValueError):
                raise SweepError(f"advise: a plan without method and degrees: {json.dumps(p)[:200]}")
    return sorted(out, key=lambda x: (x[3], x[0], x[1]))


def plan_flags(plan):
    method, u, r, sp = plan
    return ["--method", method, "--sp", str(sp), "--ulysses-degree", str(u), "--ring-degree", str(r)]


def plan_label(plan):
    method, u, r, sp = plan
    return f"{method} U{u}xR{r}"


def table_plans(seqpar, shape, tmp, degrees=DEGREES, backend="cpu"):
    """Every plan of the simulator's method table for the SP degrees on this shape."""
    model = Path(tmp) / f"{shape}.json"
    model.write_text(json.dumps({"name": shape, **COMMON, **shapes_of(backend)[shape]}))
    plans = []
    for sp in degrees:
        # --tp 1: the training step runs sequence parallelism alone.
        cmd = [seqpar, "advise", "--model", str(model), "--gpus", str(sp), "--sp", str(sp), "--tp", "1",
               "--seq-len", "64", "--zero", "0", "--checkpoint", "none", "--top", "1000", "--json"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        # 0: plans; 1: valid plans, none fits; 2: no valid plan at this degree (an answer: none), or
        # bad input (a document with errors and no ranking).
        if r.returncode not in (0, 1, 2):
            raise SweepError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
        try:
            doc = json.loads(r.stdout)
        except json.JSONDecodeError as e:
            raise SweepError(f"{' '.join(cmd)} (exit {r.returncode}): not JSON: {e}: {r.stderr.strip()}")
        if "ranked" not in doc:
            raise SweepError(f"{' '.join(cmd)} failed ({r.returncode}): {doc.get('errors') or r.stderr.strip()}")
        plans += plans_from_advise(doc)
    if not plans:
        raise SweepError(f"advise listed no plan for {shape}: the method table is empty or its JSON changed")
    return sorted(set(plans), key=lambda x: (x[3], x[0], x[1]))


def pairs(plans_by_shape, quick):
    """The (plan, shape) pairs to run: all; quick, each plan once, the shapes taking turns."""
    shapes = list(plans_by_shape)
    if not quick:
        return [(p, s) for s in shapes for p in plans_by_shape[s]]
    distinct = sorted({p for ps in plans_by_shape.values() for p in ps}, key=lambda x: (x[3], x[0], x[1]))
    out = []
    for j, plan in enumerate(distinct):
        having = [s for s in shapes if plan in plans_by_shape[s]]
        out.append((plan, having[j % len(having)]))
    return out


def balancer_fits(balancer, plan, seq_len):
    """contiguous and zigzag cut the packed sequence evenly: the length must divide as they need."""
    method, u, r, sp = plan
    if balancer == "contiguous":
        return seq_len % (u * r) == 0
    if balancer == "zigzag":
        return seq_len % (u * r) == 0 and seq_len % (2 * r) == 0
    return True


def with_documents(runs, specs):
    """Each run given a workload and a balancer, taking turns (see the module doc)."""
    out = []
    for i, c in enumerate(runs):
        for k in range(len(BALANCERS)):
            b = BALANCERS[(i + k) % len(BALANCERS)]
            if balancer_fits(b, c["plan"], c["seq_len"]):
                break
        out.append(dict(c, documents=(specs[i % len(specs)], b)))
    return out


def cases(lengths_of, seeds, quick):
    """The runs: per (plan, shape), seed i takes length i mod #lengths and memory option i mod 6,
    so 20 seeds cover every (length, memory option) pair of up to 3 lengths. Quick: one seed by
    default, the length and memory option taking turns over the pairs (with more seeds, each pair
    takes the next options in turn)."""
    out = []
    for k, ((plan, shape), lengths) in enumerate(lengths_of.items()):
        for i in (range(k, k + seeds) if quick else range(seeds)):
            if lengths:
                out.append({"plan": plan, "shape": shape, "seq_len": lengths[i % len(lengths)],
                            "memory": MEMORY[i % len(MEMORY)], "seed": 1 + i})
    return out


def train_command(train, case, steps, mode, out_json, backend="cpu", shapes="cpu"):
    """seqpar-train's command line; `shapes` names the back end whose shape table sizes the model."""
    argv = [train, "--validate", "--steps", str(steps), "--seed", str(case["seed"]), "--seq-len",
            str(case["seq_len"]), *plan_flags(case["plan"]), *model_flags(case["shape"], shapes), *case["memory"][1],
            "--backend", backend, "-J", out_json]
    if case.get("documents"):
        spec, balancer = case["documents"]
        argv += ["--documents", spec, "--doc-seed", str(case["seed"])]
        if balancer:
            argv += ["--balancer", balancer]
    sp = case["plan"][3]
    if mode == "mpi":
        return ["mpirun", "-np", str(sp), "--oversubscribe", argv[0], "--comm", "mpi", *argv[1:]]
    return [argv[0], "--comm", "virtual", *argv[1:]]


def describe(case, mode):
    method, u, r, sp = case["plan"]
    docs = ""
    if case.get("documents"):
        spec, balancer = case["documents"]
        docs = f" documents {spec} balancer {balancer or 'own'}"
    return (f"{mode:7s} {plan_label(case['plan']):22s} {case['shape']:12s} seq {case['seq_len']:<4d} "
            f"{case['memory'][0]:12s} seed {case['seed']}{docs}")


def run_case(train, case, steps, mode, tmp, timeout, backend="cpu"):
    """One run: {'steps': validated steps, 'failed': reason or None, 'closest': (used, text)}."""
    fd, out_json = tempfile.mkstemp(suffix=".json", dir=tmp)
    os.close(fd)
    cmd = train_command(train, case, steps, mode, out_json, backend, backend)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"steps": 0, "failed": f"timed out after {timeout} s: {' '.join(cmd)}", "closest": None}
    try:
        doc = json.loads(Path(out_json).read_text())
        val = doc["results"][0]["validation"]
    except (OSError, ValueError, KeyError, IndexError):
        tail = (r.stdout + r.stderr).strip().splitlines()[-5:]
        clean = r.returncode == 2 and "error:" in r.stderr and "internal error" not in r.stderr
        if clean and case.get("documents") and "--documents:" in r.stderr:
            # The workload's own rule (a step of one-token documents has no label), reported with the refusals.
            return {"steps": 0, "failed": None, "closest": None, "refused": tail[-1] if tail else "exit 2"}
        if backend != "cpu" and clean:
            # The plan's rules were probed on the CPU back end; a clean refusal here is the GPU
            # back end's own rule (an engine's shape limits), reported beside the refused lengths.
            return {"steps": 0, "failed": None, "closest": None, "refused": tail[-1] if tail else "exit 2"}
        return {"steps": 0, "failed": f"exit {r.returncode}, no validation JSON: " + " | ".join(tail), "closest": None}
    finally:
        os.unlink(out_json)
    steps_done = len(val.get("steps", []))
    closest = val.get("closest_to_bound", {})
    check = closest.get("check", {})
    used = (check.get("sharded_error") or 0) / check["allowed_error"] if check.get("allowed_error") else float("inf")
    result = {"steps": steps_done, "failed": None, "closest": (used, closest.get("explanation", ""))}
    if r.returncode != 0 or not val.get("passed") or val.get("failures"):
        mismatches = [ln for ln in r.stderr.splitlines() if "MISMATCH" in ln][:3]
        result["failed"] = f"exit {r.returncode}, {val.get('failures')} failed checks: " + " | ".join(mismatches)
    elif steps_done != steps:
        result["failed"] = f"{steps_done} validated steps of {steps}"
    return result


def probe(train, plan, shape, seq_len, tmp, backend="cpu"):
    """Does the step run this plan at this length? True when it validates (one step, virtual ranks),
    False when it refuses cleanly (exit 2, an error naming the rule); SweepError otherwise. Always on
    the CPU back end, with `backend`'s shapes: the plan's length rules are the same on every back
    end, and a GPU probe costs seconds of engine set-up for each of the hundred lengths tried."""
    case = {"plan": plan, "shape": shape, "seq_len": seq_len, "memory": MEMORY[0], "seed": 1}
    fd, out_json = tempfile.mkstemp(suffix=".json", dir=tmp)
    os.close(fd)
    cmd = train_command(train, case, 1, "virtual", out_json, "cpu", backend)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    os.unlink(out_json)
    if r.returncode == 2 and "error:" in r.stderr and "internal error" not in r.stderr:
        return False, r.stderr.strip().splitlines()[-1]
    if r.returncode == 0:
        return True, ""
    raise SweepError(f"{' '.join(cmd)}: exit {r.returncode} (neither a pass nor a clean refusal): "
                     + " | ".join((r.stdout + r.stderr).strip().splitlines()[-5:]))


def lengths_for(train, plan, shape, tmp, quick, backend="cpu"):
    """(validated lengths, refused lengths with the reason): the shortest length the plan accepts
    (probing from 2 up: every shorter one must be a clean refusal), then 64 and 128, and lengths
    that do not divide evenly (the shortest + 1, 63, 100), each validated where the plan accepts it
    and recorded where it refuses it. A plan refused for another reason than its length (Ulysses
    beyond the head count) has no lengths. Quick: the shortest and 64."""
    refused = []
    for n in range(2, 129):
        ok, why = probe(train, plan, shape, n, tmp, backend)
        if ok:
            break
        refused.append((n, why))
        if "seq_len" not in why:  # refused whatever the length
            return [], refused
    else:
        return [], refused
    accepted = [n]
    for m in ([64] if quick else [n + 1, *ODD_LENGTHS, *LENGTHS]):
        if m in accepted or any(m == r for r, _ in refused):
            continue
        ok, why = probe(train, plan, shape, m, tmp, backend)
        (accepted if ok else refused).append(m if ok else (m, why))
    return sorted(accepted), refused


def sweep(args):
    build = Path(args.build)
    train = str(build / "bench" / "train" / "seqpar-train")
    seqpar = str(build / "cli" / "seqpar")
    for exe in (train, seqpar):
        if not os.access(exe, os.X_OK):
            raise SweepError(f"{exe} is not built (cmake --build {build} --target seqpar-train seqpar)")
    modes = args.modes.split(",")
    for m in modes:
        if m not in ("virtual", "mpi"):
            raise SweepError(f"--modes: unknown mode '{m}' (virtual, mpi)")
    if "mpi" in modes and not shutil.which("mpirun"):
        raise SweepError("--modes mpi: mpirun is not on PATH")
    if "mpi" in modes and args.backend == "cuda":
        raise SweepError("--modes mpi with --backend cuda: MPI moves host buffers; the GPU runs on virtual ranks "
                         "(--modes virtual)")
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="validation_sweep.") as tmp:
        plans_by_shape = {s: table_plans(seqpar, s, tmp, args.degrees, args.backend) for s in args.shapes}
        methods = sorted({p[0] for plans in plans_by_shape.values() for p in plans})
        print(f"# methods (the simulator's method table): {', '.join(methods)}")
        lengths_of, refusals = {}, []
        for plan, shape in pairs(plans_by_shape, args.quick):
            ok, refused = lengths_for(train, plan, shape, tmp, args.quick, args.backend)
            lengths_of[(plan, shape)] = ok
            refusals += [(plan, shape, n, why) for n, why in refused]
            print(f"# {plan_label(plan):22s} {shape:12s} lengths {ok or 'none (plan refused)'}"
                  + (f"; refused {[n for n, _ in refused]}" if refused else ""), flush=True)
        runs = []
        base = cases(lengths_of, args.seeds, args.quick)
        if args.documents:
            base = with_documents(base, args.documents)
        for mode in modes:
            chosen = base
            if mode == "mpi" and args.quick:  # one plan per method, at the largest SP it runs
                per_method = {}
                for c in base:
                    if c["plan"][0] not in per_method or c["plan"][3] > per_method[c["plan"][0]]["plan"][3]:
                        per_method[c["plan"][0]] = c
                chosen = list(per_method.values())
            # mpirun gets its own seeds: the two modes together cover twice as many draws.
            runs += [(mode, dict(c, seed=c["seed"] + (1000 if mode == "mpi" else 0))) for c in chosen]
        print(f"# {len(runs)} runs of {args.steps} validated steps ({', '.join(modes)}), {args.jobs} at a time",
              flush=True)
        lock = threading.Lock()
        total = {"steps": 0, "runs": 0, "failed": [], "by_mode": {m: 0 for m in modes}, "closest": (0.0, ""),
                 "refused_here": []}

        def one(item):
            mode, case = item
            res = run_case(train, case, args.steps, mode, tmp, args.timeout, args.backend)
            with lock:
                total["runs"] += 1
                total["steps"] += res["steps"]
                total["by_mode"][mode] += res["steps"]
                if res["closest"] and res["closest"][0] > total["closest"][0]:
                    total["closest"] = (res["closest"][0], f"{describe(case, mode)}: {res['closest'][1]}")
                status = "ok" if not res["failed"] else "FAILED: " + res["failed"]
                if res.get("refused"):
                    status = "refused after the plan's rules accepted it: " + res["refused"]
                    total["refused_here"].append(f"{describe(case, mode)}: {res['refused']}")
                if res["failed"]:
                    total["failed"].append(f"{describe(case, mode)}: {res['failed']}")
                if res["failed"] or args.verbose or total["runs"] % 25 == 0 or total["runs"] == len(runs):
                    print(f"[{total['runs']}/{len(runs)}] {describe(case, mode)} {res['steps']} steps {status}",
                          flush=True)

        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(one, runs))
    elapsed = time.time() - start
    print(f"# refused (clean errors naming the rule): {len(refusals)} plan/length pairs")
    for plan, shape, n, why in refusals[: 8 if not args.verbose else None]:
        print(f"#   {plan_label(plan)} {shape} seq {n}: {why}")
    if total["refused_here"]:
        by = f"the {args.backend} back end" + (" or the workload" if args.documents else "")
        print(f"# refused by {by} after the plan's rules accepted them: "
              f"{len(total['refused_here'])} runs")
        for r in total["refused_here"]:
            print(f"#   {r}")
    print(f"# closest to its allowance: {100 * total['closest'][0]:.0f}% of it, {total['closest'][1]}")
    by_mode = ", ".join(f"{m} {n}" for m, n in total["by_mode"].items())
    print(f"validated steps: {total['steps']} ({by_mode}) in {total['runs']} runs; false failures: "
          f"{len(total['failed'])}; {elapsed:.0f} s")
    for f in total["failed"]:
        print(f"FALSE FAILURE: {f}")
    if total["failed"]:
        return 1
    if total["steps"] < args.min_steps:
        print(f"validation_sweep: {total['steps']} validated steps, fewer than --min-steps {args.min_steps}",
              file=sys.stderr)
        return 1
    return 0


def matrix_table(build):
    """The mutation matrix as the test writes it (Markdown)."""
    test = Path(build) / "tests" / "train" / "test_train"
    if not os.access(test, os.X_OK):
        raise SweepError(f"{test} is not built (cmake --build {build} --target test_train)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "matrix.md"
        r = subprocess.run([str(test), "--gtest_filter=ValidationMatrix.*"], capture_output=True, text=True,
                           env=dict(os.environ, SEQPAR_VALIDATION_MATRIX=str(out)))
        if r.returncode != 0 or not out.exists():
            raise SweepError("the mutation-matrix test failed:\n" + "\n".join(r.stdout.splitlines()[-30:]))
        return out.read_text()


def splice(readme_text, table):
    """README text with the table between the markers; SweepError when they are missing."""
    try:
        head, rest = readme_text.split(MATRIX_BEGIN, 1)
        _, tail = rest.split(MATRIX_END, 1)
    except ValueError:
        raise SweepError(f"README.md has no {MATRIX_BEGIN} ... {MATRIX_END} block")
    return f"{head}{MATRIX_BEGIN}\n{table.rstrip()}\n{MATRIX_END}{tail}"


def matrix(args):
    readme = Path(args.readme)
    text = readme.read_text()
    new = splice(text, matrix_table(args.build))
    if args.check:
        if new != text:
            print(f"{readme}: the mutation matrix differs from what the test produces; run "
                  f"scripts/validation_sweep.py matrix --build {args.build}", file=sys.stderr)
            return 1
        print(f"{readme}: the mutation matrix is what the test produces")
        return 0
    readme.write_text(new)
    print(f"{readme}: mutation matrix written")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="sweep", choices=("sweep", "matrix"))
    ap.add_argument("--build", default=os.environ.get("SEQPAR_BUILD_DIR", str(ROOT / "build")))
    ap.add_argument("--quick", action="store_true", help="the reduced sweep CI runs")
    ap.add_argument("--seeds", type=int, default=None,
                    help="seeds per plan and shape in each mode (default 20; --quick 1)")
    ap.add_argument("--steps", type=int, default=None, help="validated steps per run (default 10; --quick 2)")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"),
                    help="seqpar-train's back end (cuda: virtual ranks sharing the GPU, head dims 64 and 128)")
    ap.add_argument("--modes", default=None, help="virtual, mpi or both (default both; cuda: virtual)")
    ap.add_argument("--degrees", default=",".join(map(str, DEGREES)), help="SP degrees (default 2,4,8)")
    ap.add_argument("--shapes", default=None,
                    help=f"model shapes (default {','.join(SHAPES)}; cuda: {','.join(GPU_SHAPES)})")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="runs at a time (default 1)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run before it counts as failed")
    ap.add_argument("--min-steps", type=int, default=None,
                    help="fail with fewer validated steps (default 10000; --quick 0)")
    ap.add_argument("--readme", default=str(ROOT / "README.md"), help="matrix: the README to write or check")
    ap.add_argument("--check", action="store_true", help="matrix: only check that the README's table is current")
    ap.add_argument("--documents", default=None,
                    help="packed-document workloads, comma-separated, or 'default' (" + ",".join(DEFAULT_DOCUMENTS) + ")")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every run")
    args = ap.parse_args(argv)
    if args.steps is None:
        args.steps = 2 if args.quick else 10
    if args.seeds is None:
        args.seeds = 1 if args.quick else 20
    if args.min_steps is None:
        args.min_steps = 0 if args.quick else 10000
    if args.seeds < 1 or args.steps < 1 or args.jobs < 1:
        ap.error("--seeds, --steps and --jobs must be at least 1")
    try:
        args.degrees = [int(d) for d in args.degrees.split(",")]
    except ValueError:
        ap.error(f"--degrees {args.degrees}: a comma-separated list of whole numbers")
    if any(d < 2 for d in args.degrees):
        ap.error("--degrees: every SP degree must be at least 2")
    if args.documents:
        args.documents = list(DEFAULT_DOCUMENTS) if args.documents == "default" else args.documents.split(",")
    if args.modes is None:
        args.modes = "virtual" if args.backend == "cuda" else "virtual,mpi"
    known = shapes_of(args.backend)
    args.shapes = (args.shapes or ",".join(known)).split(",")
    for sh in args.shapes:
        if sh not in known:
            ap.error(f"--shapes: unknown shape '{sh}' for --backend {args.backend} ({', '.join(known)})")
    try:
        return matrix(args) if args.command == "matrix" else sweep(args)
    except SweepError as e:
        print(f"validation_sweep: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
