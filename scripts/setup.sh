#!/usr/bin/env bash
# Installs what seqpar needs (Debian packages, Python packages), configures, then builds the
# targets named (default: everything, as scripts/test.sh needs). scripts/run.sh names only the
# programs the main job runs, so a fresh machine reaches its answer without compiling every test,
# benchmark and CUDA kernel. Idempotent: installed packages and an up-to-date build are left alone.
# Usage: scripts/setup.sh [BUILD_DIR [TARGET...]]   (default: build, every target)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-${SEQPAR_BUILD_DIR:-$root/build}}
targets=("${@:2}")

debs=(build-essential cmake ninja-build git pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev
      libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin)
# Plots and Python tests: Debian's packages for Debian's Python, pip for any other interpreter
# (pyenv, venv, conda).
py=${PYTHON:-python3}
system_py=0
if ! command -v "$py" >/dev/null || [ "$(command -v "$py")" = /usr/bin/python3 ]; then
  system_py=1
  debs+=(python3 python3-matplotlib python3-pytest)
fi
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$system_py" = 0 ] && ! "$py" -c 'import matplotlib, pytest' 2>/dev/null; then
  echo "setup: installing Python packages for $py: matplotlib pytest"
  "$py" -m pip install -q matplotlib pytest
fi
"$py" -c 'import matplotlib, pytest' || { echo "setup: matplotlib or pytest missing for $py" >&2; exit 1; }
# nanobind builds the seqpar Python module (cli/python); without it the module is left out and its
# test skips, nothing else changes.
if ! "$py" -c 'import nanobind' 2>/dev/null; then
  echo "setup: installing nanobind for $py (the seqpar Python module)"
  "$py" -m pip install -q nanobind 2>/dev/null || "$py" -m pip install -q --break-system-packages nanobind ||
    echo "setup: nanobind not installed; the seqpar Python module is left out" >&2
fi

# nvcc lives outside PATH on a stock CUDA install.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

# The cuDNN attention engine needs cuDNN 9 (with the CUDA toolkit here; PyTorch's nvidia-cudnn wheel
# on GPU machines) and the header-only cuDNN frontend, whose wheel carries the headers: unpacked into
# .whl/cudnn_frontend, where cmake/FindCUDNN.cmake looks. Without them the engine is left out and
# says why; nothing else changes.
if command -v nvcc >/dev/null; then
  fe_dir="$root/.whl/cudnn_frontend"
  if [ ! -f "$fe_dir/include/cudnn_frontend.h" ]; then
    tmp=$(mktemp -d)
    if "$py" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-cudnn-frontend==${SEQPAR_CUDNN_FRONTEND:-1.32.0}" >/dev/null 2>&1; then
      "$py" - "$tmp" "$fe_dir" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
      echo "setup: cuDNN frontend headers in $fe_dir/include"
    else
      echo "setup: could not download nvidia-cudnn-frontend; the cuDNN attention engine is left out" >&2
    fi
    rm -rf "$tmp"
  fi
  cudnn_h=$(ls /usr/local/cuda/include/cudnn.h /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h 2>/dev/null | head -n 1 || true)
  if [ -z "$cudnn_h" ] && ! "$py" -c 'import nvidia.cudnn' 2>/dev/null; then
    echo "setup: installing nvidia-cudnn-cu13 for $py (cuDNN for the attention engine)"
    "$py" -m pip install -q nvidia-cudnn-cu13 || echo "setup: cuDNN not installed; the cuDNN attention engine is left out" >&2
  fi
fi

# Ninja compiles a library's sources while the libraries it links against are still compiling
# (Make waits for each to be linked): on 2 cores `seqpar` builds in 140 s instead of 187 s. A build
# directory keeps the generator it was configured with.
if [ ! -f "$build/CMakeCache.txt" ]; then
  generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${SEQPAR_CMAKE_ARGS:-}
fi
if ((${#targets[@]})); then
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build" -j "$(nproc)"
fi
