#!/usr/bin/env bash
# Sets up and builds like scripts/run.sh, then runs every test: the ctest suites (unit, MPI
# multi-rank, GPU tests that skip without a device) and the Python script tests.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SEQPAR_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh" "$build"
# mpirun refuses root unless told; CI and the GPU machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
"${PYTHON:-python3}" -m pytest -q "$root/scripts/tests"
