#!/usr/bin/env bash
# The main job: installs what is missing, builds, and predicts Llama-3-8B on DGX-H100 nodes
# (8 to 64 GPUs, sequence lengths 32K to 4M, Ulysses vs Ring (zigzag) vs hybrid). Writes the
# sweep (JSON, CSV) and a report (Markdown, HTML, PNG plots) into OUT_DIR, then prints the
# advised plan per sequence length.
# Usage: scripts/run.sh [OUT_DIR]   (default: out/main-job)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SEQPAR_BUILD_DIR:-$root/build}
out=${1:-$root/out/main-job}

"$root/scripts/setup.sh" "$build" >"${TMPDIR:-/tmp}/seqpar-setup.log" 2>&1 || {
  cat "${TMPDIR:-/tmp}/seqpar-setup.log" >&2
  echo "run.sh: setup or build failed (log above)" >&2
  exit 1
}
seqpar="$build/cli/seqpar"
mkdir -p "$out"

"$seqpar" sweep --model llama3-8b --system dgx-h100 --gpus 8,16,32,64 \
  --seq-len 32K,64K,128K,256K,512K,1M,2M,4M --method ulysses,ring-zigzag,hybrid \
  --out "$out" >"$out/advice.txt"
"$seqpar" report "$out/sweep.json" --out "$out" --python "${PYTHON:-python3}" >"$out/report.log"

cat "$out/advice.txt"
echo "report: $out/report.md and $out/report.html (plots: $out/*.png; data: $out/sweep.json, $out/sweep.csv)"
