#!/usr/bin/env bash
# The main job: installs what is missing, builds the programs it runs, and predicts Llama-3-8B on
# DGX-H100 nodes (8 to 64 GPUs, sequence lengths 32K to 4M, Ulysses vs Ring (zigzag) vs hybrid vs
# all-gather KV). Writes the sweep (JSON, CSV) and a report (Markdown, HTML, PNG plots) into OUT_DIR,
# then prints the advised plan per sequence length.
# It builds only `seqpar` (the CLI and the libraries under it), plus `seqpar-train` where a CUDA GPU
# and PyTorch are present (only then does it run it); scripts/test.sh builds everything, and a
# benchmark program builds on its own: cmake --build build --target seqpar-bench-attention.
# Usage: scripts/run.sh [OUT_DIR]   (default: out/main-job)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SEQPAR_BUILD_DIR:-$root/build}
out=${1:-$root/out/main-job}
py=${PYTHON:-python3}

# The training step beside its PyTorch peer (issue 15) runs where a CUDA GPU and PyTorch are
# present; SEQPAR_TRAIN_PEER=0 leaves it out.
peer=0
if [ "${SEQPAR_TRAIN_PEER:-1}" != 0 ] && nvidia-smi -L >/dev/null 2>&1 &&
  "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  peer=1
fi
targets=(seqpar)
[ "$peer" = 1 ] && targets+=(seqpar-train)

"$root/scripts/setup.sh" "$build" "${targets[@]}" >"${TMPDIR:-/tmp}/seqpar-setup.log" 2>&1 || {
  cat "${TMPDIR:-/tmp}/seqpar-setup.log" >&2
  echo "run.sh: setup or build failed (log above)" >&2
  exit 1
}
seqpar="$build/cli/seqpar"
mkdir -p "$out"

"$seqpar" sweep --model llama3-8b --system dgx-h100 --gpus 8,16,32,64 \
  --seq-len 32K,64K,128K,256K,512K,1M,2M,4M --method ulysses,ring-zigzag,hybrid,allgather \
  --out "$out" >"$out/advice.txt"
# Llama-3-8B shapes, 4 layers, 32K vocabulary, 16K tokens, SP = 1, the same flags for both; the
# report sets them side by side.
inputs=("$out/sweep.json")
train="$build/bench/train/seqpar-train"
if [ "$peer" = 1 ] && [ -x "$train" ]; then
  shape=(--model llama3-8b --layers 4 --vocab 32000 --seq-len 16K --steps 5 --warmup 2)
  if "$train" "${shape[@]}" --backend cuda --comm loopback -J "$out/train_step_seqpar.json" >"$out/train_step_seqpar.log" 2>&1 &&
    "$py" "$root/scripts/bench_torch_step.py" "${shape[@]}" -J "$out/train_step_torch.json" >"$out/train_step_torch.log" 2>&1; then
    inputs+=("$out/train_step_seqpar.json" "$out/train_step_torch.json")
  else
    echo "run.sh: the training-step side-by-side failed (logs: $out/train_step_*.log); the report leaves it out" >&2
  fi
else
  echo "run.sh: no CUDA GPU with PyTorch here (or SEQPAR_TRAIN_PEER=0): no seqpar-train / PyTorch side-by-side" >&2
fi
# Measured steps are predicted on the preset of the GPU they ran on; on a GPU no preset describes,
# the report refuses them, and the sweep's report is still written.
if ! "$seqpar" report "${inputs[@]}" --out "$out" --python "$py" >"$out/report.log" 2>&1; then
  if [ ${#inputs[@]} -gt 1 ]; then
    echo "run.sh: the report refused the measured steps (see $out/report.log); reporting the sweep alone" >&2
    cp "$out/report.log" "$out/report-steps-refused.log"
    inputs=("$out/sweep.json")
    "$seqpar" report "${inputs[@]}" --out "$out" --python "$py" >"$out/report.log"
  else
    cat "$out/report.log" >&2
    exit 1
  fi
fi

cat "$out/advice.txt"
if [ ${#inputs[@]} -gt 1 ]; then sed -n '/^seqpar-train against PyTorch/,$p' "$out/report.log"; fi
echo "report: $out/report.md and $out/report.html (plots: $out/*.png; data: $out/sweep.json, $out/sweep.csv)"
echo "built: ${targets[*]} (in $build). Benchmarks build on demand, e.g. cmake --build $build --target seqpar-bench-attention" \
  "(others: seqpar-bench-comm, seqpar-bench-gemm, seqpar-bench-layer, seqpar-train); scripts/test.sh builds and tests everything."
