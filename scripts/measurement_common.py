"""What the PyTorch peers (bench_sdpa.py, bench_torch_step.py) share: seqpar's count spelling
(64K, 1M), the run_info header and environment record of a measurement JSON, and seqpar's sample
statistics, so their JSON reads like the C++ programs'."""
import datetime
import platform
import shlex
import subprocess
import sys
from pathlib import Path

SCHEMA_VERSION = 1


def parse_count(text, field, prog):
    """'128K' -> 131072 (binary suffixes, as seqpar's parse_count); a bad value exits naming the field."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = str(text).strip().upper()
    try:
        n = int(t[:-1]) * mult[t[-1]] if t and t[-1] in mult else int(t)
    except ValueError:
        raise SystemExit(f"{prog}: {field}: '{text}' is not a count (e.g. 4096, 4K, 1M)")
    if n <= 0:
        raise SystemExit(f"{prog}: {field}: {n} must be positive")
    return n


def run_info(argv):
    """schema_version, tool_version (git describe), command, host, created_utc: core's run_info fields."""
    try:
        version = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], capture_output=True,
                                 text=True, cwd=Path(__file__).resolve().parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        version = None
    return {"schema_version": SCHEMA_VERSION, "tool_version": version,
            "command": " ".join(shlex.quote(x) for x in [sys.argv[0], *argv]), "host": platform.node(),
            "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def environment(torch):
    """The environment record seqpar's programs write, from what PyTorch reports (gpu null without CUDA)."""
    env = {"gpu": None, "gpu_count": 0, "driver_version": None, "cuda_runtime_version": torch.version.cuda,
           "nccl_version": None, "mpi_version": None, "torch_version": torch.__version__,
           "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env["gpu"] = {"name": p.name, "compute_capability": f"{p.major}.{p.minor}", "memory_bytes": p.total_memory,
                      "sm_count": p.multi_processor_count}
        env["gpu_count"] = torch.cuda.device_count()
    return env


def _quantile(sorted_values, q):
    # Linear interpolation between order statistics ("type 7"), as core's summarize.
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples, suffix="_s"):
    """core's Stats as JSON: count, median, mean, stddev (n - 1), min, max, p10, p90 (keys + suffix)."""
    if not samples:
        raise ValueError("statistics: no samples to summarize")
    v = sorted(samples)
    mean = sum(v) / len(v)
    stddev = (sum((x - mean) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else 0.0
    return {"count": len(v), "median" + suffix: _quantile(v, 0.5), "mean" + suffix: mean, "stddev" + suffix: stddev,
            "min" + suffix: v[0], "max" + suffix: v[-1], "p10" + suffix: _quantile(v, 0.1),
            "p90" + suffix: _quantile(v, 0.9)}
