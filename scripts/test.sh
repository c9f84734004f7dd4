#!/usr/bin/env bash
# Sets up and builds like scripts/run.sh, then runs every test: the ctest suites (unit, MPI
# multi-rank, GPU tests that skip without a device), the simulator's speed gate
# (scripts/sim_speed_gate.sh), the Python script tests, and the host code's test suites again
# under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/, no CUDA).
# SEQPAR_SANITIZE_TESTS=0 leaves the sanitizer pass out.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SEQPAR_BUILD_DIR:-$root/build}
# Each phase's start in seconds, so that a slow CI run says where its time went.
phase() { echo "== test.sh: $* (at ${SECONDS} s)"; }
# Without a GPU the CUDA code is a compile check: one architecture (sm_90a, the one measured), not
# the default two, halves nvcc's device passes. A machine with a GPU builds the default.
if [ -z "${SEQPAR_CMAKE_ARGS:-}" ] && ! nvidia-smi -L >/dev/null 2>&1; then
  export SEQPAR_CMAKE_ARGS=-DCMAKE_CUDA_ARCHITECTURES=90a
fi
phase "setup and build ($build)"
"$root/scripts/setup.sh" "$build"
# mpirun refuses root unless told; CI and the GPU machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
phase "ctest, all suites ($build)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
phase "simulator speed gate (seqpar-bench-sim against reports/baselines/xeon-2vcpu-vm/sim.json)"
"$root/scripts/sim_speed_gate.sh" "$build"
phase "pytest scripts/tests"
"${PYTHON:-python3}" -m pytest -q "$root/scripts/tests"

[ "${SEQPAR_SANITIZE_TESTS:-1}" = 0 ] && exit 0
# The sanitizer pass (cmake/Sanitizers.cmake): use-after-free, dangling temporaries, overflows, leaks
# and undefined behaviour in host code, which a Release build may run through silently.
asan=${SEQPAR_ASAN_BUILD_DIR:-$root/build-asan}
phase "sanitizer build, ASan + UBSan, no CUDA ($asan)"
if [ ! -f "$asan/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  command -v ninja >/dev/null && launcher+=(-G Ninja)  # as setup.sh: libraries compile side by side
  # -O1: the optimisation level the sanitizers are designed for, and a much faster build than -O3.
  cmake -S "$root" -B "$asan" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DSEQPAR_ENABLE_CUDA=OFF -DSEQPAR_SANITIZE=ON "${launcher[@]}"
fi
cmake --build "$asan" -j "$(nproc)"
# Reports also go to files: ctest ignores the exit code of a test that passes on an output pattern,
# and some tests expect a non-zero exit, so a report in any file fails the pass.
logs=$asan/sanitizer-logs
rm -rf "$logs" && mkdir -p "$logs"
asan_options="log_path=$logs/asan:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$root/cmake/lsan-openmpi.supp:print_suppressions=0"
# Property tests over large samples (the simulator's invariants, the preset fuzzer) take every 8th
# case here: each runs about ten times slower under the sanitizers, and the pass above ran them all.
export SEQPAR_TEST_SAMPLE=8
status=0
# Whole test folders, so tests added to them are included. The suites that start MPI programs
# unwind every allocation in full (slower) so that Open MPI's own leaks reach its libraries'
# frames and the suppressions.
for suite in core sim reports train comm reshard bench gemm kernels layering; do
  [ -d "$asan/tests/$suite" ] || continue
  unwind=1
  case $suite in train | comm | reshard | bench) unwind=0 ;; esac
  phase "sanitizer suite tests/$suite"
  ASAN_OPTIONS="$asan_options:fast_unwind_on_malloc=$unwind" \
    ctest --test-dir "$asan/tests/$suite" --output-on-failure -j "$(nproc)" || status=1
done
if compgen -G "$logs/*" >/dev/null; then
  cat "$logs"/*
  echo "test.sh: sanitizer reports above (also in $logs)" >&2
  status=1
fi
phase "done, status $status"
exit $status
