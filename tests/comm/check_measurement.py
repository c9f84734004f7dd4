"""Checks that a file follows the measurement JSON contract of the benchmark programs."""
import json
import sys


def check(path):
    with open(path) as f:
        doc = json.load(f)
    for key in ("schema_version", "tool_version", "command", "host", "created_utc", "kind",
                "program", "mode", "device", "environment", "config", "layout", "results"):
        assert key in doc, f"{path}: missing '{key}'"
    assert doc["kind"] == "measurement", doc["kind"]
    assert doc["mode"] in ("real-ranks", "virtual-ranks", "single-rank-proxy"), doc["mode"]
    assert doc["device"] in ("gpu", "cpu"), doc["device"]
    for key in ("gpu", "driver_version", "cuda_runtime_version", "nccl_version", "mpi_version"):
        assert key in doc["environment"], f"{path}: environment lacks '{key}'"
    layout = doc["layout"]
    assert layout["world"] == layout["dp"] * layout["sp"], layout
    assert layout["sp"] == layout["ulysses_degree"] * layout["ring_degree"], layout
    assert doc["results"], f"{path}: no results"
    names = set()
    for row in doc["results"]:
        assert row["name"] not in names, f"duplicate result name {row['name']}"
        names.add(row["name"])
        assert row["time_s"] > 0, row
        assert len(row["samples_s"]) == doc["config"]["iters"], row
        assert min(row["samples_s"]) <= row["time_s"] <= max(row["samples_s"]), row
        assert row["wrong"] == 0, row
        for key in row:
            assert key == key.lower(), f"key {key} is not snake_case"


if __name__ == "__main__":
    check(sys.argv[1])
    print(f"check_measurement: {sys.argv[1]} OK")
