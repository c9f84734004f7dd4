#!/usr/bin/env bash
# Installs what seqpar needs (Debian packages, Python packages), then configures and builds.
# Idempotent: installed packages and an up-to-date build are left alone.
# Usage: scripts/setup.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-${SEQPAR_BUILD_DIR:-$root/build}}

debs=(build-essential cmake git pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev
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

# nvcc lives outside PATH on a stock CUDA install.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release ${SEQPAR_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "$(nproc)"
