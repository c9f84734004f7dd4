#!/usr/bin/env python3
"""A stand-in benchmark for the sweep runner's tests: writes a small measurement JSON to the file
after -J, logs each invocation to $FAKE_BENCH_LOG, and on request fails or interrupts its parent.
  FAKE_BENCH_FAIL_ON=<text>       exit 3 when an argument equals <text>
  FAKE_BENCH_INTERRUPT_ON=<text>  write half a JSON file, then send SIGINT to the sweep (Ctrl-C)"""
import json
import os
import signal
import sys


def main(argv):
    out = argv[argv.index("-J") + 1]
    args = argv[1:argv.index("-J")]
    if os.environ.get("FAKE_BENCH_LOG"):
        with open(os.environ["FAKE_BENCH_LOG"], "a") as f:
            f.write(" ".join(args) + "\n")
    if os.environ.get("FAKE_BENCH_FAIL_ON") in args:
        return 3
    if os.environ.get("FAKE_BENCH_INTERRUPT_ON") in args:
        with open(out, "w") as f:
            f.write('{"kind": "measurement", "resu')  # the partial file an interrupted run leaves
        os.kill(os.getppid(), signal.SIGINT)
        return 130
    seq = int(args[args.index("--seq-len") + 1]) if "--seq-len" in args else 1024
    t = 1e-6 * seq
    doc = {"schema_version": 1, "tool_version": "fake", "command": " ".join(argv), "host": "test",
           "created_utc": "2024-01-01T00:00:00Z", "kind": "measurement", "program": "fake_bench.py",
           "mode": "single-rank-proxy", "device": "cpu", "environment": {}, "config": {"args": args},
           "results": [{"name": "fake/" + "/".join(args).replace("--", ""), "time_s": t,
                        "samples_s": [t, t * 1.01, t * 0.99, t, t * 1.02]}]}
    with open(out, "w") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
