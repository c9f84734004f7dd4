#!/usr/bin/env bash
# One measurement session on a GPU machine, from the programs scripts/device/pack.sh packed:
# build check, correctness (GPU tests, --validate on virtual ranks), timing (attention engines beside
# PyTorch SDPA, the layer benchmark, training steps beside the PyTorch peer, the memory features: the
# real maximum length found by one-step runs beside the predicted one), then a short table printed last. Everything it writes goes into one
# archive under $OUT (the device tool brings back at most 8 files).
# Usage (on the GPU machine, from the repository root):
#   scripts/device/measure.sh [check|validate|attention|layer|train|maxlen|fidelity|all] [CARRY_DIR]
#   (default: all build-device/carry)
# The simulator's system follows the GPU (H100: dgx-h100, H200: hgx-h200; SEQPAR_SYSTEM overrides).
# maxlen: MAXLEN_FEATURES replaces the memory options searched (default every ALST feature: a step near
# 512K tokens on an H100; on an H200 the ALST maximum is near 1.3M tokens, minutes a step, so a shorter
# plan such as "--checkpoint none" fits one call), MAXLEN_PROBES and MAXLEN_BUDGET_S bound the search.
# Each phase fits in one 10-minute device call; `all` does not: run the phases one call each.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
phase=${1:-all}
carry=${2:-$root/build-device/carry}
out=${OUT:-$root/out/device}
work=$(mktemp -d)
mkdir -p "$out"
bin=$carry/bin
[ -d "$bin" ] || { echo "measure.sh: $bin missing: run scripts/device/pack.sh here first and carry it" >&2; exit 2; }

# The GPU machine's CUDA stack: the toolkit's, and PyTorch's nvidia wheels (cuBLAS, cuDNN, NCCL, nvrtc).
libs=$carry/lib:/usr/local/cuda/lib64
for d in $(python3 -c 'import site,glob,os; print(" ".join(sorted({os.path.dirname(p) for s in site.getsitepackages() for p in glob.glob(s+"/nvidia/*/lib/*.so*")})))' 2>/dev/null); do
  libs=$libs:$d
done
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
summary=$work/summary.txt
failed=0  # the exit status: 1 when any step failed
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# Runs a command, keeps its log, notes its exit status; a failure never stops the session.
step() {
  local name=$1; shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" >"$work/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$work/$name.log"
  note "$(printf '%-34s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")"
  [ "$rc" = 0 ] || failed=1
  return $rc
}
finish() {
  tar -C "$work" -czf "$out/measure-$phase.tar.gz" . 2>/dev/null
  cp "$summary" "$out/summary-$phase.txt"
  echo; echo "== summary ($phase)"; cat "$summary"
}
trap finish EXIT

model=(--model llama3-8b --layers 4 --vocab 32000)
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
case "$gpu_name" in
  *H200*) system=hgx-h200 ;;
  *) system=dgx-h100 ;;
esac
system=${SEQPAR_SYSTEM:-$system}
train=("$bin/seqpar-train" "${model[@]}" --backend cuda)

if [[ $phase == check || $phase == all ]]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$work/gpu.txt"
  step ldd bash -c "ldd $bin/* | grep 'not found' && exit 1 || exit 0"
  step engines "$bin/seqpar-bench-attention" --attention both --seq-lens 1K --head-dims 128 --ops fwd --iters 2
  # The cuDNN engine's own workspace sizes on the 8B model's heads (workspace_bytes per row): what
  # `seqpar calibrate` fits the memory model's workspace figures from.
  step engines_workspace "$bin/seqpar-bench-attention" --attention cudnn --seq-lens 1K,4K,16K,32K --head-dims 128 \
    --heads 32 --kv-heads 8 --masks full,causal --ops fwd,bwd --iters 3 -J "$work/engines_workspace.json"
  step gpu_tests_kernels "$bin/seqpar_test_kernels_gpu"
  step gpu_tests_train "$bin/test_train" --gtest_filter='CudaVsCpu*:CudnnVsCpu*:*Gemm*Gpu*:*Cuda*'
  # A small model every listed plan is valid on: 8 query heads (Ulysses 8 splits them one per rank)
  # and 2 KV heads, so Ulysses 4 and 8 and hybrid U4 run grouped-query attention with SP above the
  # KV head count (the KV heads replicated across ranks). Head dim 16: cuDNN takes multiples of 8.
  shape=(--layers 2 --hidden 128 --heads 8 --kv-heads 2 --head-dim 16 --ffn-hidden 256 --vocab 256)
  for m in "ulysses --sp 2" "ulysses --sp 4" "ulysses --sp 8" "ring --sp 4" "ring-zigzag --sp 4" \
           "ring-zigzag --sp 8" "hybrid --ulysses-degree 2 --ring-degree 2" "hybrid --ulysses-degree 4 --ring-degree 2"; do
    tag=validate_$(echo "$m" | tr -c 'a-z0-9\n' '_' | tr -s _)
    # shellcheck disable=SC2086
    step "$tag" "$bin/seqpar-train" "${shape[@]}" --backend cuda --comm virtual --method $m --seq-len 2K --steps 2 \
      --validate -J "$work/$tag.json"
  done
fi

# Issue 26 on the GPU: the false-alarm sweep of --validate on virtual ranks sharing the GPU (bf16
# kernels, cuDNN engine), every plan of the method table at SP 2, 4, 8, in a reduced form (one shape
# and memory option per plan, VALIDATE_SEEDS seeds), and the GPU validation tests with planted faults.
if [[ $phase == validate || $phase == all ]]; then
  [ -f "$work/gpu.txt" ] || nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$work/gpu.txt"
  step gpu_validation_tests "$bin/test_train" --gtest_filter='*CudaValidation*'
  # validation_sweep.py finds the programs in a build tree's layout.
  tree=$work/tree
  mkdir -p "$tree/bench/train" "$tree/cli"
  abs_bin=$(cd "$bin" && pwd)
  ln -sf "$abs_bin/seqpar-train" "$tree/bench/train/seqpar-train"
  ln -sf "$abs_bin/seqpar" "$tree/cli/seqpar"
  step validation_sweep_gpu timeout "${VALIDATE_TIMEOUT_S:-1800}" python3 "$root/scripts/validation_sweep.py" \
    --build "$tree" --backend cuda --quick --seeds "${VALIDATE_SEEDS:-2}" --min-steps 1 --timeout 120
  note "$(grep '^validated steps' "$work/validation_sweep_gpu.log" || echo "validation sweep: no result")"
fi

if [[ $phase == attention || $phase == all ]]; then
  shapes=(--seq-lens 1K,2K,4K,8K,16K,32K --head-dims 64,128 --masks full,causal --ops fwd,bwd --heads 16 --batch 1)
  step gemm_ceiling "$bin/seqpar-bench-gemm" --shapes square -J "$work/gemm.json"
  step attn_engines "$bin/seqpar-bench-attention" --attention both "${shapes[@]}" -J "$work/attn_engines.json"
  step attn_sdpa python3 "$root/scripts/bench_sdpa.py" "${shapes[@]}" -J "$work/attn_sdpa.json"
  step attn_gqa "$bin/seqpar-bench-attention" --attention both --seq-lens 16K --heads 32 --kv-heads 8 --head-dims 128 \
    --masks causal -J "$work/attn_gqa.json"
  step attn_compare python3 "$root/scripts/device/compare_attention.py" "$work/attn_engines.json" \
    "$work/attn_sdpa.json" -J "$work/attn_compare.json"
fi

if [[ $phase == layer || $phase == all ]]; then
  for e in seqpar cudnn; do
    step "layer_$e" "$bin/seqpar-bench-layer" --model llama3-8b --seq-len 128K --sp 8 --backend cuda --comm loopback \
      --methods ulysses,ring-zigzag --reps 3 --attention "$e" -J "$work/layer_$e.json"
  done
  for m in "ulysses" "ring-zigzag"; do
    step "train_proxy_${m}_cudnn" "${train[@]}" --seq-len 128K --method "$m" --sp 8 --comm loopback --steps 3 \
      --attention cudnn -J "$work/train_proxy_$m.json"
  done
fi

if [[ $phase == train || $phase == all ]]; then
  for len in 16K 32K; do
    for ck in none full; do
      step "train_${len}_$ck" "${train[@]}" --seq-len "$len" --method ulysses --sp 1 --comm loopback --steps 4 \
        --checkpoint "$ck" -J "$work/train_${len}_$ck.json"
      step "torch_${len}_$ck" python3 "$root/scripts/bench_torch_step.py" "${model[@]}" --seq-len "$len" \
        --checkpoint "$ck" --warmup 1 --iters 3 -J "$work/torch_${len}_$ck.json"
    done
  done
fi

if [[ $phase == maxlen || $phase == all ]]; then
  # The longest sequence the simulator predicts for this 4-layer model on one GPU with every ALST
  # feature, and the longest that really runs.
  mkdir -p "$work/models"
  python3 - "$root/sim/presets/models/llama3-8b.json" "$work/models/llama3-8b-4l.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["name"] = "llama3-8b-4l"
m["layers"] = {"value": 4, "source": "measure.sh: 4 layers of llama3-8b"}
m["vocab"] = {"value": 32000, "source": "measure.sh: 32K vocabulary"}
json.dump(m, open(sys.argv[2], "w"), indent=1)
PY
  # seqpar-train's own inventory (sim/presets/frameworks/seqpar-train.json) on the cuDNN engine it runs.
  # shellcheck disable=SC2206
  alst=(${MAXLEN_FEATURES:---checkpoint full --offload-checkpoints --tiled-mlp --tiled-loss})
  "$bin/seqpar" maxlen --model "$work/models/llama3-8b-4l.json" --system "$system" --framework seqpar-train --attention-kernel cudnn \
    --gpus 1 --method ulysses --sp 1 --zero 0 "${alst[@]}" --json >"$work/maxlen.json" 2>"$work/maxlen.log"
  maxlen=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("max_seq_len") or d.get("results",[{}])[0].get("max_seq_len",""))' "$work/maxlen.json" 2>/dev/null)
  note "predicted max length on $system with ${alst[*]}: ${maxlen:-unknown (see maxlen.log)}"
  if [ -n "$maxlen" ]; then
    # The real maximum by two-step runs: the prediction, then 3% above it (PASS when it runs out of
    # memory) or well below it, then bisection. Two steps a probe: what the first keeps between calls
    # (the attention workspaces' grow-only scratch) is held through the second, as in training; a
    # one-step run can peak before the backward first allocates it (seen on an H200 at 188,837
    # tokens: reports/results/h200/maxlen/NOTES.md). Near 512K tokens a step takes about 90 s on an
    # H100, so 3 probes fit the 10-minute call beside the prediction.
    python3 "$root/scripts/device/maxlen_search.py" --predicted "$maxlen" --dir "$work/probes" --tolerance 0.03 \
      --max-probes "${MAXLEN_PROBES:-3}" --budget-s "${MAXLEN_BUDGET_S:-540}" -J "$work/maxlen_search.json" -- \
      "${train[@]}" --method ulysses --sp 1 --comm loopback --steps 2 --warmup 0 "${alst[@]}" \
      >"$work/maxlen_search.log" 2>&1 || failed=1
    cat "$work/maxlen_search.log"
    note "$(grep '^maxlen ' "$work/maxlen_search.log" | tail -n 1 || echo "maxlen FAIL: no result (see maxlen_search.log)")"
  fi
fi

# Issue 16 on this GPU: a profile calibrated from seqpar's own kernel and GEMM rows, then from three
# training steps, predicting the other measured steps (per-rank time within 5%, peak memory within
# 3%). About 7 minutes on an H100 (an estimate: kernels ~1.5, 15 steps ~5, calibrate and report seconds).
# FIDELITY_KERNELS=DIR reuses kernel rows measured before (a former fidelity archive's kernels/, or
# the attention phase's gemm.json and attn_engines.json) instead of measuring them.
if [[ $phase == fidelity || $phase == all ]]; then
  [ -f "$work/gpu.txt" ] || nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$work/gpu.txt"
  # Steps, kernels and profiles in their own folders: the report below reads the steps only, and
  # the catch-all report at the end sees no top-level JSON of this phase.
  mkdir -p "$work/kernels" "$work/steps" "$work/calib"
  if [ -n "${FIDELITY_KERNELS:-}" ]; then
    for f in "$FIDELITY_KERNELS"/{gemm*,attn_engines,attn_cudnn}.json; do [ -f "$f" ] && cp "$f" "$work/kernels/"; done
    note "kernel rows from $FIDELITY_KERNELS: $(cd "$work/kernels" && echo *.json)"
  else
    # Only what calibrate fits: the model's layer GEMMs (fwd, dX, dW) at the per-rank token counts
    # of the steps, and cuDNN attention on the model's heads (32 query, 8 KV, d128) with both masks
    # (ring chunks are full blocks, the diagonal is causal).
    step gemm_layer "$bin/seqpar-bench-gemm" --shapes layer --model llama3-8b --tokens 1K,2K,4K,8K,16K,32K \
      -J "$work/kernels/gemm_layer.json"
    step attn_cudnn "$bin/seqpar-bench-attention" --attention cudnn --seq-lens 1K,2K,4K,8K,16K,32K --head-dims 128 \
      --masks full,causal --ops fwd,bwd --heads 32 --kv-heads 8 --batch 1 -J "$work/kernels/attn_cudnn.json"
  fi
  kernels=("$work"/kernels/*.json)
  step calibrate_kernels "$bin/seqpar" calibrate "${kernels[@]}" --attention-engine cudnn \
    --out "$work/calib/profile_kernels.json"
  # 15 steps, each to its own JSON: SP = 1 at 8K/16K/32K with no and full checkpointing, and
  # single-rank proxies (4 ranks' plans, one rank's work) of Ulysses, zigzag and hybrid 2x2 at three
  # length/checkpointing points; three fit the framework terms, the issue's 12 are held out.
  fstep() {  # tag, then seqpar-train's plan flags
    local tag=$1; shift
    step "fid_$tag" "${train[@]}" --attention cudnn --comm loopback --steps 4 --warmup 1 "$@" -J "$work/steps/$tag.json"
  }
  for len in 8K 16K 32K; do
    for ck in none full; do fstep "sp1_${len}_$ck" --seq-len "$len" --method ulysses --sp 1 --checkpoint "$ck"; done
  done
  for lc in 16K:selective 32K:none 64K:full; do
    len=${lc%:*} ck=${lc#*:}
    fstep "ulysses4_${len}_$ck" --seq-len "$len" --method ulysses --sp 4 --checkpoint "$ck"
    fstep "zigzag4_${len}_$ck" --seq-len "$len" --method ring-zigzag --sp 4 --checkpoint "$ck"
    fstep "hybrid2x2_${len}_$ck" --seq-len "$len" --method hybrid --ulysses-degree 2 --ring-degree 2 --checkpoint "$ck"
  done
  # Three steps fit the framework terms (different lengths and checkpointing, >= 2 token counts for
  # the per-token memory term); every other step is held out.
  fit=()
  for t in sp1_8K_none sp1_16K_full sp1_32K_none; do [ -f "$work/steps/$t.json" ] && fit+=("$work/steps/$t.json"); done
  [ ${#fit[@]} -eq 3 ] || note "fidelity: only ${#fit[@]} of the 3 fit steps ran (see their fid_*.log)"
  steps=("$work"/steps/*.json)
  if [ ${#fit[@]} -gt 0 ] && [ -e "${steps[0]}" ]; then
    step calibrate_steps "$bin/seqpar" calibrate "${kernels[@]}" "${fit[@]}" --attention-engine cudnn \
      --out "$work/calib/profile_steps.json"
    step fidelity_report "$bin/seqpar" report "${steps[@]}" --system "$work/calib/profile_steps.json" \
      --out "$work/fidelity_report" ||
      step fidelity_report_tables "$bin/seqpar" report "${steps[@]}" --system "$work/calib/profile_steps.json" \
        --out "$work/fidelity_report" --no-plots
    step fidelity_check python3 "$root/scripts/device/fidelity_check.py" "$work/fidelity_report" --fit "${fit[@]}" \
      --calibration "$work/calib/profile_steps.json" --min-held-out 12 -J "$work/calib/fidelity_check.json"
    # For the record: the same steps predicted from the kernel profile alone (no framework terms).
    step fidelity_report_kernels_only "$bin/seqpar" report "${steps[@]}" --system "$work/calib/profile_kernels.json" \
      --out "$work/fidelity_report_kernels_only" --no-plots
    note "$(grep '^fidelity ' "$work/fidelity_check.log" || echo "fidelity: no result (see fidelity_check.log)")"
  else
    note "fidelity: no fit steps ran (see the fid_*.log files)"
  fi
fi

# A report of everything measured, side by side (seqpar-train beside the PyTorch peer), and the
# --validate verdicts (they time nothing: the report lists them apart from every timing).
jsons=()
for f in "$work"/*.json; do [[ -e $f ]] && jsons+=("$f"); done
# A report that cannot read a document is a failed step, in the summary like the others.
[ ${#jsons[@]} -gt 0 ] && step report "$bin/seqpar" report "${jsons[@]}" --out "$work/report"
[ -f "$work/attn_compare.log" ] && { echo; tail -n 60 "$work/attn_compare.log"; }
exit $failed
