#!/usr/bin/env bash
# Builds the GPU programs and GPU tests here for Hopper only (sm_90a: a fast build) and packs them,
# with the non-system shared libraries they load, into one folder that travels to a GPU machine
# (git ignores it; name it in the device tool's `carry`). scripts/device/measure.sh runs there.
# Usage: scripts/device/pack.sh [BUILD_DIR]   (default: build-device; the pack is BUILD_DIR/carry)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build-device}
arch=${SEQPAR_DEVICE_ARCH:-90a}
case "$build" in /*) ;; *) build=$root/$build ;; esac
case "$build" in "$root"/build*) ;; *)
  echo "pack.sh: BUILD_DIR must be a build* folder inside the repository (git ignores those): $build" >&2
  exit 2 ;;
esac
export PATH=/usr/local/cuda/bin:$PATH
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" "${launcher[@]}"
fi
cmake --build "$build" -j "$(nproc)"

carry=$build/carry
rm -rf "$carry" && mkdir -p "$carry/bin" "$carry/lib"
# The programs the measurements run, and every test executable that can touch a GPU.
programs=(cli/seqpar bench/attention/seqpar-bench-attention bench/layer/seqpar-bench-layer
          bench/train/seqpar-train bench/gemm/seqpar-bench-gemm bench/reshard/seqpar-bench-reshard
          bench/comm/seqpar-bench-comm tests/kernels/seqpar_test_kernels_gpu tests/train/test_train)
for p in "${programs[@]}"; do
  [ -x "$build/$p" ] || { echo "pack.sh: $build/$p was not built" >&2; exit 1; }
  cp "$build/$p" "$carry/bin/"
done
strip --strip-unneeded "$carry"/bin/* 2>/dev/null || true
# Non-system libraries: what is not in the C/C++ runtime or the CUDA stack (the GPU machine has its
# own driver, CUDA runtime, cuBLAS, cuDNN and NCCL, from the toolkit or PyTorch's nvidia wheels).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink|libnvidia)'
ldd "$carry"/bin/* 2>/dev/null | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$carry/lib/$name"
done
# Open MPI opens its components at run time; the single-rank and virtual-rank paths need none.
du -sh "$carry"
size=$(du -sm "$carry" | cut -f1)
if [ "$size" -gt 60 ]; then
  echo "pack.sh: $carry is ${size} MiB; the device tool carries 64 MiB with the working tree" >&2
  exit 1
fi
echo "pack.sh: carry ${carry#$root/} (set LD_LIBRARY_PATH to its lib/ on the GPU machine)"
